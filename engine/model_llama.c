/* Binds a GGUF file of architecture "llama" (Llama 3.x and look-alikes):
 * reads the hyper-parameters, checks every tensor's presence, type and
 * shape against them, and points the layer table into the mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "model_bind.h"

static npl_status read_hparams(const npl_binder *b)
{
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    const npl_gguf *g = m->gguf;
    npl_status st;

    uint32_t n_expert = 0;
    if ((st = npl_bind_u32(b, "expert_count", false, 0, 0, UINT32_MAX, &n_expert)))
        return st;
    if (n_expert > 0)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: mixture-of-experts llama models (llama.expert_count = %u) are not supported",
                             b->path, n_expert);

    if ((st = npl_bind_u32(b, "context_length", true, 0, 1, NPL_MAX_CTX, &hp->n_ctx_train)) ||
        (st = npl_bind_u32(b, "embedding_length", true, 0, 1, NPL_MAX_EMBD, &hp->n_embd)) ||
        (st = npl_bind_u32(b, "block_count", true, 0, 1, NPL_MAX_LAYERS, &hp->n_layer)) ||
        (st = npl_bind_u32(b, "feed_forward_length", true, 0, 1, NPL_MAX_FF, &hp->n_ff)) ||
        (st = npl_bind_u32(b, "attention.head_count", true, 0, 1, NPL_MAX_HEADS, &hp->n_head)) ||
        (st = npl_bind_f32(b, "attention.layer_norm_rms_epsilon", true, 0.0f, &hp->rms_eps)))
        return st;

    if ((st = npl_bind_u32(b, "attention.head_count_kv", false, hp->n_head, 1, hp->n_head, &hp->n_head_kv)))
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: llama.attention.head_count (%u) is not a multiple of head_count_kv (%u)",
                             b->path, hp->n_head, hp->n_head_kv);

    uint32_t key_len, value_len;
    if ((st = npl_bind_u32(b, "attention.key_length", false, hp->n_embd / hp->n_head, 2, NPL_MAX_HEAD_DIM,
                           &key_len)) ||
        (st = npl_bind_u32(b, "attention.value_length", false, key_len, 0, UINT32_MAX, &value_len)))
        return st;
    if (value_len != key_len)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: attention key_length %u differs from value_length %u", b->path, key_len,
                             value_len);
    hp->head_dim = key_len;

    if ((st = npl_bind_u32(b, "rope.dimension_count", false, hp->head_dim, 0, UINT32_MAX, &hp->n_rot)))
        return st;
    if (hp->n_rot == 0 || hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: llama.rope.dimension_count = %u must be even, positive and at most the head size %u",
                             b->path, hp->n_rot, hp->head_dim);
    if ((st = npl_bind_f32(b, "rope.freq_base", false, 10000.0f, &hp->rope_base)))
        return st;
    if (!(hp->rope_base > 1.0f && hp->rope_base < 1e12f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: llama.rope.freq_base = %g is out of range", b->path,
                             (double)hp->rope_base);
    if (!(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f))
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: llama.attention.layer_norm_rms_epsilon = %g is out of range", b->path,
                             (double)hp->rms_eps);

    npl_str scaling;
    if (npl_gguf_get_str(g, "llama.rope.scaling.type", &scaling) && !npl_str_eq(scaling, "none")) {
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: rope scaling type '%.*s' is not supported",
                             b->path, (int)(scaling.len > 64 ? 64 : scaling.len), scaling.ptr);
    }
    return NPL_OK;
}

/* Tensors of the llama family this engine does not implement: refusing
 * them beats silently computing something else. */
static npl_status reject_unsupported_tensors(const npl_binder *b)
{
    static const char *const extras[] = {
        "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_gate_inp.weight",
    };
    char name[96];
    for (uint32_t l = 0; l < b->m->hp.n_layer; l++) {
        for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++) {
            snprintf(name, sizeof name, "blk.%u.%s", l, extras[i]);
            if (npl_gguf_find_tensor(b->m->gguf, name))
                return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' is not supported", b->path,
                                     name);
        }
    }
    return NPL_OK;
}

static npl_status bind_layer(const npl_binder *b, uint32_t l, npl_layer *L)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim;
    uint64_t kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    char name[96];
    npl_status st;

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
    if ((st = npl_bind_vector(b, NAME("attn_norm.weight"), e, "n_embd", &L->attn_norm)) ||
        (st = npl_bind_matrix(b, NAME("attn_q.weight"), e, q_dim, "n_embd, n_head * head_dim", &L->wq)) ||
        (st = npl_bind_matrix(b, NAME("attn_k.weight"), e, kv_dim, "n_embd, n_head_kv * head_dim", &L->wk)) ||
        (st = npl_bind_matrix(b, NAME("attn_v.weight"), e, kv_dim, "n_embd, n_head_kv * head_dim", &L->wv)) ||
        (st = npl_bind_matrix(b, NAME("attn_output.weight"), q_dim, e, "n_head * head_dim, n_embd", &L->wo)) ||
        (st = npl_bind_vector(b, NAME("ffn_norm.weight"), e, "n_embd", &L->ffn_norm)) ||
        (st = npl_bind_matrix(b, NAME("ffn_gate.weight"), e, hp->n_ff, "n_embd, n_ff", &L->w_gate)) ||
        (st = npl_bind_matrix(b, NAME("ffn_up.weight"), e, hp->n_ff, "n_embd, n_ff", &L->w_up)) ||
        (st = npl_bind_matrix(b, NAME("ffn_down.weight"), hp->n_ff, e, "n_ff, n_embd", &L->w_down)))
        return st;
#undef NAME
    return NPL_OK;
}

npl_status npl_llama_load(npl_model *m, npl_error *err)
{
    npl_binder b = {.m = m, .path = npl_gguf_path(m->gguf), .arch = "llama", .err = err};
    npl_hparams *hp = &m->hp;
    npl_status st;

    if ((st = read_hparams(&b)))
        return st;

    if ((st = npl_bind_embeddings_and_output(&b)))
        return st;
    m->rope_freqs = NULL;
    if (npl_gguf_find_tensor(m->gguf, "rope_freqs.weight")) {
        if ((st = npl_bind_vector(&b, "rope_freqs.weight", hp->n_rot / 2, "rope dimension_count / 2", &m->rope_freqs)))
            return st;
        for (uint32_t i = 0; i < hp->n_rot / 2; i++)
            if (!(m->rope_freqs[i] > 0.0f && m->rope_freqs[i] < 1e9f))
                return npl_error_set(err, NPL_ERR_FORMAT, "%s: rope_freqs.weight[%u] = %g is not a positive factor",
                                     b.path, i, (double)m->rope_freqs[i]);
    }

    if ((st = reject_unsupported_tensors(&b)))
        return st;
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for %u layers", hp->n_layer);
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if ((st = bind_layer(&b, l, &m->layers[l])))
            return st;
    return NPL_OK;
}
