// Stub of XRT 2.18 experimental/xrt_kernel.h (declarations used by the shim only).
#ifndef NPL_STUB_XRT_EXPERIMENTAL_KERNEL_H
#define NPL_STUB_XRT_EXPERIMENTAL_KERNEL_H
#include <chrono>
#include <condition_variable>
#include "xrt/xrt_hw_context.h"
#include "xrt/xrt_kernel.h"
namespace xrt {
class runlist {
public:
  runlist() = default;
  runlist(const xrt::hw_context& hwctx);
  ~runlist();
  runlist(const runlist&) = default;
  runlist(runlist&&) = default;
  runlist& operator=(const runlist&) = default;
  runlist& operator=(runlist&&) = default;
  void add(const xrt::run& run);
  void execute();
  std::cv_status wait(const std::chrono::milliseconds& timeout) const;
  void wait() const { wait(std::chrono::milliseconds(0)); }
};
} // namespace xrt
#endif
