/* Binds a GGUF file of architecture "gemma3" (Gemma 3 text models, also
 * the language part of the multimodal ones): hyper-parameters, the
 * sliding-window layout, and every tensor's presence, type and shape.
 *
 * What differs from llama, as llama.cpp's gemma3 graph computes it:
 *  - token embeddings are multiplied by sqrt(n_embd);
 *  - Q and K get a per-head RMSNorm before RoPE, which rotates NEOX pairs
 *    (x[i], x[i + n_rot/2]);
 *  - layer i is local (sliding window of attention.sliding_window
 *    positions, rope base rope.freq_base_swa, default 10000, no rope
 *    scaling) unless i % P == P - 1, P = attention.sliding_window_pattern
 *    (default 6); global layers use rope.freq_base and linear rope scaling
 *    when rope.scaling.* asks for it;
 *  - attention and FFN outputs go through their own RMSNorm before the
 *    residual add (norm weights in the file already include Gemma's +1);
 *  - the FFN is GELU(tanh)-gated; the output is usually tied. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_bind.h"

/* Gemma 3 27B (62 layers) was trained with query_pre_attn_scalar =
 * n_embd / n_head instead of head_dim; GGUF has no key for it, so the
 * layer count identifies the model, as in llama.cpp. */
#define GEMMA3_27B_LAYERS 62u

#define DEFAULT_SWA_PATTERN 6u
#define DEFAULT_ROPE_BASE 10000.0f

static npl_status check_rope_base(const npl_binder *b, const char *key, float v)
{
    if (!(v > 1.0f && v < 1e12f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.%s = %g is out of range", b->path, b->arch, key,
                             (double)v);
    return NPL_OK;
}

/* Linear scaling divides the global layers' positions by the factor;
 * llama.cpp reads the type as "linear" when the key is absent and the
 * factor from rope.scaling.factor, else the older rope.scale_linear. */
static npl_status read_rope_scaling(const npl_binder *b, npl_hparams *hp)
{
    npl_status st;
    npl_str type = {"linear", 6};
    bool has_type, has_factor = false;
    if ((st = npl_bind_str(b, "rope.scaling.type", &type, &has_type)))
        return st;
    float factor = 0.0f;
    const char *factor_key = "rope.scaling.factor";
    char k[128];
    snprintf(k, sizeof k, "%s.rope.scaling.factor", b->arch);
    if (!npl_gguf_find(b->m->gguf, k))
        factor_key = "rope.scale_linear";
    if ((st = npl_bind_f32(b, factor_key, false, 0.0f, &factor)))
        return st;
    has_factor = factor != 0.0f;
    hp->rope_scale = 1.0f;
    if (npl_str_eq(type, "none"))
        return NPL_OK;
    if (!npl_str_eq(type, "linear"))
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: rope scaling type '%.*s' is not supported", b->path,
                             (int)(type.len > 64 ? 64 : type.len), type.ptr);
    if (!has_factor)
        return NPL_OK;
    if (!(factor > 0.0f && factor < 1e6f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.%s = %g is not a positive factor", b->path, b->arch,
                             factor_key, (double)factor);
    hp->rope_scale = 1.0f / factor;
    return NPL_OK;
}

/* Ollama's own Gemma 3 converter writes a dialect: no rms epsilon key
 * (its engine uses 1e-6), the rope bases under rope.global.freq_base
 * (default 1e6) and rope.local.freq_base (default 1e4), and a tokenizer
 * with one token more than the embedding has rows. */
#define OLLAMA_RMS_EPS 1e-6f
#define OLLAMA_GLOBAL_ROPE_BASE 1000000.0f
#define OLLAMA_EXTRA_TOKENS 1u

static bool has_key(const npl_binder *b, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", b->arch, key);
    return npl_gguf_find(b->m->gguf, k) != NULL;
}

static bool is_ollama_dialect(const npl_binder *b)
{
    return has_key(b, "rope.global.freq_base") || has_key(b, "rope.local.freq_base") ||
           !has_key(b, "attention.layer_norm_rms_epsilon");
}

/* The first of the keys the file has (standard name first), else def. */
static npl_status bind_rope_base(const npl_binder *b, const char *key, const char *ollama_key, float def,
                                 float *out)
{
    const char *k = has_key(b, key) || !has_key(b, ollama_key) ? key : ollama_key;
    npl_status st = npl_bind_f32(b, k, false, def, out);
    return st ? st : check_rope_base(b, k, *out);
}

static npl_status read_hparams(const npl_binder *b, uint32_t *swa_pattern)
{
    bool ollama = is_ollama_dialect(b);
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    npl_status st;

    if ((st = npl_bind_u32(b, "context_length", true, 0, 1, NPL_MAX_CTX, &hp->n_ctx_train)) ||
        (st = npl_bind_u32(b, "embedding_length", true, 0, 1, NPL_MAX_EMBD, &hp->n_embd)) ||
        (st = npl_bind_u32(b, "block_count", true, 0, 1, NPL_MAX_LAYERS, &hp->n_layer)) ||
        (st = npl_bind_u32(b, "feed_forward_length", true, 0, 1, NPL_MAX_FF, &hp->n_ff)) ||
        (st = npl_bind_u32(b, "attention.head_count", true, 0, 1, NPL_MAX_HEADS, &hp->n_head)) ||
        (st = npl_bind_u32(b, "attention.head_count_kv", false, hp->n_head, 1, hp->n_head, &hp->n_head_kv)) ||
        (st = npl_bind_f32(b, "attention.layer_norm_rms_epsilon", !ollama, OLLAMA_RMS_EPS, &hp->rms_eps)))
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: gemma3.attention.head_count (%u) is not a multiple of head_count_kv (%u)", b->path,
                             hp->n_head, hp->n_head_kv);
    if (!(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f))
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: gemma3.attention.layer_norm_rms_epsilon = %g is out of range", b->path,
                             (double)hp->rms_eps);

    uint32_t key_len, value_len;
    if ((st = npl_bind_u32(b, "attention.key_length", false, hp->n_embd / hp->n_head, 2, NPL_MAX_HEAD_DIM,
                           &key_len)) ||
        (st = npl_bind_u32(b, "attention.value_length", false, key_len, 1, NPL_MAX_HEAD_DIM, &value_len)))
        return st;
    if (value_len != key_len)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: attention key_length %u differs from value_length %u",
                             b->path, key_len, value_len);
    hp->head_dim = key_len;
    if ((st = npl_bind_u32(b, "rope.dimension_count", false, hp->head_dim, 2, hp->head_dim, &hp->n_rot)))
        return st;
    if (hp->n_rot % 2 != 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: gemma3.rope.dimension_count = %u is not even", b->path,
                             hp->n_rot);

    if ((st = bind_rope_base(b, "rope.freq_base", "rope.global.freq_base",
                             ollama ? OLLAMA_GLOBAL_ROPE_BASE : DEFAULT_ROPE_BASE, &hp->rope_base)) ||
        (st = read_rope_scaling(b, hp)))
        return st;

    /* No window (absent or 0): every layer is global, as in llama.cpp. */
    if ((st = npl_bind_u32(b, "attention.sliding_window", false, 0, 0, NPL_MAX_CTX, &hp->n_swa)))
        return st;
    *swa_pattern = 0;
    if (hp->n_swa) {
        if ((st = npl_bind_u32(b, "attention.sliding_window_pattern", false, DEFAULT_SWA_PATTERN, 0,
                               NPL_MAX_LAYERS, swa_pattern)) ||
            (st = bind_rope_base(b, "rope.freq_base_swa", "rope.local.freq_base", DEFAULT_ROPE_BASE,
                                 &hp->rope_base_swa)))
            return st;
    }

    float softcap = 0.0f;
    if ((st = npl_bind_f32(b, "final_logit_softcapping", false, 0.0f, &softcap)))
        return st;
    if (softcap != 0.0f)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: gemma3.final_logit_softcapping = %g is not supported (Gemma 3 has none)", b->path,
                             (double)softcap);

    m->embd_scale = sqrtf((float)hp->n_embd);
    uint32_t pre_attn = hp->n_layer == GEMMA3_27B_LAYERS ? hp->n_embd / hp->n_head : hp->head_dim;
    if (pre_attn == 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: gemma3 with n_embd %u < n_head %u", b->path, hp->n_embd,
                             hp->n_head);
    m->attn_scale = 1.0f / sqrtf((float)pre_attn);
    m->rope_neox = true;
    m->ffn_gelu = true;
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
        (st = npl_bind_vector(b, NAME("attn_q_norm.weight"), hp->head_dim, "head_dim", &L->attn_q_norm)) ||
        (st = npl_bind_vector(b, NAME("attn_k_norm.weight"), hp->head_dim, "head_dim", &L->attn_k_norm)) ||
        (st = npl_bind_matrix(b, NAME("attn_output.weight"), q_dim, e, "n_head * head_dim, n_embd", &L->wo)) ||
        (st = npl_bind_vector(b, NAME("post_attention_norm.weight"), e, "n_embd", &L->post_attn_norm)) ||
        (st = npl_bind_vector(b, NAME("ffn_norm.weight"), e, "n_embd", &L->ffn_norm)) ||
        (st = npl_bind_matrix(b, NAME("ffn_gate.weight"), e, hp->n_ff, "n_embd, n_ff", &L->w_gate)) ||
        (st = npl_bind_matrix(b, NAME("ffn_up.weight"), e, hp->n_ff, "n_embd, n_ff", &L->w_up)) ||
        (st = npl_bind_matrix(b, NAME("ffn_down.weight"), hp->n_ff, e, "n_ff, n_embd", &L->w_down)) ||
        (st = npl_bind_vector(b, NAME("post_ffw_norm.weight"), e, "n_embd", &L->post_ffn_norm)))
        return st;
#undef NAME
    return NPL_OK;
}

npl_status npl_gemma3_load(npl_model *m, npl_error *err)
{
    npl_binder b = {.m = m, .path = npl_gguf_path(m->gguf), .arch = "gemma3", .err = err};
    if (is_ollama_dialect(&b))
        b.extra_tokens = OLLAMA_EXTRA_TOKENS;
    npl_hparams *hp = &m->hp;
    npl_status st;
    uint32_t swa_pattern;

    if ((st = read_hparams(&b, &swa_pattern)) || (st = npl_bind_embeddings_and_output(&b)))
        return st;
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for %u layers", hp->n_layer);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        if ((st = bind_layer(&b, l, &m->layers[l])))
            return st;
        /* Pattern 0: every layer local (llama.cpp's convention). */
        m->layers[l].local = hp->n_swa && (swa_pattern == 0 || l % swa_pattern < swa_pattern - 1);
    }
    return NPL_OK;
}
