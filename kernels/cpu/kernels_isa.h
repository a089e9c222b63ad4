/* The entry points each *_simd.c source defines once per instruction set,
 * with the ISA's suffix (simd_vec.h's NPL_ISA_FN): included only by files
 * compiled per ISA. Their signatures are the table's (kernel_table.h). */
#ifndef NPL_KERNELS_ISA_H
#define NPL_KERNELS_ISA_H

#include "kernel_table.h"
#include "simd_vec.h"

void NPL_ISA_FN(npl_quantize_act_q8)(const float *x, int64_t n, npl_act_q8 *out);
void NPL_ISA_FN(npl_quantize_act_q8k)(const float *x, int64_t n, npl_act_q8k *out);
void NPL_ISA_FN(npl_act_to_bf16)(const float *x, size_t n, uint16_t *out);
void NPL_ISA_FN(npl_float_matmul)(const npl_matrix *w, int64_t r0, int64_t r1, const float *x, size_t x_stride,
                                  size_t n_vec, float *const *y, float *buf);
void NPL_ISA_FN(npl_bf16_matmul)(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                                 size_t n_vec, float *const *y);
void NPL_ISA_FN(npl_packed_matmul)(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,
                                   float *const *y);
void NPL_ISA_FN(npl_attention)(npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q, const void *k,
                               const void *v, size_t kv_stride_bytes, size_t n_kv, size_t head_dim, float scale,
                               const float *sinks, float *out, size_t out_stride, float *scratch);
void NPL_ISA_FN(npl_attention_rows)(const npl_attn_rows_job *job, float *scratch);

void NPL_ISA_FN(npl_attention_nc)(const float *q, size_t q_stride, size_t n_q, const float *kt, const float *v,
                                  size_t v_stride, size_t n_kv, size_t head_dim, float scale, float *out,
                                  size_t out_stride, float *scratch);
void NPL_ISA_FN(npl_act_bias)(npl_act_kind act, float *x, const float *bias, size_t n);
void NPL_ISA_FN(npl_act_gated)(npl_act_kind act, float *gate, const float *up, size_t n);
void NPL_ISA_FN(npl_scale_row)(float a, float *y, size_t n);
void NPL_ISA_FN(npl_f16_to_f32_row)(const uint16_t *src, float *dst, size_t n);
void NPL_ISA_FN(npl_f32_to_f16_row)(const float *src, uint16_t *dst, size_t n);
void NPL_ISA_FN(npl_deltanet_step)(float *S, const float *q, const float *k, const float *v, float decay, float beta,
                                   float scale, size_t dk, size_t dv, float *o);

#endif
