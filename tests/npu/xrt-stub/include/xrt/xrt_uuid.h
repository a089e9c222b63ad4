// Stand-in for XRT's xrt/xrt_uuid.h: declarations the shim needs, with the
// signatures of XRT 2.18 and 2.26 (see ../README). XRT defines these inline.
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
