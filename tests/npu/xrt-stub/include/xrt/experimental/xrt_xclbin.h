// Stand-in for XRT's xrt/experimental/xrt_xclbin.h (experimental/xrt_xclbin.h
// in XRT 2.18): declarations the shim needs (see ../../README).
#ifndef NPL_STUB_XRT_XCLBIN_H
#define NPL_STUB_XRT_XCLBIN_H
#include <string>
#include "xrt/xrt_uuid.h"
namespace xrt {
class xclbin {
public:
  xclbin() = default;
  explicit xclbin(const std::string& filename);
  uuid get_uuid() const;
};
} // namespace xrt
#endif
