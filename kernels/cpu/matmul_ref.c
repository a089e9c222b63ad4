/* The scalar reference of every matrix kernel, reading the native rows of
 * the file. It defines the arithmetic the SIMD kernels reproduce bit for
 * bit (see matmul_ref.h), and it is the portable path.
 *
 * The float operations are spelled with fmaf so the compiler cannot
 * contract or reassociate them differently from the SIMD code. */
#include "matmul_ref.h"

#include <math.h>

#include "lane_sum.h"
#include <string.h>

#include "ggml_types.h"
#include "matmul_packed.h"

static int zero_point(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_Q4_0: return 8;
    case NPL_TYPE_Q5_0: return 16;
    case NPL_TYPE_Q8_0: return 128;
    case NPL_TYPE_MXFP4: return 12;
    default: return 0;
    }
}

static float dot_legacy(uint32_t type, const uint8_t *row, size_t block_bytes, size_t nb, const npl_act_q8 *a)
{
    int zp = zero_point(type);
    bool has_min = type == NPL_TYPE_Q4_1 || type == NPL_TYPE_Q5_1;
    float acc = 0.0f;
    npl_block_ints bi;
    for (size_t b = 0; b < nb; b++) {
        npl_block_to_ints(type, row + b * block_bytes, &bi);
        int32_t isum = 0;
        for (int j = 0; j < 32; j++)
            isum += ((int32_t)bi.q[j] - zp) * a[b].q[j];
        float dw = type == NPL_TYPE_MXFP4 ? npl_e8m0_to_fp32_half((uint8_t)bi.d) : npl_fp16_to_fp32(bi.d);
        acc = fmaf(dw * a[b].d, (float)isum, acc);
        if (has_min)
            acc = fmaf(npl_fp16_to_fp32(bi.m), a[b].s, acc);
    }
    return acc;
}

static float dot_kquant(uint32_t type, const uint8_t *row, size_t block_bytes, size_t nb, const npl_act_q8k *a)
{
    float acc = 0.0f;
    npl_block_ints bi;
    for (size_t b = 0; b < nb; b++) {
        npl_block_to_ints(type, row + b * block_bytes, &bi);
        const npl_act_q8k *ab = &a[b];
        int32_t s = 0;
        if (type == NPL_TYPE_Q6_K) {
            for (int g = 0; g < 16; g++) {
                int32_t isum = 0;
                for (int i = 16 * g; i < 16 * g + 16; i++)
                    isum += (int32_t)bi.q[i] * ab->q[i];
                s += bi.sc[g] * (isum - 32 * ab->bsum16[g]);
            }
            acc = fmaf(npl_fp16_to_fp32(bi.d) * ab->d, (float)s, acc);
        } else {
            int32_t mins = 0;
            for (int c = 0; c < 8; c++) {
                int32_t isum = 0;
                for (int i = 32 * c; i < 32 * c + 32; i++)
                    isum += (int32_t)bi.q[i] * ab->q[i];
                s += bi.sc[c] * isum;
                mins += bi.mn[c] * ab->bsum32[c];
            }
            acc = fmaf(npl_fp16_to_fp32(bi.d) * ab->d, (float)s, acc);
            acc = fmaf(-(npl_fp16_to_fp32(bi.m) * ab->d), (float)mins, acc);
        }
    }
    return acc;
}

bool npl_quant_kind_is_k(uint32_t type)
{
    return type == NPL_TYPE_Q4_K || type == NPL_TYPE_Q5_K || type == NPL_TYPE_Q6_K;
}

void npl_quant_rows_ref(const npl_matrix *w, int64_t r0, int64_t r1, const void *act, size_t n_vec, float *const *y)
{
    const npl_type_traits *tr = npl_type_traits_get(w->type);
    size_t nb = (size_t)w->n_cols / tr->block_size;
    bool k = npl_quant_kind_is_k(w->type);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        for (size_t v = 0; v < n_vec; v++) {
            if (k)
                y[v][r] = dot_kquant(w->type, row, tr->type_size, nb, (const npl_act_q8k *)act + v * nb);
            else
                y[v][r] = dot_legacy(w->type, row, tr->type_size, nb, (const npl_act_q8 *)act + v * nb);
        }
    }
}

float npl_dot_canon_ref(const float *w, const float *x, size_t n)
{
    float lane[16] = {0};
    size_t n16 = n & ~(size_t)15;
    for (size_t c = 0; c < n16; c += 16)
        for (int i = 0; i < 16; i++)
            lane[i] = fmaf(w[c + i], x[c + i], lane[i]);
    float s = npl_lane_sum16(lane);
    for (size_t c = n16; c < n; c++)
        s = fmaf(w[c], x[c], s);
    return s;
}

const float *npl_row_as_f32(const npl_matrix *w, int64_t r, float *buf)
{
    const uint8_t *src = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    size_t n = (size_t)w->n_cols;
    switch (w->type) {
    case NPL_TYPE_F32:
        return (const float *)(const void *)src;
    case NPL_TYPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, sizeof h);
            buf[i] = npl_fp16_to_fp32(h);
        }
        return buf;
    case NPL_TYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, sizeof h);
            buf[i] = npl_bf16_to_fp32(h);
        }
        return buf;
    default:
        if (!npl_dequantize_row_ref(w->type, src, buf, w->n_cols))
            memset(buf, 0, n * sizeof *buf); /* unreachable: type checked at init */
        return buf;
    }
}

void npl_float_rows_ref(const npl_matrix *w, int64_t r0, int64_t r1, const float *x, size_t x_stride, size_t n_vec,
                        float *const *y, float *buf)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *row = npl_row_as_f32(w, r, buf);
        for (size_t v = 0; v < n_vec; v++)
            y[v][r] = npl_dot_canon_ref(row, x + v * x_stride, (size_t)w->n_cols);
    }
}
