// Stand-in for XRT's xrt/xrt_hw_context.h: declarations the shim needs (see
// ../README).
#ifndef NPL_STUB_XRT_HW_CONTEXT_H
#define NPL_STUB_XRT_HW_CONTEXT_H
#include <cstdint>
#include "xrt/xrt_device.h"
#include "xrt/xrt_uuid.h"
namespace xrt {
class hw_context {
public:
  enum class access_mode : uint8_t { exclusive = 0, shared = 1 };
  hw_context() = default;
  hw_context(const xrt::device& device, const xrt::uuid& xclbin_id, access_mode mode);
  hw_context(const xrt::device& device, const xrt::uuid& xclbin_id)
    : hw_context{device, xclbin_id, access_mode::shared} {}
  hw_context(const hw_context&) = default;
  hw_context(hw_context&&) = default;
  ~hw_context();
  hw_context& operator=(const hw_context&) = default;
  hw_context& operator=(hw_context&&) = default;
};
} // namespace xrt
#endif
