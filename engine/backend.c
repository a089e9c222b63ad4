/* The backend registry: the CPU engine and the NPU runtime
 * (engine/backend_npu.h) as ops tables. */
#include "backend.h"

#include "backend_npu.h"
#include "model_internal.h"

/* The NPU's kernel groups compute RMSNorm, Q/K/V without bias, optional
 * per-head Q/K norms, rope (both styles, rope_freqs, sliding windows),
 * attention, output projection with optional post-norms and a SiLU or
 * GELU-gated FFN: a layer with projection biases (qwen2) has no group. */
static npl_status npu_supports(const npl_model *m, npl_error *err)
{
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        if (m->layers[l].bq || m->layers[l].bk || m->layers[l].bv)
            return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                                 "the NPU runtime does not run architecture '%s' (Q/K/V projection biases): "
                                 "use the cpu device",
                                 m->architecture);
    return NPL_OK;
}

static npl_status npu_open(npl_model *m, struct npl_npu_device *dev, const char *cache_dir, npl_error *err)
{
    return npl_backend_npu_create_in(m, dev, cache_dir, &m->device->npu, err);
}

static const npl_backend backends[] = {
    {.name = "cpu"}, /* engine/forward.c runs every architecture of the table */
    {.name = "npu", .supports = npu_supports, .open = npu_open},
};

const npl_backend *npl_backend_for(const struct npl_npu_device *dev)
{
    return dev ? &backends[1] : &backends[0];
}
