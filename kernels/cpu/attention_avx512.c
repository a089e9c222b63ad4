/* AVX-512 npl_attention: the arithmetic of attention_internal.h, 16 lanes
 * per register, so its results equal the portable version's bits. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "lane_sum.h"
#include "attention.h"
#include "attention_internal.h"
#include "ggml_types.h"

#define AI static inline __attribute__((always_inline))

/* Query heads x 16-float parts of a head whose accumulators are kept in
 * registers at once. */
#define HEADS_AT_ONCE 4
#define DIM_REGS 4

AI __m512 load_halves(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}

/* The 16 lane sums of a[0..15], each in the order of hsum16, in one
 * register: the pairs (l, l+8), (l, l+4), (l, l+2), (l, l+1) are added
 * for all sixteen at once. Lane 4k + m ends up holding a[k + 4m]. */
AI __m512 reduce16(__m512 a[16])
{
    __m512 b[8], c[4], d[2];
    for (int p = 0; p < 8; p++)
        b[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0xee));
    for (int p = 0; p < 4; p++)
        c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * p], b[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * p], b[2 * p + 1], 0xdd));
    for (int p = 0; p < 2; p++)
        d[p] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * p], c[2 * p + 1], 0x44),
                             _mm512_shuffle_ps(c[2 * p], c[2 * p + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xdd));
}

/* scores[j] = dot16(q, keys[j]) * scale for the nj keys of a block,
 * sixteen at a time. */
AI void block_scores(const float *q, const float *keys, size_t nj, size_t hd, float scale, float *scores)
{
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    size_t hd16 = hd & ~(size_t)15;
    for (size_t j0 = 0; j0 < nj; j0 += 16) {
        size_t n = nj - j0 < 16 ? nj - j0 : 16;
        __m512 a[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
            a[j] = _mm512_setzero_ps();
        for (size_t c = 0; c < hd16; c += 16) {
            __m512 qc = _mm512_loadu_ps(q + c);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                if ((size_t)j < n) /* rows past the block are not read */
                    a[j] = _mm512_fmadd_ps(qc, _mm512_loadu_ps(keys + (j0 + (size_t)j) * hd + c), a[j]);
        }
        __m512 s = _mm512_permutexvar_ps(order, reduce16(a));
        __mmask16 live = n == 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
        if (hd16 == hd) {
            _mm512_mask_storeu_ps(scores + j0, live, _mm512_mul_ps(s, _mm512_set1_ps(scale)));
        } else {
            _mm512_mask_storeu_ps(scores + j0, live, s);
            for (size_t j = 0; j < n; j++) {
                float t = scores[j0 + j];
                for (size_t c = hd16; c < hd; c++)
                    t = fmaf(q[c], keys[(j0 + j) * hd + c], t);
                scores[j0 + j] = t * scale;
            }
        }
    }
}

/* The block's rows as floats, exactly: halves widened, Q8_0 values q * d. */
static void block_to_f32(npl_kv_format fmt, const void *rows, size_t stride, size_t j0, size_t nj, size_t hd,
                         float *dst)
{
    size_t hd16 = hd & ~(size_t)15;
    for (size_t j = 0; j < nj; j++) {
        const uint8_t *row = (const uint8_t *)rows + (j0 + j) * stride;
        float *o = dst + j * hd;
        if (fmt == NPL_KV_Q8_0) {
            for (size_t b = 0; b < hd / 32; b++) {
                const uint8_t *blk = row + 34 * b;
                uint16_t dh;
                memcpy(&dh, blk, sizeof dh);
                __m512 d = _mm512_set1_ps(_cvtsh_ss(dh));
                __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
                __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
                __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
                _mm512_storeu_ps(o + 32 * b, _mm512_mul_ps(lo, d));
                _mm512_storeu_ps(o + 32 * b + 16, _mm512_mul_ps(hi, d));
            }
        } else {
            const uint16_t *h = (const uint16_t *)(const void *)row;
            size_t c = 0;
            for (; c < hd16; c += 16)
                _mm512_storeu_ps(o + c, load_halves(h + c));
            for (; c < hd; c++)
                o[c] = npl_fp16_to_fp32(h[c]);
        }
    }
}

void npl_attention_avx512(npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q, const void *k,
                          const void *v, size_t kv_stride_bytes, size_t n_kv, size_t head_dim, float scale, float *out,
                          size_t out_stride, float *scratch)
{
    npl_attn_scratch sc = npl_attn_scratch_split(scratch, n_q, head_dim);
    float *scores = sc.scores, *run_max = sc.run_max, *run_sum = sc.run_sum, *acc = sc.acc;
    size_t hd16 = head_dim & ~(size_t)15;

    for (size_t h = 0; h < n_q; h++) {
        run_max[h] = -INFINITY;
        run_sum[h] = 0.0f;
    }
    memset(acc, 0, n_q * head_dim * sizeof *acc);

    for (size_t j0 = 0; j0 < n_kv; j0 += NPL_ATTN_BLOCK) {
        size_t nj = n_kv - j0 < NPL_ATTN_BLOCK ? n_kv - j0 : NPL_ATTN_BLOCK;
        block_to_f32(fmt, k, kv_stride_bytes, j0, nj, head_dim, sc.keys);
        block_to_f32(fmt, v, kv_stride_bytes, j0, nj, head_dim, sc.vals);
        for (size_t h = 0; h < n_q; h++)
            block_scores(q + h * q_stride, sc.keys, nj, head_dim, scale, scores + h * NPL_ATTN_BLOCK);

        for (size_t h = 0; h < n_q; h++) {
            float *s = scores + h * NPL_ATTN_BLOCK;
            __m512 mv = _mm512_set1_ps(run_max[h]);
            for (size_t j = 0; j < nj; j += 16) {
                __mmask16 live = nj - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nj - j)) - 1u);
                mv = _mm512_mask_max_ps(mv, live, _mm512_maskz_loadu_ps(live, s + j), mv);
            }
            float m = _mm512_reduce_max_ps(mv);
            if (m > run_max[h]) {
                float c = npl_attn_exp(run_max[h] - m);
                run_sum[h] *= c;
                __m512 cv = _mm512_set1_ps(c);
                float *a = acc + h * head_dim;
                size_t d = 0;
                for (; d < hd16; d += 16)
                    _mm512_storeu_ps(a + d, _mm512_mul_ps(_mm512_loadu_ps(a + d), cv));
                for (; d < head_dim; d++)
                    a[d] *= c;
                run_max[h] = m;
            }
            __m512 lanes = _mm512_setzero_ps();
            __m512 msub = _mm512_set1_ps(m);
            for (size_t j = 0; j < nj; j += 16) {
                __mmask16 live = nj - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nj - j)) - 1u);
                __m512 p = npl_exp_neg_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, s + j), msub));
                _mm512_mask_storeu_ps(s + j, live, p);
                lanes = _mm512_mask_add_ps(lanes, live, lanes, p);
            }
            run_sum[h] += npl_lane_sum16_avx512(lanes);
        }

        /* acc += p_j * v_j: up to HEADS_AT_ONCE heads x 64 dimensions of
         * accumulators in registers, 16 independent chains */
        for (size_t h0 = 0; h0 < n_q; h0 += HEADS_AT_ONCE) {
            size_t nh = n_q - h0 < HEADS_AT_ONCE ? n_q - h0 : HEADS_AT_ONCE;
            for (size_t d0 = 0; d0 < hd16; d0 += 16 * DIM_REGS) {
                size_t nc = (hd16 - d0) / 16 < DIM_REGS ? (hd16 - d0) / 16 : DIM_REGS;
                __m512 a[HEADS_AT_ONCE][DIM_REGS];
                for (size_t h = 0; h < nh; h++)
                    for (size_t c = 0; c < nc; c++)
                        a[h][c] = _mm512_loadu_ps(acc + (h0 + h) * head_dim + d0 + 16 * c);
                for (size_t j = 0; j < nj; j++) {
                    const float *vr = sc.vals + j * head_dim + d0;
                    __m512 vv[DIM_REGS];
                    for (size_t c = 0; c < nc; c++)
                        vv[c] = _mm512_loadu_ps(vr + 16 * c);
                    for (size_t h = 0; h < nh; h++) {
                        __m512 p = _mm512_set1_ps(scores[(h0 + h) * NPL_ATTN_BLOCK + j]);
                        for (size_t c = 0; c < nc; c++)
                            a[h][c] = _mm512_fmadd_ps(p, vv[c], a[h][c]);
                    }
                }
                for (size_t h = 0; h < nh; h++)
                    for (size_t c = 0; c < nc; c++)
                        _mm512_storeu_ps(acc + (h0 + h) * head_dim + d0 + 16 * c, a[h][c]);
            }
        }
        for (size_t d = hd16; d < head_dim; d++)
            for (size_t j = 0; j < nj; j++) {
                float vd = sc.vals[j * head_dim + d];
                for (size_t h = 0; h < n_q; h++)
                    acc[h * head_dim + d] = fmaf(scores[h * NPL_ATTN_BLOCK + j], vd, acc[h * head_dim + d]);
            }
    }

    for (size_t h = 0; h < n_q; h++) {
        float inv = run_sum[h] > 0.0f ? 1.0f / run_sum[h] : 0.0f;
        float *o = out + h * out_stride;
        const float *a = acc + h * head_dim;
        __m512 iv = _mm512_set1_ps(inv);
        size_t d = 0;
        for (; d < hd16; d += 16)
            _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(a + d), iv));
        for (; d < head_dim; d++)
            o[d] = a[d] * inv;
    }
}
#endif
