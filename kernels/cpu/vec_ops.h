/* Float vector primitives used by the matrix and attention kernels, each
 * with a portable C version and an AVX2/FMA/F16C one. The level is an
 * explicit argument (no global state) so tests can run both. Each function
 * has a fixed summation order for a given level and length. */
#ifndef NPL_VEC_OPS_H
#define NPL_VEC_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ordered: a level implies every level below it. */
typedef enum npl_simd_level {
    NPL_SIMD_NONE = 0,   /* portable C */
    NPL_SIMD_AVX2 = 1,   /* x86-64 with AVX2, FMA and F16C */
    NPL_SIMD_AVX512 = 2, /* + AVX-512 F, BW, VL and VNNI */
} npl_simd_level;

/* The best level this CPU runs (from cpu_features.h). */
npl_simd_level npl_simd_detect(void);

float npl_dot_f32(npl_simd_level lv, const float *a, const float *b, size_t n);
/* y += a * x */
void npl_axpy_f32(npl_simd_level lv, float a, const float *x, float *y, size_t n);
/* y *= a */
void npl_scale_f32(npl_simd_level lv, float a, float *y, size_t n);
void npl_f16_to_f32_row(npl_simd_level lv, const uint16_t *src, float *dst, size_t n);
void npl_f32_to_f16_row(npl_simd_level lv, const float *src, uint16_t *dst, size_t n);
void npl_bf16_to_f32_row(const uint16_t *src, float *dst, size_t n);

#ifdef __cplusplus
}
#endif

#endif
