/* The SIMD level of this CPU, and the float row helpers: the portable
 * reference of each, and its entry point through the dispatch table
 * (kernel_table.h; the SIMD versions are vec_rows_simd.c). */
#include "vec_ops.h"

#include <string.h>

#include "cpu_features.h"
#include "ggml_types.h"
#include "kernel_table.h"

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

void npl_scale_row_ref(float a, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] *= a;
}

void npl_f16_to_f32_row_ref(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = npl_fp16_to_fp32(src[i]);
}

void npl_f32_to_f16_row_ref(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = npl_fp32_to_fp16(src[i]);
}

void npl_scale_f32(npl_simd_level lv, float a, float *y, size_t n)
{
    npl_kernels(lv)->scale_row(a, y, n);
}

void npl_f16_to_f32_row(npl_simd_level lv, const uint16_t *src, float *dst, size_t n)
{
    npl_kernels(lv)->f16_to_f32_row(src, dst, n);
}

void npl_f32_to_f16_row(npl_simd_level lv, const float *src, uint16_t *dst, size_t n)
{
    npl_kernels(lv)->f32_to_f16_row(src, dst, n);
}

void npl_bf16_to_f32_row(const uint16_t *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &bits, sizeof bits);
    }
}
