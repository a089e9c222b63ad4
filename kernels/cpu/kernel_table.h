/* The dispatch table of the SIMD kernels (internal to kernels/cpu): one
 * table per level, filled once at start-up from cpu_features.h, so the
 * portable entry points make one indirect call instead of `if (level >=
 * ...)` chains. The AVX2 and AVX-512 entries come from the same sources
 * (*_simd.c over simd_vec.h) compiled once per instruction set; the
 * portable entries are the scalar references that define the arithmetic
 * (matmul_ref.h, attention_internal.h, quant_act.c), which every level
 * reproduces bit for bit. */
#ifndef NPL_KERNEL_TABLE_H
#define NPL_KERNEL_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "act_gelu.h"
#include "attention.h"
#include "matmul_packed.h"
#include "matvec.h"
#include "quant_act.h"

typedef struct npl_kernel_table {
    /* activations, n a multiple of 32 (256) */
    void (*quantize_q8)(const float *x, int64_t n, npl_act_q8 *out);
    void (*quantize_q8k)(const float *x, int64_t n, npl_act_q8k *out);
    void (*act_to_bf16)(const float *x, size_t n, uint16_t *out);
    /* Float rows [r0, r1) (F32, F16, BF16 read in place; other types
     * through the reference dequantizer into buf, 4 * n_cols floats). */
    void (*float_matmul)(const npl_matrix *w, int64_t r0, int64_t r1, const float *x, size_t x_stride,
                         size_t n_vec, float *const *y, float *buf);
    /* BF16 rows against BF16 activations (matmul_bf16.h). */
    void (*bf16_matmul)(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                        size_t n_vec, float *const *y);
    /* Packed integer matrix (matmul_packed.h): row groups [g0, g1) against
     * n_vec vectors of npl_act_q8 / npl_act_q8k blocks; NULL at the
     * portable level, which multiplies the file layout. */
    void (*packed_matmul)(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,
                          float *const *y);
    /* npl_attention_kv_sinks */
    void (*attention)(npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q, const void *k, const void *v,
                      size_t kv_stride_bytes, size_t n_kv, size_t head_dim, float scale, const float *sinks,
                      float *out, size_t out_stride, float *scratch);
    /* npl_attention_rows */
    void (*attention_rows)(const npl_attn_rows_job *job, float *scratch);
    /* npl_attention_nc */
    void (*attention_nc)(const float *q, size_t q_stride, size_t n_q, const float *kt, const float *v,
                         size_t v_stride, size_t n_kv, size_t head_dim, float scale, float *out, size_t out_stride,
                         float *scratch);
    /* npl_act_bias_f32 */
    void (*act_bias)(npl_act_kind act, float *x, const float *bias, size_t n);
    /* npl_act_gated_f32 */
    void (*act_gated)(npl_act_kind act, float *gate, const float *up, size_t n);
    /* Rows of floats (vec_ops.h): y *= a; halves widened; rounded to
     * halves (nearest even). Element-wise, so the same bits everywhere. */
    void (*scale_row)(float a, float *y, size_t n);
    void (*f16_to_f32_row)(const uint16_t *src, float *dst, size_t n);
    void (*f32_to_f16_row)(const float *src, uint16_t *dst, size_t n);
    /* npl_deltanet_step (deltanet.h) */
    void (*deltanet_step)(float *S, const float *q, const float *k, const float *v, float decay, float beta,
                          float scale, size_t dk, size_t dv, float *o);
} npl_kernel_table;

/* The table of a level (at most the detected one: a higher request gets
 * the detected level's table). */
const npl_kernel_table *npl_kernels(npl_simd_level lv);

#endif
