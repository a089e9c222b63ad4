/* Attention of many query positions at once (flash-attention style): a
 * block of queries against blocks of cached keys, the scores of a block
 * as one small matrix product, an online softmax per query row, then the
 * weights times the values as another matrix product. Each cached key and
 * value block is read and converted once per block of queries instead of
 * once per query position, and the two products run on AMX-BF16 tiles.
 *
 * Arithmetic (AMX-BF16, F16 caches): q is rounded to a half like the
 * cached keys; a half is exactly hi + lo in bf16 (8 + 8 significant bits
 * >= 11), so q.k is the sum of four exact bf16 products accumulated in
 * f32 (only the summation order differs from an f32 dot product). The
 * softmax weights are rounded to halves before multiplying the values
 * (llama.cpp without flash attention does the same), split the same way.
 *
 * Key blocks are fixed by position (positions [64 b, 64 b + 64)) and a
 * query row only ever sees its own keys (the others weigh exactly 0 and
 * leave its maximum alone), so a row's result does not depend on which
 * other rows share its block: a decode step (one position) and a prefill
 * chunk give the same bits for the same token. */
#ifndef NPL_ATTENTION_TILED_H
#define NPL_ATTENTION_TILED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "vec_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keys per block of the online softmax. */
#define NPL_ATTN_TILED_KEYS 64

/* One KV head's work: n_pos query positions x group query heads (the
 * heads sharing the KV head) against the cache. */
typedef struct npl_attn_tiled_job {
    const float *q;    /* position i, head h at q + i * q_stride + h * head_dim */
    size_t q_stride;
    float *out;        /* same layout as q, with out_stride */
    size_t out_stride;
    size_t n_pos, group, head_dim;
    const uint32_t *key_lo, *key_hi; /* position i sees key positions [key_lo[i], key_hi[i]] */
    const uint8_t *k, *v; /* key position p at row (ring ? p % ring : p), row_bytes apart */
    size_t row_bytes;
    uint32_t ring;
    float scale;       /* multiplies q.k */
    const float *sinks; /* NULL, or query head h's sink logit (npl_attention_kv_sinks) */
} npl_attn_tiled_job;

/* True when npl_attention_tiled runs for this level, cache format and
 * head size on this CPU (AMX-BF16 present and allowed, AVX-512 level, F16
 * cache, head_dim a multiple of 64 up to 512). Otherwise use npl_attention_kv. */
bool npl_attention_tiled_available(npl_simd_level lv, npl_kv_format fmt, size_t head_dim);

/* Bytes of scratch one call with up to n_pos positions needs. */
size_t npl_attention_tiled_scratch_bytes(size_t n_pos, size_t group, size_t head_dim);

/* Runs the job (only where npl_attention_tiled_available). Loads its own
 * tile configuration and releases the tiles before returning. */
void npl_attention_tiled(const npl_attn_tiled_job *job, void *scratch);

#ifdef __cplusplus
}
#endif

#endif
