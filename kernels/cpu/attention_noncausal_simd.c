/* npl_attention_nc (attention_noncausal.h) written once over simd_vec.h:
 * the header's arithmetic on 16 lanes, so every level gives the portable
 * version's bits (the scores' fmaf chains, the lane order of the sums and
 * the order of the weighted sum over keys are the reference's; a tile
 * shape only decides which of them share a load).
 *
 * Each chunk of keys and values is loaded once for all the queries of
 * the call (it stays in L1 while they pass over it; their running
 * maximum, sum and accumulators live in the scratch), in tiles of 4
 * queries: the scores of a chunk are 4 queries x KV_AT_ONCE vectors of 16
 * keys at a time, accumulated over the head's dimensions (each key load
 * shared by the 4 queries); the weighted sum of values runs over blocks
 * of DV vectors of dimensions, each value load shared by the 4 queries.
 * With 32 registers (AVX-512) a chunk's 4 key vectors and 5 dimension
 * vectors (a 72- or 80-wide head in one block) are at once; with 16 YMM
 * registers (AVX2, two per vector) one of each. */
#include <math.h>
#include <string.h>

#include "attention_noncausal.h"
#include "kernels_isa.h"

#define QT 4                        /* queries per tile */
#define KV (NPL_ATTN_NC_CHUNK / 16) /* key vectors per chunk */
#define KV_AT_ONCE (NPL_V_TILE / QT)
/* 1 or 5: the scratch holds each query's accumulators rounded up to
 * 80 dimensions (npl_attention_nc_scratch_floats) */
#ifdef NPL_V_AVX512
#define DV 5
#else
#define DV 1
#endif

_Static_assert(KV == 4, "the sums over a chunk's lanes are the header's (p_l + p_16+l) + (p_32+l + p_48+l)");
_Static_assert(KV % KV_AT_ONCE == 0, "whole passes over a chunk's keys");

/* The raw scores (dot products, unscaled) of the tile's queries qs
 * against the chunk whose transposed keys start at g, into
 * pbuf[t * NPL_ATTN_NC_CHUNK + key]. */
NPL_V_AI void chunk_scores(const float *const qs[QT], const float *g, size_t hd, float *pbuf)
{
    for (int k0 = 0; k0 < KV; k0 += KV_AT_ONCE) {
        const float *gk = g + (size_t)k0 * hd * 16;
        vf s[QT][KV_AT_ONCE];
#pragma GCC unroll 4
        for (int t = 0; t < QT; t++)
#pragma GCC unroll 4
            for (int k = 0; k < KV_AT_ONCE; k++)
                s[t][k] = vf_zero();
        for (size_t d = 0; d < hd; d++) {
            vf kk[KV_AT_ONCE];
#pragma GCC unroll 4
            for (int k = 0; k < KV_AT_ONCE; k++)
                kk[k] = vf_loadu(gk + (size_t)k * hd * 16 + d * 16);
#pragma GCC unroll 4
            for (int t = 0; t < QT; t++) {
                vf qb = vf_set1(qs[t][d]);
#pragma GCC unroll 4
                for (int k = 0; k < KV_AT_ONCE; k++)
                    s[t][k] = vf_fmadd(qb, kk[k], s[t][k]);
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < QT; t++)
#pragma GCC unroll 4
            for (int k = 0; k < KV_AT_ONCE; k++)
                vf_storeu(pbuf + (size_t)t * NPL_ATTN_NC_CHUNK + (size_t)(k0 + k) * 16, s[t][k]);
    }
}

/* One query's online-softmax step over a chunk (keys j0 ...): its scores
 * in row scaled (keys past n_kv: -inf) and replaced by their weights, the
 * running maximum *m and sum *l updated; returns the factor c by which
 * the accumulators are rescaled. */
NPL_V_AI float chunk_softmax(float *row, size_t j0, size_t n_kv, float scale, float *m, float *l)
{
    const vf ninf = vf_set1(-INFINITY);
    vf s[KV], p[KV], mx = ninf;
#pragma GCC unroll 4
    for (int k = 0; k < KV; k++) {
        size_t base = j0 + (size_t)k * 16;
        vmask live = vmask_first(base >= n_kv ? 0 : n_kv - base);
        s[k] = vf_blend_mask(live, vf_mul(vf_loadu(row + (size_t)k * 16), vf_set1(scale)), ninf);
        mx = vf_max(mx, s[k]);
    }
    float cmax = vf_hmax(mx);
    float mn = cmax > *m ? cmax : *m;
    float c = npl_exp_neg(*m - mn);
    vf vm = vf_set1(mn);
#pragma GCC unroll 4
    for (int k = 0; k < KV; k++) {
        p[k] = vf_exp_neg(vf_sub(s[k], vm));
        vf_storeu(row + (size_t)k * 16, p[k]);
    }
    vf lane = vf_add(vf_add(p[0], p[1]), vf_add(p[2], p[3]));
    *l = *l * c + vf_hsum(lane);
    *m = mn;
    return c;
}

/* Lanes of dimension vector c that exist. */
NPL_V_AI vmask dim_mask(size_t c, size_t hd) { return vmask_first(c * 16 >= hd ? 0 : hd - c * 16); }

void NPL_ISA_FN(npl_attention_nc)(const float *q, size_t q_stride, size_t n_q, const float *kt, const float *v,
                                  size_t v_stride, size_t n_kv, size_t head_dim, float scale, float *out,
                                  size_t out_stride, float *scratch)
{
    size_t hd = head_dim;
    size_t n_dv = (hd + 15) / 16;                 /* dimension vectors */
    size_t n_blk = (n_dv + DV - 1) / DV;          /* blocks of DV */
    size_t acc_stride = n_blk * DV * 16;
    size_t n_qp = (n_q + QT - 1) / QT * QT;       /* queries rounded up to whole tiles */
    float *pbuf = scratch;                        /* [QT][CHUNK]: scores, then weights */
    float *run_m = pbuf + QT * NPL_ATTN_NC_CHUNK; /* [n_qp] */
    float *run_l = run_m + n_qp;                  /* [n_qp] */
    float *accs = run_l + n_qp;                   /* [n_qp][acc_stride] */
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
            float *acc = accs + i0 * acc_stride;
            for (size_t t = 0; t < QT; t++)
                qs[t] = q + (i0 + (t < nq ? t : nq - 1)) * q_stride; /* padding queries repeat the last */
            size_t nj = n_kv - j0 < NPL_ATTN_NC_CHUNK ? n_kv - j0 : NPL_ATTN_NC_CHUNK;
            chunk_scores(qs, kt + (j0 / 16) * hd * 16, hd, pbuf);
            for (size_t t = 0; t < QT; t++)
                cs[t] = chunk_softmax(pbuf + t * NPL_ATTN_NC_CHUNK, j0, n_kv, scale, run_m + i0 + t,
                                      run_l + i0 + t);

            for (size_t b = 0; b < n_blk; b++) {
                vmask dm[DV];
                vf a[QT][DV];
#pragma GCC unroll 5
                for (int c = 0; c < DV; c++)
                    dm[c] = dim_mask(b * DV + (size_t)c, hd);
#pragma GCC unroll 4
                for (int t = 0; t < QT; t++) {
                    vf ct = vf_set1(cs[t]);
#pragma GCC unroll 5
                    for (int c = 0; c < DV; c++)
                        a[t][c] = vf_mul(vf_loadu(acc + (size_t)t * acc_stride + (b * DV + (size_t)c) * 16), ct);
                }
                for (size_t j = 0; j < nj; j++) {
                    const float *vr = v + (j0 + j) * v_stride + b * DV * 16;
                    vf vv[DV];
#pragma GCC unroll 5
                    for (int c = 0; c < DV; c++)
                        vv[c] = vf_loadu_mask(vr + (size_t)c * 16, dm[c]);
#pragma GCC unroll 4
                    for (int t = 0; t < QT; t++) {
                        vf pb = vf_set1(pbuf[(size_t)t * NPL_ATTN_NC_CHUNK + j]);
#pragma GCC unroll 5
                        for (int c = 0; c < DV; c++)
                            a[t][c] = vf_fmadd(pb, vv[c], a[t][c]);
                    }
                }
#pragma GCC unroll 4
                for (int t = 0; t < QT; t++)
#pragma GCC unroll 5
                    for (int c = 0; c < DV; c++)
                        vf_storeu(acc + (size_t)t * acc_stride + (b * DV + (size_t)c) * 16, a[t][c]);
            }
        }

    for (size_t i = 0; i < n_q; i++) {
        vf inv = vf_set1(1.0f / run_l[i]);
        for (size_t c = 0; c < n_dv; c++)
            vf_storeu_mask(out + i * out_stride + c * 16, vf_mul(vf_loadu(accs + i * acc_stride + c * 16), inv),
                           dim_mask(c, hd));
    }
}
