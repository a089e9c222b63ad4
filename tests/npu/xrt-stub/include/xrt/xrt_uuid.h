// Stub of XRT 2.18 xrt/xrt_uuid.h (declarations used by the shim only).
#ifndef NPL_STUB_XRT_UUID_H
#define NPL_STUB_XRT_UUID_H
#include <string>
namespace xrt {
class uuid {
public:
  uuid();
  uuid(const uuid& rhs);
  uuid(uuid&&) = default;
  uuid& operator=(const uuid& rhs);
  uuid& operator=(uuid&& rhs) = default;
  std::string to_string() const;
};
} // namespace xrt
#endif
