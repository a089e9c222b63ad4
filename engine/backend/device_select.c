/* Device selection: the CPU, the emulated NPU, or the NPU found by
 * discovery (kernels/npu/npu_discovery.c), with a one-line reason. */
#include "device_select.h"

#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "npullm.h"

typedef enum device_kind { KIND_CPU, KIND_NPU_EMU, KIND_NPU } device_kind;

/* The backend registry's entry (engine/backend/backend.h) of each kind. */
static const char *const kind_backend[] = {[KIND_CPU] = "cpu", [KIND_NPU_EMU] = "npu-emu", [KIND_NPU] = "npu"};

/* What a request resolves to before anything is opened. */
typedef struct decision {
    device_kind kind;
    bool is_auto;
    npl_npu_probe_config probe; /* the configuration discovery ran with */
    char name[NPL_DEVICE_NAME_MAX];
    char reason[NPL_DEVICE_REASON_MAX];
} decision;

static npl_status decide(const char *request, const npl_npu_probe_config *probe, decision *d,
                         npl_error *err)
{
    memset(d, 0, sizeof *d);
    if (!request || strcmp(request, "cpu") == 0) {
        d->kind = KIND_CPU;
        snprintf(d->name, sizeof d->name, "cpu");
        snprintf(d->reason, sizeof d->reason, "cpu requested");
        return NPL_OK;
    }
    if (strcmp(request, "npu-emu") == 0) {
        d->kind = KIND_NPU_EMU;
        snprintf(d->name, sizeof d->name, "npu-emu");
        snprintf(d->reason, sizeof d->reason,
                 "emulated NPU requested: the NPU kernel groups computed on the CPU");
        return NPL_OK;
    }
    d->is_auto = strcmp(request, "auto") == 0;
    if (!d->is_auto && strcmp(request, "npu") != 0)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "device '%.64s': expected cpu, npu, npu-emu or auto", request);

    if (probe)
        d->probe = *probe;
    else
        npl_npu_probe_config_default(&d->probe);
    npl_npu_probe_result r;
    npl_status st = npl_npu_probe(&d->probe, &r, err);
    if (st != NPL_OK)
        return st;
    if (r.verdict != NPL_NPU_USABLE) {
        if (!d->is_auto)
            return npl_error_set(err, NPL_ERR_UNSUPPORTED, "device npu: %s: %s",
                                 npl_npu_verdict_name(r.verdict), r.reason);
        d->kind = KIND_CPU;
        snprintf(d->name, sizeof d->name, "cpu");
        snprintf(d->reason, sizeof d->reason, "auto: NPU not used (%s: %.560s)",
                 npl_npu_verdict_name(r.verdict), r.reason);
        return NPL_OK;
    }
    d->kind = KIND_NPU;
    snprintf(d->name, sizeof d->name, "%s", r.backend);
    snprintf(d->reason, sizeof d->reason, "%s: %s %s (%.64s), kernels in %.256s",
             d->is_auto ? "auto: NPU found" : "npu requested", r.chip,
             npl_npu_generation_name(r.generation), r.dev_path, d->probe.kernel_dir);
    return NPL_OK;
}

npl_status npl_device_select(const char *request, const npl_npu_probe_config *probe,
                             npl_device_choice *out, npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "device selection needs an output");
    memset(out, 0, sizeof *out);
    decision d;
    npl_status st = decide(request, probe, &d, err);
    if (st != NPL_OK)
        return st;
    snprintf(out->name, sizeof out->name, "%s", d.name);
    snprintf(out->reason, sizeof out->reason, "%s", d.reason);
    out->backend = npl_backend_named(kind_backend[d.kind]);
    npl_error open_err;
    npl_error_clear(&open_err);
    st = out->backend->probe(&d.probe, &out->dev, &open_err);
    if (st == NPL_OK)
        return NPL_OK;
    if (d.kind != KIND_NPU || !d.is_auto) {
        if (err)
            *err = open_err;
        return st;
    }
    /* Discovery approved the NPU, opening it failed: auto still runs. */
    out->dev = NULL;
    out->backend = npl_backend_named("cpu");
    snprintf(out->name, sizeof out->name, "cpu");
    snprintf(out->reason, sizeof out->reason, "auto: NPU not used (open-failed: %.560s)",
             open_err.message);
    return NPL_OK;
}

npl_status npl_device_resolve(const char *request, npl_device_plan *out, npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_device_resolve: no output");
    memset(out, 0, sizeof *out);
    decision d;
    npl_status st = decide(request, NULL, &d, err);
    if (st != NPL_OK)
        return st;
    snprintf(out->device, sizeof out->device, "%s", d.name);
    snprintf(out->reason, sizeof out->reason, "%s", d.reason);
    out->load_as = d.kind == KIND_NPU ? "npu" : d.kind == KIND_NPU_EMU ? "npu-emu" : "cpu";
    return NPL_OK;
}
