/* GGUF tensor -> Q4NX. The 4-bit types whose groups are 32 columns wide
 * keep their codes and only have scales and mins rounded to bf16; every
 * other type with a reference dequantizer is dequantized and requantized. */
#include <stdlib.h>
#include <string.h>

#include "ggml_blocks.h"
#include "ggml_types.h"
#include "npu_bf16.h"
#include "q4nx.h"
#include "q4nx_internal.h"

bool npl_q4nx_can_repack(uint32_t src_type)
{
    const npl_type_traits *t = npl_type_traits_get(src_type);
    return t && t->can_dequantize;
}

/* Scale and min code (6 bits each) of q4_K group j from the 12 packed
 * bytes: groups 0-3 use the low 6 bits of bytes j and j+4; groups 4-7
 * take 4 low bits from byte j+4 and the 2 high bits left over in bytes
 * j-4 (scale) and j (min). */
static void q4_K_group_codes(const uint8_t s[NPL_K_SCALE_SIZE], int j, uint8_t *sc, uint8_t *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        *mn = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

static uint16_t canonical_zero(uint16_t bits)
{
    return bits == 0x8000u ? 0 : bits;
}

static void repack_row_q4_0(const uint8_t *src, uint8_t *dst, const npl_q4nx_layout *l,
                            uint32_t row)
{
    uint8_t codes[NPL_Q4NX_GROUP_COLS];
    for (uint32_t b = 0; b < l->cols / NPL_QK4_0; b++) {
        npl_block_q4_0 blk;
        memcpy(&blk, src + (size_t)b * sizeof blk, sizeof blk);
        /* w = d*(q-8) = d*q + (-8d); -8 * bf16(d) is exact in bf16. */
        uint16_t db = npu_f32_to_bf16(npl_fp16_to_fp32(blk.d));
        uint16_t mb = canonical_zero(npu_f32_to_bf16(-8.0f * npu_bf16_to_f32(db)));
        for (int j = 0; j < NPL_QK4_0 / 2; j++) {
            codes[j] = blk.qs[j] & 15;
            codes[j + 16] = blk.qs[j] >> 4;
        }
        q4nx_write_group(dst, l, row, b, db, mb, codes);
    }
}

static void repack_row_q4_1(const uint8_t *src, uint8_t *dst, const npl_q4nx_layout *l,
                            uint32_t row)
{
    uint8_t codes[NPL_Q4NX_GROUP_COLS];
    for (uint32_t b = 0; b < l->cols / NPL_QK4_1; b++) {
        npl_block_q4_1 blk;
        memcpy(&blk, src + (size_t)b * sizeof blk, sizeof blk);
        uint16_t db = npu_f32_to_bf16(npl_fp16_to_fp32(blk.d));
        uint16_t mb = canonical_zero(npu_f32_to_bf16(npl_fp16_to_fp32(blk.m)));
        for (int j = 0; j < NPL_QK4_1 / 2; j++) {
            codes[j] = blk.qs[j] & 15;
            codes[j + 16] = blk.qs[j] >> 4;
        }
        q4nx_write_group(dst, l, row, b, db, mb, codes);
    }
}

static void repack_row_q4_K(const uint8_t *src, uint8_t *dst, const npl_q4nx_layout *l,
                            uint32_t row)
{
    uint8_t codes[NPL_Q4NX_GROUP_COLS];
    for (uint32_t b = 0; b < l->cols / NPL_QK_K; b++) {
        npl_block_q4_K blk;
        memcpy(&blk, src + (size_t)b * sizeof blk, sizeof blk);
        float d = npl_fp16_to_fp32(blk.d);
        float dmin = npl_fp16_to_fp32(blk.dmin);
        /* Each 64-element chunk k stores group 2k in the low nibbles of
         * its 32 bytes and group 2k+1 in the high nibbles. */
        for (int g = 0; g < 8; g++) {
            uint8_t sc, mn;
            q4_K_group_codes(blk.scales, g, &sc, &mn);
            /* d*sc and dmin*mn are exact in f32 (11 x 6 bits). */
            uint16_t db = npu_f32_to_bf16(d * (float)sc);
            uint16_t mb = canonical_zero(npu_f32_to_bf16(-(dmin * (float)mn)));
            const uint8_t *qs = blk.qs + (g / 2) * 32;
            for (int j = 0; j < 32; j++)
                codes[j] = (g & 1) ? (uint8_t)(qs[j] >> 4) : (uint8_t)(qs[j] & 15);
            q4nx_write_group(dst, l, row, b * 8 + (uint32_t)g, db, mb, codes);
        }
    }
}

static npl_status requantize_row(uint32_t type, const uint8_t *src, uint8_t *dst,
                                 const npl_q4nx_layout *l, uint32_t row, float *tmp,
                                 npl_error *err)
{
    if (!npl_dequantize_row_ref(type, src, tmp, l->cols))
        return npl_error_set(err, NPL_ERR_INTERNAL, "q4nx: dequantizing row %u failed", row);
    uint8_t codes[NPL_Q4NX_GROUP_COLS];
    for (uint32_t c0 = 0; c0 < l->cols; c0 += NPL_Q4NX_GROUP_COLS) {
        uint32_t n = l->cols - c0 < NPL_Q4NX_GROUP_COLS ? l->cols - c0 : NPL_Q4NX_GROUP_COLS;
        for (uint32_t j = 0; j < n; j++) {
            float v = tmp[c0 + j];
            if (!(v <= NPL_Q4NX_MAX_ABS_WEIGHT && v >= -NPL_Q4NX_MAX_ABS_WEIGHT))
                return npl_error_set(err, NPL_ERR_FORMAT,
                                     "q4nx: weight %g at row %u column %u is not finite or "
                                     "beyond %g", (double)v, row, c0 + j,
                                     (double)NPL_Q4NX_MAX_ABS_WEIGHT);
        }
        uint16_t db, mb;
        q4nx_quantize_group(tmp + c0, n, &db, &mb, codes);
        q4nx_write_group(dst, l, row, c0 / NPL_Q4NX_GROUP_COLS, db, mb, codes);
    }
    return NPL_OK;
}

npl_status npl_q4nx_repack(const npl_q4nx_layout *l, uint32_t src_type, const void *src,
                           size_t src_bytes, void *dst, size_t dst_bytes,
                           npl_q4nx_repack_kind *kind, npl_error *err)
{
    if (!l || !src || !dst)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx: missing layout or buffer");
    const npl_type_traits *t = npl_type_traits_get(src_type);
    if (!t || !t->can_dequantize)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "q4nx: cannot repack tensors of type %s",
                             t ? t->name : "unknown");
    size_t row_bytes = npl_type_row_size(src_type, l->cols);
    if (row_bytes == 0)
        return npl_error_set(err, NPL_ERR_FORMAT,
                             "q4nx: a row of %u elements is not whole %s blocks of %u",
                             l->cols, t->name, t->block_size);
    if (src_bytes / row_bytes < l->rows)
        return npl_error_set(err, NPL_ERR_FORMAT,
                             "q4nx: source holds %zu bytes, %u rows of %s need %zu",
                             src_bytes, l->rows, t->name, row_bytes * l->rows);
    if (dst_bytes < l->bytes)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "q4nx: destination holds %zu bytes, layout needs %zu",
                             dst_bytes, l->bytes);
    memset(dst, 0, l->bytes);
    const uint8_t *s = src;
    switch (src_type) {
    case NPL_TYPE_Q4_0:
    case NPL_TYPE_Q4_1:
    case NPL_TYPE_Q4_K:
        for (uint32_t row = 0; row < l->rows; row++) {
            const uint8_t *r = s + (size_t)row * row_bytes;
            if (src_type == NPL_TYPE_Q4_0)
                repack_row_q4_0(r, dst, l, row);
            else if (src_type == NPL_TYPE_Q4_1)
                repack_row_q4_1(r, dst, l, row);
            else
                repack_row_q4_K(r, dst, l, row);
        }
        if (kind)
            *kind = NPL_Q4NX_REPACK_SCALES_ROUNDED;
        return NPL_OK;
    default:
        break;
    }
    float *tmp = malloc((size_t)l->cols * sizeof *tmp);
    if (!tmp)
        return npl_error_set(err, NPL_ERR_NOMEM, "q4nx: no memory for a %u-column row", l->cols);
    npl_status st = NPL_OK;
    for (uint32_t row = 0; row < l->rows && st == NPL_OK; row++)
        st = requantize_row(src_type, s + (size_t)row * row_bytes, dst, l, row, tmp, err);
    free(tmp);
    if (st == NPL_OK && kind)
        *kind = NPL_Q4NX_REPACK_REQUANTIZED;
    return st;
}
