/* Which device a model runs on: turns the `device` request of
 * npl_model_params ("cpu", "npu-emu", "npu", "auto") into an opened NPU
 * device or the CPU, with the one-line reason a user sees (the service's
 * DeviceStatus, npullm-client status, the fallback log line). */
#ifndef NPL_DEVICE_SELECT_H
#define NPL_DEVICE_SELECT_H

#include "npl_error.h"
#include "npu_device.h"
#include "npu_discovery.h"

#define NPL_DEVICE_NAME_MAX 32
#define NPL_DEVICE_REASON_MAX 640

typedef struct npl_device_choice {
    npl_npu_device *dev;               /* NULL: the CPU; otherwise owned by the caller */
    const struct npl_backend *backend; /* its entry in engine/backend/backend.h */
    char name[NPL_DEVICE_NAME_MAX];   /* "cpu", "npu-emu", "npu:xdna1", "npu:xdna2" */
    char reason[NPL_DEVICE_REASON_MAX];
} npl_device_choice;

/* Resolves request (NULL means "cpu"):
 *   cpu      the CPU engine
 *   npu-emu  the emulated NPU (the NPU's kernel groups computed on the CPU)
 *   npu      the NPU, or an error naming why it cannot be used
 *   auto     the NPU when discovery finds everything in place, else the
 *            CPU with the reason in out->reason
 * probe may be NULL (the system's defaults); tests pass fake roots.
 * Errors: NPL_ERR_INVALID_ARG for an unknown request, NPL_ERR_UNSUPPORTED
 * when "npu" is not usable, whatever opening the device returned. */
npl_status npl_device_select(const char *request, const npl_npu_probe_config *probe,
                             npl_device_choice *out, npl_error *err);

#endif
