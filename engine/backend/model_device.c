/* The device a model runs on: chosen at load (npl_model_params.device),
 * kept in m->device with the reason, and queried through the public API
 * (npl_model_device, npl_model_device_reason, npl_model_device_stats). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "device_select.h"
#include "model_internal.h"

npl_status npl_model_device_open_in(npl_model *m, const char *request, const char *npu_cache_dir,
                                    npl_error *err)
{
    npl_model_device_state *d = calloc(1, sizeof *d);
    if (!d)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    npl_device_choice choice;
    npl_status st = npl_device_select(request, NULL, &choice, err);
    if (st != NPL_OK) {
        free(d);
        return st;
    }
    snprintf(d->name, sizeof d->name, "%s", choice.name);
    snprintf(d->reason, sizeof d->reason, "%s", choice.reason);
    const npl_backend *be = choice.backend;
    d->ops = be;
    m->device = d;
    if (be->open && (st = be->open(m, choice.dev, npu_cache_dir, err)) != NPL_OK) {
        m->device = NULL;
        free(d);
        return st;
    }
    return NPL_OK;
}

void npl_model_device_close(npl_model *m)
{
    if (!m->device)
        return;
    const npl_backend *be = npl_model_backend(m);
    if (be->close)
        be->close(m);
    free(m->device);
    m->device = NULL;
}

const char *npl_model_device(const npl_model *m)
{
    return m && m->device ? m->device->name : "cpu";
}

const char *npl_model_device_reason(const npl_model *m)
{
    return m && m->device ? m->device->reason : "";
}

bool npl_model_device_stats(const npl_model *m, npl_device_stats *out)
{
    if (!out)
        return false;
    memset(out, 0, sizeof *out);
    const npl_backend *be = npl_model_backend(m);
    return be->stats && be->stats(m, out);
}
