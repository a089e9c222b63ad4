/* AVX-512 npl_attention_nc: the arithmetic of attention_noncausal.h.
 * Each chunk of keys and values is loaded once for all the queries of
 * the call (it stays in L1 while they pass over it; their running
 * maximum, sum and accumulators live in the scratch), in tiles of 4
 * queries: the scores of a chunk are 4 queries x 4 registers of 16 keys,
 * accumulated over the head's dimensions (each key load shared by the 4
 * queries); the weighted sum of values runs over blocks of 5 registers
 * of dimensions (a 72-wide head in one block), each value load shared by
 * the 4 queries. */
#if defined(__x86_64__) && defined(NPL_HAVE_X86_KERNELS)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention_noncausal.h"
#include "fast_exp.h"
#include "lane_sum.h"

#define AI static inline __attribute__((always_inline))

#define QT 4                          /* queries per tile */
#define KV (NPL_ATTN_NC_CHUNK / 16)   /* key registers per chunk */
#define DV 5                          /* dimension registers per block of the weighted sum */

/* Dimension lanes of register c (of 16) that exist. */
AI __mmask16 dim_mask(size_t c, size_t hd)
{
    size_t d0 = c * 16;
    if (d0 >= hd)
        return 0;
    return hd - d0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (hd - d0)) - 1u);
}

void npl_attention_nc_avx512(const float *q, size_t q_stride, size_t n_q, const float *kt, const float *v,
                             size_t v_stride, size_t n_kv, size_t head_dim, float scale, float *out,
                             size_t out_stride, float *scratch)
{
    size_t hd = head_dim;
    size_t n_dv = (hd + 15) / 16;                   /* dimension registers */
    size_t n_blk = (n_dv + DV - 1) / DV;            /* blocks of DV */
    size_t acc_stride = n_blk * DV * 16;
    size_t n_qp = (n_q + QT - 1) / QT * QT;         /* queries rounded up to whole tiles */
    float *pbuf = scratch;                          /* [QT][CHUNK] */
    float *run_m = pbuf + QT * NPL_ATTN_NC_CHUNK;   /* [n_qp] */
    float *run_l = run_m + n_qp;                    /* [n_qp] */
    float *accs = run_l + n_qp;                     /* [n_qp][acc_stride] */
    const __m512 vscale = _mm512_set1_ps(scale);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (size_t i = 0; i < n_qp; i++) {
        run_m[i] = -INFINITY;
        run_l[i] = 0.0f;
    }
    memset(accs, 0, n_qp * acc_stride * sizeof *accs);

    for (size_t j0 = 0; j0 < n_kv; j0 += NPL_ATTN_NC_CHUNK)
        for (size_t i0 = 0; i0 < n_q; i0 += QT) {
            size_t nq = n_q - i0 < QT ? n_q - i0 : QT;
            const float *qs[QT];
            float cs[QT];
            float *m = run_m + i0, *l = run_l + i0, *acc = accs + i0 * acc_stride;
            for (size_t t = 0; t < QT; t++)
                qs[t] = q + (i0 + (t < nq ? t : nq - 1)) * q_stride; /* padding queries repeat the last */
            size_t nj = n_kv - j0 < NPL_ATTN_NC_CHUNK ? n_kv - j0 : NPL_ATTN_NC_CHUNK;
            const float *g = kt + (j0 / 16) * hd * 16;
            __m512 s[QT][KV];
#pragma GCC unroll 4
            for (int t = 0; t < QT; t++)
#pragma GCC unroll 4
                for (int k = 0; k < KV; k++)
                    s[t][k] = _mm512_setzero_ps();
            for (size_t d = 0; d < hd; d++) {
                __m512 kk[KV];
#pragma GCC unroll 4
                for (int k = 0; k < KV; k++)
                    kk[k] = _mm512_loadu_ps(g + (size_t)k * hd * 16 + d * 16);
#pragma GCC unroll 4
                for (int t = 0; t < QT; t++) {
                    __m512 qb = _mm512_set1_ps(qs[t][d]);
#pragma GCC unroll 4
                    for (int k = 0; k < KV; k++)
                        s[t][k] = _mm512_fmadd_ps(qb, kk[k], s[t][k]);
                }
            }
            for (int t = 0; t < QT; t++) {
                __m512 mx = ninf;
                for (int k = 0; k < KV; k++) {
                    size_t base = j0 + (size_t)k * 16;
                    __mmask16 live = base >= n_kv          ? (__mmask16)0
                                     : n_kv - base >= 16 ? (__mmask16)0xffff
                                                         : (__mmask16)((1u << (n_kv - base)) - 1u);
                    s[t][k] = _mm512_mask_mul_ps(ninf, live, s[t][k], vscale);
                    mx = _mm512_max_ps(mx, s[t][k]);
                }
                float cmax = _mm512_reduce_max_ps(mx);
                float mn = cmax > m[t] ? cmax : m[t];
                cs[t] = npl_exp_neg(m[t] - mn);
                __m512 vm = _mm512_set1_ps(mn);
                __m512 p[KV];
                for (int k = 0; k < KV; k++) {
                    p[k] = npl_exp_neg_avx512(_mm512_sub_ps(s[t][k], vm));
                    _mm512_storeu_ps(pbuf + (size_t)t * NPL_ATTN_NC_CHUNK + (size_t)k * 16, p[k]);
                }
                __m512 lane = _mm512_add_ps(_mm512_add_ps(p[0], p[1]), _mm512_add_ps(p[2], p[3]));
                l[t] = l[t] * cs[t] + npl_lane_sum16_avx512(lane);
                m[t] = mn;
            }

            for (size_t b = 0; b < n_blk; b++) {
                __mmask16 dm[DV];
                __m512 a[QT][DV];
#pragma GCC unroll 5
                for (int c = 0; c < DV; c++)
                    dm[c] = dim_mask(b * DV + (size_t)c, hd);
#pragma GCC unroll 4
                for (int t = 0; t < QT; t++) {
                    __m512 ct = _mm512_set1_ps(cs[t]);
#pragma GCC unroll 5
                    for (int c = 0; c < DV; c++)
                        a[t][c] = _mm512_mul_ps(_mm512_loadu_ps(acc + (size_t)t * acc_stride + (b * DV + (size_t)c) * 16), ct);
                }
                for (size_t j = 0; j < nj; j++) {
                    const float *vr = v + (j0 + j) * v_stride + b * DV * 16;
                    __m512 vv[DV];
#pragma GCC unroll 5
                    for (int c = 0; c < DV; c++)
                        vv[c] = _mm512_maskz_loadu_ps(dm[c], vr + (size_t)c * 16);
#pragma GCC unroll 4
                    for (int t = 0; t < QT; t++) {
                        __m512 pb = _mm512_set1_ps(pbuf[(size_t)t * NPL_ATTN_NC_CHUNK + j]);
#pragma GCC unroll 5
                        for (int c = 0; c < DV; c++)
                            a[t][c] = _mm512_fmadd_ps(pb, vv[c], a[t][c]);
                    }
                }
#pragma GCC unroll 4
                for (int t = 0; t < QT; t++)
#pragma GCC unroll 5
                    for (int c = 0; c < DV; c++)
                        _mm512_storeu_ps(acc + (size_t)t * acc_stride + (b * DV + (size_t)c) * 16, a[t][c]);
            }
        }

    for (size_t i = 0; i < n_q; i++) {
        __m512 inv = _mm512_set1_ps(1.0f / run_l[i]);
        for (size_t c = 0; c < n_dv; c++)
            _mm512_mask_storeu_ps(out + i * out_stride + c * 16, dim_mask(c, hd),
                                  _mm512_mul_ps(_mm512_loadu_ps(accs + i * acc_stride + c * 16), inv));
    }
}
#endif
