/* The one horizontal sum of 16 float lanes every kernel uses (internal to
 * kernels/cpu): (l + l+8), then (+4), (+2), (+1). Written once in scalar C
 * and once per instruction set with the same pairing, so a SIMD kernel's
 * reduction gives the scalar reference's bits. The SIMD versions exist
 * only in files compiled for their instruction set. */
#ifndef NPL_LANE_SUM_H
#define NPL_LANE_SUM_H

static inline float npl_lane_sum16(const float lane[16])
{
    float t8[8], t4[4];
    for (int i = 0; i < 8; i++)
        t8[i] = lane[i] + lane[i + 8];
    for (int i = 0; i < 4; i++)
        t4[i] = t8[i] + t8[i + 4];
    return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>

/* Lanes 0-7 in lo, 8-15 in hi. */
static inline __attribute__((always_inline)) float npl_lane_sum16_avx2(__m256 lo, __m256 hi)
{
    __m256 t8 = _mm256_add_ps(lo, hi);
    __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
    __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}
#endif

#ifdef __AVX512F__
static inline __attribute__((always_inline)) float npl_lane_sum16_avx512(__m512 v)
{
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return npl_lane_sum16_avx2(lo, hi);
}
#endif

#endif
