/* The encoder activations of the vision tower (GELU, GELU-quick, SiLU)
 * with a bias, in one pass and the same bits at every SIMD level: each is
 * x * sigmoid(z(x)), the sigmoid taken from fast_exp.h's exp(-|z|) so it
 * never overflows, every step one IEEE operation (no libm tanhf/expf,
 * which is scalar and level-dependent). */
#ifndef NPL_ACT_GELU_H
#define NPL_ACT_GELU_H

#include <stddef.h>

#include "vec_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum npl_act_kind {
    NPL_ACT_GELU_TANH,  /* 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) x (1 + 0.044715 x^2) */
    NPL_ACT_GELU_QUICK, /* x sigmoid(1.702 x) */
    NPL_ACT_SILU,       /* x sigmoid(x) */
} npl_act_kind;

/* x[i] = act(x[i] + bias[i]); bias may be NULL. */
void npl_act_bias_f32(npl_simd_level lv, npl_act_kind act, float *x, const float *bias, size_t n);

#ifdef __cplusplus
}
#endif

#endif
