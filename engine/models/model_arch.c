/* The architecture table and the loader that walks it: the common
 * hyper-parameters, the embeddings and output, then every entry of the
 * family's tensor table for each layer. */
#include "model_arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYER(f) offsetof(npl_layer, f)

/* The tensors every family here shares: pre-norm attention and SwiGLU or
 * GeGLU FFN. */
#define ATTN_NORM {"attn_norm.weight", NPL_SHAPE_EMBD, LAYER(attn_norm), false}
#define ATTN_QKV                                                                                                       \
    {"attn_q.weight", NPL_SHAPE_EMBD_Q, LAYER(wq), false}, {"attn_k.weight", NPL_SHAPE_EMBD_KV, LAYER(wk), false},     \
        {"attn_v.weight", NPL_SHAPE_EMBD_KV, LAYER(wv), false}
#define ATTN_OUT {"attn_output.weight", NPL_SHAPE_Q_EMBD, LAYER(wo), false}
#define QK_NORM                                                                                                        \
    {"attn_q_norm.weight", NPL_SHAPE_HEAD, LAYER(attn_q_norm), false},                                                 \
        {"attn_k_norm.weight", NPL_SHAPE_HEAD, LAYER(attn_k_norm), false}
#define FFN                                                                                                            \
    {"ffn_norm.weight", NPL_SHAPE_EMBD, LAYER(ffn_norm), false},                                                       \
        {"ffn_gate.weight", NPL_SHAPE_EMBD_FF, LAYER(w_gate), false},                                                  \
        {"ffn_up.weight", NPL_SHAPE_EMBD_FF, LAYER(w_up), false},                                                      \
        {"ffn_down.weight", NPL_SHAPE_FF_EMBD, LAYER(w_down), false}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const npl_arch_tensor llama_tensors[] = {ATTN_NORM, ATTN_QKV, ATTN_OUT, FFN};

/* Gemma 3: per-head Q/K norms, and a norm on each sub-layer's output. */
static const npl_arch_tensor gemma3_tensors[] = {
    ATTN_NORM, ATTN_QKV, QK_NORM, ATTN_OUT,
    {"post_attention_norm.weight", NPL_SHAPE_EMBD, LAYER(post_attn_norm), false},
    FFN,
    {"post_ffw_norm.weight", NPL_SHAPE_EMBD, LAYER(post_ffn_norm), false},
};

/* Gemma 4: the norms every layer has; attention, FFN (per-layer width)
 * and per-layer inputs are bound by its finish hook (model_gemma4.c). */
static const npl_arch_tensor gemma4_tensors[] = {
    ATTN_NORM,
    {"post_attention_norm.weight", NPL_SHAPE_EMBD, LAYER(post_attn_norm), false},
    {"ffn_norm.weight", NPL_SHAPE_EMBD, LAYER(ffn_norm), false},
    {"post_ffw_norm.weight", NPL_SHAPE_EMBD, LAYER(post_ffn_norm), false},
};

/* Qwen 2 / 2.5: biases on the Q, K and V projections. */
static const npl_arch_tensor qwen2_tensors[] = {
    ATTN_NORM, ATTN_QKV,
    {"attn_q.bias", NPL_SHAPE_Q, LAYER(bq), false},
    {"attn_k.bias", NPL_SHAPE_KV, LAYER(bk), false},
    {"attn_v.bias", NPL_SHAPE_KV, LAYER(bv), false},
    ATTN_OUT, FFN,
};

/* Qwen 3 (dense): per-head Q/K RMS norms, no biases. */
static const npl_arch_tensor qwen3_tensors[] = {ATTN_NORM, ATTN_QKV, QK_NORM, ATTN_OUT, FFN};

/* BERT: biased projections, LayerNorm (weight and bias) after each
 * sub-layer's residual add, GELU FFN without a gate. */
static const npl_arch_tensor bert_tensors[] = {
    ATTN_QKV,
    {"attn_q.bias", NPL_SHAPE_Q, LAYER(bq), false},
    {"attn_k.bias", NPL_SHAPE_KV, LAYER(bk), false},
    {"attn_v.bias", NPL_SHAPE_KV, LAYER(bv), false},
    ATTN_OUT,
    {"attn_output.bias", NPL_SHAPE_EMBD, LAYER(bo), false},
    {"attn_output_norm.weight", NPL_SHAPE_EMBD, LAYER(attn_out_norm), false},
    {"attn_output_norm.bias", NPL_SHAPE_EMBD, LAYER(attn_out_norm_b), false},
    {"ffn_up.weight", NPL_SHAPE_EMBD_FF, LAYER(w_up), false},
    {"ffn_up.bias", NPL_SHAPE_FF, LAYER(b_up), false},
    {"ffn_down.weight", NPL_SHAPE_FF_EMBD, LAYER(w_down), false},
    {"ffn_down.bias", NPL_SHAPE_EMBD, LAYER(b_down), false},
    {"layer_output_norm.weight", NPL_SHAPE_EMBD, LAYER(out_norm), false},
    {"layer_output_norm.bias", NPL_SHAPE_EMBD, LAYER(out_norm_b), false},
};
/* Variants of the family (gated FFN: jina-bert-v2; fused QKV: nomic-bert). */
static const char *const refused_bert[] = {"ffn_gate.weight", "attn_qkv.weight"};

/* nomic-bert: bert's post-norm layers with a SwiGLU FFN without biases;
 * Q, K and V (fused or not) are bound by its finish hook. */
static const npl_arch_tensor nomic_bert_tensors[] = {
    ATTN_OUT,
    {"attn_output.bias", NPL_SHAPE_EMBD, LAYER(bo), true},
    {"attn_output_norm.weight", NPL_SHAPE_EMBD, LAYER(attn_out_norm), false},
    {"attn_output_norm.bias", NPL_SHAPE_EMBD, LAYER(attn_out_norm_b), false},
    {"ffn_up.weight", NPL_SHAPE_EMBD_FF, LAYER(w_up), false},
    {"ffn_gate.weight", NPL_SHAPE_EMBD_FF, LAYER(w_gate), false},
    {"ffn_down.weight", NPL_SHAPE_FF_EMBD, LAYER(w_down), false},
    {"layer_output_norm.weight", NPL_SHAPE_EMBD, LAYER(out_norm), false},
    {"layer_output_norm.bias", NPL_SHAPE_EMBD, LAYER(out_norm_b), false},
};
/* llama.cpp adds a QKV bias but ignores FFN biases in this graph (no
 * published file has either); Q/K norms are jina's, experts nomic v2's. */
static const char *const refused_nomic_bert[] = {
    "attn_qkv.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "ffn_up.bias", "ffn_down.bias",
    "attn_q_norm.weight", "attn_k_norm.weight", "ffn_gate_inp.weight",
};

static const char *const refused_biases_moe[] = {
    "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_gate_inp.weight",
};
/* Granite's optional biases (in no published dense file), and MoE. */
static const char *const refused_granite[] = {
    "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias",
    "ffn_gate_inp.weight",
};
/* Phi-3 / Phi-4: the fused projections are bound by its finish hook. */
static const npl_arch_tensor phi3_tensors[] = {
    ATTN_NORM, ATTN_OUT,
    {"ffn_norm.weight", NPL_SHAPE_EMBD, LAYER(ffn_norm), false},
    {"ffn_down.weight", NPL_SHAPE_FF_EMBD, LAYER(w_down), false},
};
static const char *const refused_phi3[] = {
    "attn_qkv.bias", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_up.bias", "ffn_down.bias",
    "ffn_gate_inp.weight",
};
/* Qwen 3.5: what every layer has; the attention or Gated DeltaNet weights
 * are bound by its finish hook (model_qwen35.c). */
static const npl_arch_tensor qwen35_tensors[] = {
    ATTN_NORM,
    {"post_attention_norm.weight", NPL_SHAPE_EMBD, LAYER(ffn_norm), false},
    {"ffn_gate.weight", NPL_SHAPE_EMBD_FF, LAYER(w_gate), false},
    {"ffn_up.weight", NPL_SHAPE_EMBD_FF, LAYER(w_up), false},
    {"ffn_down.weight", NPL_SHAPE_FF_EMBD, LAYER(w_down), false},
};
/* LFM2: every layer's norms and FFN; attention or short convolution
 * bound by its finish hook (model_lfm2.c). */
static const npl_arch_tensor lfm2_tensors[] = {
    ATTN_NORM,
    FFN,
};
static const char *const refused_o_bias_moe[] = {"attn_output.bias", "ffn_gate_inp.weight"};
/* Qwen 3 MoE: qwen3's attention; the experts are bound by its finish hook
 * (model_moe.c). */
static const npl_arch_tensor qwen3moe_tensors[] = {
    ATTN_NORM, ATTN_QKV, QK_NORM, ATTN_OUT, {"ffn_norm.weight", NPL_SHAPE_EMBD, LAYER(ffn_norm), false},
};
/* gpt-oss: biased projections, the FFN input norm named
 * post_attention_norm; sinks and experts bound by its finish hook. */
static const npl_arch_tensor gptoss_tensors[] = {
    ATTN_NORM, ATTN_QKV,
    {"attn_q.bias", NPL_SHAPE_Q, LAYER(bq), false},
    {"attn_k.bias", NPL_SHAPE_KV, LAYER(bk), false},
    {"attn_v.bias", NPL_SHAPE_KV, LAYER(bv), false},
    ATTN_OUT,
    {"attn_output.bias", NPL_SHAPE_EMBD, LAYER(bo), false},
    {"post_attention_norm.weight", NPL_SHAPE_EMBD, LAYER(ffn_norm), false},
};
/* Qwen 3.5 MoE: qwen35's per-layer norms; attention or DeltaNet, experts
 * and the shared expert bound by its finish hook (model_moe.c). */
static const npl_arch_tensor qwen35moe_tensors[] = {
    ATTN_NORM,
    {"post_attention_norm.weight", NPL_SHAPE_EMBD, LAYER(ffn_norm), false},
};
static const char *const refused_qwen35moe[] = {
    "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_gate_inp.bias", "ffn_gate.weight",
};
/* Qwen 2 MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): qwen2's biased Q/K/V;
 * experts and the shared expert bound by its finish hook (model_moe.c). */
static const npl_arch_tensor qwen2moe_tensors[] = {
    ATTN_NORM, ATTN_QKV,
    {"attn_q.bias", NPL_SHAPE_Q, LAYER(bq), false},
    {"attn_k.bias", NPL_SHAPE_KV, LAYER(bk), false},
    {"attn_v.bias", NPL_SHAPE_KV, LAYER(bv), false},
    ATTN_OUT,
    {"ffn_norm.weight", NPL_SHAPE_EMBD, LAYER(ffn_norm), false},
};
static const char *const refused_qwen2moe[] = {"attn_output.bias", "ffn_gate_inp.bias", "ffn_gate.weight"};
static const char *const refused_qwen3moe[] = {
    "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_gate_shexp.weight", "ffn_gate_inp.bias",
};

static const npl_arch arches[] = {
    {
        .name = "llama",
        .default_rope_base = 10000.0f,
        .read_extra = npl_llama_read_extra,
        .tensors = llama_tensors,
        .n_tensors = COUNT(llama_tensors),
        .refused = refused_biases_moe,
        .n_refused = COUNT(refused_biases_moe),
        .rope_freqs = true,
        .rope = NPL_ROPE_NORM,
        .ffn = NPL_FFN_SILU,
    },
    {
        .name = "gemma3",
        .default_rope_base = 10000.0f,
        .prepare = npl_gemma3_prepare,
        .read_extra = npl_gemma3_read_extra,
        .tensors = gemma3_tensors,
        .n_tensors = COUNT(gemma3_tensors),
        .rope = NPL_ROPE_NEOX,
        .ffn = NPL_FFN_GELU,
        .embd_scale_sqrt = true,
        .finish = npl_gemma3_finish,
    },
    /* EmbeddingGemma: Gemma 3's blocks, bidirectional, pooled (model_gemma_embed.c). */
    {
        .name = "gemma-embedding", .default_rope_base = 10000.0f,
        .prepare = npl_gemma3_prepare, .read_extra = npl_gemma_embed_read_extra, .finish = npl_gemma_embed_finish,
        .tensors = gemma3_tensors, .n_tensors = COUNT(gemma3_tensors),
        .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_GELU, .embd_scale_sqrt = true, .always_embeds = true,
    },
    {
        .name = "gemma4", .default_rope_base = 10000.0f,
        .prepare = npl_gemma4_prepare, .read_extra = npl_gemma4_read_extra, .finish = npl_gemma4_finish,
        .tensors = gemma4_tensors, .n_tensors = COUNT(gemma4_tensors),
        .rope_freqs = true, .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_GELU, .embd_scale_sqrt = true,
    },
    {
        .name = "qwen2",
        .default_rope_base = 10000.0f,
        .read_extra = npl_llama_read_extra,
        .tensors = qwen2_tensors,
        .n_tensors = COUNT(qwen2_tensors),
        .refused = refused_o_bias_moe,
        .n_refused = COUNT(refused_o_bias_moe),
        .rope = NPL_ROPE_NEOX,
        .ffn = NPL_FFN_SILU,
    },
    /* Llama's graph with multipliers (model_granite.c), without RoPE in
     * every fourth layer (model_smollm3.c), with fused projections and
     * LongRoPE (model_phi3.c). */
    {
        .name = "granite", .default_rope_base = 10000.0f,
        .read_extra = npl_granite_read_extra, .finish = npl_granite_finish,
        .tensors = llama_tensors, .n_tensors = COUNT(llama_tensors),
        .refused = refused_granite, .n_refused = COUNT(refused_granite),
        .rope_freqs = true, .rope = NPL_ROPE_NORM, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "smollm3", .default_rope_base = 10000.0f,
        .read_extra = npl_llama_read_extra, .finish = npl_smollm3_finish,
        .tensors = llama_tensors, .n_tensors = COUNT(llama_tensors),
        .refused = refused_biases_moe, .n_refused = COUNT(refused_biases_moe),
        .rope = NPL_ROPE_NORM, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "phi3", .default_rope_base = 10000.0f,
        .read_extra = npl_phi3_read_extra, .finish = npl_phi3_finish,
        .tensors = phi3_tensors, .n_tensors = COUNT(phi3_tensors),
        .refused = refused_phi3, .n_refused = COUNT(refused_phi3),
        .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_SILU,
    },
    /* Ministral 3: Llama's tensors with YaRN and the attention temperature
     * (model_mistral3.c). */
    {
        .name = "mistral3", .default_rope_base = 10000.0f,
        .read_extra = npl_mistral3_read_extra,
        .tensors = llama_tensors, .n_tensors = COUNT(llama_tensors),
        .refused = refused_biases_moe, .n_refused = COUNT(refused_biases_moe),
        .rope = NPL_ROPE_NORM, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "qwen35", .default_rope_base = 10000.0f,
        .read_extra = npl_qwen35_read_extra, .finish = npl_qwen35_finish,
        .tensors = qwen35_tensors, .n_tensors = COUNT(qwen35_tensors),
        .refused = refused_biases_moe, .n_refused = COUNT(refused_biases_moe),
        .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "lfm2", .default_rope_base = 1000000.0f,
        .prepare = npl_lfm2_prepare, .read_extra = npl_lfm2_read_extra, .finish = npl_lfm2_finish,
        .tensors = lfm2_tensors, .n_tensors = COUNT(lfm2_tensors),
        .refused = refused_biases_moe, .n_refused = COUNT(refused_biases_moe),
        .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "qwen3",
        .default_rope_base = 10000.0f,
        .read_extra = npl_llama_read_extra,
        .tensors = qwen3_tensors,
        .n_tensors = COUNT(qwen3_tensors),
        .refused = refused_biases_moe,
        .n_refused = COUNT(refused_biases_moe),
        .rope = NPL_ROPE_NEOX,
        .ffn = NPL_FFN_SILU,
        .may_embed = true,
    },
    {
        .name = "qwen3moe", .default_rope_base = 10000.0f,
        .read_extra = npl_qwen3moe_read_extra, .finish = npl_qwen3moe_finish,
        .tensors = qwen3moe_tensors, .n_tensors = COUNT(qwen3moe_tensors),
        .refused = refused_qwen3moe, .n_refused = COUNT(refused_qwen3moe),
        .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "qwen35moe", .default_rope_base = 10000.0f,
        .prepare = npl_moe_shared_prepare, .read_extra = npl_qwen35moe_read_extra, .finish = npl_qwen35moe_finish,
        .tensors = qwen35moe_tensors, .n_tensors = COUNT(qwen35moe_tensors),
        .refused = refused_qwen35moe, .n_refused = COUNT(refused_qwen35moe),
        .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "qwen2moe", .default_rope_base = 10000.0f,
        .prepare = npl_moe_shared_prepare, .read_extra = npl_qwen2moe_read_extra, .finish = npl_qwen2moe_finish,
        .tensors = qwen2moe_tensors, .n_tensors = COUNT(qwen2moe_tensors),
        .refused = refused_qwen2moe, .n_refused = COUNT(refused_qwen2moe),
        .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "gpt-oss", .default_rope_base = 150000.0f,
        .read_extra = npl_gptoss_read_extra, .finish = npl_gptoss_finish,
        .tensors = gptoss_tensors, .n_tensors = COUNT(gptoss_tensors),
        .rope = NPL_ROPE_NEOX, .ffn = NPL_FFN_SILU,
    },
    {
        .name = "bert",
        .prepare = npl_bert_prepare,
        .read_extra = npl_bert_read_extra,
        .tensors = bert_tensors,
        .n_tensors = COUNT(bert_tensors),
        .refused = refused_bert,
        .n_refused = COUNT(refused_bert),
        .ffn = NPL_FFN_GELU,
        .encoder = true,
    },
    {
        .name = "nomic-bert",
        .default_rope_base = 10000.0f,
        .prepare = npl_nomic_bert_prepare,
        .read_extra = npl_nomic_bert_read_extra,
        .finish = npl_nomic_bert_finish,
        .tensors = nomic_bert_tensors,
        .n_tensors = COUNT(nomic_bert_tensors),
        .refused = refused_nomic_bert,
        .n_refused = COUNT(refused_nomic_bert),
        .rope = NPL_ROPE_NEOX,
        .ffn = NPL_FFN_SILU,
        .encoder = true,
    },
};

const npl_arch *npl_arch_find(const char *name)
{
    for (size_t i = 0; name && i < COUNT(arches); i++)
        if (strcmp(arches[i].name, name) == 0)
            return &arches[i];
    return NULL;
}

/* The pooling key of a decoder embedder, "<arch>.pooling_type". */
static bool has_pooling_key(const npl_arch *a, const npl_gguf *g)
{
    char key[96];
    uint32_t v;
    snprintf(key, sizeof key, "%s.pooling_type", a->name);
    return npl_gguf_get_u32(g, key, &v);
}

bool npl_arch_makes_embeddings(const npl_arch *a, const npl_gguf *g)
{
    return a && (a->encoder || a->always_embeds || (a->may_embed && has_pooling_key(a, g)));
}

const char *npl_arch_names(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < COUNT(arches) && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", arches[i].name);
    return buf;
}

/* The hyper-parameters every family names the same way. */
static npl_status read_common(const npl_arch *a, const npl_binder *b)
{
    npl_hparams *hp = &b->m->hp;
    npl_status st;
    if ((st = npl_bind_u32(b, "context_length", true, 0, 1, NPL_MAX_CTX, &hp->n_ctx_train)) ||
        (st = npl_bind_u32(b, "embedding_length", true, 0, 1, NPL_MAX_EMBD, &hp->n_embd)) ||
        (st = npl_bind_u32(b, "block_count", true, 0, 1, NPL_MAX_LAYERS, &hp->n_layer)) ||
        (!b->ff_per_layer && (st = npl_bind_u32(b, "feed_forward_length", !b->ff_default, b->ff_default, 1,
                                                 NPL_MAX_FF, &hp->n_ff))) ||
        (st = npl_bind_u32(b, "attention.head_count", true, 0, 1, NPL_MAX_HEADS, &hp->n_head)) ||
        (st = b->kv_heads_per_layer ? npl_lfm2_kv_heads(b) :
              b->kv_arr             ? NPL_OK /* gemma4's prepare read it */
                                    : npl_bind_u32(b, "attention.head_count_kv", false, hp->n_head, 1, hp->n_head,
                                                   &hp->n_head_kv)) ||
        (st = npl_bind_f32(b, "attention.layer_norm_rms_epsilon", !b->rms_eps_optional, b->rms_eps_default,
                           &hp->rms_eps)))
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: %s.attention.head_count (%u) is not a multiple of head_count_kv (%u)", b->path,
                             b->arch, hp->n_head, hp->n_head_kv);
    if (!(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f))
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: %s.attention.layer_norm_rms_epsilon = %g is out of range", b->path, b->arch,
                             (double)hp->rms_eps);

    uint32_t key_len, value_len;
    if ((st = npl_bind_u32(b, "attention.key_length", false, hp->n_embd / hp->n_head, 2, NPL_MAX_HEAD_DIM,
                           &key_len)) ||
        (st = npl_bind_u32(b, "attention.value_length", false, key_len, 0, UINT32_MAX, &value_len)))
        return st;
    if (value_len != key_len)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: attention key_length %u differs from value_length %u",
                             b->path, key_len, value_len);
    hp->head_dim = key_len;

    if ((st = npl_bind_u32(b, "rope.dimension_count", false, hp->head_dim, 0, UINT32_MAX, &hp->n_rot)))
        return st;
    if (hp->n_rot == 0 || hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: %s.rope.dimension_count = %u must be even, positive and at most the head size %u",
                             b->path, b->arch, hp->n_rot, hp->head_dim);
    hp->n_rot_swa = hp->n_rot;
    if (b->own_rope_base) /* the family's hook reads it */
        return NPL_OK;
    if ((st = npl_bind_f32(b, "rope.freq_base", false, a->default_rope_base, &hp->rope_base)))
        return st;
    return npl_arch_check_rope_base(b, "rope.freq_base", hp->rope_base);
}

npl_status npl_arch_check_rope_base(const npl_binder *b, const char *key, float v)
{
    if (!(v > 1.0f && v < 1e12f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.%s = %g is out of range", b->path, b->arch, key,
                             (double)v);
    return NPL_OK;
}

static npl_status bind_rope_freqs(const npl_binder *b)
{
    npl_model *m = b->m;
    uint32_t half = m->hp.n_rot / 2;
    npl_status st;
    m->rope_freqs = NULL;
    if (!npl_gguf_find_tensor(m->gguf, "rope_freqs.weight"))
        return NPL_OK;
    if ((st = npl_bind_vector(b, "rope_freqs.weight", half, "rope dimension_count / 2", &m->rope_freqs)))
        return st;
    for (uint32_t i = 0; i < half; i++)
        if (!(m->rope_freqs[i] > 0.0f && m->rope_freqs[i] <= 1e30f)) /* 1e30: gemma4's unrotated pairs */
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: rope_freqs.weight[%u] = %g is not a positive factor",
                                 b->path, i, (double)m->rope_freqs[i]);
    return NPL_OK;
}

static npl_status refuse_tensors(const npl_arch *a, const npl_binder *b)
{
    char name[96];
    for (uint32_t l = 0; l < b->m->hp.n_layer; l++) {
        for (size_t i = 0; i < a->n_refused; i++) {
            snprintf(name, sizeof name, "blk.%u.%s", l, a->refused[i]);
            if (npl_gguf_find_tensor(b->m->gguf, name))
                return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' is not supported", b->path, name);
        }
    }
    return NPL_OK;
}

static npl_status bind_tensor(const npl_binder *b, const npl_arch_tensor *t, uint32_t l, npl_layer *L)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd, q = (uint64_t)hp->n_head * hp->head_dim, kv = (uint64_t)hp->n_head_kv * hp->head_dim;
    char name[96];
    snprintf(name, sizeof name, "blk.%u.%s", l, t->suffix);
    if (t->optional && !npl_gguf_find_tensor(b->m->gguf, name))
        return NPL_OK;
    char *field = (char *)L + t->field;
    const float **vec = (const float **)(void *)field;
    npl_matrix *mat = (npl_matrix *)(void *)field;
    switch (t->shape) {
    case NPL_SHAPE_EMBD:
        return npl_bind_vector(b, name, e, "n_embd", vec);
    case NPL_SHAPE_HEAD:
        return npl_bind_vector(b, name, hp->head_dim, "head_dim", vec);
    case NPL_SHAPE_Q:
        return npl_bind_vector(b, name, q, "n_head * head_dim", vec);
    case NPL_SHAPE_KV:
        return npl_bind_vector(b, name, kv, "n_head_kv * head_dim", vec);
    case NPL_SHAPE_EMBD_Q:
        return npl_bind_matrix(b, name, e, q, "n_embd, n_head * head_dim", mat);
    case NPL_SHAPE_EMBD_KV:
        return npl_bind_matrix(b, name, e, kv, "n_embd, n_head_kv * head_dim", mat);
    case NPL_SHAPE_Q_EMBD:
        return npl_bind_matrix(b, name, q, e, "n_head * head_dim, n_embd", mat);
    case NPL_SHAPE_EMBD_FF:
        return npl_bind_matrix(b, name, e, hp->n_ff, "n_embd, n_ff", mat);
    case NPL_SHAPE_FF_EMBD:
        return npl_bind_matrix(b, name, hp->n_ff, e, "n_ff, n_embd", mat);
    case NPL_SHAPE_FF:
        return npl_bind_vector(b, name, hp->n_ff, "n_ff", vec);
    }
    return npl_error_set(b->err, NPL_ERR_INTERNAL, "tensor table: unknown shape rule %d", (int)t->shape);
}

npl_status npl_arch_bind_attention(const npl_binder *b, uint32_t l, npl_layer *L, uint32_t q_mult)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd, q = (uint64_t)hp->n_head * hp->head_dim, kv = (uint64_t)hp->n_head_kv * hp->head_dim;
    char n[6][96];
    const char *suffix[6] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                             "attn_q_norm.weight", "attn_k_norm.weight"};
    for (int i = 0; i < 6; i++)
        snprintf(n[i], sizeof n[i], "blk.%u.%s", l, suffix[i]);
    npl_status st;
    if ((st = npl_bind_matrix(b, n[0], e, q_mult * q,
                              q_mult == 2 ? "n_embd, 2 * n_head * head_dim (query and gate)" : "n_embd, n_head * head_dim",
                              &L->wq)) ||
        (st = npl_bind_matrix(b, n[1], e, kv, "n_embd, n_head_kv * head_dim", &L->wk)) ||
        (st = npl_bind_matrix(b, n[2], e, kv, "n_embd, n_head_kv * head_dim", &L->wv)) ||
        (st = npl_bind_matrix(b, n[3], q, e, "n_head * head_dim, n_embd", &L->wo)) ||
        (st = npl_bind_vector(b, n[4], hp->head_dim, "head_dim", &L->attn_q_norm)) ||
        (st = npl_bind_vector(b, n[5], hp->head_dim, "head_dim", &L->attn_k_norm)))
        return st;
    L->attn_gate = q_mult == 2;
    return NPL_OK;
}

npl_status npl_arch_load(const npl_arch *a, npl_model *m, npl_error *err)
{
    npl_binder b = {.m = m, .path = npl_gguf_path(m->gguf), .arch = a->name, .err = err};
    npl_hparams *hp = &m->hp;
    npl_status st;

    m->embd_scale = 1.0f;
    m->attn_scale = 0.0f;
    m->residual_scale = 1.0f;
    m->logit_scale = 1.0f;
    m->rope_mscale = 1.0f;
    m->rope_factors_long = NULL;
    m->rope_long_ctx = UINT32_MAX;
    m->yarn = false;
    m->attn_temp_scale = 0.0f;
    m->npu_refusal = NULL;
    m->fold_layer_end = false;
    m->logit_softcap = 0.0f;
    m->rope_neox = a->rope == NPL_ROPE_NEOX;
    m->ffn_gelu = a->ffn == NPL_FFN_GELU;
    hp->rope_scale = 1.0f;
    b.rms_eps_default = 0.0f;
    if ((a->prepare && (st = a->prepare(&b))) || (st = read_common(a, &b)) ||
        (a->read_extra && (st = a->read_extra(&b))))
        return st;
    if (!a->encoder && (st = npl_bind_embeddings_and_output(&b)))
        return st;
    m->enc.decoder = !a->encoder && npl_arch_makes_embeddings(a, m->gguf);
    if (m->enc.decoder && (st = npl_read_decoder_pooling(&b, &m->enc)))
        return st;
    if (a->rope_freqs && (st = bind_rope_freqs(&b)))
        return st;
    if ((st = refuse_tensors(a, &b)))
        return st;
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for %u layers", hp->n_layer);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        npl_layer *L = &m->layers[l];
        L->head_dim = hp->head_dim;
        L->n_rot = hp->n_rot;
        L->n_ff = hp->n_ff;
        L->n_head_kv = hp->n_head_kv;
        L->out_scale = 1.0f;
        for (size_t i = 0; i < a->n_tensors; i++)
            if ((st = bind_tensor(&b, &a->tensors[i], l, L)))
                return st;
    }
    if (a->embd_scale_sqrt)
        m->embd_scale = sqrtf((float)hp->n_embd);
    if (a->finish && (st = a->finish(&b)))
        return st;
    if (m->attn_scale == 0.0f)
        m->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    return NPL_OK;
}
