/* Causal self-attention of one query position against a KV cache, in
 * blocks of cached positions with a running maximum and running sum
 * (online softmax): the scores of the whole context never exist at once,
 * memory stays O(block) whatever the context length.
 *
 * The cache of one KV head is two arrays of rows, [position][head_dim],
 * so a step reads K then V front to back. Rows are IEEE halves (the
 * engine's cache) or Q8_0 blocks (half the memory again, for long
 * contexts). The n_q query heads that share the KV head (grouped-query
 * attention) are handled together so each cached row is converted and
 * read once per block.
 *
 * The arithmetic is fixed (attention_internal.h): the portable, AVX2 and
 * AVX-512 versions give the same bits, so a row's output never depends
 * on the SIMD level or on what else was computed in the same step. */
#ifndef NPL_ATTENTION_H
#define NPL_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "vec_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Cached positions per online-softmax block. */
#define NPL_ATTN_BLOCK 64

/* Floats of scratch one call needs. */
size_t npl_attention_scratch_floats(size_t n_q, size_t head_dim);

/* q: n_q heads of head_dim floats, head h at q + h * q_stride;
 * k, v: n_kv rows of head_dim halves (n_kv >= 1), row i at + i * kv_stride;
 * out: head h at out + h * out_stride. scale multiplies q.k. */
void npl_attention(npl_simd_level lv, const float *q, size_t q_stride, size_t n_q,
                   const uint16_t *k, const uint16_t *v, size_t kv_stride, size_t n_kv,
                   size_t head_dim, float scale, float *out, size_t out_stride, float *scratch);

typedef enum npl_kv_format {
    NPL_KV_F16 = 0,  /* IEEE halves */
    NPL_KV_Q8_0 = 1, /* ggml Q8_0 blocks of 32 (head_dim a multiple of 32) */
} npl_kv_format;

/* Bytes of one cached row of head_dim values (0: head_dim does not fit
 * the format). */
size_t npl_kv_row_bytes(npl_kv_format fmt, size_t head_dim);

/* Writes one row (head_dim floats) into the cache format. */
void npl_kv_store_row(npl_kv_format fmt, const float *src, void *dst, size_t head_dim);

/* npl_attention over rows of either format; row i of k and v at
 * + i * kv_stride_bytes. */
void npl_attention_kv(npl_simd_level lv, npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q,
                      const void *k, const void *v, size_t kv_stride_bytes, size_t n_kv, size_t head_dim,
                      float scale, float *out, size_t out_stride, float *scratch);

/* npl_attention_kv with attention sinks (gpt-oss): sinks[h] is query head
 * h's logit that joins its softmax's maximum and denominator without a
 * value (ggml's soft_max with sinks), so a head may attend to nothing;
 * sinks NULL is npl_attention_kv. */
void npl_attention_kv_sinks(npl_simd_level lv, npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q,
                            const void *k, const void *v, size_t kv_stride_bytes, size_t n_kv, size_t head_dim,
                            float scale, const float *sinks, float *out, size_t out_stride, float *scratch);

/* Many query positions of one KV head at once (a prefill chunk): position
 * i's group query heads (head h at q + i * q_stride + h * head_dim) see
 * key positions [0, key_hi[i]]. Each block of NPL_ATTN_BLOCK cached keys
 * and values is converted once for all the positions instead of once per
 * position, and the scores of several positions share each key load;
 * every row gets npl_attention_kv's bits for n_kv = key_hi[i] + 1 (the
 * same arithmetic, attention_internal.h, row by row). */
typedef struct npl_attn_rows_job {
    npl_kv_format fmt;
    const float *q;
    size_t q_stride;
    float *out; /* same layout as q, with out_stride */
    size_t out_stride;
    size_t n_pos, group, head_dim;
    const uint32_t *key_hi;
    const void *k, *v; /* key position p at + p * row_bytes */
    size_t row_bytes;
    float scale; /* multiplies q.k */
    const float *sinks; /* NULL, or head h's sink logit (npl_attention_kv_sinks) */
} npl_attn_rows_job;

/* Floats of scratch one npl_attention_rows call of up to n_pos positions
 * needs. */
size_t npl_attention_rows_scratch_floats(size_t n_pos, size_t group, size_t head_dim);

void npl_attention_rows(npl_simd_level lv, const npl_attn_rows_job *job, float *scratch);

#ifdef __cplusplus
}
#endif

#endif
