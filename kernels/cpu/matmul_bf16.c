/* BF16 rows: the portable reference of matmul_bf16.h and the activation
 * rounding. */
#include "matmul_bf16.h"

#include <math.h>

#include "kernel_table.h"
#include "lane_sum.h"

/* Subnormal -> signed zero. */
static float flush(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (u & 0x7f800000u) ? v : copysignf(0.0f, v);
}

void npl_act_to_bf16_ref(const float *x, size_t n, uint16_t *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = npl_bf16_act_bits(x[i]);
}

void npl_act_to_bf16(npl_simd_level lv, const float *x, size_t n, uint16_t *out)
{
    npl_kernels(lv)->act_to_bf16(x, n, out);
}

static float dot_bf16(const uint8_t *row, const uint16_t *xb, size_t n)
{
    float lane[16] = {0};
    size_t n32 = n & ~(size_t)31;
    for (size_t c = 0; c < n32; c += 32)
        for (int l = 0; l < 16; l++) {
            uint16_t w0, w1;
            memcpy(&w0, row + 2 * (c + 2 * (size_t)l), sizeof w0);
            memcpy(&w1, row + 2 * (c + 2 * (size_t)l + 1), sizeof w1);
            float acc = fmaf(flush(npl_bf16_widen(w1)), npl_bf16_widen(xb[c + 2 * (size_t)l + 1]), lane[l]);
            acc = flush(acc);
            acc = fmaf(flush(npl_bf16_widen(w0)), npl_bf16_widen(xb[c + 2 * (size_t)l]), acc);
            lane[l] = flush(acc);
        }
    return npl_bf16_tail(row, xb, n32, n, npl_lane_sum16(lane));
}

void npl_bf16_rows_ref(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                       size_t n_vec, float *const *y)
{
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        for (size_t v = 0; v < n_vec; v++)
            y[v][r] = dot_bf16(row, xb + v * xb_stride, (size_t)w->n_cols);
    }
}
