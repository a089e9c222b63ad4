/* npl_backend: one ops table per kind of device a model's layers run on
 * (the CPU engine, the NPU runtime on the emulator or on XRT). Loading
 * picks the entry of the selected device (engine/device_select.h), asks it
 * whether it runs the model's architecture variations, and opens it
 * through the table.
 *
 * This round the per-step calls (prefill, decode, sequences), the counters
 * and closing still reach the NPU runtime through m->device->npu
 * (forward.c, kv_cache.c, model_device.c; tests attach a runtime there by
 * hand), as other work is changing those files at the same time. */
#ifndef NPL_BACKEND_H
#define NPL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "npullm.h"

struct npl_npu_device;

typedef struct npl_backend {
    const char *name; /* "cpu" or "npu" (the emulated NPU uses the NPU runtime) */
    /* NPL_OK when the backend computes every variation of m's
     * architecture; else NPL_ERR_UNSUPPORTED saying which it does not.
     * NULL: every architecture of the table. */
    npl_status (*supports)(const npl_model *m, npl_error *err);
    /* Sets the backend up for m on dev, taking ownership of dev also on
     * failure. NULL: nothing to set up (the CPU engine is the model). */
    npl_status (*open)(npl_model *m, struct npl_npu_device *dev, const char *cache_dir, npl_error *err);
} npl_backend;

/* The entry for a device: the NPU runtime when dev is an NPU device
 * (emulated or not), else the CPU. */
const npl_backend *npl_backend_for(const struct npl_npu_device *dev);

#endif
