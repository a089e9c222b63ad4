// Stub of XRT 2.18 xrt/xrt_device.h (declarations used by the shim only).
#ifndef NPL_STUB_XRT_DEVICE_H
#define NPL_STUB_XRT_DEVICE_H
#include "xrt/xrt_uuid.h"
#include "experimental/xrt_xclbin.h"
namespace xrt {
class device {
public:
  device() = default;
  ~device();
  explicit device(unsigned int didx);
  device(const device& rhs) = default;
  device& operator=(const device& rhs) = default;
  device(device&& rhs) = default;
  device& operator=(device&& rhs) = default;
  uuid register_xclbin(const xrt::xclbin& xclbin);
};
} // namespace xrt
#endif
