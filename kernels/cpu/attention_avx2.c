/* AVX2 npl_attention: the arithmetic of attention_internal.h with its 16
 * lanes as two 8-lane registers, so its results equal the portable
 * version's bits. */
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

#define HEADS_AT_ONCE 4

AI __m256 load_halves(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}


static void block_to_f32(npl_kv_format fmt, const void *rows, size_t stride, size_t j0, size_t nj, size_t hd,
                         float *dst)
{
    size_t hd8 = hd & ~(size_t)7;
    for (size_t j = 0; j < nj; j++) {
        const uint8_t *row = (const uint8_t *)rows + (j0 + j) * stride;
        float *o = dst + j * hd;
        if (fmt == NPL_KV_Q8_0) {
            for (size_t b = 0; b < hd / 32; b++) {
                const uint8_t *blk = row + 34 * b;
                uint16_t dh;
                memcpy(&dh, blk, sizeof dh);
                __m256 d = _mm256_set1_ps(_cvtsh_ss(dh));
                for (int part = 0; part < 4; part++) {
                    __m128i q8 = _mm_loadl_epi64((const __m128i *)(const void *)(blk + 2 + 8 * part));
                    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
                    _mm256_storeu_ps(o + 32 * b + 8 * (size_t)part, _mm256_mul_ps(f, d));
                }
            }
        } else {
            const uint16_t *h = (const uint16_t *)(const void *)row;
            size_t c = 0;
            for (; c < hd8; c += 8)
                _mm256_storeu_ps(o + c, load_halves(h + c));
            for (; c < hd; c++)
                o[c] = npl_fp16_to_fp32(h[c]);
        }
    }
}

void npl_attention_avx2(npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q, const void *k, const void *v,
                        size_t kv_stride_bytes, size_t n_kv, size_t head_dim, float scale, float *out,
                        size_t out_stride, float *scratch)
{
    npl_attn_scratch sc = npl_attn_scratch_split(scratch, n_q, head_dim);
    float *scores = sc.scores, *run_max = sc.run_max, *run_sum = sc.run_sum, *acc = sc.acc;
    size_t hd16 = head_dim & ~(size_t)15;
    size_t hd8 = head_dim & ~(size_t)7;

    for (size_t h = 0; h < n_q; h++) {
        run_max[h] = -INFINITY;
        run_sum[h] = 0.0f;
    }
    memset(acc, 0, n_q * head_dim * sizeof *acc);

    for (size_t j0 = 0; j0 < n_kv; j0 += NPL_ATTN_BLOCK) {
        size_t nj = n_kv - j0 < NPL_ATTN_BLOCK ? n_kv - j0 : NPL_ATTN_BLOCK;
        block_to_f32(fmt, k, kv_stride_bytes, j0, nj, head_dim, sc.keys);
        block_to_f32(fmt, v, kv_stride_bytes, j0, nj, head_dim, sc.vals);

        for (size_t j = 0; j < nj; j++) {
            const float *kr = sc.keys + j * head_dim;
            for (size_t h = 0; h < n_q; h++) {
                const float *qh = q + h * q_stride;
                __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
                for (size_t c = 0; c < hd16; c += 16) {
                    lo = _mm256_fmadd_ps(_mm256_loadu_ps(qh + c), _mm256_loadu_ps(kr + c), lo);
                    hi = _mm256_fmadd_ps(_mm256_loadu_ps(qh + c + 8), _mm256_loadu_ps(kr + c + 8), hi);
                }
                float s = npl_lane_sum16_avx2(lo, hi);
                for (size_t c = hd16; c < head_dim; c++)
                    s = fmaf(qh[c], kr[c], s);
                scores[h * NPL_ATTN_BLOCK + j] = s * scale;
            }
        }

        size_t nj16 = nj & ~(size_t)15;
        for (size_t h = 0; h < n_q; h++) {
            float *s = scores + h * NPL_ATTN_BLOCK;
            float m = run_max[h];
            for (size_t j = 0; j < nj; j++)
                if (s[j] > m)
                    m = s[j];
            if (m > run_max[h]) {
                float c = npl_attn_exp(run_max[h] - m);
                run_sum[h] *= c;
                __m256 cv = _mm256_set1_ps(c);
                float *a = acc + h * head_dim;
                size_t d = 0;
                for (; d < hd8; d += 8)
                    _mm256_storeu_ps(a + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), cv));
                for (; d < head_dim; d++)
                    a[d] *= c;
                run_max[h] = m;
            }
            __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
            __m256 msub = _mm256_set1_ps(m);
            for (size_t j = 0; j < nj16; j += 16) {
                __m256 p0 = npl_exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), msub));
                __m256 p1 = npl_exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j + 8), msub));
                _mm256_storeu_ps(s + j, p0);
                _mm256_storeu_ps(s + j + 8, p1);
                lo = _mm256_add_ps(lo, p0);
                hi = _mm256_add_ps(hi, p1);
            }
            float lane[16];
            _mm256_storeu_ps(lane, lo);
            _mm256_storeu_ps(lane + 8, hi);
            for (size_t j = nj16; j < nj; j++) {
                s[j] = npl_attn_exp(s[j] - m);
                lane[j % 16] += s[j];
            }
            run_sum[h] += npl_lane_sum16(lane);
        }

        for (size_t h0 = 0; h0 < n_q; h0 += HEADS_AT_ONCE) {
            size_t nh = n_q - h0 < HEADS_AT_ONCE ? n_q - h0 : HEADS_AT_ONCE;
            for (size_t d = 0; d < hd8; d += 8) {
                __m256 a[HEADS_AT_ONCE];
                for (size_t h = 0; h < nh; h++)
                    a[h] = _mm256_loadu_ps(acc + (h0 + h) * head_dim + d);
                for (size_t j = 0; j < nj; j++) {
                    __m256 vr = _mm256_loadu_ps(sc.vals + j * head_dim + d);
                    for (size_t h = 0; h < nh; h++)
                        a[h] = _mm256_fmadd_ps(_mm256_set1_ps(scores[(h0 + h) * NPL_ATTN_BLOCK + j]), vr, a[h]);
                }
                for (size_t h = 0; h < nh; h++)
                    _mm256_storeu_ps(acc + (h0 + h) * head_dim + d, a[h]);
            }
        }
        for (size_t d = hd8; d < head_dim; d++)
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
        __m256 iv = _mm256_set1_ps(inv);
        size_t d = 0;
        for (; d < hd8; d += 8)
            _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(a + d), iv));
        for (; d < head_dim; d++)
            o[d] = a[d] * inv;
    }
}
#endif
