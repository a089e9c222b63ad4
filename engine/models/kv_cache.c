/* Sequences: a KV cache of n_ctx positions plus the last logits.
 *
 * K and V are kept in the model's cache format (IEEE halves, or Q8_0
 * blocks when npl_model_params.kv_type asks for them), one array each,
 * laid out [layer][kv_head][row]: the attention of one head reads its
 * cached rows front to back, and a new token writes one row per
 * (layer, head). A global layer has a row per position of the context; a
 * local (sliding-window) layer of a context longer than its window needs
 * only a mirrored ring of the positions one step can reach (see
 * npl_seq.kv_ring). The memory comes zeroed from the kernel, so pages a
 * short conversation never reaches are never touched; it is offered to
 * huge pages, since a follow-up turn copies thousands of cached rows into
 * a new sequence, and on 4 KiB pages the faults of that copy cost more
 * than the copy itself (docs/performance.md). */
#include <stdlib.h>

#include "huge_alloc.h"

#include "backend.h"
#include "model_internal.h"
#include "seq_state.h"

/* Ring period of the local layers: a step reads, for its first row, the
 * n_swa - 1 positions before it, and writes up to fw.rows positions of one
 * sequence before any row attends; none of those may share a row. 0 when
 * the mirrored ring would not be smaller than n_ctx rows. */
static uint32_t local_ring(const npl_model *m, uint32_t n_ctx)
{
    const npl_hparams *hp = &m->hp;
    if (!hp->n_swa)
        return 0;
    uint64_t ring = (uint64_t)hp->n_swa + m->fw.rows - 1;
    return 2 * ring - 1 < n_ctx ? (uint32_t)ring : 0;
}

npl_seq *npl_seq_create(npl_model *m, uint32_t n_ctx, npl_error *err)
{
    if (m && npl_model_is_embedding(m)) {
        npl_error_set(err, NPL_ERR_UNSUPPORTED, "%s is an embedding model: it makes vectors, not text", m->name);
        return NULL;
    }
    return npl_seq_create_any(m, n_ctx, err);
}

npl_seq *npl_seq_create_any(npl_model *m, uint32_t n_ctx, npl_error *err)
{
    return npl_seq_create_on(m, n_ctx, NULL, err);
}

npl_seq *npl_seq_create_on(npl_model *m, uint32_t n_ctx, const npl_backend *on, npl_error *err)
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

    npl_seq *s = calloc(1, sizeof *s);
    if (!s) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->model = m;
    s->n_ctx = n_ctx;
    s->kv_ring = local_ring(m, n_ctx);
    s->kv_ring_rows = s->kv_ring ? 2 * s->kv_ring - 1 : 0;
    s->kv_layer_off = malloc((size_t)hp->n_layer * sizeof *s->kv_layer_off);
    if (!s->kv_layer_off) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        npl_seq_free(s);
        return NULL;
    }
    /* Every factor is bounded by the loader's limits, but the sum can
     * still exceed what this machine can address: bounded so that K and V
     * together stay addressable. A row holds at least one byte per value
     * in either format, so the value offsets of kv_layer_off fit too. */
    size_t rows_total = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        size_t rows = npl_kv_rows(s, l);
        if (rows > SIZE_MAX / 2 / hp->n_layer / hp->n_head_kv / m->kv_row_bytes) {
            npl_error_set(err, NPL_ERR_NOMEM, "a KV cache of %u tokens does not fit in memory", n_ctx);
            npl_seq_free(s);
            return NULL;
        }
        s->kv_layer_off[l] = rows_total * hp->head_dim;
        rows_total += rows * m->layers[l].n_head_kv; /* gemma4 31B: per layer */
    }

    size_t bytes = rows_total * m->kv_row_bytes;
    s->k_cache = npl_huge_alloc(bytes, &s->k_map_bytes);
    s->v_cache = npl_huge_alloc(bytes, &s->v_map_bytes);
    s->logits = malloc((size_t)hp->n_vocab * sizeof *s->logits);
    s->hist = malloc((size_t)n_ctx * sizeof *s->hist);
    npl_error serr;
    npl_error_clear(&serr);
    s->state = npl_seq_state_create(m, &serr);
    if (!s->state && serr.code) {
        if (err)
            *err = serr;
        npl_seq_free(s);
        return NULL;
    }
    if (!s->k_cache || !s->v_cache || !s->logits || !s->hist) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory for a KV cache of %u tokens (%zu MiB)", n_ctx,
                      (bytes * 2) >> 20);
        npl_seq_free(s);
        return NULL;
    }
    /* On an NPU the cache that is used lives on the device. */
    const npl_backend *be = s->backend = on ? on : npl_model_backend(m);
    if (be->seq_attach && be->seq_attach(m, s, err)) {
        npl_seq_free(s);
        return NULL;
    }
    return s;
}

void npl_seq_free(npl_seq *s)
{
    if (!s)
        return;
    if (s->backend && s->backend->seq_release)
        s->backend->seq_release(s);
    npl_huge_free(s->k_cache, s->k_map_bytes);
    npl_huge_free(s->v_cache, s->v_map_bytes);
    free(s->logits);
    free(s->kv_layer_off);
    free(s->hist);
    npl_seq_state_free(s->state);
    free(s);
}

size_t npl_seq_bytes(const npl_seq *s)
{
    const npl_model *m = s->model;
    size_t kv = 0;
    if (s->backend && s->backend->seq_kv_bytes) {
        kv = s->backend->seq_kv_bytes(s); /* the host arrays are never touched */
    } else {
        for (uint32_t l = 0; l < m->hp.n_layer; l++)
            kv += (size_t)npl_kv_rows(s, l) * m->layers[l].n_head_kv;
        kv *= 2 * m->kv_row_bytes;
    }
    return kv + (s->logits ? (size_t)m->hp.n_vocab * sizeof *s->logits : 0) +
           (size_t)s->n_ctx * sizeof *s->hist + npl_seq_state_bytes(m, s->state);
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
