/* exp(x) for x <= 0, written once and used the same way by every SIMD
 * level (internal to kernels/cpu): softmax weights and SiLU need nothing
 * else, and a fixed sequence of IEEE operations gives the same bits
 * everywhere, unlike libm's expf.
 *
 * Cody-Waite reduction by ln 2 and Cephes' degree-7 polynomial, every step
 * spelled as fmaf / mul / add; below -87 the result is 0 (also for -inf
 * and NaN). Relative error below 1e-7 over [-87, 0]. */
#ifndef NPL_FAST_EXP_H
#define NPL_FAST_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define NPL_EXP_LOG2E 1.44269504088896341f
#define NPL_EXP_LN2_HI 0.693359375f
#define NPL_EXP_LN2_LO -2.12194440e-4f
#define NPL_EXP_P0 1.9875691500e-4f
#define NPL_EXP_P1 1.3981999507e-3f
#define NPL_EXP_P2 8.3334519073e-3f
#define NPL_EXP_P3 4.1665795894e-2f
#define NPL_EXP_P4 1.6666665459e-1f
#define NPL_EXP_P5 5.0000001201e-1f
#define NPL_EXP_MIN -87.0f

static inline float npl_exp_neg(float x)
{
    if (!(x >= NPL_EXP_MIN)) /* also -inf and NaN */
        return 0.0f;
    float n = rintf(x * NPL_EXP_LOG2E);
    float r = fmaf(n, -NPL_EXP_LN2_HI, x);
    r = fmaf(n, -NPL_EXP_LN2_LO, r);
    float p = fmaf(NPL_EXP_P0, r, NPL_EXP_P1);
    p = fmaf(p, r, NPL_EXP_P2);
    p = fmaf(p, r, NPL_EXP_P3);
    p = fmaf(p, r, NPL_EXP_P4);
    p = fmaf(p, r, NPL_EXP_P5);
    float y = fmaf(p, r * r, r) + 1.0f;
    /* 2^n for n in [-126, 1]: n + 127 in the exponent field */
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static inline __m256 npl_exp_neg_avx2(__m256 x)
{
    __m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(NPL_EXP_MIN), _CMP_GE_OQ);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(NPL_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-NPL_EXP_LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-NPL_EXP_LN2_LO), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(NPL_EXP_P0), r, _mm256_set1_ps(NPL_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(NPL_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(NPL_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(NPL_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(NPL_EXP_P5));
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(ok, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

__attribute__((target("avx512f"))) static inline __m512 npl_exp_neg_avx512(__m512 x)
{
    __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(NPL_EXP_MIN), _CMP_GE_OQ);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(NPL_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-NPL_EXP_LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-NPL_EXP_LN2_LO), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(NPL_EXP_P0), r, _mm512_set1_ps(NPL_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(NPL_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(NPL_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(NPL_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(NPL_EXP_P5));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mul_ps(ok, y, _mm512_castsi512_ps(e));
}
#endif

#endif
