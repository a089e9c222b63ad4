/* Online-softmax attention: the portable version, which is also the
 * reference of the SIMD ones (attention_internal.h gives the arithmetic),
 * the cache row formats, and the dispatch. */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "attention_internal.h"
#include "ggml_blocks.h"
#include "ggml_types.h"
#include "kernel_table.h"
#include "matmul_ref.h"

size_t npl_attention_scratch_floats(size_t n_q, size_t head_dim)
{
    /* scores of a block, running max and sum, accumulators, a block of
     * keys and one of values as floats */
    return n_q * NPL_ATTN_BLOCK + 2 * n_q + n_q * head_dim + 2 * NPL_ATTN_BLOCK * head_dim;
}

size_t npl_attention_rows_scratch_floats(size_t n_pos, size_t group, size_t head_dim)
{
    /* keys, keys transposed and values of a block; per row its scores,
     * running max and sum, accumulators and active-list entry (a uint32
     * in a float's place). Also enough for npl_attention_ref. */
    size_t rows = n_pos * group;
    return 3 * NPL_ATTN_BLOCK * head_dim + rows * (NPL_ATTN_BLOCK + 3 + head_dim);
}

size_t npl_kv_row_bytes(npl_kv_format fmt, size_t head_dim)
{
    if (fmt == NPL_KV_Q8_0)
        return head_dim % NPL_QK8_0 == 0 ? head_dim / NPL_QK8_0 * sizeof(npl_block_q8_0) : 0;
    return head_dim * sizeof(uint16_t);
}

void npl_kv_store_row(npl_kv_format fmt, const float *src, void *dst, size_t head_dim)
{
    if (fmt == NPL_KV_Q8_0) {
        npl_quantize_row_ref(NPL_TYPE_Q8_0, src, dst, (int64_t)head_dim);
        return;
    }
    uint8_t *d = dst;
    for (size_t i = 0; i < head_dim; i++) {
        uint16_t h = npl_fp32_to_fp16(src[i]);
        memcpy(d + 2 * i, &h, sizeof h);
    }
}

void npl_kv_block_to_f32(npl_kv_format fmt, const void *rows, size_t stride_bytes, size_t j0, size_t nj,
                         size_t head_dim, float *dst)
{
    for (size_t j = 0; j < nj; j++) {
        const uint8_t *row = (const uint8_t *)rows + (j0 + j) * stride_bytes;
        float *o = dst + j * head_dim;
        if (fmt == NPL_KV_Q8_0) {
            for (size_t b = 0; b < head_dim / NPL_QK8_0; b++) {
                const uint8_t *blk = row + b * sizeof(npl_block_q8_0);
                uint16_t dh;
                memcpy(&dh, blk, sizeof dh);
                float d = npl_fp16_to_fp32(dh);
                for (int i = 0; i < NPL_QK8_0; i++)
                    o[b * NPL_QK8_0 + (size_t)i] = (float)(int8_t)blk[offsetof(npl_block_q8_0, qs) + (size_t)i] * d;
            }
        } else {
            for (size_t i = 0; i < head_dim; i++) {
                uint16_t h;
                memcpy(&h, row + 2 * i, sizeof h);
                o[i] = npl_fp16_to_fp32(h);
            }
        }
    }
}

void npl_attention_ref(npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q, const void *k, const void *v,
                       size_t kv_stride_bytes, size_t n_kv, size_t head_dim, float scale, const float *sinks,
                       float *out, size_t out_stride, float *scratch)
{
    npl_attn_scratch a = npl_attn_scratch_split(scratch, n_q, head_dim);
    for (size_t h = 0; h < n_q; h++) {
        a.run_max[h] = -INFINITY;
        a.run_sum[h] = 0.0f;
    }
    memset(a.acc, 0, n_q * head_dim * sizeof *a.acc);

    for (size_t j0 = 0; j0 < n_kv; j0 += NPL_ATTN_BLOCK) {
        size_t nj = n_kv - j0 < NPL_ATTN_BLOCK ? n_kv - j0 : NPL_ATTN_BLOCK;
        npl_kv_block_to_f32(fmt, k, kv_stride_bytes, j0, nj, head_dim, a.keys);
        npl_kv_block_to_f32(fmt, v, kv_stride_bytes, j0, nj, head_dim, a.vals);
        for (size_t j = 0; j < nj; j++)
            for (size_t h = 0; h < n_q; h++)
                a.scores[h * NPL_ATTN_BLOCK + j] =
                    npl_dot_canon_ref(q + h * q_stride, a.keys + j * head_dim, head_dim) * scale;
        /* Fold the block into the running max: rescale what was summed
         * so far, then turn the scores into weights. */
        for (size_t h = 0; h < n_q; h++) {
            float *s = a.scores + h * NPL_ATTN_BLOCK;
            float m = a.run_max[h];
            for (size_t j = 0; j < nj; j++)
                if (s[j] > m)
                    m = s[j];
            if (m > a.run_max[h]) {
                float c = npl_attn_exp(a.run_max[h] - m); /* 0 on the first block */
                a.run_sum[h] *= c;
                for (size_t d = 0; d < head_dim; d++)
                    a.acc[h * head_dim + d] *= c;
                a.run_max[h] = m;
            }
            float lane[16] = {0};
            for (size_t j = 0; j < nj; j++) {
                s[j] = npl_attn_exp(s[j] - m);
                lane[j % 16] += s[j];
            }
            a.run_sum[h] += npl_lane_sum16(lane);
        }
        for (size_t j = 0; j < nj; j++) {
            const float *row = a.vals + j * head_dim;
            for (size_t h = 0; h < n_q; h++) {
                float p = a.scores[h * NPL_ATTN_BLOCK + j];
                float *acc = a.acc + h * head_dim;
                for (size_t d = 0; d < head_dim; d++)
                    acc[d] = fmaf(p, row[d], acc[d]);
            }
        }
    }

    for (size_t h = 0; h < n_q; h++) {
        float inv = npl_attn_inv_sum(a.run_max[h], a.run_sum[h], sinks ? sinks + h : NULL);
        float *o = out + h * out_stride;
        const float *acc = a.acc + h * head_dim;
        for (size_t d = 0; d < head_dim; d++)
            o[d] = acc[d] * inv;
    }
}

void npl_attention_rows_ref(const npl_attn_rows_job *job, float *scratch)
{
    for (size_t i = 0; i < job->n_pos; i++)
        npl_attention_ref(job->fmt, job->q + i * job->q_stride, job->head_dim, job->group, job->k, job->v,
                          job->row_bytes, (size_t)job->key_hi[i] + 1, job->head_dim, job->scale, job->sinks,
                          job->out + i * job->out_stride, job->head_dim, scratch);
}

void npl_attention_rows(npl_simd_level lv, const npl_attn_rows_job *job, float *scratch)
{
    npl_kernels(lv)->attention_rows(job, scratch);
}

void npl_attention_kv_sinks(npl_simd_level lv, npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q,
                            const void *k, const void *v, size_t kv_stride_bytes, size_t n_kv, size_t head_dim,
                            float scale, const float *sinks, float *out, size_t out_stride, float *scratch)
{
    npl_kernels(lv)->attention(fmt, q, q_stride, n_q, k, v, kv_stride_bytes, n_kv, head_dim, scale, sinks, out,
                               out_stride, scratch);
}

void npl_attention_kv(npl_simd_level lv, npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q,
                      const void *k, const void *v, size_t kv_stride_bytes, size_t n_kv, size_t head_dim,
                      float scale, float *out, size_t out_stride, float *scratch)
{
    npl_attention_kv_sinks(lv, fmt, q, q_stride, n_q, k, v, kv_stride_bytes, n_kv, head_dim, scale, NULL, out,
                           out_stride, scratch);
}

void npl_attention(npl_simd_level lv, const float *q, size_t q_stride, size_t n_q,
                   const uint16_t *k, const uint16_t *v, size_t kv_stride, size_t n_kv,
                   size_t head_dim, float scale, float *out, size_t out_stride, float *scratch)
{
    npl_attention_kv(lv, NPL_KV_F16, q, q_stride, n_q, k, v, kv_stride * sizeof(uint16_t), n_kv, head_dim, scale,
                     out, out_stride, scratch);
}
