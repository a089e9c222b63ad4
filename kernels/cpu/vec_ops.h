/* The SIMD levels, and float row helpers: each has a portable reference
 * (the _ref functions, the table's portable row) and one SIMD source for
 * every level (vec_rows_simd.c), reached through the dispatch table
 * (kernel_table.h). The level is an explicit argument (no global state)
 * so tests can run every one; all give the reference's bits. */
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

/* y *= a */
void npl_scale_f32(npl_simd_level lv, float a, float *y, size_t n);
/* halves widened (exact) */
void npl_f16_to_f32_row(npl_simd_level lv, const uint16_t *src, float *dst, size_t n);
/* rounded to halves, nearest even */
void npl_f32_to_f16_row(npl_simd_level lv, const float *src, uint16_t *dst, size_t n);
void npl_bf16_to_f32_row(const uint16_t *src, float *dst, size_t n);

/* The portable references. */
void npl_scale_row_ref(float a, float *y, size_t n);
void npl_f16_to_f32_row_ref(const uint16_t *src, float *dst, size_t n);
void npl_f32_to_f16_row_ref(const float *src, uint16_t *dst, size_t n);

#ifdef __cplusplus
}
#endif

#endif
