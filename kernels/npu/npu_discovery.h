/* Finds an AMD XDNA NPU and decides whether `--device auto` can use it.
 *
 * Looks at /sys/class/accel/accel* for a device bound to the amdxdna
 * driver, identifies its generation from the PCI id, checks the device
 * node's permissions, that this build has XRT support, that XRT >= 2.18
 * loads, and that the kernel directory has a usable manifest. The first
 * check that fails becomes the one-line reason for falling back to the
 * CPU. Every root is a parameter so tests can use fake trees. */
#ifndef NPL_NPU_DISCOVERY_H
#define NPL_NPU_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPL_NPU_XRT_MIN_MAJOR 2
#define NPL_NPU_XRT_MIN_MINOR 18
#define NPL_NPU_XRT_LIBRARY "libxrt_coreutil.so.2"
#define NPL_NPU_XRT_VERSION_JSON "/opt/xilinx/xrt/version.json"
/* XRT's user-space driver for amdxdna, built by AMD's xdna-driver
 * (src/shim) and installed next to libxrt_coreutil: without it XRT sees no
 * NPU. */
#define NPL_NPU_XRT_XDNA_PLUGIN "libxrt_driver_xdna.so.2"
#ifndef NPL_NPU_DEFAULT_KERNEL_DIR
#define NPL_NPU_DEFAULT_KERNEL_DIR "/usr/share/npullm/npu-kernels"
#endif

typedef enum npl_npu_generation {
    NPL_NPU_GEN_NONE = 0,
    NPL_NPU_GEN_XDNA1 = 1, /* Phoenix, Hawk Point */
    NPL_NPU_GEN_XDNA2 = 2, /* Strix Point, Strix Halo, Krackan Point */
} npl_npu_generation;

/* Why the NPU is not used, in check order. */
typedef enum npl_npu_verdict {
    NPL_NPU_USABLE = 0,
    NPL_NPU_NO_DRIVER,           /* no accel node bound to amdxdna */
    NPL_NPU_UNSUPPORTED_GENERATION,
    NPL_NPU_NO_PERMISSION,       /* device node missing or not read/write */
    NPL_NPU_MEMLOCK_LIMIT,       /* RLIMIT_MEMLOCK is not unlimited */
    NPL_NPU_NO_XRT_SUPPORT,      /* this build has no XRT shim */
    NPL_NPU_XRT_MISSING,
    NPL_NPU_XRT_TOO_OLD,
    NPL_NPU_NO_XDNA_PLUGIN,      /* XRT without its amdxdna driver plugin */
    NPL_NPU_KERNELS_MISSING,     /* no manifest, bad manifest, missing binaries */
} npl_npu_verdict;

const char *npl_npu_verdict_name(npl_npu_verdict v);
const char *npl_npu_generation_name(npl_npu_generation g); /* "xdna1", "xdna2", "none" */

typedef struct npl_npu_probe_config {
    const char *sysfs_root;      /* "/sys" */
    const char *dev_root;        /* "/dev" */
    const char *xrt_library;     /* dlopen name or path of libxrt_coreutil */
    const char *xrt_version_json;/* used when the library has no version API */
    const char *kernel_dir;      /* holds manifest.txt; per generation */
    bool xrt_support_built;      /* the XRT shim was compiled in */
    const char *xrt_plugin;      /* dlopen name or path of XRT's xdna plugin */
    /* The locked-memory limit to judge (bytes, UINT64_MAX = unlimited);
     * 0 reads the process's RLIMIT_MEMLOCK. */
    uint64_t memlock_limit;
} npl_npu_probe_config;

/* The defaults above; xrt_support_built from the build configuration. */
void npl_npu_probe_config_default(npl_npu_probe_config *cfg);

typedef struct npl_npu_probe_result {
    npl_npu_verdict verdict;
    char backend[16];        /* "npu:xdna1", "npu:xdna2" or "cpu" */
    char reason[512];        /* one line; "" when usable */
    /* Device (filled as far as discovery got). */
    bool found;
    char node[32];           /* "accel0" */
    char dev_path[256];      /* "/dev/accel/accel0" */
    uint16_t pci_vendor, pci_device;
    uint8_t pci_revision;
    npl_npu_generation generation;
    char chip[32];           /* "Strix Point", ... */
    char fw_version[32];     /* from sysfs when the driver exposes it, else "" */
    char driver_version[32]; /* amdxdna module version from sysfs, else "" */
    uint64_t memlock_limit;  /* the limit judged; UINT64_MAX = unlimited */
    /* XRT */
    bool xrt_found;
    unsigned xrt_major, xrt_minor, xrt_patch;
    char xrt_version_source[32]; /* "xrtVersionCode" or "version.json" */
    /* Kernels */
    char manifest_path[512];
} npl_npu_probe_result;

/* Runs every check; the result is always filled. Returns an error only
 * for bad arguments. */
npl_status npl_npu_probe(const npl_npu_probe_config *cfg, npl_npu_probe_result *out,
                         npl_error *err);

/* Generation and marketing name of an AMD PCI device/revision. */
npl_npu_generation npl_npu_generation_of(uint16_t device, uint8_t revision, const char **chip);

/* Writes the result as one JSON object (no trailing newline) into buf;
 * returns the length it needed (like snprintf). */
int npl_npu_probe_result_json(const npl_npu_probe_result *r, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
