/* The gemma3 family's hooks of the architecture table (engine/models/model_arch.c):
 * Gemma 3 text models, also the language part of the multimodal ones.
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

#include "model_arch.h"

/* Gemma 3 27B (62 layers) was trained with query_pre_attn_scalar =
 * n_embd / n_head instead of head_dim; GGUF has no key for it, so the
 * layer count identifies the model, as in llama.cpp. */
#define GEMMA3_27B_LAYERS 62u

#define DEFAULT_SWA_PATTERN 6u
#define DEFAULT_ROPE_BASE 10000.0f

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
    return st ? st : npl_arch_check_rope_base(b, k, *out);
}

npl_status npl_gemma3_prepare(npl_binder *b)
{
    bool ollama = is_ollama_dialect(b);
    if (ollama)
        b->extra_tokens = OLLAMA_EXTRA_TOKENS;
    b->rms_eps_optional = ollama;
    b->rms_eps_default = OLLAMA_RMS_EPS;
    b->own_rope_base = true;
    return NPL_OK;
}

npl_status npl_gemma3_read_extra(npl_binder *b)
{
    npl_hparams *hp = &b->m->hp;
    npl_status st;
    if ((st = bind_rope_base(b, "rope.freq_base", "rope.global.freq_base",
                             is_ollama_dialect(b) ? OLLAMA_GLOBAL_ROPE_BASE : DEFAULT_ROPE_BASE, &hp->rope_base)) ||
        (st = read_rope_scaling(b, hp)))
        return st;

    /* No window (absent or 0): every layer is global, as in llama.cpp. */
    if ((st = npl_bind_u32(b, "attention.sliding_window", false, 0, 0, NPL_MAX_CTX, &hp->n_swa)))
        return st;
    b->swa_pattern = 0;
    if (hp->n_swa) {
        if ((st = npl_bind_u32(b, "attention.sliding_window_pattern", false, DEFAULT_SWA_PATTERN, 0,
                               NPL_MAX_LAYERS, &b->swa_pattern)) ||
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
    return NPL_OK;
}

npl_status npl_gemma3_finish(npl_binder *b)
{
    npl_model *m = b->m;
    const npl_hparams *hp = &m->hp;
    uint32_t pre_attn = hp->n_layer == GEMMA3_27B_LAYERS ? hp->n_embd / hp->n_head : hp->head_dim;
    if (pre_attn == 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: gemma3 with n_embd %u < n_head %u", b->path, hp->n_embd,
                             hp->n_head);
    m->attn_scale = 1.0f / sqrtf((float)pre_attn);
    /* Pattern 0: every layer local (llama.cpp's convention). */
    for (uint32_t l = 0; l < hp->n_layer; l++)
        m->layers[l].local = hp->n_swa && (b->swa_pattern == 0 || l % b->swa_pattern < b->swa_pattern - 1);
    return NPL_OK;
}
