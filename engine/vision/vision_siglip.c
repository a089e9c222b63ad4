/* The SigLIP encoder and the Gemma 3 projector, one stage at a time:
 *
 *   stage 0        patches (14x14x3 each, a convolution as one matrix
 *                  product) + bias + position embedding [+ pre-LayerNorm]
 *   stage 1..L     one encoder block: LayerNorm -> Q, K, V (biased) ->
 *                  attention of every patch over every patch (no mask) ->
 *                  output projection + residual -> LayerNorm -> fc1 ->
 *                  GELU -> fc2 + residual
 *   stage L+1      [post-LayerNorm] -> average of each pool x pool square
 *                  of patches (row-major tokens) -> RMSNorm * soft_emb_norm
 *                  -> projection to the text model's width
 *
 * Matrix products run over the patches in chunks of NPL_VISION_ROW_CHUNK
 * rows through the shared matrix kernel (Q, K and V in one call), or on
 * AMX tiles for the F16 matrices vision_weights.c packed for them. On the
 * fast path (the default) the attention is vision_attention.c's and the
 * activation act_gelu.h's; with npl_vision_params.exact the attention is
 * two matrix products per head and chunk (K times the queries gives the
 * scores, V transposed times their softmax the output) with expf/tanhf.
 * Norms, activations and the softmax are row-parallel on the vision
 * tower's thread pool. Norm statistics and softmax sums are taken in
 * double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "act_gelu.h"
#include "ggml_types.h"
#include "vision_internal.h"


static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Adds the time since *t0 to *acc and restarts the clock. */
static void lap(double *t0, double *acc)
{
    double t = now_s();
    *acc += t - *t0;
    *t0 = t;
}

/* ---- row-parallel helpers ------------------------------------------------- */


typedef struct row_job {
    npl_vision_row_op op;
    const npl_vision *v;
    float *dst;
    const float *src;
    const float *w, *b;
    size_t width;
    float scale;
} row_job;

static void layernorm_row(const float *x, float *y, size_t n, float eps, const float *w, const float *b)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    float mean = (float)(sum / (double)n);
    double var = 0.0;
    for (size_t i = 0; i < n; i++) {
        float d = x[i] - mean;
        var += (double)d * d;
    }
    float scale = 1.0f / sqrtf((float)(var / (double)n) + eps);
    for (size_t i = 0; i < n; i++) {
        float t = (x[i] - mean) * scale;
        if (w)
            t *= w[i];
        if (b)
            t += b[i];
        y[i] = t;
    }
}

static float activate(npl_vision_act act, float x)
{
    switch (act) {
    case NPL_VISION_GELU:
        return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x)));
    case NPL_VISION_SILU:
        return x / (1.0f + expf(-x));
    default:
        return x / (1.0f + expf(-1.702f * x));
    }
}

static void row_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const row_job *j = ctx;
    size_t n = j->width;
    for (size_t r = begin; r < end; r++) {
        float *d = j->dst + r * n;
        const float *s = j->src ? j->src + r * n : NULL;
        switch (j->op) {
        case OP_LAYERNORM:
            layernorm_row(s, d, n, j->v->eps, j->w, j->b);
            break;
        case OP_ADD_BIAS:
            for (size_t i = 0; i < n; i++)
                d[i] += j->b[i];
            break;
        case OP_ADD:
            for (size_t i = 0; i < n; i++)
                d[i] += s[i] + (j->b ? j->b[i] : 0.0f);
            break;
        case OP_ACT:
            for (size_t i = 0; i < n; i++)
                d[i] = activate(j->v->act, d[i] + (j->b ? j->b[i] : 0.0f));
            break;
        case OP_ACT_FAST: {
            npl_act_kind k = j->v->act == NPL_VISION_GELU   ? NPL_ACT_GELU_TANH
                             : j->v->act == NPL_VISION_SILU ? NPL_ACT_SILU
                                                            : NPL_ACT_GELU_QUICK;
            npl_act_bias_f32(j->v->simd, k, d, j->b, n);
            break;
        }
        case OP_SOFTMAX: {
            float mx = -INFINITY;
            for (size_t i = 0; i < n; i++) {
                d[i] *= j->scale;
                mx = d[i] > mx ? d[i] : mx;
            }
            double sum = 0.0;
            for (size_t i = 0; i < n; i++) {
                d[i] = expf(d[i] - mx);
                sum += d[i];
            }
            npl_scale_f32(j->v->simd, (float)(1.0 / sum), d, n);
            break;
        }
        case OP_MUL:
            for (size_t i = 0; i < n; i++)
                d[i] *= s[i];
            break;
        case OP_RMSNORM: {
            double ss = 0.0;
            for (size_t i = 0; i < n; i++)
                ss += (double)s[i] * s[i];
            float scale = 1.0f / sqrtf((float)(ss / (double)n) + j->v->eps);
            for (size_t i = 0; i < n; i++)
                d[i] = s[i] * scale * (j->w ? j->w[i] : 1.0f);
            break;
        }
        }
    }
}

void npl_vision_rows(const npl_vision *v, npl_vision_row_op op, float *dst, const float *src, const float *w,
                     const float *b, size_t n_rows, size_t width)
{
    row_job j = {.op = op, .v = v, .dst = dst, .src = src, .w = w, .b = b, .width = width};
    npl_threadpool_run(v->pool, n_rows, row_task, &j);
}

/* y = W x for n <= NPL_VISION_ROW_CHUNK rows: on the AMX tiles when W
 * was packed for them, else the shared matrix kernel. */
void npl_vision_product(const npl_vision *v, const npl_matrix *w, const float *x, size_t x_stride, size_t n, float *y,
                        size_t y_stride)
{
    const npl_amx_weights *t = npl_vision_amx_weights(v, w);
    if (t && npl_amx_acts_load(v->pool, v->amx_acts, x, x_stride, n, (size_t)w->n_cols) &&
        npl_amx_matmul(v->pool, v->amx_acts, t, y, y_stride))
        return;
    npl_matmul_contig(v->pool, v->mm_ws, w, x, x_stride, n, y, y_stride);
}

/* y[r] = W x[r] for n_rows rows, in chunks the workspace holds. */
void npl_vision_matmul_rows(const npl_vision *v, const npl_matrix *w, const float *x, size_t n_rows, float *y)
{
    size_t in = (size_t)w->n_cols, out = (size_t)w->n_rows;
    for (size_t r0 = 0; r0 < n_rows; r0 += NPL_VISION_ROW_CHUNK) {
        size_t n = n_rows - r0 < NPL_VISION_ROW_CHUNK ? n_rows - r0 : NPL_VISION_ROW_CHUNK;
        npl_vision_product(v, w, x + r0 * in, in, n, y + r0 * out, out);
    }
}

/* ---- attention ------------------------------------------------------------- */

/* K and V (row-major, in tmp) into their per-head layouts. */
static void split_heads(const npl_vision *v, const float *src, float *dst, bool transpose)
{
    size_t N = v->n_patches, E = v->info.n_embd, hd = v->head_dim;
    for (size_t p = 0; p < N; p++)
        for (size_t h = 0; h < v->info.n_head; h++) {
            const float *from = src + p * E + h * hd;
            if (transpose) {
                float *to = dst + h * hd * N + p;
                for (size_t d = 0; d < hd; d++)
                    to[d * N] = from[d];
            } else {
                memcpy(dst + (h * N + p) * hd, from, hd * sizeof *from);
            }
        }
}

/* Every patch attends to every patch; the output goes to xn. */
static npl_status attention(npl_vision_encoding *e, npl_error *err)
{
    const npl_vision *v = e->v;
    size_t N = v->n_patches, E = v->info.n_embd, hd = v->head_dim;
    float scale = 1.0f / sqrtf((float)hd);
    for (size_t h = 0; h < v->info.n_head; h++) {
        npl_matrix k, vt;
        if (!npl_matrix_init(&k, NPL_TYPE_F32, e->kh + h * N * hd, (int64_t)hd, (int64_t)N) ||
            !npl_matrix_init(&vt, NPL_TYPE_F32, e->vt + h * hd * N, (int64_t)N, (int64_t)hd))
            return npl_error_set(err, NPL_ERR_INTERNAL, "vision: attention matrices");
        for (size_t r0 = 0; r0 < N; r0 += NPL_VISION_ROW_CHUNK) {
            size_t n = N - r0 < NPL_VISION_ROW_CHUNK ? N - r0 : NPL_VISION_ROW_CHUNK;
            npl_matmul_contig(v->pool, v->mm_ws, &k, e->q + r0 * E + h * hd, E, n, e->scores, N);
            row_job j = {.op = OP_SOFTMAX, .v = v, .dst = e->scores, .width = N, .scale = scale};
            npl_threadpool_run(v->pool, n, row_task, &j);
            npl_matmul_contig(v->pool, v->mm_ws, &vt, e->scores, N, n, e->xn + r0 * E + h * hd, E);
        }
    }
    return NPL_OK;
}

/* ---- stages ------------------------------------------------------------------ */

/* Patch vectors of rows [r0, r0 + n) in (channel, y, x) order. */
static void gather_patches(const npl_vision_encoding *e, size_t r0, size_t n, float *dst)
{
    const npl_vision *v = e->v;
    size_t p = v->info.patch_size, s = v->info.image_size, plane = s * s;
    for (size_t r = 0; r < n; r++) {
        size_t py = (r0 + r) / v->n_side, px = (r0 + r) % v->n_side;
        float *d = dst + r * 3 * p * p;
        for (size_t c = 0; c < 3; c++)
            for (size_t ky = 0; ky < p; ky++)
                memcpy(d + (c * p + ky) * p, e->pixels + c * plane + (py * p + ky) * s + px * p, p * sizeof *d);
    }
}

/* Patches [r0 + begin, r0 + end) into rows [begin, end) of hidden. */
static void gather_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const npl_vision_embed_job *j = ctx;
    size_t len = (size_t)j->e->v->patch_embd.n_cols;
    gather_patches(j->e, j->r0 + begin, end - begin, j->e->hidden + begin * len);
}

/* Position embeddings of patches [begin, end) into xn. */
static void position_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const npl_vision_embed_job *j = ctx;
    const npl_vision *v = j->e->v;
    for (size_t r = begin; r < end; r++)
        npl_matrix_get_row(&v->pos_embd, (int64_t)r, j->e->xn + r * v->info.n_embd);
}

void npl_vision_embed_patches(npl_vision_encoding *e, npl_task_fn gather)
{
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, N = e->n_patches;
    for (size_t r0 = 0; r0 < N; r0 += NPL_VISION_ROW_CHUNK) {
        size_t n = N - r0 < NPL_VISION_ROW_CHUNK ? N - r0 : NPL_VISION_ROW_CHUNK;
        npl_vision_embed_job j = {.e = e, .r0 = r0};
        npl_threadpool_run(v->pool, n, gather, &j);
        npl_vision_product(v, &v->patch_embd, e->hidden, (size_t)v->patch_embd.n_cols, n, e->x + r0 * E, E);
    }
}

static void stage_embed(npl_vision_encoding *e)
{
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, N = v->n_patches;
    npl_vision_embed_patches(e, gather_task);
    npl_vision_embed_job j = {.e = e};
    npl_threadpool_run(v->pool, N, position_task, &j);
    npl_vision_rows(v, OP_ADD, e->x, e->xn, NULL, v->patch_bias, N, E);
    if (v->pre_ln_w) {
        npl_vision_rows(v, OP_LAYERNORM, e->xn, e->x, v->pre_ln_w, v->pre_ln_b, N, E);
        memcpy(e->x, e->xn, N * E * sizeof *e->x);
    }
    free(e->pixels);
    e->pixels = NULL;
}

/* Q, K and V of every patch from xn, biased: into q, kh and vt (row-major
 * n_patches x n_embd; the exact path rearranges K and V afterwards). */
static void project_qkv(npl_vision_encoding *e, const npl_vision_block *B)
{
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, N = v->n_patches;
    const npl_matrix *w[3] = {&B->wq, &B->wk, &B->wv};
    float *dst[3] = {e->q, e->kh, e->vt};
    for (size_t r0 = 0; r0 < N; r0 += NPL_VISION_ROW_CHUNK) {
        size_t n = N - r0 < NPL_VISION_ROW_CHUNK ? N - r0 : NPL_VISION_ROW_CHUNK;
        float *y[3] = {dst[0] + r0 * E, dst[1] + r0 * E, dst[2] + r0 * E};
        size_t ys[3] = {E, E, E};
        const npl_amx_weights *t[3] = {npl_vision_amx_weights(v, w[0]), npl_vision_amx_weights(v, w[1]),
                                       npl_vision_amx_weights(v, w[2])};
        /* on the tiles the activations are split once for all three */
        if (t[0] && t[1] && t[2] && npl_amx_acts_load(v->pool, v->amx_acts, e->xn + r0 * E, E, n, E) &&
            npl_amx_matmul(v->pool, v->amx_acts, t[0], y[0], E) && npl_amx_matmul(v->pool, v->amx_acts, t[1], y[1], E) &&
            npl_amx_matmul(v->pool, v->amx_acts, t[2], y[2], E))
            continue;
        npl_matmul_multi(v->pool, v->mm_ws, 3, w, e->xn + r0 * E, E, n, y, ys);
    }
    const float *bias[3] = {B->bq, B->bk, B->bv};
    for (size_t i = 0; i < 3; i++)
        if (bias[i])
            npl_vision_rows(v, OP_ADD_BIAS, dst[i], NULL, NULL, bias[i], N, E);
}

static npl_status stage_block(npl_vision_encoding *e, const npl_vision_block *B, npl_error *err)
{
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, F = v->info.n_ff, N = v->n_patches;
    double t0 = now_s();

    npl_vision_rows(v, OP_LAYERNORM, e->xn, e->x, B->ln1_w, B->ln1_b, N, E);
    project_qkv(e, B);
    lap(&t0, &e->times.attn_proj);
    if (v->exact) {
        memcpy(e->tmp, e->kh, N * E * sizeof *e->tmp);
        split_heads(v, e->tmp, e->kh, false);
        memcpy(e->tmp, e->vt, N * E * sizeof *e->tmp);
        split_heads(v, e->tmp, e->vt, true);
        npl_status st = attention(e, err);
        if (st != NPL_OK)
            return st;
    } else {
        npl_vision_attention_fast(v, &e->attn, N, 1.0f / sqrtf((float)v->head_dim), e->q, e->kh, e->vt, e->xn);
    }
    lap(&t0, &e->times.attention);

    /* Q is spent: it receives the output projection. */
    npl_vision_matmul_rows(v, &B->wo, e->xn, N, e->q);
    npl_vision_rows(v, OP_ADD, e->x, e->q, NULL, B->bo, N, E);
    lap(&t0, &e->times.attn_proj);

    npl_vision_rows(v, OP_LAYERNORM, e->xn, e->x, B->ln2_w, B->ln2_b, N, E);
    for (size_t r0 = 0; r0 < N; r0 += NPL_VISION_ROW_CHUNK) {
        size_t n = N - r0 < NPL_VISION_ROW_CHUNK ? N - r0 : NPL_VISION_ROW_CHUNK;
        npl_vision_product(v, &B->w_up, e->xn + r0 * E, E, n, e->hidden, F);
        npl_vision_rows(v, v->exact ? OP_ACT : OP_ACT_FAST, e->hidden, NULL, NULL, B->b_up, n, F);
        npl_vision_product(v, &B->w_down, e->hidden, F, n, e->q + r0 * E, E);
    }
    npl_vision_rows(v, OP_ADD, e->x, e->q, NULL, B->b_down, N, E);
    lap(&t0, &e->times.mlp);
    return NPL_OK;
}

typedef struct pool_job {
    const npl_vision *v;
    const float *feat;
    float *pooled;
} pool_job;

/* Token (ty, tx) averages patches [ty*k, ty*k+k) x [tx*k, tx*k+k), added
 * in row-major order; tokens [begin, end). */
void npl_vision_pool_sum(const float *feat, size_t nx, size_t k, size_t ty, size_t tx, size_t E, float *dst)
{
    memset(dst, 0, E * sizeof *dst);
    for (size_t dy = 0; dy < k; dy++)
        for (size_t dx = 0; dx < k; dx++) {
            const float *src = feat + ((ty * k + dy) * nx + tx * k + dx) * E;
            for (size_t i = 0; i < E; i++)
                dst[i] += src[i];
        }
}

static void pool_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const pool_job *j = ctx;
    const npl_vision *v = j->v;
    size_t E = v->info.n_embd, k = v->info.pool, side = v->n_side / k;
    for (size_t t = begin; t < end; t++) {
        float *dst = j->pooled + t * E;
        npl_vision_pool_sum(j->feat, v->n_side, k, t / side, t % side, E, dst);
        npl_scale_f32(v->simd, 1.0f / (float)(k * k), dst, E);
    }
}

static void stage_project(npl_vision_encoding *e)
{
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, N = v->n_patches;
    const float *feat = e->x;
    if (v->post_ln_w) {
        npl_vision_rows(v, OP_LAYERNORM, e->xn, e->x, v->post_ln_w, v->post_ln_b, N, E);
        feat = e->xn;
    }
    size_t T = v->info.n_tokens;
    pool_job j = {.v = v, .feat = feat, .pooled = e->q};
    npl_threadpool_run(v->pool, T, pool_task, &j);
    npl_vision_rows(v, OP_RMSNORM, e->tmp, e->q, v->soft_emb_norm, NULL, T, E);
    npl_vision_matmul_rows(v, &v->proj, e->tmp, T, e->out);
}

/* ---- public ------------------------------------------------------------------ */

npl_status npl_vision_encoding_alloc(npl_vision *v, size_t n_pixels, uint32_t n_patches, uint32_t n_tokens,
                                     npl_vision_encoding **out, npl_error *err)
{
    *out = NULL;
    npl_vision_encoding *e = calloc(1, sizeof *e);
    if (!e)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    e->v = v;
    e->n_patches = n_patches;
    e->n_tokens = n_tokens;
    const npl_vision_info *in = &v->info;
    size_t E = in->n_embd, N = n_patches;
    size_t hidden = in->n_ff > (size_t)v->patch_embd.n_cols ? in->n_ff : (size_t)v->patch_embd.n_cols;
    bool exact_attn = v->exact && !v->gemma4v; /* gemma4v's attention is always the fast kernel's */
    e->pixels = npl_vision_floats(n_pixels);
    e->x = npl_vision_floats(N * E);
    e->xn = npl_vision_floats(N * E);
    e->q = npl_vision_floats(N * E);
    e->kh = npl_vision_floats(N * E);
    e->vt = npl_vision_floats(N * E);
    e->tmp = npl_vision_floats(N * E);
    e->hidden = npl_vision_floats(NPL_VISION_ROW_CHUNK * hidden);
    if (v->gemma4v)
        e->gate = npl_vision_floats(NPL_VISION_ROW_CHUNK * (size_t)in->n_ff);
    if (exact_attn)
        e->scores = npl_vision_floats(NPL_VISION_ROW_CHUNK * N);
    e->out = npl_vision_floats((size_t)n_tokens * in->n_embd_out);
    if (!e->pixels || !e->x || !e->xn || !e->q || !e->kh || !e->vt || !e->tmp || !e->hidden ||
        (v->gemma4v && !e->gate) || (exact_attn && !e->scores) || !e->out) {
        npl_vision_encoding_free(e);
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the vision encoder's activations (%zu patches)", N);
    }
    npl_status st = exact_attn ? NPL_OK : npl_vision_attn_alloc(v, N, &e->attn, err);
    if (st != NPL_OK) {
        npl_vision_encoding_free(e);
        return st;
    }
    *out = e;
    return NPL_OK;
}

npl_vision_encoding *npl_vision_encoding_create(npl_vision *v, const npl_image *img, npl_error *err)
{
    if (!v || !img || !img->rgb) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: missing tower or image");
        return NULL;
    }
    npl_vision_pixel_params p;
    npl_vision_get_pixel_params(v, &p);
    size_t n = npl_vision_pixel_count_for(&p, img->width, img->height);
    float *pixels = n ? npl_vision_floats(n) : NULL;
    if (!pixels) {
        npl_error_set(err, n ? NPL_ERR_NOMEM : NPL_ERR_INVALID_ARG, n ? "out of memory for the preprocessed image"
                      : "vision: a %u x %u image cannot be fitted to this projector", img->width, img->height);
        return NULL;
    }
    npl_vision_encoding *e = NULL;
    if (npl_image_preprocess(&p, img, pixels, err) == NPL_OK)
        e = npl_vision_encoding_create_from_pixels(v, &p, pixels, err);
    free(pixels);
    return e;
}

npl_vision_encoding *npl_vision_encoding_create_from_pixels(npl_vision *v, const npl_vision_pixel_params *p,
                                                            const float *pixels, npl_error *err)
{
    if (!v || !p || !pixels) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: missing tower or pixels");
        return NULL;
    }
    npl_vision_pixel_params mine;
    npl_vision_get_pixel_params(v, &mine);
    if (memcmp(&mine, p, sizeof mine) != 0) {
        npl_error_set(err, NPL_ERR_INVALID_ARG,
                      "vision: the image was preprocessed for another projector (%u pixels wide, this one takes %u)",
                      p->image_size, mine.image_size);
        return NULL;
    }
    if (v->gemma4v)
        return npl_gemma4v_encoding_create(v, p, pixels, err);
    npl_vision_encoding *e;
    size_t n = npl_vision_pixel_count(p);
    if (npl_vision_encoding_alloc(v, n, v->n_patches, v->info.n_tokens, &e, err) != NPL_OK)
        return NULL;
    memcpy(e->pixels, pixels, n * sizeof(float));
    return e;
}

void npl_vision_encoding_free(npl_vision_encoding *e)
{
    if (!e)
        return;
    free(e->pixels);
    free(e->x);
    free(e->xn);
    free(e->q);
    free(e->kh);
    free(e->vt);
    free(e->tmp);
    free(e->hidden);
    free(e->gate);
    free(e->scores);
    free(e->out);
    npl_vision_attn_free(&e->attn);
    free(e);
}

uint32_t npl_vision_encoding_n_stages(const npl_vision_encoding *e)
{
    return e->v->info.n_layer + 2;
}

uint32_t npl_vision_encoding_stages_done(const npl_vision_encoding *e)
{
    return e->stage;
}

npl_status npl_vision_encoding_step(npl_vision_encoding *e, bool *done, npl_error *err)
{
    if (!e)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: no encoding");
    uint32_t n = npl_vision_encoding_n_stages(e);
    if (e->stage < n) {
        npl_status st = NPL_OK;
        double t0 = now_s();
        if (e->v->gemma4v) {
            /* a block's time is counted under mlp */
            npl_gemma4v_stage(e);
            lap(&t0, e->stage == 0 ? &e->times.embed : e->stage <= e->v->info.n_layer ? &e->times.mlp
                                                                                     : &e->times.project);
        } else if (e->stage == 0) {
            stage_embed(e);
            lap(&t0, &e->times.embed);
        } else if (e->stage <= e->v->info.n_layer) {
            st = stage_block(e, &e->v->blocks[e->stage - 1], err);
        } else {
            stage_project(e);
            lap(&t0, &e->times.project);
        }
        if (st != NPL_OK)
            return st;
        e->stage++;
    }
    if (done)
        *done = e->stage == n;
    return NPL_OK;
}

void npl_vision_encoding_get_timings(const npl_vision_encoding *e, npl_vision_timings *out)
{
    *out = e->times;
}

uint32_t npl_vision_encoding_n_tokens(const npl_vision_encoding *e)
{
    return e ? e->n_tokens : 0;
}

const float *npl_vision_encoding_output(const npl_vision_encoding *e)
{
    return e && e->stage == npl_vision_encoding_n_stages(e) ? e->out : NULL;
}

npl_status npl_vision_encode(npl_vision *v, const npl_image *img, float *out, npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: no output buffer");
    npl_error local;
    if (!err) {
        npl_error_clear(&local);
        err = &local;
    }
    npl_vision_encoding *e = npl_vision_encoding_create(v, img, err);
    if (!e)
        return err->code != NPL_OK ? err->code : NPL_ERR_INTERNAL;
    npl_status st = NPL_OK;
    bool done = false;
    while (!done && st == NPL_OK)
        st = npl_vision_encoding_step(e, &done, err);
    if (st == NPL_OK)
        memcpy(out, e->out, (size_t)e->n_tokens * v->info.n_embd_out * sizeof *out);
    npl_vision_encoding_free(e);
    return st;
}
