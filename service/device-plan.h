/* What --device means on this machine, decided once at startup
 * (npl_device_resolve: auto runs the NPU discovery): the Device and
 * DeviceStatus properties, what models load on, and where repacked
 * weights are kept between loads. */
#ifndef NPD_DEVICE_PLAN_H
#define NPD_DEVICE_PLAN_H

#include <gio/gio.h>

#include "daemon-config.h"

typedef struct {
    gchar *device;       /* the Device property */
    gchar *status;       /* DeviceStatus: why this device */
    const char *load_as; /* npl_model_params.device */
    /* Where an NPU device (and, with [Engine] WeightCache, the CPU) keeps
     * its repacked weights between loads: systemd's CacheDirectory=
     * ($CACHE_DIRECTORY), else "" (none; the daemon never writes beside
     * the models). Never from a client. */
    gchar *cache_dir;
} NpdDevicePlan;

/* NULL with error when the device asked for cannot be used (an explicit
 * npu; auto falling back to the CPU is one log line naming the reason). */
NpdDevicePlan *npd_device_plan_resolve(const NpdConfig *cfg, GError **error);
void npd_device_plan_free(NpdDevicePlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdDevicePlan, npd_device_plan_free)

#endif
