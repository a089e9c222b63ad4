/* The mixture-of-experts families' hooks of the architecture table
 * (engine/models/model_arch.c), on the shared feed-forward of
 * engine/models/moe.h (qwen3moe, gpt-oss, and qwen35moe and qwen2moe with
 * their shared expert).
 *
 * qwen3moe (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): qwen3's attention (per-head
 * Q/K norms, NEOX RoPE); the feed-forward of every layer is experts, gated
 * by a softmax over all of them, top-k, the k weights divided by their sum
 * (norm_topk_prob), SwiGLU experts. */
#include <stdio.h>

#include "model_arch.h"
#include "moe.h"

npl_status npl_qwen3moe_read_extra(npl_binder *b)
{
    static const npl_moe_cfg cfg = {.gating = NPL_MOE_SOFTMAX, .act = NPL_MOE_SILU, .norm_w = true, .w_scale = 1.0f};
    npl_status st;
    if ((st = npl_llama_rope_plain(b)))
        return st;
    return npl_moe_read(b, &cfg);
}

/* Every layer's experts without biases, and the gated shared expert when
 * the family has one. */
static npl_status bind_experts(npl_binder *b)
{
    bool shared = b->m->moe->cfg.shared;
    npl_status st;
    for (uint32_t l = 0; l < b->m->hp.n_layer; l++)
        if ((st = npl_moe_bind_layer(b, l, &b->m->layers[l], false)) ||
            (shared && (st = npl_moe_bind_shared(b, l, true))))
            return st;
    return NPL_OK;
}

npl_status npl_qwen3moe_finish(npl_binder *b)
{
    return bind_experts(b);
}

/* gpt-oss (gpt-oss-20b, -120b): biases on Q, K, V and the output
 * projection, a sink logit per head (in the attention kernels' softmax,
 * npl_attention_kv_sinks), even layers attending
 * to a sliding window of attention.sliding_window positions, YaRN on every
 * layer, and experts chosen by their k largest router logits (plus bias)
 * weighted by a softmax over those k, with biased gate, up and down and
 * the clamped SwiGLU. The FFN input norm is post_attention_norm. */
npl_status npl_gptoss_read_extra(npl_binder *b)
{
    static const npl_moe_cfg cfg = {.gating = NPL_MOE_TOPK_SOFTMAX, .act = NPL_MOE_SWIGLU_OAI, .w_scale = 1.0f};
    npl_hparams *hp = &b->m->hp;
    npl_status st;
    uint32_t orig_ctx = 0;
    npl_str scaling = {"none", 4};
    bool found;
    if ((st = npl_bind_u32(b, "attention.sliding_window", true, 0, 1, NPL_MAX_CTX, &hp->n_swa)) ||
        (st = npl_bind_str(b, "rope.scaling.type", &scaling, &found)) ||
        (st = npl_bind_u32(b, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, NPL_MAX_CTX,
                           &orig_ctx)))
        return st;
    hp->rope_base_swa = 0.0f; /* the local layers rotate as the others */
    if (npl_str_eq(scaling, "yarn"))
        st = npl_read_yarn(b, orig_ctx);
    else if (!npl_str_eq(scaling, "none"))
        st = npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: rope scaling type '%.*s' is not supported", b->path,
                           (int)(scaling.len > 64 ? 64 : scaling.len), scaling.ptr);
    return st ? st : npl_moe_read(b, &cfg);
}

npl_status npl_gptoss_finish(npl_binder *b)
{
    npl_model *m = b->m;
    npl_status st;
    char name[96];
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        npl_layer *L = &m->layers[l];
        snprintf(name, sizeof name, "blk.%u.attn_sinks.weight", l);
        if ((st = npl_bind_vector(b, name, m->hp.n_head, "n_head", &L->attn_sinks)) ||
            (st = npl_moe_bind_layer(b, l, L, true)))
            return st;
        L->local = l % 2 == 0; /* llama.cpp's sliding-window pattern 2 */
    }
    return NPL_OK;
}

/* The shared-expert families' files may lack feed_forward_length (they
 * have no dense FFN): the shared expert's width stands in for it. */
npl_status npl_moe_shared_prepare(npl_binder *b)
{
    return npl_bind_u32(b, "expert_shared_feed_forward_length", false, 0, 0, NPL_MAX_FF, &b->ff_default);
}

/* qwen35moe (Qwen3.5/3.6-35B-A3B): qwen35's Gated DeltaNet and gated
 * attention layers (model_qwen35.c); every layer's feed-forward is
 * qwen3moe's experts (softmax over all, top-k, weights divided by their
 * sum) plus one shared SwiGLU expert times sigmoid(ffn_gate_inp_shexp . x). */
npl_status npl_qwen35moe_read_extra(npl_binder *b)
{
    static const npl_moe_cfg cfg = {
        .gating = NPL_MOE_SOFTMAX, .act = NPL_MOE_SILU, .norm_w = true, .w_scale = 1.0f, .shared = true};
    npl_status st = npl_qwen35_read_hybrid(b);
    return st ? st : npl_moe_read(b, &cfg);
}

npl_status npl_qwen35moe_finish(npl_binder *b)
{
    npl_status st = npl_qwen35_finish(b);
    return st ? st : bind_experts(b);
}

/* qwen2moe (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): qwen2's attention (Q/K/V
 * biases, NEOX RoPE); experts gated by a softmax over all of them, top-k,
 * the k weights as they are (not divided by their sum), plus the shared
 * expert times sigmoid(ffn_gate_inp_shexp . x). */
npl_status npl_qwen2moe_read_extra(npl_binder *b)
{
    static const npl_moe_cfg cfg = {.gating = NPL_MOE_SOFTMAX, .act = NPL_MOE_SILU, .w_scale = 1.0f, .shared = true};
    npl_status st = npl_llama_rope_plain(b);
    return st ? st : npl_moe_read(b, &cfg);
}

npl_status npl_qwen2moe_finish(npl_binder *b)
{
    return bind_experts(b);
}
