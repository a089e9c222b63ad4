/* Loading an mmproj GGUF with a Gemma 3 projector (as llama.cpp's
 * converter writes it): hyper-parameters from the clip.* keys, then every
 * tensor checked for presence, shape and type.
 *
 * The 2-D weights are used in place from the mapping. Norm weights and
 * biases are converted to f32 (they are tiny and may be stored in any
 * type). mm.input_projection is stored [n_embd_out, n_embd], i.e. one row
 * per encoder dimension; it is transposed once at load into an f32 matrix
 * of one row per output dimension so the generic matrix kernel applies. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "vision_internal.h"

void npl_vision_params_default(npl_vision_params *p)
{
    p->n_threads = 0;
    p->exact = false;
    p->bf16_weights = false;
    p->q8_weights = false;
}

/* ---- metadata ---------------------------------------------------------- */

npl_status npl_vision_get_u32(const npl_vision_loader *L, const char *key, bool required, uint32_t def, uint32_t *out)
{
    const npl_gguf *g = L->v->gguf;
    if (!npl_gguf_find(g, key)) {
        if (required)
            return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: missing required key '%s'", L->path, key);
        *out = def;
        return NPL_OK;
    }
    if (!npl_gguf_get_u32(g, key, out))
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: metadata '%s' is not an unsigned 32-bit integer",
                             L->path, key);
    return NPL_OK;
}

npl_status npl_vision_get_range(const npl_vision_loader *L, const char *key, bool required, uint32_t def, uint32_t lo,
                            uint32_t hi, uint32_t *out)
{
    npl_status st = npl_vision_get_u32(L, key, required, def, out);
    if (st)
        return st;
    if (*out < lo || *out > hi)
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: metadata '%s' = %u is out of range [%u, %u]", L->path,
                             key, *out, lo, hi);
    return NPL_OK;
}

npl_status npl_vision_get_bool(const npl_vision_loader *L, const char *key, bool *out)
{
    const npl_gguf *g = L->v->gguf;
    *out = false;
    if (!npl_gguf_find(g, key))
        return NPL_OK;
    if (!npl_gguf_get_bool(g, key, out))
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: metadata '%s' is not a boolean", L->path, key);
    return NPL_OK;
}

/* Three per-channel values (mean or std); `def` for each when absent. */
static npl_status get_rgb(const npl_vision_loader *L, const char *key, float def, bool positive, float out[3])
{
    const npl_gguf *g = L->v->gguf;
    out[0] = out[1] = out[2] = def;
    const npl_gguf_value *any = npl_gguf_find(g, key);
    if (!any)
        return NPL_OK;
    const npl_gguf_value *a = npl_gguf_get_array(g, key, NPL_GGUF_FLOAT32);
    if (!a || a->arr.count < 3)
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: metadata '%s' is not an array of 3 floats", L->path, key);
    for (int c = 0; c < 3; c++) {
        double x = npl_gguf_array_f64(a, (uint64_t)c);
        if (!isfinite(x) || (positive && !(x > 0.0)) || fabs(x) > 1e6)
            return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: metadata '%s'[%d] = %g is not usable", L->path, key,
                                 c, x);
        out[c] = (float)x;
    }
    return NPL_OK;
}

static npl_status check_projector(npl_vision_loader *L)
{
    const npl_gguf *g = L->v->gguf;
    bool has_vision = false;
    npl_status st = npl_vision_get_bool(L, "clip.has_vision_encoder", &has_vision);
    if (st)
        return st;
    if (!has_vision)
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED, "%s: not a vision projector (clip.has_vision_encoder is not true)",
                             L->path);
    npl_str proj = {NULL, 0};
    if (!npl_gguf_get_str(g, "clip.projector_type", &proj) && !npl_gguf_get_str(g, "clip.vision.projector_type", &proj))
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: missing required key 'clip.projector_type'", L->path);
    if (!npl_str_eq(proj, "gemma3") && !npl_str_eq(proj, "gemma4v"))
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED,
                             "%s: projector type '%.*s' is not supported (supported: gemma3, gemma4v)", L->path,
                             (int)(proj.len > 64 ? 64 : proj.len), proj.ptr);
    L->v->gemma4v = npl_str_eq(proj, "gemma4v");
    L->v->info.projector = L->v->gemma4v ? "gemma4v" : "gemma3";
    return NPL_OK;
}

/* The keys preprocessing needs (npl_vision_read_pixel_params reads only
 * these). */
static npl_status read_pixel_params(const npl_vision_loader *L, npl_vision_pixel_params *out)
{
    memset(out, 0, sizeof *out);
    npl_status st = npl_vision_get_range(L, "clip.vision.image_size", true, 0, 1, NPL_VISION_MAX_IMAGE, &out->image_size);
    if (st == NPL_OK)
        st = get_rgb(L, "clip.vision.image_mean", 0.5f, false, out->image_mean);
    if (st == NPL_OK)
        st = get_rgb(L, "clip.vision.image_std", 0.5f, true, out->image_std);
    if (st == NPL_OK && L->v->gemma4v)
        st = npl_gemma4v_pixel_params(L, out);
    return st;
}

npl_status npl_vision_read_pixel_params(const char *mmproj_path, npl_vision_pixel_params *out, npl_error *err)
{
    if (!mmproj_path || !out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: no projector path or output");
    npl_error local;
    if (!err)
        err = &local;
    npl_vision tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.gguf = npl_gguf_open(mmproj_path, err);
    if (!tmp.gguf)
        return err->code != NPL_OK ? err->code : NPL_ERR_FORMAT;
    npl_vision_loader L = {.v = &tmp, .path = mmproj_path, .err = err};
    npl_status st = check_projector(&L);
    if (st == NPL_OK)
        st = read_pixel_params(&L, out);
    npl_gguf_close(tmp.gguf);
    return st;
}

static npl_status read_hparams(npl_vision_loader *L)
{
    npl_vision *v = L->v;
    npl_vision_info *in = &v->info;
    npl_status st;
#define TRY(x) do { if ((st = (x)) != NPL_OK) return st; } while (0)
    TRY(npl_vision_get_range(L, "clip.vision.embedding_length", true, 0, 1, NPL_VISION_MAX_EMBD, &in->n_embd));
    TRY(npl_vision_get_range(L, "clip.vision.feed_forward_length", true, 0, 1, NPL_VISION_MAX_FF, &in->n_ff));
    TRY(npl_vision_get_range(L, "clip.vision.block_count", true, 0, 1, NPL_VISION_MAX_LAYERS, &in->n_layer));
    TRY(npl_vision_get_range(L, "clip.vision.attention.head_count", true, 0, 1, NPL_VISION_MAX_EMBD, &in->n_head));
    TRY(npl_vision_get_range(L, "clip.vision.patch_size", true, 0, 1, NPL_VISION_MAX_IMAGE, &in->patch_size));
    TRY(npl_vision_get_range(L, "clip.vision.projector.scale_factor", false, v->gemma4v ? 3 : 4, 1, NPL_VISION_MAX_IMAGE, &in->pool));
    if (!npl_gguf_get_f32(v->gguf, "clip.vision.attention.layer_norm_epsilon", &v->eps))
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: missing or non-numeric 'clip.vision.attention.layer_norm_epsilon'",
                             L->path);
    if (!(v->eps > 0.0f) || !(v->eps < 1.0f))
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: layer_norm_epsilon = %g is out of range (0, 1)", L->path,
                             (double)v->eps);
    npl_vision_pixel_params px;
    TRY(read_pixel_params(L, &px));
    v->pixel = px;
    in->image_size = px.image_size;
    memcpy(in->image_mean, px.image_mean, sizeof px.image_mean);
    memcpy(in->image_std, px.image_std, sizeof px.image_std);
    bool gelu = false, silu = false;
    TRY(npl_vision_get_bool(L, "clip.use_gelu", &gelu));
    TRY(npl_vision_get_bool(L, "clip.use_silu", &silu));
    if (gelu && silu)
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: both clip.use_gelu and clip.use_silu are set", L->path);
    v->act = gelu ? NPL_VISION_GELU : silu ? NPL_VISION_SILU : NPL_VISION_GELU_QUICK;
#undef TRY

    if (in->n_embd % in->n_head != 0)
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: embedding_length %u is not a multiple of head_count %u",
                             L->path, in->n_embd, in->n_head);
    v->head_dim = in->n_embd / in->n_head;
    if (v->gemma4v)
        return npl_gemma4v_hparams(L);
    if (in->image_size % in->patch_size != 0)
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED, "%s: image_size %u is not a multiple of patch_size %u",
                             L->path, in->image_size, in->patch_size);
    v->n_side = in->image_size / in->patch_size;
    if ((uint64_t)v->n_side * v->n_side > NPL_VISION_MAX_PATCHES)
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED, "%s: %u x %u patches exceed the limit of %u", L->path,
                             v->n_side, v->n_side, NPL_VISION_MAX_PATCHES);
    v->n_patches = v->n_side * v->n_side;
    if (v->n_side % in->pool != 0)
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED,
                             "%s: %u patches per side are not a multiple of the pooling factor %u", L->path,
                             v->n_side, in->pool);
    uint32_t per_side = v->n_side / in->pool;
    in->n_tokens = per_side * per_side;
    in->max_tokens = in->n_tokens;
    return NPL_OK;
}

/* ---- tensors ----------------------------------------------------------- */

const npl_gguf_tensor *npl_vision_find(const npl_vision_loader *L, const char *name, bool required)
{
    const npl_gguf_tensor *t = npl_gguf_find_tensor(L->v->gguf, name);
    if (!t && required)
        npl_error_set(L->err, NPL_ERR_FORMAT, "%s: missing tensor '%s'", L->path, name);
    return t;
}

bool npl_vision_shape_is(const npl_gguf_tensor *t, uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3)
{
    return t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == ne3;
}

npl_status npl_vision_shape_error(const npl_vision_loader *L, const npl_gguf_tensor *t, const char *name, const char *want)
{
    char got[96];
    int n = snprintf(got, sizeof got, "[");
    for (uint32_t d = 0; d < t->n_dims && n > 0 && (size_t)n < sizeof got; d++)
        n += snprintf(got + n, sizeof got - (size_t)n, d ? ", %llu" : "%llu", (unsigned long long)t->ne[d]);
    if (n > 0 && (size_t)n < sizeof got)
        snprintf(got + n, sizeof got - (size_t)n, "]");
    return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected %s", L->path, name, got,
                         want);
}

static const char *type_name(uint32_t type)
{
    const npl_type_traits *tr = npl_type_traits_get(type);
    return tr ? tr->name : "unknown";
}

/* A weight matrix of n_rows rows of n_cols, read in place. `want`
 * describes the expected shape for the error message. */
npl_status npl_vision_bind_matrix(const npl_vision_loader *L, const npl_gguf_tensor *t, const char *name, int64_t n_cols,
                              int64_t n_rows, const char *want, npl_matrix *out)
{
    if (!npl_matmul_type_supported(t->type))
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which the CPU kernels do not support",
                             L->path, name, type_name(t->type));
    if (!npl_matrix_init(out, t->type, t->data, n_cols, n_rows))
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED,
                             "%s: tensor '%s' (%s, %s) cannot be read as a matrix (misaligned data or rows not a whole number of blocks)",
                             L->path, name, type_name(t->type), want);
    return NPL_OK;
}

npl_status npl_vision_matrix2(const npl_vision_loader *L, const char *name, uint64_t ne0, uint64_t ne1, const char *want,
                          npl_matrix *out)
{
    const npl_gguf_tensor *t = npl_vision_find(L, name, true);
    if (!t)
        return NPL_ERR_FORMAT;
    if (!npl_vision_shape_is(t, ne0, ne1, 1, 1))
        return npl_vision_shape_error(L, t, name, want);
    return npl_vision_bind_matrix(L, t, name, (int64_t)ne0, (int64_t)ne1, want, out);
}

/* Converts n elements of t into the arena. */
static npl_status to_floats(npl_vision_loader *L, const npl_gguf_tensor *t, const char *name, uint64_t n, const float **out)
{
    if ((uint64_t)(L->arena_end - L->arena) < n)
        return npl_error_set(L->err, NPL_ERR_INTERNAL, "%s: vector storage exhausted at '%s'", L->path, name);
    if (!npl_dequantize_row_ref(t->type, t->data, L->arena, (int64_t)n))
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which cannot be converted to f32",
                             L->path, name, type_name(t->type));
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(L->arena[i]))
            return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: tensor '%s' holds a non-finite value at %llu", L->path,
                                 name, (unsigned long long)i);
    *out = L->arena;
    L->arena += n;
    return NPL_OK;
}

/* A 1-D vector of n elements; NULL (no error) when optional and absent. */
npl_status npl_vision_vector(npl_vision_loader *L, const char *name, uint64_t n, bool required, const float **out)
{
    *out = NULL;
    const npl_gguf_tensor *t = npl_vision_find(L, name, required);
    if (!t)
        return required ? NPL_ERR_FORMAT : NPL_OK;
    if (!npl_vision_shape_is(t, n, 1, 1, 1)) {
        char want[48];
        snprintf(want, sizeof want, "[%llu]", (unsigned long long)n);
        return npl_vision_shape_error(L, t, name, want);
    }
    return to_floats(L, t, name, n, out);
}

/* A norm's weight and optional bias: NAME.weight, NAME.bias. */
static npl_status norm_pair(npl_vision_loader *L, const char *base, uint64_t n, bool required, const float **w, const float **b)
{
    char name[96];
    snprintf(name, sizeof name, "%s.weight", base);
    npl_status st = npl_vision_vector(L, name, n, required, w);
    if (st || !*w)
        return st;
    snprintf(name, sizeof name, "%s.bias", base);
    return npl_vision_vector(L, name, n, false, b);
}

static npl_status bind_block(npl_vision_loader *L, uint32_t il)
{
    npl_vision *v = L->v;
    npl_vision_block *B = &v->blocks[il];
    uint32_t e = v->info.n_embd, f = v->info.n_ff;
    char name[96], base[64], want[96];
    npl_status st;
#define TRY(x) do { if ((st = (x)) != NPL_OK) return st; } while (0)
#define NAME(fmt) (snprintf(name, sizeof name, "v.blk.%u." fmt, il), name)
    snprintf(want, sizeof want, "[%u, %u] (n_embd, n_embd)", e, e);
    TRY(npl_vision_matrix2(L, NAME("attn_q.weight"), e, e, want, &B->wq));
    TRY(npl_vision_matrix2(L, NAME("attn_k.weight"), e, e, want, &B->wk));
    TRY(npl_vision_matrix2(L, NAME("attn_v.weight"), e, e, want, &B->wv));
    TRY(npl_vision_matrix2(L, NAME("attn_out.weight"), e, e, want, &B->wo));
    TRY(npl_vision_vector(L, NAME("attn_q.bias"), e, false, &B->bq));
    TRY(npl_vision_vector(L, NAME("attn_k.bias"), e, false, &B->bk));
    TRY(npl_vision_vector(L, NAME("attn_v.bias"), e, false, &B->bv));
    TRY(npl_vision_vector(L, NAME("attn_out.bias"), e, false, &B->bo));
    snprintf(base, sizeof base, "v.blk.%u.ln1", il);
    TRY(norm_pair(L, base, e, true, &B->ln1_w, &B->ln1_b));
    snprintf(base, sizeof base, "v.blk.%u.ln2", il);
    TRY(norm_pair(L, base, e, true, &B->ln2_w, &B->ln2_b));

    /* Older converters named fc1 "ffn_down" and fc2 "ffn_up": recognise
     * them by shape (a down projection has n_ff inputs). When n_ff equals
     * n_embd the shapes cannot tell, and the names are trusted. */
    const npl_gguf_tensor *up = npl_vision_find(L, NAME("ffn_up.weight"), true);
    if (!up)
        return NPL_ERR_FORMAT;
    const npl_gguf_tensor *down = npl_vision_find(L, NAME("ffn_down.weight"), true);
    if (!down)
        return NPL_ERR_FORMAT;
    bool swapped = f != e && npl_vision_shape_is(down, e, f, 1, 1) && npl_vision_shape_is(up, f, e, 1, 1);
    const char *up_name = swapped ? "ffn_down" : "ffn_up";
    const char *down_name = swapped ? "ffn_up" : "ffn_down";
    const npl_gguf_tensor *t_up = swapped ? down : up;
    const npl_gguf_tensor *t_down = swapped ? up : down;
    snprintf(name, sizeof name, "v.blk.%u.%s.weight", il, up_name);
    snprintf(want, sizeof want, "[%u, %u] (n_embd, n_ff)", e, f);
    if (!npl_vision_shape_is(t_up, e, f, 1, 1))
        return npl_vision_shape_error(L, t_up, name, want);
    TRY(npl_vision_bind_matrix(L, t_up, name, e, f, want, &B->w_up));
    snprintf(name, sizeof name, "v.blk.%u.%s.weight", il, down_name);
    snprintf(want, sizeof want, "[%u, %u] (n_ff, n_embd)", f, e);
    if (!npl_vision_shape_is(t_down, f, e, 1, 1))
        return npl_vision_shape_error(L, t_down, name, want);
    TRY(npl_vision_bind_matrix(L, t_down, name, f, e, want, &B->w_down));
    snprintf(name, sizeof name, "v.blk.%u.%s.bias", il, up_name);
    TRY(npl_vision_vector(L, name, f, false, &B->b_up));
    snprintf(name, sizeof name, "v.blk.%u.%s.bias", il, down_name);
    TRY(npl_vision_vector(L, name, e, false, &B->b_down));
    if (swapped)
        v->info.ffn_swapped = true;
#undef NAME
#undef TRY
    return NPL_OK;
}

npl_status npl_vision_projection(npl_vision_loader *L, int out_axis, const npl_gguf_tensor **out_t, uint32_t *n_out)
{
    uint32_t e = L->v->info.n_embd;
    const char *name = "mm.input_projection.weight";
    const npl_gguf_tensor *t = npl_vision_find(L, name, true);
    if (!t)
        return NPL_ERR_FORMAT;
    char want[96];
    snprintf(want, sizeof want, out_axis ? "[%u, n_embd_out] (encoder width, text width)"
                                         : "[n_embd_out, %u] (text width, encoder width)", e);
    if (t->ne[1 - out_axis] != e || t->ne[2] != 1 || t->ne[3] != 1 || t->ne[out_axis] < 1 ||
        t->ne[out_axis] > NPL_VISION_MAX_OUT_EMBD)
        return npl_vision_shape_error(L, t, name, want);
    uint32_t out = (uint32_t)t->ne[out_axis];
    uint32_t declared = 0;
    npl_status st = npl_vision_get_u32(L, "clip.vision.projection_dim", false, out, &declared);
    if (st)
        return st;
    if (declared != out)
        return npl_error_set(L->err, NPL_ERR_FORMAT, "%s: clip.vision.projection_dim = %u but %s has %u outputs",
                             L->path, declared, name, out);
    *out_t = t;
    *n_out = out;
    return NPL_OK;
}

/* mm.input_projection.weight [n_embd_out, n_embd] -> proj_t, one row of
 * n_embd per output dimension. */
static npl_status bind_projection(npl_vision_loader *L)
{
    npl_vision *v = L->v;
    uint32_t e = v->info.n_embd, out = 0;
    const char *name = "mm.input_projection.weight";
    const npl_gguf_tensor *t = NULL;
    npl_status st = npl_vision_projection(L, 0, &t, &out);
    if (st)
        return st;
    size_t rb = npl_type_row_size(t->type, out);
    const npl_type_traits *tr = npl_type_traits_get(t->type);
    if (rb == 0 || !tr || !tr->can_dequantize)
        return npl_error_set(L->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which cannot be converted to f32",
                             L->path, name, type_name(t->type));
    v->info.n_embd_out = out;
    v->proj_t = malloc((size_t)out * e * sizeof(float));
    float *row = malloc((size_t)out * sizeof(float));
    if (!v->proj_t || !row) {
        free(row);
        return npl_error_set(L->err, NPL_ERR_NOMEM, "out of memory for the projection");
    }
    for (uint32_t i = 0; i < e; i++) {
        npl_dequantize_row_ref(t->type, (const uint8_t *)t->data + (size_t)i * rb, row, out);
        for (uint32_t j = 0; j < out; j++)
            v->proj_t[(size_t)j * e + i] = row[j];
    }
    free(row);
    if (!npl_matrix_init(&v->proj, NPL_TYPE_F32, v->proj_t, e, out))
        return npl_error_set(L->err, NPL_ERR_INTERNAL, "projection matrix setup failed");
    return NPL_OK;
}

npl_status npl_vision_load_weights(npl_vision *v, npl_error *err)
{
    npl_vision_loader L = {.v = v, .path = npl_gguf_path(v->gguf), .err = err};
    npl_status st;
#define TRY(x) do { if ((st = (x)) != NPL_OK) return st; } while (0)
    TRY(check_projector(&L));
    TRY(read_hparams(&L));
    if (v->gemma4v)
        return npl_gemma4v_load_tensors(&L);
    const npl_vision_info *in = &v->info;
    uint64_t e = in->n_embd, f = in->n_ff;
    size_t n_vec = (size_t)in->n_layer * (9 * e + f) + 6 * e;
    v->vectors = malloc(n_vec * sizeof(float));
    v->blocks = calloc(in->n_layer, sizeof *v->blocks);
    if (!v->vectors || !v->blocks)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the vision weights");
    L.arena = v->vectors;
    L.arena_end = v->vectors + n_vec;

    /* Patch embedding: a convolution kernel [patch, patch, 3, n_embd],
     * i.e. one row of 3 * patch^2 (channel, y, x) per output. */
    uint32_t p = in->patch_size;
    const char *name = "v.patch_embd.weight";
    const npl_gguf_tensor *t = npl_vision_find(&L, name, true);
    if (!t)
        return NPL_ERR_FORMAT;
    char want[96];
    snprintf(want, sizeof want, "[%u, %u, 3, %u] (patch, patch, channels, n_embd)", p, p, in->n_embd);
    if (!npl_vision_shape_is(t, p, p, 3, e))
        return npl_vision_shape_error(&L, t, name, want);
    TRY(npl_vision_bind_matrix(&L, t, name, (int64_t)3 * p * p, (int64_t)e, want, &v->patch_embd));
    TRY(npl_vision_vector(&L, "v.patch_embd.bias", e, false, &v->patch_bias));
    snprintf(want, sizeof want, "[%u, %u] (n_embd, patches)", in->n_embd, v->n_patches);
    TRY(npl_vision_matrix2(&L, "v.position_embd.weight", e, v->n_patches, want, &v->pos_embd));
    TRY(norm_pair(&L, "v.pre_ln", e, false, &v->pre_ln_w, &v->pre_ln_b));
    for (uint32_t il = 0; il < in->n_layer; il++)
        TRY(bind_block(&L, il));
    TRY(norm_pair(&L, "v.post_ln", e, false, &v->post_ln_w, &v->post_ln_b));
    TRY(npl_vision_vector(&L, "mm.soft_emb_norm.weight", e, true, &v->soft_emb_norm));
    TRY(bind_projection(&L));
    if (npl_gguf_find_tensor(v->gguf, "v.blk.0.attn_qkv.weight") || npl_gguf_find_tensor(v->gguf, "v.blk.0.ffn_gate.weight"))
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "%s: fused QKV or gated FFN tensors are not part of the gemma3 projector",
                             L.path);
#undef TRY
    return NPL_OK;
}

npl_vision *npl_vision_load(const char *path, const npl_vision_params *params, npl_error *err)
{
    npl_vision_params defaults;
    if (!params) {
        npl_vision_params_default(&defaults);
        params = &defaults;
    }
    if (!path) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "no mmproj path given");
        return NULL;
    }
    if (params->n_threads < 0 || params->n_threads > 1024) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "n_threads = %d is out of range [0, 1024]", params->n_threads);
        return NULL;
    }
    npl_vision *v = calloc(1, sizeof *v);
    if (!v) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    v->simd = npl_simd_detect();
    v->exact = params->exact;
    v->bf16_weights = params->bf16_weights && !params->exact;
    v->q8_weights = params->q8_weights && !params->exact;
    v->gguf = npl_gguf_open(path, err);
    if (!v->gguf || npl_vision_load_weights(v, err))
        goto fail;
    v->pool = npl_threadpool_create(params->n_threads);
    if (!v->pool) {
        npl_error_set(err, errno == ENOMEM ? NPL_ERR_NOMEM : NPL_ERR_INTERNAL, "cannot start the compute threads: %s",
                      strerror(errno));
        goto fail;
    }
    int64_t max_cols = v->info.n_embd;
    if ((int64_t)v->info.n_ff > max_cols)
        max_cols = v->info.n_ff;
    if (v->patch_embd.n_cols > max_cols)
        max_cols = v->patch_embd.n_cols;
    if (v->exact && (int64_t)v->n_patches > max_cols) /* exact attention: V transposed has a column per patch */
        max_cols = v->n_patches;
    v->mm_ws = npl_matmul_ws_create(npl_threadpool_size(v->pool), max_cols, NPL_VISION_ROW_CHUNK);
    if (!v->mm_ws) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the matrix workspace");
        goto fail;
    }
    if (!v->exact && npl_vision_prepare_weights(v, err) != NPL_OK)
        goto fail;
    return v;

fail:
    npl_vision_free(v);
    return NULL;
}

void npl_vision_free(npl_vision *v)
{
    if (!v)
        return;
    npl_vision_free_weights(v);
    npl_matmul_ws_free(v->mm_ws);
    npl_threadpool_free(v->pool);
    free(v->proj_t);
    free(v->blocks);
    free(v->vectors);
    npl_gguf_close(v->gguf);
    free(v);
}

const npl_vision_info *npl_vision_get_info(const npl_vision *v)
{
    return &v->info;
}
