/* tests/npu_engine: a CPU-loaded model given the NPU runtime on an
 * emulated device whose kernel contracts come from manifest text, as
 * npl_model_load builds it for npu-emu (no weight cache). */
#ifndef NPU_ENGINE_EMU_H
#define NPU_ENGINE_EMU_H

#include <string.h>

#include "backend_npu.h"
#include "npu_emu.h"

/* *man must outlive the device: free it after the model. On failure the
 * device is gone with the runtime that failed. */
static inline npl_status ne_emu_runtime(npl_model *m, const char *text, npl_npu_manifest **man,
                                        npl_backend_npu **b, npl_error *err)
{
    npl_npu_device *dev = NULL;
    *b = NULL;
    npl_status st = npl_npu_manifest_parse(text, strlen(text), "test manifest", man, err);
    npl_npu_emu_config cfg = {.manifest = *man};
    if (st == NPL_OK)
        st = npl_npu_emu_open(&cfg, &dev, err);
    if (st == NPL_OK)
        st = npl_backend_npu_create_in(m, dev, "", b, err);
    return st;
}

#endif
