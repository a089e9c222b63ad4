/* The arithmetic every matrix kernel performs, written once in scalar C
 * over the native rows (internal to kernels/cpu). The SIMD kernels give
 * the same bits; so a token's result never depends on the SIMD level, the
 * batch it was computed in, or the thread count.
 *
 * Integer formats, per (row, vector), blocks b in order, acc from 0:
 *   legacy (act npl_act_q8):
 *     isum = sum_j (q_j - zero_point) * a_j          exact int32
 *     acc  = fmaf(d_w * d_a, (float)isum, acc)
 *     acc  = fmaf(m_w, s_a, acc)                      Q4_1, Q5_1 only
 *   MXFP4: q = doubled E2M1 level + 12, zero point 12, d_w = 2^(e - 128)
 *   Q4_K, Q5_K (act npl_act_q8k, one float scale per 256):
 *     S = sum_c sc_c * isum_c,  M = sum_c m_c * bsum32_c   exact int32
 *     acc = fmaf(d * d_a, S, acc); acc = fmaf(-(dmin * d_a), M, acc)
 *   Q6_K:
 *     S = sum_g sc_g * (isum16_g - 32 * bsum16_g)
 *     acc = fmaf(d * d_a, S, acc)
 * BF16 rows: against BF16-rounded activations, VDPBF16PS's arithmetic
 * (matmul_bf16.h). Float rows (F32, F16 exactly widened; other types
 * through the reference dequantizer): 16 lanes, lane l = fmaf chain over columns
 * c = l (mod 16) below n & ~15; then ((l_i + l_i+8) pairwise halving down
 * to one value, i.e. the natural AVX-512 / 2xAVX2 horizontal sum); then
 * the remaining columns fmaf'ed in order. */
#ifndef NPL_MATMUL_REF_H
#define NPL_MATMUL_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "matvec.h"
#include "quant_act.h"

/* Q4_K, Q5_K, Q6_K: activations npl_act_q8k (else npl_act_q8). */
bool npl_quant_kind_is_k(uint32_t type);

/* y[v][r] for rows [r0, r1); act holds n_cols / block blocks per vector. */
void npl_quant_rows_ref(const npl_matrix *w, int64_t r0, int64_t r1, const void *act, size_t n_vec, float *const *y);

float npl_dot_canon_ref(const float *w, const float *x, size_t n);

/* Row r as floats: the mapped row itself for F32, else converted into buf. */
const float *npl_row_as_f32(const npl_matrix *w, int64_t r, float *buf);

/* Float rows: buf holds n_cols floats. */
void npl_float_rows_ref(const npl_matrix *w, int64_t r0, int64_t r1, const float *x, size_t x_stride, size_t n_vec,
                        float *const *y, float *buf);

#endif
