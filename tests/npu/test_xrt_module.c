/* The XRT shim module as built against a real XRT (registered only when
 * meson found one): it loads with every XRT symbol resolved, and each way
 * of opening it that cannot give a device fails with a code and a message
 * instead of an exception escaping into C. The module path comes from
 * NPU_XRT_MODULE. The kernel directories here hold no real binaries, so
 * the cases behave the same with or without an NPU present. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npl_test.h"
#include "xrt_shim.h"

static const char *module_path(void)
{
    const char *path = getenv("NPU_XRT_MODULE");
    if (!path)
        CHECK(!"NPU_XRT_MODULE set by meson");
    return path;
}

/* dlopen with RTLD_NOW fails if any XRT symbol the shim uses is missing
 * from the libxrt_coreutil it was linked against. */
static npl_npu_xrt_shim_open_fn load_entry(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        nt_check_failed(__FILE__, __LINE__, "dlopen of the XRT shim module");
        nt_note("  %s", why ? why : "unknown error");
        return NULL;
    }
    void *sym = dlsym(h, NPL_NPU_XRT_SHIM_ENTRY);
    CHECK(sym != NULL);
    npl_npu_xrt_shim_open_fn fn = NULL;
    if (sym)
        memcpy(&fn, &sym, sizeof fn);
    /* Kept loaded: XRT does not support being unloaded. */
    return fn;
}

static void rejects_wrong_abi(void)
{
    const char *path = module_path();
    npl_npu_xrt_shim_open_fn open_fn = path ? load_entry(path) : NULL;
    if (!open_fn)
        return;
    npl_npu_xrt_config cfg = { 0, "/nonexistent-kernels" };
    npl_npu_device *dev = NULL;
    npl_error err;
    CHECK_FAILS(open_fn(NPL_NPU_XRT_SHIM_ABI + 1, &cfg, &dev, &err), NPL_ERR_UNSUPPORTED, &err,
                "speaks ABI");
    CHECK(dev == NULL);
    CHECK_FAILS(open_fn(NPL_NPU_XRT_SHIM_ABI, NULL, &dev, &err), NPL_ERR_INVALID_ARG, &err,
                "needs a kernel directory");
}

static void rejects_missing_kernel_dir(void)
{
    const char *path = module_path();
    if (!path)
        return;
    npl_npu_xrt_config cfg = { 0, "/nonexistent-kernels" };
    npl_npu_device *dev = NULL;
    npl_error err;
    npl_status st = npl_npu_xrt_open(path, &cfg, &dev, &err);
    CHECK(st != NPL_OK && dev == NULL);
    CHECK(strstr(err.message, "/nonexistent-kernels") != NULL);
}

static void rejects_emulator_kernels(void)
{
    const char *path = module_path();
    char *dir = nt_tempdir();
    if (!path || !dir) {
        CHECK(dir != NULL);
        free(dir);
        return;
    }
    char file[512];
    snprintf(file, sizeof file, "%s/manifest.txt", dir);
    CHECK(nt_write_file(file, "npullm-npu-manifest 1\ndevice = emu\n"
                               "[group g]\narg = x io f32 [n_embd]\n") == 0);
    npl_npu_xrt_config cfg = { 0, dir };
    npl_npu_device *dev = NULL;
    npl_error err;
    CHECK_FAILS(npl_npu_xrt_open(path, &cfg, &dev, &err), NPL_ERR_UNSUPPORTED, &err,
                "holds emulator contracts");
    CHECK(dev == NULL);
    nt_rmtree(dir);
    free(dir);
}

/* XRT throws (no device, no driver plugin, or a file that is not an
 * xclbin); the shim must turn that into NPL_ERR_IO and free what it made. */
static void bad_binaries_fail_cleanly(void)
{
    const char *path = module_path();
    char *dir = nt_tempdir();
    if (!path || !dir) {
        CHECK(dir != NULL);
        free(dir);
        return;
    }
    char file[512];
    snprintf(file, sizeof file, "%s/manifest.txt", dir);
    CHECK(nt_write_file(file, "npullm-npu-manifest 1\ndevice = xdna2\n[group g]\n"
                               "xclbin = bin/g.xclbin\nkernel = MLIR_AIE\n"
                               "arg = x io f32 [n_embd]\n") == 0);
    snprintf(file, sizeof file, "%s/bin/g.xclbin", dir);
    CHECK(nt_write_file(file, "not an xclbin") == 0);
    npl_npu_xrt_config cfg = { 0, dir };
    npl_npu_device *dev = NULL;
    npl_error err;
    CHECK_FAILS(npl_npu_xrt_open(path, &cfg, &dev, &err), NPL_ERR_IO, &err,
                "xrt: opening the NPU: ");
    CHECK(dev == NULL);
    nt_note("  XRT said: %s", err.message);
    nt_rmtree(dir);
    free(dir);
}

static const nt_case cases[] = {
    { "rejects_wrong_abi", rejects_wrong_abi },
    { "rejects_missing_kernel_dir", rejects_missing_kernel_dir },
    { "rejects_emulator_kernels", rejects_emulator_kernels },
    { "bad_binaries_fail_cleanly", bad_binaries_fail_cleanly },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
