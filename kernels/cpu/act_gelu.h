/* The activations (GELU, GELU-quick, SiLU): with a bias for the vision
 * tower's encoder, gated for the text models' feed-forward blocks (SwiGLU,
 * GEGLU), in one pass and the same bits at every SIMD level: each is
 * x * sigmoid(z(x)), the sigmoid taken from fast_exp.h's exp(-|z|) so it
 * never overflows, every step one IEEE operation (no libm tanhf/expf,
 * which is scalar and level-dependent). */
#ifndef NPL_ACT_GELU_H
#define NPL_ACT_GELU_H

#include <math.h>
#include <stddef.h>

#include "fast_exp.h"
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

/* The portable reference (the dispatch table's portable row). */
void npl_act_bias_ref(npl_act_kind act, float *x, const float *bias, size_t n);

/* gate[i] = act(gate[i]) * up[i]: SwiGLU with NPL_ACT_SILU, Gemma's GEGLU
 * with NPL_ACT_GELU_TANH. */
void npl_act_gated_f32(npl_simd_level lv, npl_act_kind act, float *gate, const float *up, size_t n);

/* The portable reference. */
void npl_act_gated_ref(npl_act_kind act, float *gate, const float *up, size_t n);

/* z(x): the sigmoid's argument. */
static inline float npl_act_z(npl_act_kind act, float x)
{
    switch (act) {
    case NPL_ACT_GELU_TANH: {
        float x2 = x * x;
        float p = 0.044715f * x2 + 1.0f;
        return (1.5957691216057308f * x) * p; /* 2 sqrt(2/pi) */
    }
    case NPL_ACT_GELU_QUICK:
        return 1.702f * x;
    default:
        return x;
    }
}

/* One element: x * s, s = 1 / (1 + t) for z >= 0 and t / (1 + t) below,
 * t = exp(-|z|); the SIMD versions do the same steps per lane. */
static inline float npl_act_one(npl_act_kind act, float x)
{
    float z = npl_act_z(act, x);
    float t = npl_exp_neg(-fabsf(z));
    float s = (z >= 0.0f ? 1.0f : t) / (1.0f + t);
    return x * s;
}

#ifdef __cplusplus
}
#endif

#endif
