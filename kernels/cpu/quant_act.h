/* Activations quantized to 8 bits on the fly, the right-hand side of the
 * integer matrix kernels.
 *
 *  - npl_act_q8: blocks of 32 for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 weights.
 *    d = max|x| / 127 rounded to half precision (as llama.cpp's q8_0
 *    activations), q = round(x * 127 / max|x|), plus sum(q) and d * sum(q)
 *    for the zero points and offsets of the weight formats.
 *  - npl_act_q8k: super-blocks of 256 for the K-quants, one float scale
 *    and the sums of each 16 and each 32 quants (the sub-block minimums
 *    and zero points are applied through them).
 *
 * Every level (portable, AVX2, AVX-512) produces the same bytes: the
 * maximum is exact, the scale is one IEEE division, the rounding is to
 * nearest even everywhere. */
#ifndef NPL_QUANT_ACT_H
#define NPL_QUANT_ACT_H

#include <stddef.h>
#include <stdint.h>

#include "vec_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPL_ACT_QK 32
#define NPL_ACT_QKK 256

typedef struct npl_act_q8 {
    float d;      /* scale, a half-precision value */
    float s;      /* d * sum */
    int32_t sum;  /* sum of q */
    int32_t nsum8; /* -8 * sum: the Q4_0 zero point's term, ready to broadcast */
    int8_t q[NPL_ACT_QK];
} npl_act_q8;

typedef struct npl_act_q8k {
    int8_t q[NPL_ACT_QKK];
    int16_t bsum16[NPL_ACT_QKK / 16]; /* sum of each 16 quants */
    int16_t bsum32[NPL_ACT_QKK / 32]; /* sum of each 32 quants */
    float d;
    int32_t pad[3];
} npl_act_q8k;

_Static_assert(sizeof(npl_act_q8) == 48, "npl_act_q8 is 48 bytes");
_Static_assert(sizeof(npl_act_q8k) == 320, "npl_act_q8k is 320 bytes");

/* 1 / d, or 0 when that is not a finite number (an all-zero block, or
 * one so tiny that its scale is subnormal): such a block quantizes to
 * zeros. */
static inline float npl_act_inverse_scale(float d)
{
    float id = d > 0.0f ? 1.0f / d : 0.0f;
    return id <= 3.40282347e+38f ? id : 0.0f;
}

/* n a multiple of 32 (resp. 256); out receives n / 32 (n / 256) blocks. */
void npl_quantize_act_q8(npl_simd_level lv, const float *x, int64_t n, npl_act_q8 *out);
void npl_quantize_act_q8k(npl_simd_level lv, const float *x, int64_t n, npl_act_q8k *out);

/* The portable references every level reproduces (the dispatch table's
 * portable row, kernel_table.h). */
void npl_quantize_act_q8_ref(const float *x, int64_t n, npl_act_q8 *out);
void npl_quantize_act_q8k_ref(const float *x, int64_t n, npl_act_q8k *out);

#ifdef __cplusplus
}
#endif

#endif
