// Stand-in for XRT's xrt/experimental/xrt_kernel.h (experimental/xrt_kernel.h
// in XRT 2.18): xrt::runlist as the shim uses it (see ../../README). The
// constructor is explicit from XRT 2.19 on; add(xrt::run&&) exists only
// from 2.20 on and is left out so the shim keeps building with 2.18.
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
  explicit runlist(const xrt::hw_context& hwctx);
  ~runlist();
  runlist(const runlist&) = default;
  runlist(runlist&&) = default;
  runlist& operator=(const runlist&) = default;
  runlist& operator=(runlist&&) = default;
  void add(const xrt::run& run);
  void execute();
  // Throws (an std::exception) when a run in the list fails.
  std::cv_status wait(const std::chrono::milliseconds& timeout) const;
  void wait() const { wait(std::chrono::milliseconds(0)); }
};
} // namespace xrt
#endif
