/* The NPU runtime's packed weight arguments (docs/npu.md, "Kernel
 * groups"): where each part of a pack comes from in the model, and
 * filling a pack's host view as the kernels' contract lays it out. */
#include "npu_weight_packs.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ggml_types.h"
#include "model_internal.h"
#include "q4nx.h"

static const char *const pack_arg[NPL_NPU_PACK_COUNT] = {"w_attn", "w_ffn", "w_head"};

/* Where a device weight comes from: a matrix of the model (repacked to
 * Q4NX) or a vector (norms to bf16; rope factors and the Q/K/V biases
 * kept f32: the biases are added to f32 sums, so f32 adds them exactly as
 * the CPU engine does), or ones (the rope factors of a model without
 * them: dividing by 1 changes nothing). */
typedef struct weight_src {
    char name[64];          /* GGUF tensor name: the cache's key, and for messages */
    const npl_matrix *mat;
    const float *vec;
    uint32_t n;             /* vector length */
    bool keep_f32;
    bool ones;
} weight_src;

static void src_matrix(weight_src *s, const npl_matrix *mat, const char *fmt, uint32_t layer)
{
    snprintf(s->name, sizeof s->name, fmt, layer);
    s->mat = mat;
}

static void src_vector(weight_src *s, const float *vec, uint32_t n, const char *fmt, uint32_t layer)
{
    snprintf(s->name, sizeof s->name, fmt, layer);
    s->vec = vec;
    s->n = vec ? n : 0;
}

/* The weights of a layer's packs. kind: a matrix, a bf16 vector of
 * n_embd or head_dim, or an f32 one of the Q or KV width. */
enum { MAT, EMBD, HEAD, Q_F32, KV_F32 };
static const struct {
    npl_npu_pack pack;
    const char *part, *gguf;
    int kind;
    size_t field;
} layer_weights[] = {
#define W(pk, p, g, kind, f) { pk, p, g, kind, offsetof(npl_layer, f) }
    W(NPL_NPU_PACK_ATTN, "attn_norm", "blk.%u.attn_norm.weight", EMBD, attn_norm),
    W(NPL_NPU_PACK_ATTN, "wq", "blk.%u.attn_q.weight", MAT, wq),
    W(NPL_NPU_PACK_ATTN, "wk", "blk.%u.attn_k.weight", MAT, wk),
    W(NPL_NPU_PACK_ATTN, "wv", "blk.%u.attn_v.weight", MAT, wv),
    W(NPL_NPU_PACK_ATTN, "q_bias", "blk.%u.attn_q.bias", Q_F32, bq),
    W(NPL_NPU_PACK_ATTN, "k_bias", "blk.%u.attn_k.bias", KV_F32, bk),
    W(NPL_NPU_PACK_ATTN, "v_bias", "blk.%u.attn_v.bias", KV_F32, bv),
    W(NPL_NPU_PACK_ATTN, "q_norm", "blk.%u.attn_q_norm.weight", HEAD, attn_q_norm),
    W(NPL_NPU_PACK_ATTN, "k_norm", "blk.%u.attn_k_norm.weight", HEAD, attn_k_norm),
    W(NPL_NPU_PACK_FFN, "wo", "blk.%u.attn_output.weight", MAT, wo),
    W(NPL_NPU_PACK_FFN, "post_attn_norm", "blk.%u.post_attention_norm.weight", EMBD, post_attn_norm),
    W(NPL_NPU_PACK_FFN, "ffn_norm", "blk.%u.ffn_norm.weight", EMBD, ffn_norm),
    W(NPL_NPU_PACK_FFN, "w_gate", "blk.%u.ffn_gate.weight", MAT, w_gate),
    W(NPL_NPU_PACK_FFN, "w_up", "blk.%u.ffn_up.weight", MAT, w_up),
    W(NPL_NPU_PACK_FFN, "w_down", "blk.%u.ffn_down.weight", MAT, w_down),
    W(NPL_NPU_PACK_FFN, "post_ffn_norm", "blk.%u.post_ffw_norm.weight", EMBD, post_ffn_norm),
#undef W
};

/* The parts outside that table: the rope factors (one copy in every
 * layer's w_attn) and the head's. */
static const struct {
    npl_npu_pack pack;
    const char *part;
} other_weights[] = {
    { NPL_NPU_PACK_ATTN, "rope_freqs" }, { NPL_NPU_PACK_HEAD, "out_norm" },
    { NPL_NPU_PACK_HEAD, "w_out" },
};

/* The source of part `part` of a pack (layer l's, or the head's), or
 * false when this runtime knows no weight of that name. */
static bool part_source(const npl_model *m, npl_npu_pack pack, uint32_t l, const char *part,
                        weight_src *s)
{
    memset(s, 0, sizeof *s);
    const npl_hparams *hp = &m->hp;
    if (pack == NPL_NPU_PACK_HEAD) {
        if (!strcmp(part, "out_norm"))
            src_vector(s, m->output_norm, hp->n_embd, "output_norm.weight", 0);
        else if (!strcmp(part, "w_out"))
            src_matrix(s, &m->output, m->output.data == m->tok_embd.data ? "token_embd.weight"
                                                                         : "output.weight", 0);
        else
            return false;
        return true;
    }
    const npl_layer *L = &m->layers[l];
    if (pack == NPL_NPU_PACK_ATTN && !strcmp(part, "rope_freqs")) {
        /* Shared by every layer; one copy in each layer's pack. */
        src_vector(s, m->rope_freqs, hp->n_rot / 2, "rope_freqs.weight", 0);
        s->keep_f32 = true;
        s->ones = !m->rope_freqs;
        s->n = hp->n_rot / 2;
        return true;
    }
    for (size_t i = 0; i < sizeof layer_weights / sizeof layer_weights[0]; i++) {
        int kind = layer_weights[i].kind;
        if (layer_weights[i].pack != pack || strcmp(layer_weights[i].part, part))
            continue;
        const char *field = (const char *)L + layer_weights[i].field;
        if (kind == MAT) {
            src_matrix(s, (const npl_matrix *)field, layer_weights[i].gguf, l);
            return true;
        }
        uint32_t n = kind == EMBD    ? hp->n_embd
                     : kind == HEAD  ? hp->head_dim
                     : kind == Q_F32 ? hp->n_head * hp->head_dim
                                     : hp->n_head_kv * hp->head_dim;
        src_vector(s, *(const float *const *)field, n, layer_weights[i].gguf, l);
        s->keep_f32 = kind == Q_F32 || kind == KV_F32;
        return true;
    }
    return false;
}

static bool src_present(const weight_src *s)
{
    return (s->mat && s->mat->data) || s->vec || s->ones;
}

/* Device bytes of one weight; checks that it can be repacked. */
static npl_status src_bytes(const weight_src *s, size_t *bytes, npl_error *err)
{
    if (!s->mat) {
        *bytes = (size_t)s->n * (s->keep_f32 ? sizeof(float) : sizeof(uint16_t));
        return NPL_OK;
    }
    if (!npl_q4nx_can_repack(s->mat->type)) {
        const npl_type_traits *tr = npl_type_traits_get(s->mat->type);
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu: tensor '%s' has type %s, which cannot be repacked to Q4NX",
                             s->name, tr ? tr->name : "unknown");
    }
    npl_q4nx_layout layout;
    npl_status st = npl_q4nx_layout_init(&layout, s->mat->n_rows, s->mat->n_cols, err);
    if (st == NPL_OK)
        *bytes = layout.bytes;
    return st;
}

/* A vector in its device format at dst: bf16, or f32 kept as it is. */
static void vector_fill(const weight_src *s, uint8_t *dst)
{
    for (uint32_t i = 0; i < s->n; i++) {
        float v = s->ones ? 1.0f : s->vec[i];
        if (s->keep_f32) {
            memcpy(dst + 4 * (size_t)i, &v, sizeof v);
        } else {
            uint16_t h = npl_fp32_to_bf16(v);
            memcpy(dst + 2 * (size_t)i, &h, sizeof h);
        }
    }
}

static int pack_arg_index(const npl_npu_group_spec *spec, npl_npu_pack pack, npl_error *err)
{
    int a = npl_npu_group_arg_index(spec, pack_arg[pack]);
    if (a < 0 || spec->args[a].type != NPL_NPU_ELEM_PACK || spec->args[a].cls != NPL_NPU_BUF_STATIC) {
        npl_error_set(err, NPL_ERR_UNSUPPORTED,
                      "npu: kernel group %s has no packed static argument '%s' for its weights",
                      spec->name, pack_arg[pack]);
        return -1;
    }
    return a;
}

/* Groups that take the same pack must lay it out the same way. */
static npl_status check_same_pack(const npl_npu_group_spec *ref, const npl_npu_group_spec *other,
                                  npl_npu_pack pack, const npl_npu_shape *shape, npl_error *err)
{
    int ra = pack_arg_index(ref, pack, err), oa = pack_arg_index(other, pack, err);
    if (ra < 0 || oa < 0)
        return NPL_ERR_UNSUPPORTED;
    size_t rb = 0, ob = 0;
    npl_status st;
    if ((st = npl_npu_group_arg_bytes(ref, (uint32_t)ra, shape, &rb, err)) ||
        (st = npl_npu_group_arg_bytes(other, (uint32_t)oa, shape, &ob, err)))
        return st;
    bool same = rb == ob;
    for (uint32_t p = 0; same && p < ref->n_parts; p++) {
        if (ref->parts[p].arg != (uint32_t)ra)
            continue;
        int q = npl_npu_group_part_index(other, ref->parts[p].elem.name);
        size_t r_off = 0, r_n = 0, o_off = 0, o_n = 0;
        same = q >= 0 && other->parts[q].arg == (uint32_t)oa &&
               other->parts[q].elem.type == ref->parts[p].elem.type &&
               npl_npu_part_place(ref, p, shape, &r_off, &r_n, err) == NPL_OK &&
               npl_npu_part_place(other, (uint32_t)q, shape, &o_off, &o_n, err) == NPL_OK &&
               r_off == o_off && r_n == o_n;
    }
    if (!same)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu: kernel groups %s and %s lay out '%s' differently", ref->name,
                             other->name, pack_arg[pack]);
    return NPL_OK;
}

npl_status npl_npu_pack_bytes(const npl_npu_group_spec *const *specs, size_t n,
                              npl_npu_pack pack, const npl_npu_shape *shape, size_t *bytes,
                              npl_error *err)
{
    for (size_t i = 1; i < n; i++) {
        npl_status st = specs[i] ? check_same_pack(specs[0], specs[i], pack, shape, err) : NPL_OK;
        if (st != NPL_OK)
            return st;
    }
    int a = pack_arg_index(specs[0], pack, err);
    if (a < 0)
        return NPL_ERR_UNSUPPORTED;
    return npl_npu_group_arg_bytes(specs[0], (uint32_t)a, shape, bytes, err);
}

/* Every weight of the model that belongs in the pack must be one of its
 * parts: a contract without it (a kernel build older than the weight, or
 * made for other models) would run the layer without it. */
static npl_status check_pack_takes_all(const npl_model *m, const npl_npu_group_spec *spec,
                                       npl_npu_pack pack, uint32_t l, int a, npl_error *err)
{
    size_t n_layer = sizeof layer_weights / sizeof layer_weights[0];
    size_t n_other = sizeof other_weights / sizeof other_weights[0];
    for (size_t i = 0; i < n_layer + n_other; i++) {
        bool in_layer = i < n_layer;
        npl_npu_pack pk = in_layer ? layer_weights[i].pack : other_weights[i - n_layer].pack;
        const char *part = in_layer ? layer_weights[i].part : other_weights[i - n_layer].part;
        weight_src src;
        if (pk != pack || !part_source(m, pack, l, part, &src) || src.ones || !src_present(&src))
            continue;
        int p = npl_npu_group_part_index(spec, part);
        if (p < 0 || spec->parts[p].arg != (uint32_t)a)
            return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                                 "npu: kernel group %s has no part '%s' in '%s' for the model's "
                                 "%s, and would run without it",
                                 spec->name, part, pack_arg[pack], src.name);
    }
    return NPL_OK;
}

npl_status npl_npu_pack_fill(const npl_model *m, const npl_npu_group_spec *spec,
                             npl_npu_pack pack, uint32_t l, const npl_npu_shape *shape,
                             uint8_t *host, npl_npu_cache_matrix *mats, char (*names)[64],
                             size_t *n_mats, npl_error *err)
{
    int a = pack_arg_index(spec, pack, err);
    if (a < 0)
        return NPL_ERR_UNSUPPORTED;
    for (uint32_t p = 0; p < spec->n_parts; p++) {
        if (spec->parts[p].arg != (uint32_t)a)
            continue;
        const char *name = spec->parts[p].elem.name;
        weight_src src;
        if (!part_source(m, pack, l, name, &src))
            return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                                 "npu: kernel group %s: part '%s' of '%s' is no weight this "
                                 "runtime knows", spec->name, name, pack_arg[pack]);
        size_t off = 0, bytes = 0, have = 0;
        npl_status st = npl_npu_part_place(spec, p, shape, &off, &bytes, err);
        if (st != NPL_OK)
            return st;
        if (!src_present(&src) && !bytes)
            continue;
        if (!src_present(&src))
            return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                                 "npu: kernel group %s takes %s, which the model does not have",
                                 spec->name, src.name);
        if ((st = src_bytes(&src, &have, err)) != NPL_OK)
            return st;
        if (have != bytes)
            return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                                 "npu: kernel group %s has %zu bytes for %s, which needs %zu",
                                 spec->name, bytes, src.name, have);
        if (!src.mat) {
            vector_fill(&src, host + off);
            continue;
        }
        memcpy(names[*n_mats], src.name, sizeof src.name);
        mats[*n_mats] = (npl_npu_cache_matrix){.name = names[*n_mats], .mat = src.mat,
                                               .dst = host + off, .dst_bytes = bytes};
        (*n_mats)++;
    }
    return check_pack_takes_all(m, spec, pack, l, a, err);
}
