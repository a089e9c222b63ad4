#include "q4nx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "npu_bf16.h"
#include "q4nx_internal.h"

npl_status npl_q4nx_layout_init(npl_q4nx_layout *l, int64_t rows, int64_t cols, npl_error *err)
{
    if (!l)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx: no layout to fill");
    memset(l, 0, sizeof *l);
    if (rows < 1 || cols < 1 || rows > NPL_Q4NX_MAX_DIM || cols > NPL_Q4NX_MAX_DIM)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "q4nx: matrix %lld x %lld is outside 1..%u per dimension",
                             (long long)rows, (long long)cols, NPL_Q4NX_MAX_DIM);
    l->rows = (uint32_t)rows;
    l->cols = (uint32_t)cols;
    l->row_blocks = (l->rows + NPL_Q4NX_BLOCK_ROWS - 1) / NPL_Q4NX_BLOCK_ROWS;
    l->col_blocks = (l->cols + NPL_Q4NX_BLOCK_COLS - 1) / NPL_Q4NX_BLOCK_COLS;
    l->rows_padded = l->row_blocks * NPL_Q4NX_BLOCK_ROWS;
    l->cols_padded = l->col_blocks * NPL_Q4NX_BLOCK_COLS;
    size_t blocks = (size_t)l->row_blocks * l->col_blocks;
    if (blocks > SIZE_MAX / NPL_Q4NX_BLOCK_BYTES)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx: matrix too large for memory");
    l->bytes = blocks * NPL_Q4NX_BLOCK_BYTES;
    return NPL_OK;
}

static inline uint16_t load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline void store_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

uint16_t npl_q4nx_scale_bits(const void *q, const npl_q4nx_layout *l, uint32_t row, uint32_t group)
{
    const uint8_t *blk = q4nx_block_at((uint8_t *)(uintptr_t)q, l, row, group * NPL_Q4NX_GROUP_COLS);
    uint32_t idx = q4nx_param_index(row % NPL_Q4NX_BLOCK_ROWS,
                                    group % NPL_Q4NX_GROUPS_PER_BLOCK_ROW);
    return load_u16(blk + NPL_Q4NX_SCALES_OFFSET + 2 * idx);
}

uint16_t npl_q4nx_min_bits(const void *q, const npl_q4nx_layout *l, uint32_t row, uint32_t group)
{
    const uint8_t *blk = q4nx_block_at((uint8_t *)(uintptr_t)q, l, row, group * NPL_Q4NX_GROUP_COLS);
    uint32_t idx = q4nx_param_index(row % NPL_Q4NX_BLOCK_ROWS,
                                    group % NPL_Q4NX_GROUPS_PER_BLOCK_ROW);
    return load_u16(blk + NPL_Q4NX_MINS_OFFSET + 2 * idx);
}

uint8_t npl_q4nx_code(const void *q, const npl_q4nx_layout *l, uint32_t row, uint32_t col)
{
    const uint8_t *blk = q4nx_block_at((uint8_t *)(uintptr_t)q, l, row, col);
    uint32_t r = row % NPL_Q4NX_BLOCK_ROWS;
    return (uint8_t)((blk[q4nx_code_byte(r, col % NPL_Q4NX_BLOCK_COLS)] >> q4nx_code_shift(r)) & 15);
}

void q4nx_write_group(uint8_t *base, const npl_q4nx_layout *l, uint32_t row, uint32_t group,
                      uint16_t d_bits, uint16_t m_bits, const uint8_t codes[NPL_Q4NX_GROUP_COLS])
{
    uint8_t *blk = q4nx_block_at(base, l, row, group * NPL_Q4NX_GROUP_COLS);
    uint32_t r = row % NPL_Q4NX_BLOCK_ROWS;
    uint32_t g = group % NPL_Q4NX_GROUPS_PER_BLOCK_ROW;
    store_u16(blk + NPL_Q4NX_SCALES_OFFSET + 2 * q4nx_param_index(r, g), d_bits);
    store_u16(blk + NPL_Q4NX_MINS_OFFSET + 2 * q4nx_param_index(r, g), m_bits);
    /* The byte is shared with the neighbouring row: keep its nibble. */
    unsigned shift = q4nx_code_shift(r);
    for (uint32_t j = 0; j < NPL_Q4NX_GROUP_COLS; j++) {
        uint8_t *p = blk + q4nx_code_byte(r, g * NPL_Q4NX_GROUP_COLS + j);
        *p = (uint8_t)((*p & ~(15u << shift)) | ((codes[j] & 15u) << shift));
    }
}

/* The 16 values a group's codes decode to, in f32 as the reference
 * dequantizer computes them. */
static void group_levels(const uint8_t *blk, uint32_t r, uint32_t g, bool round_bf16, float lut[16])
{
    uint32_t idx = q4nx_param_index(r, g);
    float d = npu_bf16_to_f32(load_u16(blk + NPL_Q4NX_SCALES_OFFSET + 2 * idx));
    float m = npu_bf16_to_f32(load_u16(blk + NPL_Q4NX_MINS_OFFSET + 2 * idx));
    for (int q = 0; q < 16; q++) {
        float w = d * (float)q + m;
        lut[q] = round_bf16 ? npu_round_bf16(w) : w;
    }
}

static void dequantize_row(const void *q4nx, const npl_q4nx_layout *l, uint32_t row,
                           bool round_bf16, float *dst)
{
    const uint8_t *base = q4nx;
    uint32_t r = row % NPL_Q4NX_BLOCK_ROWS;
    for (uint32_t c0 = 0; c0 < l->cols; c0 += NPL_Q4NX_GROUP_COLS) {
        const uint8_t *blk = q4nx_block_at((uint8_t *)(uintptr_t)base, l, row, c0);
        uint32_t g = (c0 % NPL_Q4NX_BLOCK_COLS) / NPL_Q4NX_GROUP_COLS;
        float lut[16];
        group_levels(blk, r, g, round_bf16, lut);
        const uint8_t *qs = blk + q4nx_code_byte(r, g * NPL_Q4NX_GROUP_COLS);
        unsigned shift = q4nx_code_shift(r);
        uint32_t n = l->cols - c0 < NPL_Q4NX_GROUP_COLS ? l->cols - c0 : NPL_Q4NX_GROUP_COLS;
        for (uint32_t j = 0; j < n; j++)
            dst[c0 + j] = lut[(qs[j * (NPL_Q4NX_BAND_ROWS / 2)] >> shift) & 15];
    }
}

void npl_q4nx_dequantize_row(const void *q4nx, const npl_q4nx_layout *l, uint32_t row, float *dst)
{
    dequantize_row(q4nx, l, row, false, dst);
}

void npl_q4nx_dequantize_row_bf16(const void *q4nx, const npl_q4nx_layout *l, uint32_t row,
                                  float *dst)
{
    dequantize_row(q4nx, l, row, true, dst);
}

/* Dot product of a bf16-valued weight row with a bf16 vector, summed per
 * 32-column group and then across groups (the documented order). */
static float dot_grouped(const float *w, const uint16_t *x, uint32_t cols)
{
    float total = 0.0f;
    for (uint32_t c0 = 0; c0 < cols; c0 += NPL_Q4NX_GROUP_COLS) {
        uint32_t n = cols - c0 < NPL_Q4NX_GROUP_COLS ? cols - c0 : NPL_Q4NX_GROUP_COLS;
        float part = 0.0f;
        for (uint32_t j = 0; j < n; j++)
            part += w[c0 + j] * npu_bf16_to_f32(x[c0 + j]);
        total += part;
    }
    return total;
}

void npl_q4nx_matvec_ref(const void *q4nx, const npl_q4nx_layout *l, const uint16_t *x, float *y)
{
    const uint8_t *base = q4nx;
    for (uint32_t row = 0; row < l->rows; row++) {
        uint32_t r = row % NPL_Q4NX_BLOCK_ROWS;
        float total = 0.0f;
        for (uint32_t c0 = 0; c0 < l->cols; c0 += NPL_Q4NX_GROUP_COLS) {
            const uint8_t *blk = q4nx_block_at((uint8_t *)(uintptr_t)base, l, row, c0);
            uint32_t g = (c0 % NPL_Q4NX_BLOCK_COLS) / NPL_Q4NX_GROUP_COLS;
            float lut[16];
            group_levels(blk, r, g, true, lut);
            const uint8_t *qs = blk + q4nx_code_byte(r, g * NPL_Q4NX_GROUP_COLS);
            unsigned shift = q4nx_code_shift(r);
            uint32_t n = l->cols - c0 < NPL_Q4NX_GROUP_COLS ? l->cols - c0 : NPL_Q4NX_GROUP_COLS;
            float part = 0.0f;
            for (uint32_t j = 0; j < n; j++)
                part += lut[(qs[j * (NPL_Q4NX_BAND_ROWS / 2)] >> shift) & 15]
                      * npu_bf16_to_f32(x[c0 + j]);
            total += part;
        }
        y[row] = total;
    }
}

npl_status npl_q4nx_matmul_ref(const void *q4nx, const npl_q4nx_layout *l, const uint16_t *x,
                               size_t x_stride, uint32_t n_vectors, float *y, size_t y_stride,
                               npl_error *err)
{
    if (n_vectors == 0)
        return NPL_OK;
    if (n_vectors == 1) {
        npl_q4nx_matvec_ref(q4nx, l, x, y);
        return NPL_OK;
    }
    float *w = malloc((size_t)l->cols * sizeof *w);
    if (!w)
        return npl_error_set(err, NPL_ERR_NOMEM, "q4nx: no memory for a %u-column row", l->cols);
    for (uint32_t row = 0; row < l->rows; row++) {
        dequantize_row(q4nx, l, row, true, w);
        for (uint32_t v = 0; v < n_vectors; v++)
            y[(size_t)v * y_stride + row] = dot_grouped(w, x + (size_t)v * x_stride, l->cols);
    }
    free(w);
    return NPL_OK;
}

/* Largest bf16 value <= f (f finite). */
static uint16_t bf16_round_down(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t hi = (uint16_t)(u >> 16);
    if ((u & 0xffffu) == 0)
        return hi;
    /* Truncation moves toward zero: right for positives, one step too
     * high for negatives, whose magnitude must grow instead. */
    return (u & 0x80000000u) ? (uint16_t)(hi + 1) : hi;
}

/* Smallest bf16 value >= f (f finite). */
static uint16_t bf16_round_up(float f)
{
    return (uint16_t)(bf16_round_down(-f) ^ 0x8000u);
}

void q4nx_quantize_group(const float *v, uint32_t n, uint16_t *d_bits, uint16_t *m_bits,
                         uint8_t codes[NPL_Q4NX_GROUP_COLS])
{
    float mn = v[0], mx = v[0];
    for (uint32_t j = 1; j < n; j++) {
        mn = v[j] < mn ? v[j] : mn;
        mx = v[j] > mx ? v[j] : mx;
    }
    /* Min rounded down and step rounded up, so the 16 levels span the
     * whole group: no element is clamped by more than a rounding error. */
    uint16_t mb = bf16_round_down(mn);
    float m = npu_bf16_to_f32(mb);
    float range = mx - m;
    uint16_t db = range > 0.0f ? bf16_round_up(range / 15.0f) : 0;
    float d = npu_bf16_to_f32(db);
    memset(codes, 0, NPL_Q4NX_GROUP_COLS);
    for (uint32_t j = 0; j < n && d > 0.0f; j++) {
        float t = floorf((v[j] - m) / d);
        int q = t < 0.0f ? 0 : t > 15.0f ? 15 : (int)t;
        /* Pick between q and q+1 by the error the dequantizer will see. */
        if (q < 15 && fabsf(v[j] - (d * (float)(q + 1) + m)) < fabsf(v[j] - (d * (float)q + m)))
            q++;
        codes[j] = (uint8_t)q;
    }
    /* -0.0 would decode the same, but a plain zero keeps files canonical. */
    *m_bits = mb == 0x8000u ? 0 : mb;
    *d_bits = db;
}

npl_status npl_q4nx_quantize_f32(const npl_q4nx_layout *l, const float *src, void *dst,
                                 size_t dst_bytes, npl_error *err)
{
    if (!l || !src || !dst)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx: missing layout or buffer");
    if (dst_bytes < l->bytes)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "q4nx: destination holds %zu bytes, layout needs %zu",
                             dst_bytes, l->bytes);
    memset(dst, 0, l->bytes);
    uint8_t codes[NPL_Q4NX_GROUP_COLS];
    for (uint32_t row = 0; row < l->rows; row++) {
        const float *r = src + (size_t)row * l->cols;
        for (uint32_t c0 = 0; c0 < l->cols; c0 += NPL_Q4NX_GROUP_COLS) {
            uint32_t n = l->cols - c0 < NPL_Q4NX_GROUP_COLS ? l->cols - c0 : NPL_Q4NX_GROUP_COLS;
            for (uint32_t j = 0; j < n; j++)
                if (!(fabsf(r[c0 + j]) <= NPL_Q4NX_MAX_ABS_WEIGHT))
                    return npl_error_set(err, NPL_ERR_FORMAT,
                                         "q4nx: weight %g at row %u column %u is not finite "
                                         "or beyond %g",
                                         (double)r[c0 + j], row, c0 + j,
                                         (double)NPL_Q4NX_MAX_ABS_WEIGHT);
            uint16_t db, mb;
            q4nx_quantize_group(r + c0, n, &db, &mb, codes);
            q4nx_write_group(dst, l, row, c0 / NPL_Q4NX_GROUP_COLS, db, mb, codes);
        }
    }
    return NPL_OK;
}
