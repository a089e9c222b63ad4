/* The power policy's phase split in the engine worker: on performance
 * and mains, models on an NPU prefill there and decode on the CPU
 * (npl_model_set_decode_device; docs/desktop.md). A running sequence
 * moves its KV cache to the CPU at its next decode step, once, between
 * two scheduling steps: nothing is dropped. Leaving performance sends
 * new requests' decode back to the NPU; moved sequences finish on the
 * CPU. */
#include "worker-private.h"

#include <string.h>

void npd_worker_apply_decode_device(NpdWorker *w, LoadedModel *lm)
{
    npl_error err;
    npl_error_clear(&err);
    const char *before = npl_model_decode_device(lm->model);
    if (npl_model_set_decode_device(lm->model, w->cpu_decode ? "cpu" : NULL, &err) != NPL_OK)
        g_message("model %s: decoding stays on %s: %s", lm->name, before, err.message);
    else if (strcmp(before, npl_model_decode_device(lm->model)) != 0)
        g_message("model %s: decoding on %s from the next step", lm->name, npl_model_decode_device(lm->model));
}

void npd_worker_job_devices(const ActiveJob *aj, NpdJobStats *stats)
{
    npl_seq_devices d;
    npl_seq_devices_get(aj->seq, &d);
    g_strlcpy(stats->prefill_device, d.prefill, sizeof stats->prefill_device);
    g_strlcpy(stats->decode_device, d.decode, sizeof stats->decode_device);
    stats->kv_moves = d.kv_moves;
}

void npd_job_stats_add_phases(GVariantBuilder *b, const NpdJobStats *stats)
{
    if (stats->prefill_device[0] == '\0')
        return; /* nothing computed */
    g_variant_builder_add(b, "{sv}", "prefill_device", g_variant_new_string(stats->prefill_device));
    g_variant_builder_add(b, "{sv}", "decode_device", g_variant_new_string(stats->decode_device));
    g_variant_builder_add(b, "{sv}", "kv_moves", g_variant_new_uint32(stats->kv_moves));
}
