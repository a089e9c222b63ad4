/* The lfm2 family's hooks of the architecture table (engine/models/model_arch.c):
 * Liquid's LFM2 / LFM2.5 dense, a hybrid as llama.cpp's lfm2 graph
 * computes it.
 *
 * attention.head_count_kv is an array: a layer with 0 KV heads is a gated
 * short convolution (engine/models/forward_shortconv.c) whose state is the
 * last shortconv.l_cache - 1 inputs of each channel (engine/models/seq_state.h);
 * the others are attention with per-head Q/K RMS norms and NEOX RoPE. The
 * final norm is token_embd_norm.weight (the converter's name). A sliding
 * window (attention.sliding_window) and mixture of experts are refused. */
#include <stdio.h>

#include "ggml_types.h"
#include "model_arch.h"
#include "seq_state.h"

#define LFM2_MAX_L_CACHE 64u

npl_status npl_lfm2_prepare(npl_binder *b)
{
    b->kv_heads_per_layer = true;
    b->output_norm_name = "token_embd_norm.weight";
    return NPL_OK;
}

/* The per-layer KV head counts, or NULL after an error. */
static const npl_gguf_value *kv_heads(const npl_binder *b)
{
    char key[96];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", b->arch);
    const npl_gguf_value *a = npl_gguf_get_array(b->m->gguf, key, NPL_GGUF_INT32);
    if (!a)
        a = npl_gguf_get_array(b->m->gguf, key, NPL_GGUF_UINT32);
    if (!a || a->arr.count != b->m->hp.n_layer) {
        npl_error_set(b->err, NPL_ERR_FORMAT, "%s: '%s' must be an array of %u integers (one per layer)", b->path, key,
                      b->m->hp.n_layer);
        return NULL;
    }
    return a;
}

npl_status npl_lfm2_kv_heads(const npl_binder *b)
{
    npl_hparams *hp = &b->m->hp;
    const npl_gguf_value *a = kv_heads(b);
    if (!a)
        return NPL_ERR_FORMAT;
    hp->n_head_kv = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        int64_t v = npl_gguf_array_i64(a, l);
        if (v < 0 || v > hp->n_head || (v && hp->n_head_kv && v != hp->n_head_kv))
            return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                                 "%s: %s.attention.head_count_kv[%u] = %lld: the attention layers must share one "
                                 "count of at most head_count (%u)", b->path, b->arch, l, (long long)v, hp->n_head);
        if (v)
            hp->n_head_kv = (uint32_t)v;
    }
    if (!hp->n_head_kv)
        hp->n_head_kv = hp->n_head; /* no attention layer: unused */
    return NPL_OK;
}

npl_status npl_lfm2_read_extra(npl_binder *b)
{
    npl_status st;
    uint32_t l_cache = 0, swa = 0;
    if ((st = npl_llama_read_extra(b)) ||
        (st = npl_bind_u32(b, "shortconv.l_cache", true, 0, 2, LFM2_MAX_L_CACHE, &l_cache)) ||
        (st = npl_bind_u32(b, "attention.sliding_window", false, 0, 0, UINT32_MAX, &swa)))
        return st;
    if (swa)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: sliding-window attention (%s.attention.sliding_window = "
                             "%u) is not supported", b->path, b->arch, swa);
    b->m->hp.ssm_d_conv = l_cache;
    b->m->npu_refusal = "lfm2's short convolution layers";
    return NPL_OK;
}

/* A short-convolution layer: in_proj (b, c, x rows), its kernel, out_proj. */
static npl_status bind_shortconv(const npl_binder *b, uint32_t l, npl_layer *L)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd;
    char n[3][96];
    const char *suffix[3] = {"shortconv.in_proj.weight", "shortconv.out_proj.weight", "shortconv.conv.weight"};
    for (int i = 0; i < 3; i++)
        snprintf(n[i], sizeof n[i], "blk.%u.%s", l, suffix[i]);
    npl_matrix cw;
    npl_status st;
    if ((st = npl_bind_matrix(b, n[0], e, 3 * e, "n_embd, 3 * n_embd", &L->w_mix)) ||
        (st = npl_bind_matrix(b, n[1], e, e, "n_embd, n_embd", &L->w_ssm_out)) ||
        (st = npl_bind_matrix(b, n[2], hp->ssm_d_conv, e, "l_cache, n_embd", &cw)))
        return st;
    if (cw.type != NPL_TYPE_F32)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' must be f32", b->path, n[2]);
    L->ssm_conv = cw.data;
    L->shortconv = true;
    L->state_conv = (size_t)(hp->ssm_d_conv - 1) * e;
    return NPL_OK;
}

npl_status npl_lfm2_finish(npl_binder *b)
{
    npl_model *m = b->m;
    const npl_gguf_value *a = kv_heads(b);
    npl_status st;
    if (!a)
        return NPL_ERR_FORMAT;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        npl_layer *L = &m->layers[l];
        if ((st = npl_gguf_array_i64(a, l) ? npl_arch_bind_attention(b, l, L, 1) : bind_shortconv(b, l, L)))
            return st;
    }
    npl_seq_state_layout(m);
    return NPL_OK;
}
