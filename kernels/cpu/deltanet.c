/* Gated DeltaNet heads (deltanet.h): the recurrent step and the chunked
 * parallel form.
 *
 * The chunked form, per chunk of C tokens with the state S0 before it and
 * G_t the sum of the log decays g_1..g_t inside the chunk: every token's
 * correction d_t = beta_t (v_t - exp(g_t) S_{t-1} k_t) solves the
 * unit lower-triangular system
 *
 *     d_t + beta_t sum_{s<t} exp(G_t - G_s) (k_t . k_s) d_s = beta_t (v_t - exp(G_t) S0 k_t)
 *
 * (forward substitution); then o_t = scale (exp(G_t) S0 q_t + sum_{s<=t}
 * exp(G_t - G_s) (q_t . k_s) d_s) and S_C = exp(G_C) S0 + sum_s exp(G_C - G_s)
 * d_s k_s^T. G_t - G_s <= 0 for s <= t (decays are at most 1), so no
 * exponential overflows. The state is read twice per chunk instead of once
 * per token; the token-to-token work is C x C dot products. */
#include "deltanet.h"

#include <math.h>

#include "kernel_table.h"
#include "lane_sum.h"

static float dot(const float *a, const float *b, size_t n)
{
    float s = 0.0f;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* a . b on 16 lanes; the lanes past n add 0 * 0, as a masked SIMD load does */
static float dot16(const float *a, const float *b, size_t n)
{
    float lane[16] = {0};
    size_t full = n / 16 * 16;
    for (size_t i = 0; i < full; i++)
        lane[i % 16] = fmaf(a[i], b[i], lane[i % 16]);
    for (size_t l = 0; full < n && l < 16; l++)
        lane[l] = full + l < n ? fmaf(a[full + l], b[full + l], lane[l]) : fmaf(0.0f, 0.0f, lane[l]);
    return npl_lane_sum16(lane);
}

void npl_deltanet_step_ref(float *S, const float *q, const float *k, const float *v, float decay, float beta,
                           float scale, size_t dk, size_t dv, float *o)
{
    /* one pass over the state: each row's decay, correction, update and
     * read-out depend on that row only */
    for (size_t j = 0; j < dv; j++) {
        float *row = S + j * dk;
        for (size_t i = 0; i < dk; i++)
            row[i] *= decay;
        float d = (v[j] - dot16(row, k, dk)) * beta;
        for (size_t i = 0; i < dk; i++)
            row[i] = fmaf(d, k[i], row[i]);
        o[j] = dot16(row, q, dk) * scale;
    }
}

void npl_deltanet_step(npl_simd_level lv, float *S, const float *q, const float *k, const float *v, float decay,
                       float beta, float scale, size_t dk, size_t dv, float *o)
{
    npl_kernels(lv)->deltanet_step(S, q, k, v, decay, beta, scale, dk, dv, o);
}

size_t npl_deltanet_chunk_scratch(size_t dk, size_t dv)
{
    (void)dk;
    size_t c = NPL_DELTANET_CHUNK;
    return c * c + c * dv + c; /* k.k / q.k products, corrections, cumulative decays */
}

/* One chunk of c tokens (c <= NPL_DELTANET_CHUNK). */
static void chunk(float *S, const float *q, const float *k, size_t qk_stride, const float *v, size_t v_stride,
                  const float *g, const float *beta, size_t gb_stride, size_t c, float scale, size_t dk, size_t dv,
                  float *o, size_t o_stride, float *scratch)
{
    float *A = scratch, *D = A + NPL_DELTANET_CHUNK * NPL_DELTANET_CHUNK, *G = D + NPL_DELTANET_CHUNK * dv;
    float acc = 0.0f;
    for (size_t t = 0; t < c; t++) {
        acc += g[t * gb_stride];
        G[t] = acc;
    }
    /* corrections, by forward substitution */
    for (size_t t = 0; t < c; t++) {
        const float *kt = k + t * qk_stride;
        float b = beta[t * gb_stride], gt = expf(G[t]);
        float *d = D + t * dv;
        for (size_t s = 0; s < t; s++)
            A[t * NPL_DELTANET_CHUNK + s] = b * expf(G[t] - G[s]) * dot(kt, k + s * qk_stride, dk);
        for (size_t j = 0; j < dv; j++) {
            float x = v[t * v_stride + j] - gt * dot(S + j * dk, kt, dk);
            d[j] = b * x;
        }
        for (size_t s = 0; s < t; s++) {
            float a = A[t * NPL_DELTANET_CHUNK + s];
            const float *ds = D + s * dv;
            for (size_t j = 0; j < dv; j++)
                d[j] -= a * ds[j];
        }
    }
    /* outputs from S0 and the corrections */
    for (size_t t = 0; t < c; t++) {
        const float *qt = q + t * qk_stride;
        float *ot = o + t * o_stride, gt = expf(G[t]);
        for (size_t j = 0; j < dv; j++)
            ot[j] = gt * dot(S + j * dk, qt, dk);
        for (size_t s = 0; s <= t; s++) {
            float a = expf(G[t] - G[s]) * dot(qt, k + s * qk_stride, dk);
            const float *ds = D + s * dv;
            for (size_t j = 0; j < dv; j++)
                ot[j] += a * ds[j];
        }
        for (size_t j = 0; j < dv; j++)
            ot[j] *= scale;
    }
    /* the state after the chunk */
    float gc = expf(G[c - 1]);
    for (size_t t = 0; t < c; t++)
        A[t] = expf(G[c - 1] - G[t]);
    for (size_t j = 0; j < dv; j++) {
        float *row = S + j * dk;
        for (size_t i = 0; i < dk; i++)
            row[i] *= gc;
        for (size_t t = 0; t < c; t++) {
            float w = A[t] * D[t * dv + j];
            const float *kt = k + t * qk_stride;
            for (size_t i = 0; i < dk; i++)
                row[i] += w * kt[i];
        }
    }
}

void npl_deltanet_chunked(float *S, const float *q, const float *k, size_t qk_stride, const float *v,
                          size_t v_stride, const float *g, const float *beta, size_t gb_stride, size_t n, float scale,
                          size_t dk, size_t dv, float *o, size_t o_stride, float *scratch)
{
    for (size_t t0 = 0; t0 < n; t0 += NPL_DELTANET_CHUNK) {
        size_t c = n - t0 < NPL_DELTANET_CHUNK ? n - t0 : NPL_DELTANET_CHUNK;
        chunk(S, q + t0 * qk_stride, k + t0 * qk_stride, qk_stride, v + t0 * v_stride, v_stride, g + t0 * gb_stride,
              beta + t0 * gb_stride, gb_stride, c, scale, dk, dv, o + t0 * o_stride, o_stride, scratch);
    }
}
