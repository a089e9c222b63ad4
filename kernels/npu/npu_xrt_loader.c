/* Loads the XRT shim module at run time (see xrt_shim.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "xrt_shim.h"

npl_status npl_npu_xrt_open(const char *module_path, const npl_npu_xrt_config *cfg,
                            npl_npu_device **out, npl_error *err)
{
    if (!out || !cfg)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "xrt: open needs a config and an output");
    *out = NULL;
    const char *path = module_path ? module_path : NPL_NPU_XRT_SHIM_DIR "/" NPL_NPU_XRT_SHIM_FILE;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "xrt: cannot load the XRT shim %s: %s",
                             path, why ? why : "unknown error");
    }
    void *sym = dlsym(h, NPL_NPU_XRT_SHIM_ENTRY);
    if (!sym) {
        dlclose(h);
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "xrt: %s has no %s entry point", path,
                             NPL_NPU_XRT_SHIM_ENTRY);
    }
    npl_npu_xrt_shim_open_fn open_fn;
    memcpy(&open_fn, &sym, sizeof open_fn);
    /* Once the module has run, XRT may have started threads and static
     * objects: the handle is kept open even when opening failed. */
    return open_fn(NPL_NPU_XRT_SHIM_ABI, cfg, out, err);
}
