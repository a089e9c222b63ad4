#include "act_fn.h"

#include <math.h>

#include "fast_exp.h"

/* sigmoid(g) = 1 / (1 + e) for g >= 0 and e / (1 + e) below, e = exp(-|g|) */
static float swiglu_one(float g, float u)
{
    float e = npl_exp_neg(-fabsf(g));
    float sig = (g >= 0.0f ? 1.0f : e) / (1.0f + e);
    return (g * sig) * u;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void swiglu_avx512(float *gate, const float *up, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i);
        __m512 e = npl_exp_neg_avx512(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(g), sign))); /* -|g| */
        __mmask16 pos = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_GE_OQ);
        __m512 sig = _mm512_div_ps(_mm512_mask_blend_ps(pos, e, one), _mm512_add_ps(one, e));
        _mm512_storeu_ps(gate + i, _mm512_mul_ps(_mm512_mul_ps(g, sig), _mm512_loadu_ps(up + i)));
    }
    for (; i < n; i++)
        gate[i] = swiglu_one(gate[i], up[i]);
}

__attribute__((target("avx2,fma"))) static void swiglu_avx2(float *gate, const float *up, size_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 e = npl_exp_neg_avx2(_mm256_or_ps(g, sign));
        __m256 pos = _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_GE_OQ);
        __m256 sig = _mm256_div_ps(_mm256_blendv_ps(e, one, pos), _mm256_add_ps(one, e));
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_mul_ps(g, sig), _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++)
        gate[i] = swiglu_one(gate[i], up[i]);
}
#endif

void npl_swiglu_f32(npl_simd_level lv, float *gate, const float *up, size_t n)
{
#if defined(__x86_64__)
    if (lv >= NPL_SIMD_AVX512) {
        swiglu_avx512(gate, up, n);
        return;
    }
    if (lv >= NPL_SIMD_AVX2) {
        swiglu_avx2(gate, up, n);
        return;
    }
#endif
    (void)lv;
    for (size_t i = 0; i < n; i++)
        gate[i] = swiglu_one(gate[i], up[i]);
}
