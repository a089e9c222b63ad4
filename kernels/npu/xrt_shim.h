/* The extern "C" surface of the XRT backend. XRT's hardware-context API
 * is C++ only, so xrt_shim.cpp wraps it behind the device interface and
 * is built as a loadable module (linked against libxrt_coreutil); the
 * engine loads it at run time with npl_npu_xrt_open, so npullm itself
 * never links XRT and runs on machines without it. */
#ifndef NPL_XRT_SHIM_H
#define NPL_XRT_SHIM_H

#include "npl_error.h"
#include "npu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the device interface structs or this surface change, so
 * a stale module is refused instead of misread. */
#define NPL_NPU_XRT_SHIM_ABI 2u
#define NPL_NPU_XRT_SHIM_ENTRY "npl_npu_xrt_shim_open"
#define NPL_NPU_XRT_SHIM_FILE "npullm-npu-xrt.so"
#ifndef NPL_NPU_XRT_SHIM_DIR
#define NPL_NPU_XRT_SHIM_DIR "/usr/local/lib/npullm"
#endif

typedef struct npl_npu_xrt_config {
    unsigned device_index;   /* XRT device index (0 = first NPU) */
    const char *kernel_dir;  /* directory with manifest.txt and the binaries */
} npl_npu_xrt_config;

/* Exported by the module: opens the device, loads the manifest and every
 * group's xclbin (registered, with a hardware context), kernel and
 * instruction buffer, and returns a device named "npu:xdna1"/"npu:xdna2".
 * abi must be NPL_NPU_XRT_SHIM_ABI. */
typedef npl_status (*npl_npu_xrt_shim_open_fn)(unsigned abi, const npl_npu_xrt_config *cfg,
                                               npl_npu_device **out, npl_error *err);

npl_status npl_npu_xrt_shim_open(unsigned abi, const npl_npu_xrt_config *cfg,
                                 npl_npu_device **out, npl_error *err);

/* Loader used by the engine: dlopens module_path (NULL: the installed
 * NPL_NPU_XRT_SHIM_DIR/NPL_NPU_XRT_SHIM_FILE), checks the ABI and opens
 * the device. The module stays loaded for the life of the process (XRT
 * does not support being unloaded). */
npl_status npl_npu_xrt_open(const char *module_path, const npl_npu_xrt_config *cfg,
                            npl_npu_device **out, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
