// Stand-in for XRT's xrt/xrt_bo.h: declarations the shim needs (see
// ../README). The sync direction enum comes from xrt/deprecated/xrt.h and
// the flag bits from xrt/detail/xrt_mem.h there (xrt.h, xrt_mem.h in 2.18).
#ifndef NPL_STUB_XRT_BO_H
#define NPL_STUB_XRT_BO_H
#include <cstddef>
#include <cstdint>
enum xclBOSyncDirection {
  XCL_BO_SYNC_BO_TO_DEVICE = 0,
  XCL_BO_SYNC_BO_FROM_DEVICE,
  XCL_BO_SYNC_BO_GMIO_TO_AIE,
  XCL_BO_SYNC_BO_AIE_TO_GMIO,
};
#define XCL_BO_FLAGS_NONE (0)
#define XCL_BO_FLAGS_CACHEABLE (1U << 24)
#define XCL_BO_FLAGS_SVM (1U << 27)
#define XCL_BO_FLAGS_DEV_ONLY (1U << 28)
#define XCL_BO_FLAGS_HOST_ONLY (1U << 29)
#define XCL_BO_FLAGS_P2P (1U << 30)
#define XRT_BO_FLAGS_CACHEABLE XCL_BO_FLAGS_CACHEABLE
#define XRT_BO_FLAGS_DEV_ONLY XCL_BO_FLAGS_DEV_ONLY
#define XRT_BO_FLAGS_HOST_ONLY XCL_BO_FLAGS_HOST_ONLY
#define XRT_BO_FLAGS_P2P XCL_BO_FLAGS_P2P
#define XRT_BO_FLAGS_SVM XCL_BO_FLAGS_SVM
typedef uint32_t xrtMemoryGroup;
namespace xrt {
class device;
using memory_group = xrtMemoryGroup;
class bo {
public:
  enum class flags : uint32_t {
    normal = 0,
    cacheable = XRT_BO_FLAGS_CACHEABLE,
    device_only = XRT_BO_FLAGS_DEV_ONLY,
    host_only = XRT_BO_FLAGS_HOST_ONLY,
    p2p = XRT_BO_FLAGS_P2P,
    svm = XRT_BO_FLAGS_SVM,
  };
  bo() {}
  bo(const xrt::device& device, size_t sz, bo::flags flags, memory_group grp);
  // Sub-buffer of parent, size bytes at offset.
  bo(const bo& parent, size_t size, size_t offset);
  bo(const bo& rhs) = default;
  bo& operator=(const bo& rhs) = default;
  bo(bo&& rhs) = default;
  bo& operator=(bo&& rhs) = default;
  ~bo();
  size_t size() const;
  void sync(xclBOSyncDirection dir, size_t sz, size_t offset);
  void sync(xclBOSyncDirection dir) { sync(dir, size(), 0); }
  void* map();
  template<typename MapType>
  MapType map() { return reinterpret_cast<MapType>(map()); }
};
} // namespace xrt
#endif
