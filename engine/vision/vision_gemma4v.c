/* Gemma 4's vision tower (gemma4v), one stage at a time, as llama.cpp's
 * gemma4v graph computes it:
 *
 *   stage 0     pixels p -> 2p - 1; patches (a convolution as one matrix
 *               product, no bias) + x table[column] + y table[row]
 *   stage 1..L  h = RMSNorm(x) ln1; q, k, v = W h (each linear layer with
 *               its optional input and output clipping); q, k RMS-normed
 *               per head (q_norm, k_norm), then 2-D RoPE (NEOX pairs, base
 *               100): the first half of each head rotated by the patch's
 *               column, the second half by its row; v RMS-normed per head
 *               without weight; attention of every patch over every patch
 *               with q.k unscaled; x += post_attn_norm(RMSNorm(W_o a));
 *               x += post_ffn_norm(RMSNorm(W_down (gelu(W_gate h') * W_up h')))
 *               with h' = RMSNorm(x) ln2; x *= out_scale
 *   stage L+1   average of each pool x pool square of patches (row-major
 *               tokens) * sqrt(n_embd) [- std_bias, * std_scale] ->
 *               RMSNorm without weight -> W_proj
 *
 * What it shares with Gemma 3's SigLIP (vision_siglip.c): the row
 * operations, the matrix products (AMX tiles, repacked weights) and the
 * attention kernel. The attention is always the fast kernel's (exact
 * changes only the activation). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vision_internal.h"

static void clamp_floats(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

/* y = W x over n_rows rows with c's clipping: the input clamped into
 * scratch (n_rows x n_cols floats; NULL: x itself is clamped), the
 * output after. */
static void linear(const npl_vision *v, const npl_matrix *w, const npl_vision_clamp *c, float *x, size_t n_rows,
                   float *y, float *scratch)
{
    size_t in = (size_t)w->n_cols, out = (size_t)w->n_rows;
    const float *src = x;
    if (c && c->on) {
        float *dst = scratch ? scratch : x;
        if (scratch)
            memcpy(dst, x, n_rows * in * sizeof *dst);
        clamp_floats(dst, n_rows * in, c->in_lo, c->in_hi);
        src = dst;
    }
    npl_vision_matmul_rows(v, w, src, n_rows, y);
    if (c && c->on)
        clamp_floats(y, n_rows * out, c->out_lo, c->out_hi);
}

/* ---- stage 0 ---------------------------------------------------------------- */

/* Patches [r0 + begin, r0 + end) into rows of hidden, (channel, y, x)
 * order, each value v as 2v - 1. */
static void gather_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const npl_vision_embed_job *j = ctx;
    const npl_vision_encoding *e = j->e;
    size_t p = e->v->info.patch_size, w = (size_t)e->nx * p, plane = w * (size_t)e->ny * p;
    for (size_t r = begin; r < end; r++) {
        size_t py = (j->r0 + r) / e->nx, px = (j->r0 + r) % e->nx;
        float *d = e->hidden + r * 3 * p * p;
        for (size_t c = 0; c < 3; c++)
            for (size_t ky = 0; ky < p; ky++) {
                const float *s = e->pixels + c * plane + (py * p + ky) * w + px * p;
                for (size_t kx = 0; kx < p; kx++)
                    d[(c * p + ky) * p + kx] = s[kx] * 2.0f - 1.0f;
            }
    }
}

/* x[r] += x table[column] + y table[row] for patches [begin, end). */
static void position_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const npl_vision_embed_job *j = ctx;
    npl_vision_encoding *e = j->e;
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd;
    for (size_t r = begin; r < end; r++) {
        float *row = e->x + r * E, *tx = e->xn + r * E;
        npl_matrix_get_row(&v->pos_embd, (int64_t)(r % e->nx), tx);
        for (size_t i = 0; i < E; i++)
            row[i] += tx[i];
        npl_matrix_get_row(&v->pos_embd, (int64_t)(v->pos_size + r / e->nx), tx);
        for (size_t i = 0; i < E; i++)
            row[i] += tx[i];
    }
}

static void stage_embed(npl_vision_encoding *e)
{
    npl_vision_embed_patches(e, gather_task);
    npl_vision_embed_job j = {.e = e};
    npl_threadpool_run(e->v->pool, e->n_patches, position_task, &j);
    free(e->pixels);
    e->pixels = NULL;
}

/* ---- stage 1..L ------------------------------------------------------------ */

/* Rotates pairs (i, i + n/2) of each half of every head of rows [begin,
 * end) of q and k: angle pos * base^(-2i/n), n = head_dim / 2, pos the
 * column in the first half and the row in the second (ggml's NEOX rope:
 * the angle advanced by a float factor per pair). */
typedef struct rope_job {
    npl_vision_encoding *e;
} rope_job;

static void rotate_half(float *x, size_t n, const float *cs, const float *sn)
{
    for (size_t i = 0; i < n / 2; i++) {
        float a = x[i], b = x[i + n / 2];
        x[i] = a * cs[i] - b * sn[i];
        x[i + n / 2] = a * sn[i] + b * cs[i];
    }
}

static void rope_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const rope_job *j = ctx;
    npl_vision_encoding *e = j->e;
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, hd = v->head_dim, n = hd / 2, m = n / 2;
    float cs[2][NPL_VISION_MAX_EMBD / 4], sn[2][NPL_VISION_MAX_EMBD / 4];
    float step = powf(v->rope_theta, -2.0f / (float)n);
    for (size_t r = begin; r < end; r++) {
        float pos[2] = {(float)(r % e->nx), (float)(r / e->nx)};
        for (int a = 0; a < 2; a++) {
            float theta = pos[a];
            for (size_t i = 0; i < m; i++) {
                cs[a][i] = cosf(theta);
                sn[a][i] = sinf(theta);
                theta *= step;
            }
        }
        for (size_t h = 0; h < v->info.n_head; h++)
            for (int t = 0; t < 2; t++) {
                float *row = (t ? e->kh : e->q) + r * E + h * hd;
                rotate_half(row, n, cs[0], sn[0]);
                rotate_half(row + n, n, cs[1], sn[1]);
            }
    }
}

/* out = RMSNorm(out) * w when w, then x += out. */
static void add_normed(const npl_vision *v, float *x, float *out, const float *w, size_t N)
{
    size_t E = v->info.n_embd;
    if (w)
        npl_vision_rows(v, OP_RMSNORM, out, out, w, NULL, N, E);
    npl_vision_rows(v, OP_ADD, x, out, NULL, NULL, N, E);
}

static void attention_part(npl_vision_encoding *e, const npl_vision_block *B)
{
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, N = e->n_patches, H = v->info.n_head, hd = v->head_dim;
    npl_vision_rows(v, OP_RMSNORM, e->xn, e->x, B->ln1_w, NULL, N, E);
    linear(v, &B->wq, &B->clamp[NPL_G4V_Q], e->xn, N, e->q, e->tmp);
    linear(v, &B->wk, &B->clamp[NPL_G4V_K], e->xn, N, e->kh, e->tmp);
    linear(v, &B->wv, &B->clamp[NPL_G4V_V], e->xn, N, e->vt, e->tmp);
    if (B->q_norm)
        npl_vision_rows(v, OP_RMSNORM, e->q, e->q, B->q_norm, NULL, N * H, hd);
    if (B->k_norm)
        npl_vision_rows(v, OP_RMSNORM, e->kh, e->kh, B->k_norm, NULL, N * H, hd);
    npl_vision_rows(v, OP_RMSNORM, e->vt, e->vt, NULL, NULL, N * H, hd);
    rope_job rj = {.e = e};
    npl_threadpool_run(v->pool, N, rope_task, &rj);
    npl_vision_attention_fast(v, &e->attn, N, 1.0f, e->q, e->kh, e->vt, e->xn);
    /* Q is spent: it receives the output projection. */
    linear(v, &B->wo, &B->clamp[NPL_G4V_O], e->xn, N, e->q, e->tmp);
    add_normed(v, e->x, e->q, B->post_attn_norm, N);
}

static void ffn_part(npl_vision_encoding *e, const npl_vision_block *B)
{
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, F = v->info.n_ff, N = e->n_patches;
    npl_vision_rows(v, OP_RMSNORM, e->xn, e->x, B->ln2_w, NULL, N, E);
    for (size_t r0 = 0; r0 < N; r0 += NPL_VISION_ROW_CHUNK) {
        size_t n = N - r0 < NPL_VISION_ROW_CHUNK ? N - r0 : NPL_VISION_ROW_CHUNK;
        float *h = e->xn + r0 * E;
        linear(v, &B->w_gate, &B->clamp[NPL_G4V_GATE], h, n, e->gate, e->tmp);
        linear(v, &B->w_up, &B->clamp[NPL_G4V_UP], h, n, e->hidden, e->tmp);
        npl_vision_rows(v, v->exact ? OP_ACT : OP_ACT_FAST, e->gate, NULL, NULL, NULL, n, F);
        npl_vision_rows(v, OP_MUL, e->hidden, e->gate, NULL, NULL, n, F);
        linear(v, &B->w_down, &B->clamp[NPL_G4V_DOWN], e->hidden, n, e->q + r0 * E, NULL);
    }
    add_normed(v, e->x, e->q, B->post_ffn_norm, N);
    if (B->out_scale) {
        size_t step = B->out_scale_n == 1 ? 0 : 1;
        for (size_t r = 0; r < N; r++)
            for (size_t i = 0; i < E; i++)
                e->x[r * E + i] *= B->out_scale[i * step];
    }
}

/* ---- stage L+1 --------------------------------------------------------------- */

typedef struct pool_job {
    const npl_vision_encoding *e;
    float *pooled;
} pool_job;

/* Tokens [begin, end): the average of their pool x pool patches, times
 * sqrt(n_embd), standardised when the file says so. */
static void pool_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const pool_job *j = ctx;
    const npl_vision_encoding *e = j->e;
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, k = v->info.pool, side = e->nx / k;
    float scale = sqrtf((float)E);
    for (size_t t = begin; t < end; t++) {
        float *dst = j->pooled + t * E;
        npl_vision_pool_sum(e->x, e->nx, k, t / side, t % side, E, dst);
        for (size_t i = 0; i < E; i++) {
            dst[i] = dst[i] / (float)(k * k) * scale;
            if (v->std_bias)
                dst[i] = (dst[i] - v->std_bias[i]) * v->std_scale[i];
        }
    }
}

static void stage_project(npl_vision_encoding *e)
{
    const npl_vision *v = e->v;
    size_t E = v->info.n_embd, T = e->n_tokens;
    pool_job j = {.e = e, .pooled = e->q};
    npl_threadpool_run(v->pool, T, pool_task, &j);
    npl_vision_rows(v, OP_RMSNORM, e->tmp, e->q, NULL, NULL, T, E);
    linear(v, &v->proj, &v->proj_clamp, e->tmp, T, e->out, e->xn);
}

/* ---- encodings ----------------------------------------------------------------- */

npl_vision_encoding *npl_gemma4v_encoding_create(npl_vision *v, const npl_vision_pixel_params *p, const float *pixels,
                                                 npl_error *err)
{
    uint32_t ps = v->info.patch_size, a = p->align;
    float fw = pixels[0], fh = pixels[1];
    if (!(fw >= (float)a && fh >= (float)a && fw <= 65536.0f && fh <= 65536.0f) || (uint32_t)fw % a ||
        (uint32_t)fh % a || (float)(uint32_t)fw != fw || (float)(uint32_t)fh != fh) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: the preprocessed image's size %g x %g is not a multiple of %u",
                      (double)fw, (double)fh, a);
        return NULL;
    }
    uint32_t w = (uint32_t)fw, h = (uint32_t)fh, nx = w / ps, ny = h / ps;
    uint32_t n_tokens = (nx / v->info.pool) * (ny / v->info.pool);
    if (n_tokens > NPL_VISION_MAX_DYN_TOKENS) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: %u image embeddings exceed the limit of %u", n_tokens,
                      NPL_VISION_MAX_DYN_TOKENS);
        return NULL;
    }
    if (nx > v->pos_size || ny > v->pos_size) {
        npl_error_set(err, NPL_ERR_INVALID_ARG,
                      "vision: %u x %u patches exceed the projector's position tables (%u a side)", nx, ny,
                      v->pos_size);
        return NULL;
    }
    npl_vision_encoding *e;
    size_t n = (size_t)3 * w * h;
    if (npl_vision_encoding_alloc(v, n, nx * ny, n_tokens, &e, err) != NPL_OK)
        return NULL;
    e->nx = nx;
    e->ny = ny;
    memcpy(e->pixels, pixels + 2, n * sizeof(float));
    return e;
}

void npl_gemma4v_stage(npl_vision_encoding *e)
{
    uint32_t L = e->v->info.n_layer;
    if (e->stage == 0) {
        stage_embed(e);
    } else if (e->stage <= L) {
        const npl_vision_block *B = &e->v->blocks[e->stage - 1];
        attention_part(e, B);
        ffn_part(e, B);
    } else {
        stage_project(e);
    }
}
