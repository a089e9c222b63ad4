/* Gated DeltaNet (linear attention with a delta-rule state update), one
 * head: the recurrent form for any number of tokens and a chunked parallel
 * form for prefill. The state S is dv rows of dk floats (row j: how value
 * component j reads the keys), as llama.cpp keeps it. Per token t:
 *
 *     S = exp(g_t) * S
 *     d = beta_t * (v_t - S k_t)        (dv)
 *     S = S + d k_t^T
 *     o_t = scale * S q_t               (dv)
 *
 * q and k are L2-normalised by the caller. */
#ifndef NPL_DELTANET_H
#define NPL_DELTANET_H

#include <stddef.h>

#include "vec_ops.h"

/* One token: S updated in place, o written (dv floats). The dot products
 * are defined on 16 lanes (element i in lane i % 16, fused multiply-adds,
 * lane_sum.h's pairing), so every SIMD level gives the reference's bits. */
void npl_deltanet_step(npl_simd_level lv, float *S, const float *q, const float *k, const float *v, float decay,
                       float beta, float scale, size_t dk, size_t dv, float *o);
void npl_deltanet_step_ref(float *S, const float *q, const float *k, const float *v, float decay, float beta,
                           float scale, size_t dk, size_t dv, float *o);

/* Tokens [0, n) of one head in chunks of up to NPL_DELTANET_CHUNK: q, k
 * (dk each) and v (dv), g (log decay) and beta per token at the given
 * strides; outputs o at o_stride. The same results as n recurrent steps
 * up to rounding (within about 1e-5 relative on unit-norm keys; tested
 * against npl_deltanet_step). scratch: npl_deltanet_chunk_scratch floats. */
#define NPL_DELTANET_CHUNK 64
size_t npl_deltanet_chunk_scratch(size_t dk, size_t dv);
void npl_deltanet_chunked(float *S, const float *q, const float *k, size_t qk_stride, const float *v,
                          size_t v_stride, const float *g, const float *beta, size_t gb_stride, size_t n, float scale,
                          size_t dk, size_t dv, float *o, size_t o_stride, float *scratch);

#endif
