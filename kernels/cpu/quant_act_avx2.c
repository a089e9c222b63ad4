/* AVX2 activation quantization; same bytes as quant_act.c's reference. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>

static inline __m256 abs8(__m256 x)
{
    return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
}

static inline float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline int hsum8i(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline __m256i quant8(__m256 x, __m256 id)
{
    __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(x, id));
    q = _mm256_max_epi32(q, _mm256_set1_epi32(-127));
    return _mm256_min_epi32(q, _mm256_set1_epi32(127));
}

/* 16 int32 in [-127, 127] -> 16 int8 in order. */
static inline __m128i narrow16(__m256i a, __m256i b)
{
    __m256i w = _mm256_packs_epi32(a, b);               /* a0-3 b0-3 | a4-7 b4-7 */
    w = _mm256_permute4x64_epi64(w, 0xd8);              /* a0-7 | b0-7 */
    __m128i lo = _mm256_castsi256_si128(w), hi = _mm256_extracti128_si256(w, 1);
    return _mm_packs_epi16(lo, hi);
}

void npl_quantize_act_q8_avx2(const float *x, int64_t n, npl_act_q8 *out)
{
    for (int64_t b = 0; b < n / NPL_ACT_QK; b++) {
        const float *xb = x + b * NPL_ACT_QK;
        __m256 v[4];
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            m = _mm256_max_ps(abs8(v[i]), m); /* a NaN leaves m alone */
        }
        float amax = hmax8(m);
        float d = amax / 127.0f;
        __m256 id = _mm256_set1_ps(npl_act_inverse_scale(d));
        __m256i q[4];
        for (int i = 0; i < 4; i++)
            q[i] = quant8(v[i], id);
        _mm_storeu_si128((__m128i *)out[b].q, narrow16(q[0], q[1]));
        _mm_storeu_si128((__m128i *)(out[b].q + 16), narrow16(q[2], q[3]));
        int sum = hsum8i(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
        float dh = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        out[b].d = dh;
        out[b].sum = sum;
        out[b].s = dh * (float)sum;
        out[b].nsum8 = -8 * sum;
    }
}

void npl_quantize_act_q8k_avx2(const float *x, int64_t n, npl_act_q8k *out)
{
    for (int64_t b = 0; b < n / NPL_ACT_QKK; b++) {
        const float *xb = x + b * NPL_ACT_QKK;
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < NPL_ACT_QKK; j += 8)
            m = _mm256_max_ps(abs8(_mm256_loadu_ps(xb + j)), m);
        float amax = hmax8(m);
        float d = amax / 127.0f;
        __m256 id = _mm256_set1_ps(npl_act_inverse_scale(d));
        npl_act_q8k *o = &out[b];
        for (int g = 0; g < NPL_ACT_QKK / 16; g++) {
            __m256i q0 = quant8(_mm256_loadu_ps(xb + 16 * g), id);
            __m256i q1 = quant8(_mm256_loadu_ps(xb + 16 * g + 8), id);
            _mm_storeu_si128((__m128i *)(o->q + 16 * g), narrow16(q0, q1));
            o->bsum16[g] = (int16_t)hsum8i(_mm256_add_epi32(q0, q1));
        }
        for (int g = 0; g < NPL_ACT_QKK / 32; g++)
            o->bsum32[g] = (int16_t)(o->bsum16[2 * g] + o->bsum16[2 * g + 1]);
        o->d = d;
        o->pad[0] = o->pad[1] = o->pad[2] = 0;
    }
}
#endif
