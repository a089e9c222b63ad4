/* Element-wise activation functions of the feed-forward blocks, the same
 * bits at every SIMD level (they use fast_exp.h's exp, not libm's). */
#ifndef NPL_ACT_FN_H
#define NPL_ACT_FN_H

#include <math.h>
#include <stddef.h>

#include "fast_exp.h"

#include "vec_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gate[i] = silu(gate[i]) * up[i], silu(g) = g * sigmoid(g), the sigmoid
 * computed from exp(-|g|) so it never overflows. */
void npl_swiglu_f32(npl_simd_level lv, float *gate, const float *up, size_t n);

/* The portable reference (the dispatch table's portable row). */
void npl_swiglu_ref(float *gate, const float *up, size_t n);

/* One element: sigmoid(g) = 1 / (1 + e) for g >= 0 and e / (1 + e)
 * below, e = exp(-|g|); the SIMD versions do the same steps per lane. */
static inline float npl_swiglu_one(float g, float u)
{
    float e = npl_exp_neg(-fabsf(g));
    float sig = (g >= 0.0f ? 1.0f : e) / (1.0f + e);
    return (g * sig) * u;
}

#ifdef __cplusplus
}
#endif

#endif
