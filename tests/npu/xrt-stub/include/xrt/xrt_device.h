// Stand-in for XRT's xrt/xrt_device.h: declarations the shim needs (see
// ../README).
#ifndef NPL_STUB_XRT_DEVICE_H
#define NPL_STUB_XRT_DEVICE_H
#include "xrt/xrt_uuid.h"
#include "xrt/experimental/xrt_xclbin.h"
namespace xrt {
class device {
public:
  device() = default;
  ~device();
  explicit device(unsigned int didx);
  // XRT adds this overload so an int index does not convert ambiguously.
  explicit device(int didx) : device(static_cast<unsigned int>(didx)) {}
  device(const device& rhs) = default;
  device& operator=(const device& rhs) = default;
  device(device&& rhs) = default;
  device& operator=(device&& rhs) = default;
  uuid register_xclbin(const xrt::xclbin& xclbin);
};
} // namespace xrt
#endif
