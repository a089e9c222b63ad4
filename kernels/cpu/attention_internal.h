/* The arithmetic of npl_attention, shared by its portable and SIMD
 * versions (internal to kernels/cpu), so that every level gives the same
 * bits and a row's output never depends on how it was batched.
 *
 * Per query head, per block of NPL_ATTN_BLOCK cached positions:
 *   s_j  = dot16(q, k_j) * scale      (16 lanes over head_dim, fmaf chains,
 *                                      lanes summed (l, l+8), (l, l+4),
 *                                      (l, l+2), (l, l+1); tail fmaf'ed)
 *   m'   = max(m, max_j s_j); when it grows, sum and acc are multiplied by
 *          npl_attn_exp(m - m')
 *   p_j  = npl_attn_exp(s_j - m');  sum += (16 lanes over j, summed as above)
 *   acc  = fmaf(p_j, v_j, acc)        (element-wise, j in order)
 * and at the end out = acc * (1 / sum); with a sink logit z (gpt-oss, as
 * ggml's soft_max with sinks: z joins the max and the denominator, with no
 * value) out = acc * npl_attn_inv_sum(m, sum, &z).
 *
 * npl_attn_exp is fast_exp.h's exp for x <= 0 (all the softmax needs). */
#ifndef NPL_ATTENTION_INTERNAL_H
#define NPL_ATTENTION_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "attention.h"
#include "fast_exp.h"
#include "lane_sum.h"

/* The softmax's exp (fast_exp.h). */
#define npl_attn_exp npl_exp_neg

/* What multiplies a row's accumulators at the end: 1 / sum, or with a sink
 * logit (sink non-NULL) c / (sum * c + 1), c = e^(m - z), when z is above
 * the running max m, else 1 / (sum + e^(z - m)). */
static inline float npl_attn_inv_sum(float run_max, float run_sum, const float *sink)
{
    if (sink) {
        float z = *sink;
        if (z > run_max) {
            float c = npl_attn_exp(run_max - z); /* 0 when no key was seen */
            return c / (run_sum * c + 1.0f);
        }
        run_sum += npl_attn_exp(z - run_max);
    }
    return run_sum > 0.0f ? 1.0f / run_sum : 0.0f;
}

/* Cached rows [j0, j0 + nj) as floats, exactly (a half widens exactly;
 * a Q8_0 value q * d is exact in binary32): rows at dst + j * head_dim. */
void npl_kv_block_to_f32(npl_kv_format fmt, const void *rows, size_t stride_bytes, size_t j0, size_t nj,
                         size_t head_dim, float *dst);

/* The portable version, which every level reproduces (tests). */
void npl_attention_ref(npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q, const void *k, const void *v,
                       size_t kv_stride_bytes, size_t n_kv, size_t head_dim, float scale, const float *sinks,
                       float *out, size_t out_stride, float *scratch);

/* npl_attention_rows' portable version: npl_attention_ref row by row. */
void npl_attention_rows_ref(const npl_attn_rows_job *job, float *scratch);

/* Scratch layout of npl_attention_rows at the SIMD levels: r = i * group
 * + h indexes a (position, query head) row. */
typedef struct npl_attn_rows_scratch {
    float *keys;     /* [NPL_ATTN_BLOCK][head_dim] */
    float *keys_t;   /* [head_dim][NPL_ATTN_BLOCK]: the keys transposed */
    float *vals;     /* [NPL_ATTN_BLOCK][head_dim] */
    float *scores;   /* [rows][NPL_ATTN_BLOCK] */
    float *run_max;  /* [rows] */
    float *run_sum;  /* [rows] */
    float *acc;      /* [rows][head_dim] */
    uint32_t *active; /* [rows]: the positions seeing the current block */
} npl_attn_rows_scratch;

static inline npl_attn_rows_scratch npl_attn_rows_scratch_split(float *s, size_t rows, size_t head_dim)
{
    npl_attn_rows_scratch a;
    a.keys = s;
    a.keys_t = a.keys + NPL_ATTN_BLOCK * head_dim;
    a.vals = a.keys_t + NPL_ATTN_BLOCK * head_dim;
    a.scores = a.vals + NPL_ATTN_BLOCK * head_dim;
    a.run_max = a.scores + rows * NPL_ATTN_BLOCK;
    a.run_sum = a.run_max + rows;
    a.acc = a.run_sum + rows;
    a.active = (uint32_t *)(void *)(a.acc + rows * head_dim);
    return a;
}

/* Scratch layout shared by every level. */
typedef struct npl_attn_scratch {
    float *scores;  /* [n_q][NPL_ATTN_BLOCK] */
    float *run_max; /* [n_q] */
    float *run_sum; /* [n_q] */
    float *acc;     /* [n_q][head_dim] */
    float *keys;    /* [NPL_ATTN_BLOCK][head_dim] */
    float *vals;    /* [NPL_ATTN_BLOCK][head_dim] */
} npl_attn_scratch;

static inline npl_attn_scratch npl_attn_scratch_split(float *s, size_t n_q, size_t head_dim)
{
    npl_attn_scratch a;
    a.scores = s;
    a.run_max = a.scores + n_q * NPL_ATTN_BLOCK;
    a.run_sum = a.run_max + n_q;
    a.acc = a.run_sum + n_q;
    a.keys = a.acc + n_q * head_dim;
    a.vals = a.keys + NPL_ATTN_BLOCK * head_dim;
    return a;
}

#endif
