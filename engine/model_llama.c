/* Binds a GGUF file of architecture "llama" (Llama 3.x and look-alikes):
 * reads the hyper-parameters, checks every tensor's presence, type and
 * shape against them, and points the layer table into the mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "model_internal.h"

typedef struct binder {
    npl_model *m;
    const char *path;
    npl_error *err;
} binder;

static npl_status get_u32_default(const binder *b, const char *key, uint32_t def, uint32_t *out)
{
    const npl_gguf_value *v = npl_gguf_find(b->m->gguf, key);
    if (!v) {
        *out = def;
        return NPL_OK;
    }
    if (!npl_gguf_get_u32(b->m->gguf, key, out))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: metadata '%s' is not an unsigned 32-bit integer",
                             b->path, key);
    return NPL_OK;
}

static npl_status get_f32_default(const binder *b, const char *key, float def, float *out)
{
    const npl_gguf_value *v = npl_gguf_find(b->m->gguf, key);
    if (!v) {
        *out = def;
        return NPL_OK;
    }
    if (!npl_gguf_get_f32(b->m->gguf, key, out))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: metadata '%s' is not a number", b->path, key);
    return NPL_OK;
}

static npl_status check_range(const binder *b, const char *key, uint32_t v, uint32_t lo, uint32_t hi)
{
    if (v < lo || v > hi)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: metadata '%s' = %u is out of range [%u, %u]",
                             b->path, key, v, lo, hi);
    return NPL_OK;
}

static const npl_gguf_tensor *find_tensor(const binder *b, const char *name, bool required)
{
    const npl_gguf_tensor *t = npl_gguf_find_tensor(b->m->gguf, name);
    if (!t && required)
        npl_error_set(b->err, NPL_ERR_FORMAT, "%s: missing tensor '%s'", b->path, name);
    return t;
}

static void format_shape(const npl_gguf_tensor *t, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "[");
    for (uint32_t d = 0; d < t->n_dims && n > 0 && (size_t)n < cap; d++)
        n += snprintf(buf + n, cap - (size_t)n, d ? ", %llu" : "%llu", (unsigned long long)t->ne[d]);
    if (n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "]");
}

static bool shape_is(const npl_gguf_tensor *t, uint64_t ne0, uint64_t ne1)
{
    return t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1;
}

static npl_status shape_error(const binder *b, const npl_gguf_tensor *t, const char *name, uint64_t ne0,
                              uint64_t ne1, const char *meaning)
{
    char got[96];
    format_shape(t, got, sizeof got);
    if (ne1 == 1)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%llu] (%s)",
                             b->path, name, got, (unsigned long long)ne0, meaning);
    return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%llu, %llu] (%s)",
                         b->path, name, got, (unsigned long long)ne0, (unsigned long long)ne1, meaning);
}

static npl_status bind_matrix(const binder *b, const char *name, uint64_t ne0, uint64_t ne1,
                              const char *meaning, npl_matrix *out)
{
    const npl_gguf_tensor *t = find_tensor(b, name, true);
    if (!t)
        return NPL_ERR_FORMAT;
    if (!shape_is(t, ne0, ne1))
        return shape_error(b, t, name, ne0, ne1, meaning);
    if (!npl_matmul_type_supported(t->type)) {
        const npl_type_traits *tr = npl_type_traits_get(t->type);
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has type %s, which the CPU kernels do not support", b->path,
                             name, tr ? tr->name : "unknown");
    }
    if (!npl_matrix_init(out, t->type, t->data, (int64_t)ne0, (int64_t)ne1))
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: tensor '%s' cannot be read as a matrix (misaligned data or rows not a whole number of blocks)",
                             b->path, name);
    return NPL_OK;
}

/* 1-D f32 vectors (norm weights, rope factors), used in place. */
static npl_status bind_vector(const binder *b, const char *name, uint64_t n, const char *meaning,
                              const float **out)
{
    const npl_gguf_tensor *t = find_tensor(b, name, true);
    if (!t)
        return NPL_ERR_FORMAT;
    if (!shape_is(t, n, 1))
        return shape_error(b, t, name, n, 1, meaning);
    if (t->type != NPL_TYPE_F32) {
        const npl_type_traits *tr = npl_type_traits_get(t->type);
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, expected f32", b->path,
                             name, tr ? tr->name : "unknown");
    }
    if ((uintptr_t)t->data % sizeof(float) != 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor '%s' data is not 4-byte aligned", b->path, name);
    *out = t->data;
    return NPL_OK;
}

static npl_status read_hparams(const binder *b)
{
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    const npl_gguf *g = m->gguf;
    npl_status st;

    uint32_t n_expert = 0;
    if ((st = get_u32_default(b, "llama.expert_count", 0, &n_expert)))
        return st;
    if (n_expert > 0)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: mixture-of-experts llama models (llama.expert_count = %u) are not supported",
                             b->path, n_expert);

    if ((st = npl_gguf_require_u32(g, "llama.context_length", &hp->n_ctx_train, b->err)) ||
        (st = npl_gguf_require_u32(g, "llama.embedding_length", &hp->n_embd, b->err)) ||
        (st = npl_gguf_require_u32(g, "llama.block_count", &hp->n_layer, b->err)) ||
        (st = npl_gguf_require_u32(g, "llama.feed_forward_length", &hp->n_ff, b->err)) ||
        (st = npl_gguf_require_u32(g, "llama.attention.head_count", &hp->n_head, b->err)) ||
        (st = npl_gguf_require_f32(g, "llama.attention.layer_norm_rms_epsilon", &hp->rms_eps, b->err)))
        return st;
    if ((st = check_range(b, "llama.context_length", hp->n_ctx_train, 1, NPL_MAX_CTX)) ||
        (st = check_range(b, "llama.embedding_length", hp->n_embd, 1, NPL_MAX_EMBD)) ||
        (st = check_range(b, "llama.block_count", hp->n_layer, 1, NPL_MAX_LAYERS)) ||
        (st = check_range(b, "llama.feed_forward_length", hp->n_ff, 1, NPL_MAX_FF)) ||
        (st = check_range(b, "llama.attention.head_count", hp->n_head, 1, NPL_MAX_HEADS)))
        return st;

    if ((st = get_u32_default(b, "llama.attention.head_count_kv", hp->n_head, &hp->n_head_kv)) ||
        (st = check_range(b, "llama.attention.head_count_kv", hp->n_head_kv, 1, hp->n_head)))
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: llama.attention.head_count (%u) is not a multiple of head_count_kv (%u)",
                             b->path, hp->n_head, hp->n_head_kv);

    uint32_t key_len, value_len;
    if ((st = get_u32_default(b, "llama.attention.key_length", hp->n_embd / hp->n_head, &key_len)) ||
        (st = get_u32_default(b, "llama.attention.value_length", key_len, &value_len)))
        return st;
    if ((st = check_range(b, "llama.attention.key_length", key_len, 2, NPL_MAX_HEAD_DIM)))
        return st;
    if (value_len != key_len)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: attention key_length %u differs from value_length %u", b->path, key_len,
                             value_len);
    hp->head_dim = key_len;

    if ((st = get_u32_default(b, "llama.rope.dimension_count", hp->head_dim, &hp->n_rot)))
        return st;
    if (hp->n_rot == 0 || hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: llama.rope.dimension_count = %u must be even, positive and at most the head size %u",
                             b->path, hp->n_rot, hp->head_dim);
    if ((st = get_f32_default(b, "llama.rope.freq_base", 10000.0f, &hp->rope_base)))
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
static npl_status reject_unsupported_tensors(const binder *b)
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

static npl_status bind_layer(const binder *b, uint32_t l, npl_layer *L)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd;
    uint64_t q_dim = (uint64_t)hp->n_head * hp->head_dim;
    uint64_t kv_dim = (uint64_t)hp->n_head_kv * hp->head_dim;
    char name[96];
    npl_status st;

#define NAME(suffix) (snprintf(name, sizeof name, "blk.%u." suffix, l), name)
    if ((st = bind_vector(b, NAME("attn_norm.weight"), e, "n_embd", &L->attn_norm)) ||
        (st = bind_matrix(b, NAME("attn_q.weight"), e, q_dim, "n_embd, n_head * head_dim", &L->wq)) ||
        (st = bind_matrix(b, NAME("attn_k.weight"), e, kv_dim, "n_embd, n_head_kv * head_dim", &L->wk)) ||
        (st = bind_matrix(b, NAME("attn_v.weight"), e, kv_dim, "n_embd, n_head_kv * head_dim", &L->wv)) ||
        (st = bind_matrix(b, NAME("attn_output.weight"), q_dim, e, "n_head * head_dim, n_embd", &L->wo)) ||
        (st = bind_vector(b, NAME("ffn_norm.weight"), e, "n_embd", &L->ffn_norm)) ||
        (st = bind_matrix(b, NAME("ffn_gate.weight"), e, hp->n_ff, "n_embd, n_ff", &L->w_gate)) ||
        (st = bind_matrix(b, NAME("ffn_up.weight"), e, hp->n_ff, "n_embd, n_ff", &L->w_up)) ||
        (st = bind_matrix(b, NAME("ffn_down.weight"), hp->n_ff, e, "n_ff, n_embd", &L->w_down)))
        return st;
#undef NAME
    return NPL_OK;
}

npl_status npl_llama_load(npl_model *m, npl_error *err)
{
    binder b = {.m = m, .path = npl_gguf_path(m->gguf), .err = err};
    npl_hparams *hp = &m->hp;
    npl_status st;

    if ((st = read_hparams(&b)))
        return st;

    /* The vocabulary size is the embedding's row count; the tokenizer
     * must agree or sampled ids would have no text. */
    const npl_gguf_tensor *te = find_tensor(&b, "token_embd.weight", true);
    if (!te)
        return NPL_ERR_FORMAT;
    uint64_t n_vocab = te->ne[1];
    if (n_vocab < 1 || n_vocab > NPL_MAX_VOCAB)
        return npl_error_set(err, NPL_ERR_FORMAT, "%s: token_embd.weight has %llu rows, out of range", b.path,
                             (unsigned long long)n_vocab);
    hp->n_vocab = (uint32_t)n_vocab;
    int32_t tok_vocab = npl_tokenizer_n_vocab(m->tok);
    if (tok_vocab != (int32_t)hp->n_vocab)
        return npl_error_set(err, NPL_ERR_FORMAT,
                             "%s: the tokenizer has %d tokens but token_embd.weight has %u rows", b.path,
                             tok_vocab, hp->n_vocab);
    uint32_t meta_vocab;
    if ((st = get_u32_default(&b, "llama.vocab_size", hp->n_vocab, &meta_vocab)))
        return st;
    if (meta_vocab != hp->n_vocab)
        return npl_error_set(err, NPL_ERR_FORMAT, "%s: llama.vocab_size = %u but token_embd.weight has %u rows",
                             b.path, meta_vocab, hp->n_vocab);

    if ((st = bind_matrix(&b, "token_embd.weight", hp->n_embd, hp->n_vocab, "n_embd, n_vocab", &m->tok_embd)))
        return st;
    if ((st = bind_vector(&b, "output_norm.weight", hp->n_embd, "n_embd", &m->output_norm)))
        return st;
    if (npl_gguf_find_tensor(m->gguf, "output.weight")) {
        if ((st = bind_matrix(&b, "output.weight", hp->n_embd, hp->n_vocab, "n_embd, n_vocab", &m->output)))
            return st;
    } else {
        m->output = m->tok_embd; /* tied embeddings */
    }
    m->rope_freqs = NULL;
    if (npl_gguf_find_tensor(m->gguf, "rope_freqs.weight")) {
        if ((st = bind_vector(&b, "rope_freqs.weight", hp->n_rot / 2, "rope dimension_count / 2", &m->rope_freqs)))
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
