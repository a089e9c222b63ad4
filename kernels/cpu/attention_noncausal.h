/* Non-causal attention of many queries over one head's keys and values
 * (the vision encoder: every patch attends to every patch), with an
 * online softmax over chunks of NPL_ATTN_NC_CHUNK keys, so the scores of
 * all keys never exist at once.
 *
 * Unlike npl_attention (one query position against a cache), the keys are
 * stored transposed in groups of 16 ([group][dim][16]): the scores of one
 * query against 16 keys are then 16 lanes of one register accumulated
 * over the head's dimensions, with no horizontal sums, and all the
 * queries of a call share every chunk of keys and values while it is in
 * cache (tens of queries per call pay off).
 *
 * Arithmetic, the same bits at every level (the portable version below
 * is the reference): per query and chunk of keys j
 *   s_j = fmaf chain over d in order of q[d] * k_j[d], then * scale
 *   m'  = max(m, max_j s_j);  c = exp(m - m')  (fast_exp.h)
 *   p_j = exp(s_j - m');  l = l * c + sum_j p_j  (lanes l of the 64:
 *         (p_l + p_16+l) + (p_32+l + p_48+l), then npl_lane_sum16's order)
 *   acc[d] = fmaf(p_j, v_j[d], acc[d] * c) over j in order
 * and out = acc * (1 / l). Keys past n_kv have score -inf (p = 0). */
#ifndef NPL_ATTENTION_NONCAUSAL_H
#define NPL_ATTENTION_NONCAUSAL_H

#include <stddef.h>

#include "vec_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keys per online-softmax chunk. */
#define NPL_ATTN_NC_CHUNK 64

/* Floats of the transposed keys of n_kv keys (zeroed by the caller:
 * padding keys must be finite). */
size_t npl_attention_nc_keys_floats(size_t n_kv, size_t head_dim);

/* Writes key j (head_dim floats) into the transposed layout kt. */
void npl_attention_nc_store_key(const float *key, size_t j, size_t head_dim, float *kt);

/* Floats of scratch a call with n_q queries needs. */
size_t npl_attention_nc_scratch_floats(size_t n_q, size_t head_dim);

/* q: n_q queries, query i at q + i * q_stride; kt: transposed keys of
 * n_kv >= 1 keys; v: n_kv rows of head_dim floats, row j at v + j *
 * v_stride; out: query i at out + i * out_stride. */
void npl_attention_nc(npl_simd_level lv, const float *q, size_t q_stride, size_t n_q, const float *kt,
                      const float *v, size_t v_stride, size_t n_kv, size_t head_dim, float scale, float *out,
                      size_t out_stride, float *scratch);

/* The portable reference (the dispatch table's portable row); the SIMD
 * levels run attention_noncausal_simd.c. */
void npl_attention_nc_ref(const float *q, size_t q_stride, size_t n_q, const float *kt, const float *v,
                          size_t v_stride, size_t n_kv, size_t head_dim, float scale, float *out,
                          size_t out_stride, float *scratch);

#ifdef __cplusplus
}
#endif

#endif
