/* The phi3 family's hooks of the architecture table (engine/models/model_arch.c):
 * Phi-3.5-mini, Phi-4, Phi-4-mini.
 *
 * A llama-style graph with NEOX RoPE, as llama.cpp's phi3 graph computes it:
 *  - Q, K and V come from one fused matrix blk.N.attn_qkv.weight (rows
 *    Q, then K, then V), or from separate ones;
 *  - blk.N.ffn_up.weight holds the gate rows then the up rows (2 * n_ff)
 *    of a SwiGLU FFN; there is no ffn_gate;
 *  - RoPE may rotate only the leading rope.dimension_count dimensions of a
 *    head (Phi-4-mini: 96 of 128);
 *  - LongRoPE: per-pair frequency divisors rope_factors_short.weight for a
 *    sequence whose context is at most rope.scaling.original_context_length
 *    and rope_factors_long.weight for a longer one (llama.cpp picks by the
 *    context's size, not by position: a 2048-token context of a file whose
 *    original length is 256 uses the long factors from its first token),
 *    and rope.scaling.attn_factor multiplying the rotated dimensions of Q
 *    and K (cos and sin) either way. A file without the long factors has
 *    its context capped at the original length.
 * attention.sliding_window is ignored, as llama.cpp does for this family. */
#include <stdio.h>

#include "model_arch.h"

npl_status npl_phi3_read_extra(npl_binder *b)
{
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    npl_status st;
    float attn_factor = 1.0f;
    uint32_t orig_ctx = 0;
    if ((st = npl_llama_read_extra(b)) ||
        (st = npl_bind_f32(b, "rope.scaling.attn_factor", false, 1.0f, &attn_factor)) ||
        (st = npl_bind_u32(b, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, NPL_MAX_CTX,
                           &orig_ctx)))
        return st;
    if (!(attn_factor > 0.0f && attn_factor < 100.0f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.rope.scaling.attn_factor = %g is out of range", b->path,
                             b->arch, (double)attn_factor);
    m->rope_long_ctx = orig_ctx;
    m->rope_mscale = attn_factor;
    m->npu_refusal = "phi3's fused projections and RoPE factors";
    return NPL_OK;
}

/* Rows [first, first + n) of a bound matrix, as a matrix of their own. */
static npl_status rows_of(const npl_binder *b, const char *name, const npl_matrix *whole, int64_t first, int64_t n,
                          npl_matrix *out)
{
    const char *data = (const char *)whole->data + (size_t)first * whole->row_bytes;
    if (!npl_matrix_init(out, whole->type, data, whole->n_cols, n))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor '%s' cannot be split into rows", b->path, name);
    return NPL_OK;
}

npl_status npl_bind_attention_qkv(const npl_binder *b, uint32_t l, npl_layer *L)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd, q = (uint64_t)hp->n_head * hp->head_dim, kv = (uint64_t)hp->n_head_kv * hp->head_dim;
    char name[96];
    npl_status st;
    snprintf(name, sizeof name, "blk.%u.attn_qkv.weight", l);
    if (npl_gguf_find_tensor(b->m->gguf, name)) {
        npl_matrix qkv;
        if ((st = npl_bind_matrix(b, name, e, q + 2 * kv, "n_embd, (n_head + 2 * n_head_kv) * head_dim", &qkv)) ||
            (st = rows_of(b, name, &qkv, 0, (int64_t)q, &L->wq)) ||
            (st = rows_of(b, name, &qkv, (int64_t)q, (int64_t)kv, &L->wk)) ||
            (st = rows_of(b, name, &qkv, (int64_t)(q + kv), (int64_t)kv, &L->wv)))
            return st;
        return NPL_OK;
    }
    const char *part[3] = {"attn_q", "attn_k", "attn_v"};
    npl_matrix *dst[3] = {&L->wq, &L->wk, &L->wv};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "blk.%u.%s.weight", l, part[i]);
        if ((st = npl_bind_matrix(b, name, e, i ? kv : q, i ? "n_embd, n_head_kv * head_dim" : "n_embd, n_head * head_dim",
                                  dst[i])))
            return st;
    }
    return NPL_OK;
}

/* One LongRoPE factor set (rope dimension_count / 2 positive divisors), or
 * *out = NULL when the file has none. */
static npl_status bind_factors(const npl_binder *b, const char *name, const float **out)
{
    uint32_t half = b->m->hp.n_rot / 2;
    const float *f = NULL;
    npl_status st;
    *out = NULL;
    if (!npl_gguf_find_tensor(b->m->gguf, name))
        return NPL_OK;
    if ((st = npl_bind_vector(b, name, half, "rope dimension_count / 2", &f)))
        return st;
    for (uint32_t i = 0; i < half; i++)
        if (!(f[i] > 0.0f && f[i] < 1e9f))
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s[%u] = %g is not a positive factor", b->path, name, i,
                                 (double)f[i]);
    *out = f;
    return NPL_OK;
}

static npl_status bind_rope_factors(const npl_binder *b)
{
    npl_model *m = b->m;
    npl_status st;
    if ((st = bind_factors(b, "rope_factors_short.weight", &m->rope_freqs)) ||
        (st = bind_factors(b, "rope_factors_long.weight", &m->rope_factors_long)))
        return st;
    if (!m->rope_factors_long && m->rope_long_ctx < m->hp.n_ctx_train)
        m->hp.n_ctx_train = m->rope_long_ctx;
    return NPL_OK;
}

npl_status npl_phi3_finish(npl_binder *b)
{
    npl_model *m = b->m;
    const npl_hparams *hp = &m->hp;
    char name[96];
    npl_status st;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        npl_layer *L = &m->layers[l];
        npl_matrix up;
        snprintf(name, sizeof name, "blk.%u.ffn_up.weight", l);
        if ((st = npl_bind_attention_qkv(b, l, L)) ||
            (st = npl_bind_matrix(b, name, hp->n_embd, 2 * (uint64_t)hp->n_ff, "n_embd, 2 * n_ff", &up)) ||
            (st = rows_of(b, name, &up, 0, hp->n_ff, &L->w_gate)) ||
            (st = rows_of(b, name, &up, hp->n_ff, hp->n_ff, &L->w_up)))
            return st;
    }
    return bind_rope_factors(b);
}
