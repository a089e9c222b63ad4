/* Loading a gemma4v projector (Gemma 4's vision tower as llama.cpp's
 * converter writes it): the keys Gemma 3 has, with llama.cpp's gemma4v
 * defaults (pooling 3, RoPE base 100, 40 to 280 tokens an image), and the
 * tensors:
 *
 *   v.patch_embd.weight        [patch, patch, 3, n_embd] (no bias is used)
 *   v.position_embd.weight     [n_embd, pos_size, 2]: a table for x, one for y
 *   v.blk.N.ln1/ln2.weight     [n_embd] RMS norms before attention and FFN
 *   v.blk.N.attn_{q,k,v,out}.weight [n_embd, n_embd], no biases
 *   v.blk.N.attn_{q,k}_norm.weight  [head_dim] per-head RMS norms
 *   v.blk.N.attn_post_norm, ffn_post_norm [n_embd] (optional)
 *   v.blk.N.ffn_gate/ffn_up.weight [n_embd, n_ff], ffn_down [n_ff, n_embd]
 *   v.blk.N.out_scale.weight   [1] or [n_embd] (optional)
 *   NAME.input_min/input_max/output_min/output_max [1] clipping bounds of
 *                              any linear layer (optional)
 *   v.std_bias, v.std_scale    [n_embd] (optional, both or neither)
 *   mm.input_projection.weight [n_embd, text width]: one row per output,
 *                              used as stored (Gemma 3's is transposed) */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision_internal.h"

#define GEMMA4V_MIN_TOKENS 40u
#define GEMMA4V_MAX_TOKENS 280u
#define GEMMA4V_ROPE_THETA 100.0f

npl_status npl_gemma4v_pixel_params(const npl_vision_loader *L, npl_vision_pixel_params *out)
{
    uint32_t patch = 0, pool = 0;
    npl_status st = npl_vision_get_range(L, "clip.vision.patch_size", true, 0, 1, NPL_VISION_MAX_IMAGE, &patch);
    if (st == NPL_OK)
        st = npl_vision_get_range(L, "clip.vision.projector.scale_factor", false, 3, 1, 64, &pool);
    if (st != NPL_OK)
        return st;
    uint64_t a = (uint64_t)patch * pool, area = a * a;
    if (area * GEMMA4V_MAX_TOKENS > UINT32_MAX)
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED, "%s: patch size %u with pooling %u is too large", L->path,
                             patch, pool);
    out->align = (uint32_t)a;
    out->min_pixels = (uint32_t)(area * GEMMA4V_MIN_TOKENS);
    out->max_pixels = (uint32_t)(area * GEMMA4V_MAX_TOKENS);
    return NPL_OK;
}

npl_status npl_gemma4v_hparams(npl_vision_loader *L)
{
    npl_vision *v = L->v;
    if (v->head_dim % 4 != 0)
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED,
                             "%s: head size %u is not a multiple of 4 (2-D RoPE rotates pairs in each half)", L->path,
                             v->head_dim);
    v->n_side = 0;
    v->n_patches = 0;
    v->rope_theta = GEMMA4V_ROPE_THETA;
    v->info.n_tokens = GEMMA4V_MAX_TOKENS;
    v->info.max_tokens = NPL_VISION_MAX_DYN_TOKENS; /* elongated images come out larger */
    return NPL_OK;
}

/* NAME.input_min ... output_max: absent bounds are llama.cpp's +-FLT_MAX. */
static npl_status clamp_of(npl_vision_loader *L, const char *base, npl_vision_clamp *c)
{
    static const char *const suffix[4] = {"input_min", "input_max", "output_min", "output_max"};
    float val[4] = {-FLT_MAX, FLT_MAX, -FLT_MAX, FLT_MAX};
    c->on = false;
    for (int i = 0; i < 4; i++) {
        char name[128];
        const float *f;
        snprintf(name, sizeof name, "%s.%s", base, suffix[i]);
        npl_status st = npl_vision_vector(L, name, 1, false, &f);
        if (st != NPL_OK)
            return st;
        if (f) {
            val[i] = f[0];
            c->on = true;
        }
    }
    c->in_lo = val[0];
    c->in_hi = val[1];
    c->out_lo = val[2];
    c->out_hi = val[3];
    return NPL_OK;
}

static npl_status square(npl_vision_loader *L, const char *name, uint32_t n_in, uint32_t n_out, npl_matrix *m)
{
    char want[96];
    snprintf(want, sizeof want, "[%u, %u] (inputs, outputs)", n_in, n_out);
    return npl_vision_matrix2(L, name, n_in, n_out, want, m);
}

/* out_scale: one value for the block or one per dimension. */
static npl_status out_scale(npl_vision_loader *L, const char *name, npl_vision_block *B)
{
    const npl_gguf_tensor *t = npl_vision_find(L, name, false);
    if (!t)
        return NPL_OK;
    uint32_t e = L->v->info.n_embd;
    B->out_scale_n = t->ne[0] == 1 ? 1 : e;
    return npl_vision_vector(L, name, B->out_scale_n, true, &B->out_scale);
}

static npl_status bind_block(npl_vision_loader *L, uint32_t il)
{
    npl_vision *v = L->v;
    npl_vision_block *B = &v->blocks[il];
    uint32_t e = v->info.n_embd, f = v->info.n_ff, hd = v->head_dim;
    static const char *const linear[7] = {"attn_q", "attn_k", "attn_v", "attn_out", "ffn_gate", "ffn_up", "ffn_down"};
    npl_matrix *mats[7] = {&B->wq, &B->wk, &B->wv, &B->wo, &B->w_gate, &B->w_up, &B->w_down};
    char name[96];
    npl_status st;
#define TRY(x) do { if ((st = (x)) != NPL_OK) return st; } while (0)
#define NAME(fmt) (snprintf(name, sizeof name, "v.blk.%u." fmt, il), name)
    for (int i = 0; i < 7; i++) {
        uint32_t n_in = i == 6 ? f : e, n_out = i == 4 || i == 5 ? f : e;
        snprintf(name, sizeof name, "v.blk.%u.%s.weight", il, linear[i]);
        TRY(square(L, name, n_in, n_out, mats[i]));
        snprintf(name, sizeof name, "v.blk.%u.%s", il, linear[i]);
        TRY(clamp_of(L, name, &B->clamp[i]));
    }
    TRY(npl_vision_vector(L, NAME("ln1.weight"), e, true, &B->ln1_w));
    TRY(npl_vision_vector(L, NAME("ln2.weight"), e, true, &B->ln2_w));
    TRY(npl_vision_vector(L, NAME("attn_q_norm.weight"), hd, false, &B->q_norm));
    TRY(npl_vision_vector(L, NAME("attn_k_norm.weight"), hd, false, &B->k_norm));
    TRY(npl_vision_vector(L, NAME("attn_post_norm.weight"), e, false, &B->post_attn_norm));
    TRY(npl_vision_vector(L, NAME("ffn_post_norm.weight"), e, false, &B->post_ffn_norm));
    TRY(out_scale(L, NAME("out_scale.weight"), B));
#undef NAME
#undef TRY
    return NPL_OK;
}

static npl_status bind_tables(npl_vision_loader *L)
{
    npl_vision *v = L->v;
    const npl_vision_info *in = &v->info;
    uint32_t e = in->n_embd, p = in->patch_size;
    char want[96];
    const char *name = "v.patch_embd.weight";
    const npl_gguf_tensor *t = npl_vision_find(L, name, true);
    if (!t)
        return NPL_ERR_FORMAT;
    snprintf(want, sizeof want, "[%u, %u, 3, %u] (patch, patch, channels, n_embd)", p, p, e);
    if (!npl_vision_shape_is(t, p, p, 3, e))
        return npl_vision_shape_error(L, t, name, want);
    npl_status st = npl_vision_bind_matrix(L, t, name, (int64_t)3 * p * p, e, want, &v->patch_embd);
    if (st != NPL_OK)
        return st;
    name = "v.position_embd.weight";
    t = npl_vision_find(L, name, true);
    if (!t)
        return NPL_ERR_FORMAT;
    snprintf(want, sizeof want, "[%u, pos_size, 2] (n_embd, positions, x and y)", e);
    if (t->ne[0] != e || t->ne[1] < 1 || t->ne[1] > NPL_VISION_MAX_PATCHES || t->ne[2] != 2 || t->ne[3] != 1)
        return npl_vision_shape_error(L, t, name, want);
    v->pos_size = (uint32_t)t->ne[1];
    return npl_vision_bind_matrix(L, t, name, e, (int64_t)2 * v->pos_size, want, &v->pos_embd);
}

static npl_status bind_projection(npl_vision_loader *L)
{
    npl_vision *v = L->v;
    uint32_t e = v->info.n_embd, out = 0;
    const npl_gguf_tensor *t = NULL;
    npl_status st = npl_vision_projection(L, 1, &t, &out);
    if (st != NPL_OK)
        return st;
    v->info.n_embd_out = out;
    st = npl_vision_bind_matrix(L, t, "mm.input_projection.weight", e, out, "[n_embd, n_embd_out]", &v->proj);
    return st != NPL_OK ? st : clamp_of(L, "mm.input_projection", &v->proj_clamp);
}

npl_status npl_gemma4v_load_tensors(npl_vision_loader *L)
{
    npl_vision *v = L->v;
    const npl_vision_info *in = &v->info;
    size_t e = in->n_embd;
    size_t n_vec = (size_t)in->n_layer * (7 * e + 2 * v->head_dim + 28) + 2 * e + 4;
    v->vectors = malloc(n_vec * sizeof(float));
    v->blocks = calloc(in->n_layer, sizeof *v->blocks);
    if (!v->vectors || !v->blocks)
        return npl_error_set(L->err, NPL_ERR_NOMEM, "out of memory for the vision weights");
    L->arena = v->vectors;
    L->arena_end = v->vectors + n_vec;
    npl_status st = bind_tables(L);
    for (uint32_t il = 0; st == NPL_OK && il < in->n_layer; il++)
        st = bind_block(L, il);
    if (st == NPL_OK)
        st = npl_vision_vector(L, "v.std_bias", e, false, &v->std_bias);
    if (st == NPL_OK)
        st = npl_vision_vector(L, "v.std_scale", e, false, &v->std_scale);
    if (st == NPL_OK && !v->std_bias != !v->std_scale)
        st = npl_error_set(L->err, NPL_ERR_FORMAT, "%s: v.std_bias and v.std_scale come together", L->path);
    if (st == NPL_OK)
        st = bind_projection(L);
    return st;
}
