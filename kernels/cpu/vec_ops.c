#include "vec_ops.h"

#include <string.h>

#include "cpu_features.h"
#include "ggml_types.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define NPL_HAVE_X86 1
#define AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#endif

npl_simd_level npl_simd_detect(void)
{
    npl_cpu_features f;
    npl_cpu_features_detect(&f);
    if (!(f.avx2 && f.fma && f.f16c))
        return NPL_SIMD_NONE;
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni)
        return NPL_SIMD_AVX512;
    return NPL_SIMD_AVX2;
}

/* ---- portable versions: 8 independent partial sums, like one AVX
 * register, so the compiler may vectorise without reassociating. -------- */

static float dot_f32_c(const float *a, const float *b, size_t n)
{
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void axpy_f32_c(float a, const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void scale_f32_c(float a, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] *= a;
}

#ifdef NPL_HAVE_X86
AVX2_TARGET static float hsum256(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    __m128 s = _mm_add_ps(lo, hi);
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2_TARGET static float dot_f32_avx2(const float *a, const float *b, size_t n)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    float s = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

AVX2_TARGET static void axpy_f32_avx2(float a, const float *x, float *y, size_t n)
{
    __m256 va = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * x[i];
}

AVX2_TARGET static void scale_f32_avx2(float a, float *y, size_t n)
{
    __m256 va = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] *= a;
}

AVX2_TARGET static void f16_to_f32_avx2(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++)
        dst[i] = npl_fp16_to_fp32(src[i]);
}

AVX2_TARGET static void f32_to_f16_avx2(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        dst[i] = npl_fp32_to_fp16(src[i]);
}
#endif

float npl_dot_f32(npl_simd_level lv, const float *a, const float *b, size_t n)
{
#ifdef NPL_HAVE_X86
    if (lv >= NPL_SIMD_AVX2)
        return dot_f32_avx2(a, b, n);
#endif
    (void)lv;
    return dot_f32_c(a, b, n);
}

void npl_axpy_f32(npl_simd_level lv, float a, const float *x, float *y, size_t n)
{
#ifdef NPL_HAVE_X86
    if (lv >= NPL_SIMD_AVX2) {
        axpy_f32_avx2(a, x, y, n);
        return;
    }
#endif
    (void)lv;
    axpy_f32_c(a, x, y, n);
}

void npl_scale_f32(npl_simd_level lv, float a, float *y, size_t n)
{
#ifdef NPL_HAVE_X86
    if (lv >= NPL_SIMD_AVX2) {
        scale_f32_avx2(a, y, n);
        return;
    }
#endif
    (void)lv;
    scale_f32_c(a, y, n);
}

void npl_f16_to_f32_row(npl_simd_level lv, const uint16_t *src, float *dst, size_t n)
{
#ifdef NPL_HAVE_X86
    if (lv >= NPL_SIMD_AVX2) {
        f16_to_f32_avx2(src, dst, n);
        return;
    }
#endif
    (void)lv;
    for (size_t i = 0; i < n; i++)
        dst[i] = npl_fp16_to_fp32(src[i]);
}

void npl_f32_to_f16_row(npl_simd_level lv, const float *src, uint16_t *dst, size_t n)
{
#ifdef NPL_HAVE_X86
    if (lv >= NPL_SIMD_AVX2) {
        f32_to_f16_avx2(src, dst, n);
        return;
    }
#endif
    (void)lv;
    for (size_t i = 0; i < n; i++)
        dst[i] = npl_fp32_to_fp16(src[i]);
}

void npl_bf16_to_f32_row(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &bits, sizeof bits);
    }
}
