/* Element-wise activation functions of the feed-forward blocks, the same
 * bits at every SIMD level (they use fast_exp.h's exp, not libm's). */
#ifndef NPL_ACT_FN_H
#define NPL_ACT_FN_H

#include <stddef.h>

#include "vec_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* gate[i] = silu(gate[i]) * up[i], silu(g) = g * sigmoid(g), the sigmoid
 * computed from exp(-|g|) so it never overflows. */
void npl_swiglu_f32(npl_simd_level lv, float *gate, const float *up, size_t n);

#ifdef __cplusplus
}
#endif

#endif
