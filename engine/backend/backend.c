/* The backend registry: the CPU engine and the NPU host runtime
 * (engine/npu/backend_npu.h, on the emulator or on XRT) as ops tables, and
 * the public per-step calls that go through the model's entry. */
#include "backend.h"

#include <string.h>

#include "backend_npu.h"
#include "model_internal.h"
#include "npu_discovery.h"
#include "npu_emu.h"
#include "xrt_shim.h"

/* ---- the CPU ---------------------------------------------------------- */

static npl_status cpu_probe(const npl_npu_probe_config *cfg, npl_npu_device **dev, npl_error *err)
{
    (void)cfg;
    (void)err;
    *dev = NULL; /* the CPU engine needs no device */
    return NPL_OK;
}

/* ---- the NPU runtime ---------------------------------------------------- */

static npl_status emu_probe(const npl_npu_probe_config *cfg, npl_npu_device **dev, npl_error *err)
{
    (void)cfg;
    return npl_npu_emu_open(NULL, dev, err);
}

static npl_status xrt_probe(const npl_npu_probe_config *cfg, npl_npu_device **dev, npl_error *err)
{
    npl_npu_xrt_config xc = {.device_index = 0, .kernel_dir = cfg ? cfg->kernel_dir : NULL};
    return npl_npu_xrt_open(NULL, &xc, dev, err);
}

static npl_status npu_open(npl_model *m, npl_npu_device *dev, const char *cache_dir, npl_error *err)
{
    npl_backend_npu *b = NULL;
    npl_status st = npl_backend_npu_create_in(m, dev, cache_dir, &b, err);
    m->device->context = b;
    return st;
}

static void npu_close(npl_model *m)
{
    npl_backend_npu_free(m->device->context);
    m->device->context = NULL;
}

static npl_status npu_seq_attach(npl_model *m, npl_seq *s, npl_error *err)
{
    return npl_backend_npu_seq_attach(m->device->context, s, err);
}

static bool npu_stats(const npl_model *m, npl_device_stats *out)
{
    npl_backend_npu_stats(m->device->context, out);
    return true;
}

/* ---- the registry --------------------------------------------------- */

/* The NPU's kernel groups compute RMSNorm, Q/K/V with optional biases,
 * optional per-head Q/K norms, rope (both styles, rope_freqs, sliding
 * windows), attention, output projection with optional post-norms and a
 * SiLU or GELU-gated FFN: every variation of the architecture table. A
 * model weight that the kernels' contract has no part for is refused when
 * the packs are filled (npu_weight_packs.c), naming the weight. */
#define NPU_RUNTIME_OPS                                                                                  \
    .open = npu_open, .close = npu_close, .prefill = npl_backend_npu_prefill, \
    .prefill_embeddings = npl_backend_npu_prefill_embeddings, .decode = npl_backend_npu_decode,         \
    .seq_attach = npu_seq_attach, .seq_release = npl_backend_npu_seq_release,                          \
    .seq_copy_prefix = npl_backend_npu_seq_copy_prefix, .seq_kv_bytes = npl_backend_npu_seq_kv_bytes,  \
    .seq_export = npl_backend_npu_seq_export, .stats = npu_stats

static const npl_backend backends[] = {
    /* engine/models/forward.c runs every architecture of the table; a sequence's
     * cache is its host arrays; no counters */
    {.name = "cpu",
     .probe = cpu_probe,
     .host_layers = true,
     .prefill = npl_cpu_prefill,
     .prefill_embeddings = npl_cpu_prefill_embeddings,
     .decode = npl_cpu_decode},
    {.name = "npu-emu", .probe = emu_probe, NPU_RUNTIME_OPS},
    {.name = "npu", .probe = xrt_probe, NPU_RUNTIME_OPS},
};

const npl_backend *npl_backend_named(const char *name)
{
    for (size_t i = 0; name && i < sizeof backends / sizeof backends[0]; i++)
        if (strcmp(backends[i].name, name) == 0)
            return &backends[i];
    return NULL;
}

const npl_backend *npl_model_backend(const npl_model *m)
{
    return m && m->device && m->device->ops ? m->device->ops : &backends[0];
}

void npl_backend_attach_npu(npl_model *m, npl_backend_npu *runtime)
{
    m->device->context = runtime;
    m->device->ops = npl_backend_named("npu-emu");
}

/* ---- the public per-step calls -------------------------------------- */

/* A sequence's calls go to the entry its cache lives on: the model's,
 * unless the phase split moved it (engine/backend/phase_split.c). */
static const npl_backend *seq_backend(const npl_model *m, const npl_seq *s)
{
    return s && s->model == m && s->backend ? s->backend : npl_model_backend(m);
}

npl_status npl_prefill(npl_model *m, npl_seq *s, const int32_t *tokens, size_t n,
                       size_t max_tokens_this_call, size_t *consumed, npl_error *err)
{
    const npl_backend *be = seq_backend(m, s);
    npl_status st = be->prefill(m, s, tokens, n, max_tokens_this_call, consumed, err);
    if (st == NPL_OK && s && n > 0)
        s->prefill_backend = be;
    return st;
}

npl_status npl_prefill_embeddings(npl_model *m, npl_seq *s, const float *embd, size_t n, bool bidirectional,
                                  npl_error *err)
{
    const npl_backend *be = seq_backend(m, s);
    npl_status st = be->prefill_embeddings(m, s, embd, n, bidirectional, err);
    if (st == NPL_OK && s && n > 0)
        s->prefill_backend = be;
    return st;
}

npl_status npl_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n_seqs,
                      npl_error *err)
{
    return npl_phase_split_decode(m, seqs, tokens, n_seqs, err);
}
