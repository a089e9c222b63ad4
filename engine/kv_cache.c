/* Sequences: a KV cache of n_ctx positions plus the last logits.
 *
 * K and V are kept as IEEE halves, one array each, laid out
 * [layer][kv_head][position][head_dim]: the attention of one head reads
 * its cached rows front to back, and a new token writes one row per
 * (layer, head). The memory comes from calloc, so pages a short
 * conversation never reaches are never touched. */
#include <stdlib.h>

#include "model_internal.h"

npl_seq *npl_seq_create(npl_model *m, uint32_t n_ctx, npl_error *err)
{
    if (!m) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "no model");
        return NULL;
    }
    const npl_hparams *hp = &m->hp;
    if (n_ctx == 0)
        n_ctx = hp->n_ctx_train < NPL_DEFAULT_CTX_MAX ? hp->n_ctx_train : NPL_DEFAULT_CTX_MAX;
    if (n_ctx > NPL_MAX_CTX) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "context of %u tokens is larger than the maximum %u", n_ctx,
                      NPL_MAX_CTX);
        return NULL;
    }
    /* Every factor is bounded by the loader's limits, but their product
     * can still exceed what this machine can address. */
    size_t per_layer_head = (size_t)n_ctx * hp->head_dim;
    size_t heads = (size_t)hp->n_layer * hp->n_head_kv;
    if (per_layer_head > SIZE_MAX / sizeof(uint16_t) / heads) {
        npl_error_set(err, NPL_ERR_NOMEM, "a KV cache of %u tokens does not fit in memory", n_ctx);
        return NULL;
    }
    size_t elems = per_layer_head * heads;

    npl_seq *s = calloc(1, sizeof *s);
    if (!s) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->model = m;
    s->n_ctx = n_ctx;
    s->k_cache = calloc(elems, sizeof *s->k_cache);
    s->v_cache = calloc(elems, sizeof *s->v_cache);
    s->logits = malloc((size_t)hp->n_vocab * sizeof *s->logits);
    if (!s->k_cache || !s->v_cache || !s->logits) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory for a KV cache of %u tokens (%zu MiB)", n_ctx,
                      (elems * 2 * sizeof(uint16_t)) >> 20);
        npl_seq_free(s);
        return NULL;
    }
    return s;
}

void npl_seq_free(npl_seq *s)
{
    if (!s)
        return;
    free(s->k_cache);
    free(s->v_cache);
    free(s->logits);
    free(s);
}

uint32_t npl_seq_n_ctx(const npl_seq *s)
{
    return s->n_ctx;
}

uint32_t npl_seq_pos(const npl_seq *s)
{
    return s->pos;
}

const float *npl_seq_logits(const npl_seq *s)
{
    return s->has_logits ? s->logits : NULL;
}
