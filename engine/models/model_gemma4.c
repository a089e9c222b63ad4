/* The gemma4 family's hooks of the architecture table (engine/models/model_arch.c):
 * Gemma 4's text models (E2B, E4B, 26B-A4B, 31B), as llama.cpp's gemma4
 * graph computes them. What differs from gemma3:
 *  - attention.sliding_window_pattern is an array: which layers are local;
 *    local layers have their own head size (attention.key_length_swa), rope
 *    base (rope.freq_base_swa) and rotated dimensions (rope.dimension_count_swa);
 *  - global layers divide their rope angles by rope_freqs.weight (1e30 on
 *    the pairs that "proportional" RoPE leaves unrotated);
 *  - q.k is not scaled (the per-head norms set its size), and V gets an RMS
 *    norm without weights; a layer without attn_v uses its K projection;
 *  - the last attention.shared_kv_layers layers compute no K and V: they
 *    attend over the cache of the last layer of their kind before them;
 *  - feed_forward_length may be per layer (wider shared-KV layers);
 *  - per-layer token inputs (embedding_length_per_layer_input): each layer
 *    ends by adding a gated projection of its own input (forward_ple.c),
 *    and every layer may scale its output (layer_output_scale);
 *  - logits are soft-capped: cap * tanh(logits / cap), cap 30 by default;
 *  - a layer with ffn_gate_inp (26B-A4B) runs experts beside its dense
 *    FFN (moe_dense.c);
 *  - attention.head_count_kv may be per layer (31B, 26B-A4B: fewer KV
 *    heads in the global layers); step buffers are sized for the most. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model_arch.h"
#include "moe.h"

#define DEFAULT_ROPE_BASE 10000.0f
#define DEFAULT_SOFTCAP 30.0f /* llama.cpp's when the key is absent */

static const npl_gguf_value *arch_value(const npl_binder *b, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", b->arch, key);
    return npl_gguf_find(b->m->gguf, k);
}

/* An integer or boolean array of one element per layer, or NULL. */
static const npl_gguf_value *layer_array(const npl_binder *b, const char *key)
{
    const npl_gguf_value *v = arch_value(b, key);
    if (!v || v->type != NPL_GGUF_ARRAY || v->arr.elem_type == NPL_GGUF_STRING ||
        v->arr.elem_type == NPL_GGUF_ARRAY || v->arr.elem_type == NPL_GGUF_FLOAT32 ||
        v->arr.elem_type == NPL_GGUF_FLOAT64)
        return NULL;
    return v;
}

/* <arch>.<key> as one integer in [1, max] per layer: the array into *arr,
 * its largest value into *out. */
static npl_status read_per_layer(npl_binder *b, const char *key, uint32_t max, const npl_gguf_value **arr,
                                 uint32_t *out)
{
    uint32_t n_layer = b->m->hp.n_layer;
    *arr = layer_array(b, key);
    if (!*arr || (*arr)->arr.count != n_layer)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.%s has not one integer per layer (%u)", b->path, b->arch,
                             key, n_layer);
    *out = 0;
    for (uint32_t l = 0; l < n_layer; l++) {
        int64_t v = npl_gguf_array_i64(*arr, l);
        if (v < 1 || v > max)
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.%s[%u] = %lld is out of range", b->path, b->arch,
                                 key, l, (long long)v);
        if ((uint32_t)v > *out)
            *out = (uint32_t)v;
    }
    return NPL_OK;
}

static bool is_array(const npl_binder *b, const char *key)
{
    const npl_gguf_value *v = arch_value(b, key);
    return v && v->type == NPL_GGUF_ARRAY;
}

/* Per-layer feed_forward_length and attention.head_count_kv (31B, whose
 * layers each check theirs against head_count in finish): the largest
 * into the hparams, which size the buffers. */
npl_status npl_gemma4_prepare(npl_binder *b)
{
    npl_hparams *hp = &b->m->hp;
    npl_status st;
    b->own_rope_base = true;
    bool ff = is_array(b, "feed_forward_length"), kv = is_array(b, "attention.head_count_kv");
    if (!ff && !kv)
        return NPL_OK; /* one size each: read_common's */
    if ((st = npl_bind_u32(b, "block_count", true, 0, 1, NPL_MAX_LAYERS, &hp->n_layer)) ||
        (kv && (st = read_per_layer(b, "attention.head_count_kv", NPL_MAX_HEADS, &b->kv_arr, &hp->n_head_kv))) ||
        (ff && (st = read_per_layer(b, "feed_forward_length", NPL_MAX_FF, &b->ff_arr, &hp->n_ff))))
        return st;
    b->ff_per_layer = ff;
    return NPL_OK;
}

/* The local layers' head size and rotated dimensions. */
static npl_status read_swa_sizes(npl_binder *b)
{
    npl_hparams *hp = &b->m->hp;
    npl_status st;
    uint32_t v_len;
    b->head_dim_full = hp->head_dim;
    if ((st = npl_bind_u32(b, "attention.key_length_swa", true, 0, 2, NPL_MAX_HEAD_DIM, &b->head_dim_swa)) ||
        (st = npl_bind_u32(b, "attention.value_length_swa", true, 0, 0, UINT32_MAX, &v_len)) ||
        (st = npl_bind_u32(b, "rope.dimension_count_swa", false, hp->n_rot, 0, UINT32_MAX, &hp->n_rot_swa)))
        return st;
    if (v_len != b->head_dim_swa)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: attention key_length_swa %u differs from value_length_swa %u",
                             b->path, b->head_dim_swa, v_len);
    /* The rope tables are laid out for n_rot pairs (the global layers'). */
    if (hp->n_rot_swa == 0 || hp->n_rot_swa % 2 || hp->n_rot_swa > b->head_dim_swa || hp->n_rot_swa > hp->n_rot)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: %s.rope.dimension_count_swa = %u must be even, positive and at most the local head "
                             "size %u and rope.dimension_count %u", b->path, b->arch, hp->n_rot_swa, b->head_dim_swa,
                             hp->n_rot);
    if (b->head_dim_swa > hp->head_dim)
        hp->head_dim = b->head_dim_swa; /* the largest: buffers and cache rows */
    return NPL_OK;
}

npl_status npl_gemma4_read_extra(npl_binder *b)
{
    npl_hparams *hp = &b->m->hp;
    npl_status st;
    float factor = 0.0f;
    if ((st = npl_bind_f32(b, "rope.freq_base", false, DEFAULT_ROPE_BASE, &hp->rope_base)) ||
        (st = npl_arch_check_rope_base(b, "rope.freq_base", hp->rope_base)) ||
        (st = npl_bind_f32(b, "rope.freq_base_swa", false, DEFAULT_ROPE_BASE, &hp->rope_base_swa)) ||
        (st = npl_arch_check_rope_base(b, "rope.freq_base_swa", hp->rope_base_swa)) ||
        (st = npl_bind_f32(b, "rope.scaling.factor", false, 0.0f, &factor)))
        return st;
    if (factor != 0.0f && factor != 1.0f)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: %s.rope.scaling.factor = %g is not supported", b->path,
                             b->arch, (double)factor);
    if ((st = npl_bind_u32(b, "attention.sliding_window", true, 0, 1, NPL_MAX_CTX, &hp->n_swa)) ||
        (st = npl_bind_u32(b, "attention.shared_kv_layers", false, 0, 0, hp->n_layer, &b->n_kv_shared)) ||
        (st = npl_bind_u32(b, "embedding_length_per_layer_input", true, 0, 0, NPL_MAX_EMBD, &hp->n_embd_per_layer)) ||
        (st = read_swa_sizes(b)) ||
        (st = npl_bind_f32(b, "final_logit_softcapping", false, DEFAULT_SOFTCAP, &b->m->logit_softcap)))
        return st;
    if (!(b->m->logit_softcap >= 0.0f && b->m->logit_softcap < 1e6f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.final_logit_softcapping = %g is out of range", b->path,
                             b->arch, (double)b->m->logit_softcap);
    b->swa_arr = layer_array(b, "attention.sliding_window_pattern");
    if (!b->swa_arr || b->swa_arr->arr.count != hp->n_layer)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: %s.attention.sliding_window_pattern is not an array of one flag per layer (%u)",
                             b->path, b->arch, hp->n_layer);
    /* 26B-A4B: softmax over all experts, top-k, weights divided by their
     * sum, GeGLU experts (llama.cpp's gemma4 graph) */
    static const npl_moe_cfg moe = {
        .gating = NPL_MOE_SOFTMAX, .act = NPL_MOE_GEGLU, .norm_w = true, .w_scale = 1.0f, .gemma4 = true};
    return arch_value(b, "expert_count") ? npl_moe_read(b, &moe) : NPL_OK;
}

/* Layer l's experts, when it has a router (ffn_gate_inp). */
static npl_status bind_experts(const npl_binder *b, uint32_t l, npl_layer *L)
{
    char n[96];
    snprintf(n, sizeof n, "blk.%u.ffn_gate_inp.weight", l);
    if (!npl_gguf_find_tensor(b->m->gguf, n))
        return NPL_OK;
    if (!b->m->moe)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: layer %u has experts (%s) but %s.expert_count is missing",
                             b->path, l, n, b->arch);
    npl_status st = npl_moe_bind_layer(b, l, L, false);
    return st ? st : npl_moe_bind_beside_dense(b, l);
}

/* Layer l's attention: Q always; K, V and K's norm only when it keeps
 * its own cache (a missing attn_v: V is K's projection). */
static npl_status bind_attention(const npl_binder *b, uint32_t l, npl_layer *L)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd, q = (uint64_t)hp->n_head * L->head_dim, kv = (uint64_t)L->n_head_kv * L->head_dim;
    char n[96];
    npl_status st;
#define NAME(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    if ((st = npl_bind_matrix(b, NAME("attn_q.weight"), e, q, "n_embd, n_head * layer head size", &L->wq)) ||
        (st = npl_bind_matrix(b, NAME("attn_output.weight"), q, e, "n_head * layer head size, n_embd", &L->wo)) ||
        (st = npl_bind_vector(b, NAME("attn_q_norm.weight"), L->head_dim, "layer head size", &L->attn_q_norm)))
        return st;
    if (L->kv_shared)
        return NPL_OK;
    if ((st = npl_bind_matrix(b, NAME("attn_k.weight"), e, kv, "n_embd, n_head_kv * layer head size", &L->wk)) ||
        (st = npl_bind_vector(b, NAME("attn_k_norm.weight"), L->head_dim, "layer head size", &L->attn_k_norm)))
        return st;
    if (npl_gguf_find_tensor(b->m->gguf, NAME("attn_v.weight")) &&
        (st = npl_bind_matrix(b, n, e, kv, "n_embd, n_head_kv * layer head size", &L->wv)))
        return st;
    L->v_norm = true;
    return NPL_OK;
}

/* Layer l's FFN (its own width), output scale and per-layer input. */
static npl_status bind_ffn_and_input(const npl_binder *b, uint32_t l, npl_layer *L)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd, pl = hp->n_embd_per_layer;
    char n[96];
    npl_status st;
    if ((st = npl_bind_matrix(b, NAME("ffn_gate.weight"), e, L->n_ff, "n_embd, layer n_ff", &L->w_gate)) ||
        (st = npl_bind_matrix(b, NAME("ffn_up.weight"), e, L->n_ff, "n_embd, layer n_ff", &L->w_up)) ||
        (st = npl_bind_matrix(b, NAME("ffn_down.weight"), L->n_ff, e, "layer n_ff, n_embd", &L->w_down)))
        return st;
    if (npl_gguf_find_tensor(b->m->gguf, NAME("layer_output_scale.weight"))) {
        const float *s;
        if ((st = npl_bind_vector(b, n, 1, "one scale", &s)))
            return st;
        if (!isfinite(*s))
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s is not finite", b->path, n);
        L->out_scale = *s;
    }
    if (!pl)
        return NPL_OK;
    return (st = npl_bind_matrix(b, NAME("inp_gate.weight"), e, pl, "n_embd, n_embd_per_layer", &L->ple_gate)) ||
                   (st = npl_bind_matrix(b, NAME("proj.weight"), pl, e, "n_embd_per_layer, n_embd", &L->ple_proj)) ||
                   (st = npl_bind_vector(b, NAME("post_norm.weight"), e, "n_embd", &L->ple_post_norm))
               ? st
               : NPL_OK;
#undef NAME
}

/* The model-wide tensors of the per-layer inputs. */
static npl_status bind_per_layer_inputs(const npl_binder *b)
{
    npl_model *m = b->m;
    const npl_hparams *hp = &m->hp;
    uint64_t all = (uint64_t)hp->n_embd_per_layer * hp->n_layer;
    if (!hp->n_embd_per_layer)
        return NPL_OK;
    npl_status st;
    return (st = npl_bind_matrix(b, "per_layer_token_embd.weight", all, hp->n_vocab,
                                 "n_embd_per_layer * n_layer, n_vocab", &m->ple_tok_embd)) ||
                   (st = npl_bind_matrix(b, "per_layer_model_proj.weight", hp->n_embd, all,
                                         "n_embd, n_embd_per_layer * n_layer", &m->ple_model_proj)) ||
                   (st = npl_bind_vector(b, "per_layer_proj_norm.weight", hp->n_embd_per_layer, "n_embd_per_layer",
                                         &m->ple_proj_norm))
               ? st
               : NPL_OK;
}

/* Shared-KV layer l reads the last layer of its kind before the first
 * shared one, as llama.cpp's cache maps it (the one before it when local,
 * the last one when global): that layer must be of the same kind. */
static npl_status share_kv(const npl_binder *b, uint32_t l, uint32_t first_shared)
{
    npl_model *m = b->m;
    npl_layer *L = &m->layers[l];
    uint32_t back = L->local ? 2 : 1;
    if (first_shared < 2 || m->layers[first_shared - back].local != L->local)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: shared-KV layer %u (%s) has no %s layer to read at %d (shared_kv_layers = %u)",
                             b->path, l, L->local ? "local" : "global", L->local ? "local" : "global",
                             (int)first_shared - (int)back, b->n_kv_shared);
    L->kv_shared = true;
    L->kv_src = first_shared - back;
    if (m->layers[L->kv_src].n_head_kv != L->n_head_kv)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: shared-KV layer %u has %u KV heads, the layer it reads (%u) %u",
                             b->path, l, L->n_head_kv, L->kv_src, m->layers[L->kv_src].n_head_kv);
    return NPL_OK;
}

npl_status npl_gemma4_finish(npl_binder *b)
{
    npl_model *m = b->m;
    const npl_hparams *hp = &m->hp;
    uint32_t first_shared = hp->n_layer - b->n_kv_shared;
    npl_status st;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        npl_layer *L = &m->layers[l];
        L->local = npl_gguf_array_i64(b->swa_arr, l) != 0;
        L->head_dim = L->local ? b->head_dim_swa : b->head_dim_full;
        L->n_rot = L->local ? hp->n_rot_swa : hp->n_rot;
        if (L->n_rot > L->head_dim)
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: layer %u rotates %u dimensions of its %u", b->path, l,
                                 L->n_rot, L->head_dim);
        if (b->ff_arr)
            L->n_ff = (uint32_t)npl_gguf_array_i64(b->ff_arr, l);
        if (b->kv_arr)
            L->n_head_kv = (uint32_t)npl_gguf_array_i64(b->kv_arr, l);
        if (hp->n_head % L->n_head_kv)
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: layer %u: head_count %u is not a multiple of its %u KV heads",
                                 b->path, l, hp->n_head, L->n_head_kv);
    }
    for (uint32_t l = first_shared; l < hp->n_layer; l++)
        if ((st = share_kv(b, l, first_shared)))
            return st;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if ((st = bind_attention(b, l, &m->layers[l])) || (st = bind_ffn_and_input(b, l, &m->layers[l])) ||
            (st = bind_experts(b, l, &m->layers[l])))
            return st;
    if ((st = bind_per_layer_inputs(b)))
        return st;
    m->attn_scale = 1.0f;
    m->fold_layer_end = true;
    m->npu_refusal = "gemma4's per-layer inputs, shared KV layers and mixed head sizes";
    return NPL_OK;
}
