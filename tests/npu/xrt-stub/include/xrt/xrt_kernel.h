// Stand-in for XRT's xrt/xrt_kernel.h: declarations the shim needs (see
// ../README). ert_cmd_state comes from xrt/detail/ert.h there (ert.h in
// 2.18). XRT 2.26 adds a set_arg template for types derived from xrt::bo,
// which 2.18 lacks; it is left out so the shim keeps building with 2.18.
#ifndef NPL_STUB_XRT_KERNEL_H
#define NPL_STUB_XRT_KERNEL_H
#include <chrono>
#include <cstddef>
#include <string>
#include "xrt/xrt_bo.h"
#include "xrt/xrt_device.h"
#include "xrt/xrt_hw_context.h"
#include "xrt/xrt_uuid.h"
enum ert_cmd_state {
  ERT_CMD_STATE_NEW = 1,
  ERT_CMD_STATE_QUEUED = 2,
  ERT_CMD_STATE_RUNNING = 3,
  ERT_CMD_STATE_COMPLETED = 4,
  ERT_CMD_STATE_ERROR = 5,
  ERT_CMD_STATE_ABORT = 6,
  ERT_CMD_STATE_SUBMITTED = 7,
  ERT_CMD_STATE_TIMEOUT = 8,
  ERT_CMD_STATE_NORESPONSE = 9,
  ERT_CMD_STATE_SKERROR = 10,
  ERT_CMD_STATE_SKCRASHED = 11,
  ERT_CMD_STATE_MAX,
};
namespace xrt {
class kernel;
class run {
public:
  run() = default;
  explicit run(const kernel& krnl);
  run(const run&) = default;
  run(run&&) = default;
  ~run();
  run& operator=(const run&) = default;
  run& operator=(run&&) = default;
  void start();
  ert_cmd_state wait(const std::chrono::milliseconds& timeout = std::chrono::milliseconds{0}) const;
  // Scalars are passed by address and size; XRT copies at most the
  // argument's size from the kernel metadata.
  template <typename ArgType>
  void set_arg(int index, ArgType&& arg) { set_arg_at_index(index, &arg, sizeof(arg)); }
  void set_arg(int index, xrt::bo& boh) { set_arg_at_index(index, boh); }
  void set_arg(int index, const xrt::bo& boh) { set_arg_at_index(index, boh); }
  void set_arg(int index, xrt::bo&& boh) { set_arg_at_index(index, boh); }
private:
  void set_arg_at_index(int index, const void* value, size_t bytes);
  void set_arg_at_index(int index, const xrt::bo&);
};
class kernel {
public:
  kernel() = default;
  kernel(const xrt::hw_context& ctx, const std::string& name);
  kernel(const kernel&) = default;
  kernel(kernel&&) = default;
  ~kernel();
  kernel& operator=(const kernel&) = default;
  kernel& operator=(kernel&&) = default;
  int group_id(int argno) const;
};
} // namespace xrt
#endif
