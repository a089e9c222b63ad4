/* npl_attention_nc: the portable reference (attention_noncausal.h) and
 * the dispatch through the kernel table (attention_noncausal_simd.c at
 * the SIMD levels). */
#include "attention_noncausal.h"

#include <math.h>
#include <string.h>

#include "fast_exp.h"
#include "kernel_table.h"
#include "lane_sum.h"

static size_t groups_of(size_t n_kv)
{
    size_t chunks = (n_kv + NPL_ATTN_NC_CHUNK - 1) / NPL_ATTN_NC_CHUNK;
    return chunks * (NPL_ATTN_NC_CHUNK / 16);
}

size_t npl_attention_nc_keys_floats(size_t n_kv, size_t head_dim)
{
    return groups_of(n_kv) * head_dim * 16;
}

void npl_attention_nc_store_key(const float *key, size_t j, size_t head_dim, float *kt)
{
    float *g = kt + (j / 16) * head_dim * 16 + j % 16;
    for (size_t d = 0; d < head_dim; d++)
        g[d * 16] = key[d];
}

/* The SIMD versions': the weights of a chunk for a tile of 4 queries,
 * and per query (rounded up to whole tiles) its running maximum, sum and
 * accumulators in blocks of 80 dimensions (the reference needs less). */
size_t npl_attention_nc_scratch_floats(size_t n_q, size_t head_dim)
{
    size_t n_qp = (n_q + 3) / 4 * 4;
    return 4 * NPL_ATTN_NC_CHUNK + n_qp * (2 + (head_dim + 79) / 80 * 80);
}

void npl_attention_nc_ref(const float *q, size_t q_stride, size_t n_q, const float *kt, const float *v,
                          size_t v_stride, size_t n_kv, size_t head_dim, float scale, float *out,
                          size_t out_stride, float *scratch)
{
    float *p = scratch, *acc = scratch + NPL_ATTN_NC_CHUNK;
    for (size_t i = 0; i < n_q; i++) {
        const float *qi = q + i * q_stride;
        float m = -INFINITY, l = 0.0f;
        memset(acc, 0, head_dim * sizeof *acc);
        for (size_t j0 = 0; j0 < n_kv; j0 += NPL_ATTN_NC_CHUNK) {
            float mx = -INFINITY;
            for (size_t j = 0; j < NPL_ATTN_NC_CHUNK; j++) {
                const float *g = kt + ((j0 + j) / 16) * head_dim * 16 + (j0 + j) % 16;
                float s = 0.0f;
                for (size_t d = 0; d < head_dim; d++)
                    s = fmaf(qi[d], g[d * 16], s);
                s = j0 + j < n_kv ? s * scale : -INFINITY;
                p[j] = s;
                mx = s > mx ? s : mx;
            }
            float mn = mx > m ? mx : m;
            float c = npl_exp_neg(m - mn);
            float lane[16];
            for (size_t j = 0; j < NPL_ATTN_NC_CHUNK; j++)
                p[j] = npl_exp_neg(p[j] - mn);
            for (int t = 0; t < 16; t++)
                lane[t] = (p[t] + p[16 + t]) + (p[32 + t] + p[48 + t]);
            l = l * c + npl_lane_sum16(lane);
            m = mn;
            size_t nj = n_kv - j0 < NPL_ATTN_NC_CHUNK ? n_kv - j0 : NPL_ATTN_NC_CHUNK;
            for (size_t d = 0; d < head_dim; d++)
                acc[d] *= c;
            for (size_t j = 0; j < nj; j++) {
                const float *vj = v + (j0 + j) * v_stride;
                for (size_t d = 0; d < head_dim; d++)
                    acc[d] = fmaf(p[j], vj[d], acc[d]);
            }
        }
        float inv = 1.0f / l;
        for (size_t d = 0; d < head_dim; d++)
            out[i * out_stride + d] = acc[d] * inv;
    }
}

void npl_attention_nc(npl_simd_level lv, const float *q, size_t q_stride, size_t n_q, const float *kt,
                      const float *v, size_t v_stride, size_t n_kv, size_t head_dim, float scale, float *out,
                      size_t out_stride, float *scratch)
{
    npl_kernels(lv)->attention_nc(q, q_stride, n_q, kt, v, v_stride, n_kv, head_dim, scale, out, out_stride,
                                  scratch);
}
