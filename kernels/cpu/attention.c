#include "attention.h"

#include <math.h>
#include <string.h>

size_t npl_attention_scratch_floats(size_t n_q, size_t head_dim)
{
    /* one converted row, scores of a block, running max and sum,
     * accumulators */
    return head_dim + n_q * NPL_ATTN_BLOCK + 2 * n_q + n_q * head_dim;
}

void npl_attention(npl_simd_level lv, const float *q, size_t q_stride, size_t n_q,
                   const uint16_t *k, const uint16_t *v, size_t kv_stride, size_t n_kv,
                   size_t head_dim, float scale, float *out, size_t out_stride, float *scratch)
{
    float *row = scratch;
    float *scores = row + head_dim;           /* [n_q][NPL_ATTN_BLOCK] */
    float *run_max = scores + n_q * NPL_ATTN_BLOCK;
    float *run_sum = run_max + n_q;
    float *acc = run_sum + n_q;               /* [n_q][head_dim] */

    for (size_t h = 0; h < n_q; h++) {
        run_max[h] = -INFINITY;
        run_sum[h] = 0.0f;
    }
    memset(acc, 0, n_q * head_dim * sizeof *acc);

    for (size_t j0 = 0; j0 < n_kv; j0 += NPL_ATTN_BLOCK) {
        size_t nj = n_kv - j0 < NPL_ATTN_BLOCK ? n_kv - j0 : NPL_ATTN_BLOCK;

        for (size_t j = 0; j < nj; j++) {
            npl_f16_to_f32_row(lv, k + (j0 + j) * kv_stride, row, head_dim);
            for (size_t h = 0; h < n_q; h++)
                scores[h * NPL_ATTN_BLOCK + j] = npl_dot_f32(lv, q + h * q_stride, row, head_dim) * scale;
        }

        /* Fold the block into the running max: rescale what was summed
         * so far, then turn the scores into weights. */
        for (size_t h = 0; h < n_q; h++) {
            float *s = scores + h * NPL_ATTN_BLOCK;
            float m = run_max[h];
            for (size_t j = 0; j < nj; j++)
                if (s[j] > m)
                    m = s[j];
            if (m > run_max[h]) {
                float c = expf(run_max[h] - m); /* 0 on the first block */
                run_sum[h] *= c;
                npl_scale_f32(lv, c, acc + h * head_dim, head_dim);
                run_max[h] = m;
            }
            float sum = 0.0f;
            for (size_t j = 0; j < nj; j++) {
                s[j] = expf(s[j] - m);
                sum += s[j];
            }
            run_sum[h] += sum;
        }

        for (size_t j = 0; j < nj; j++) {
            npl_f16_to_f32_row(lv, v + (j0 + j) * kv_stride, row, head_dim);
            for (size_t h = 0; h < n_q; h++)
                npl_axpy_f32(lv, scores[h * NPL_ATTN_BLOCK + j], row, acc + h * head_dim, head_dim);
        }
    }

    for (size_t h = 0; h < n_q; h++) {
        float inv = run_sum[h] > 0.0f ? 1.0f / run_sum[h] : 0.0f;
        float *o = out + h * out_stride;
        const float *a = acc + h * head_dim;
        for (size_t d = 0; d < head_dim; d++)
            o[d] = a[d] * inv;
    }
}
