// Stand-in for XRT's xrt/experimental/xrt_xclbin.h (experimental/xrt_xclbin.h
// in XRT 2.18): declarations the shim needs (see ../../README).
#ifndef NPL_STUB_XRT_XCLBIN_H
#define NPL_STUB_XRT_XCLBIN_H
#include <cstddef>
#include <string>
#include "xrt/xrt_uuid.h"
namespace xrt {
class xclbin {
public:
  class kernel {
  public:
    kernel() = default;
    size_t get_num_args() const;
  };
  xclbin() = default;
  explicit xclbin(const std::string& filename);
  uuid get_uuid() const;
  kernel get_kernel(const std::string& name) const;
};
} // namespace xrt
#endif
