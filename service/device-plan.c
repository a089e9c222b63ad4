/* The device plan (device-plan.h). */
#include "device-plan.h"

#include <string.h>

#include "npullm.h"

NpdDevicePlan *npd_device_plan_resolve(const NpdConfig *cfg, GError **error)
{
    npl_device_plan plan;
    npl_error err;
    npl_error_clear(&err);
    if (npl_device_resolve(npd_device_request(cfg->device), &plan, &err) != NPL_OK) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, err.message);
        return NULL;
    }
    NpdDevicePlan *p = g_new0(NpdDevicePlan, 1);
    p->device = g_strdup(plan.device);
    p->status = g_strdup(plan.reason);
    p->load_as = plan.load_as;
    /* systemd may list several directories, colon-separated: the first. */
    const gchar *cache_env = g_getenv("CACHE_DIRECTORY");
    p->cache_dir = cache_env != NULL && cache_env[0] == '/' ? g_strndup(cache_env, strcspn(cache_env, ":"))
                                                            : g_strdup("");
    if (cfg->device == NPD_DEVICE_AUTO && g_strcmp0(plan.load_as, "cpu") == 0)
        g_message("device auto: using the CPU: %s", plan.reason);
    else
        g_message("device %s: %s", plan.device, plan.reason);
    return p;
}

void npd_device_plan_free(NpdDevicePlan *p)
{
    if (p == NULL)
        return;
    g_free(p->device);
    g_free(p->status);
    g_free(p->cache_dir);
    g_free(p);
}
