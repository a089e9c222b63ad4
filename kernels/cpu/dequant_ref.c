/* Scalar reference dequantizers: the ground truth every fast kernel is
 * tested against. Written for clarity, one block at a time, with the
 * element order and the float operation order of ggml's own reference so
 * results match it bit for bit. Each block is first copied into an
 * aligned local struct because GGUF rows pack blocks back to back at
 * arbitrary alignment. */
#include "ggml_types.h"

#include "ggml_blocks.h"

#include <stddef.h>
#include <string.h>

typedef void (*block_decoder)(const void *block, float *y);

static void decode_f32(const void *block, float *y)
{
    memcpy(y, block, sizeof(float));
}

static void decode_f16(const void *block, float *y)
{
    const uint16_t *h = block;
    y[0] = npl_fp16_to_fp32(*h);
}

static void decode_bf16(const void *block, float *y)
{
    const uint16_t *h = block;
    y[0] = npl_bf16_to_fp32(*h);
}

static void decode_q4_0(const void *block, float *y)
{
    const npl_block_q4_0 *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    for (int j = 0; j < NPL_QK4_0 / 2; j++) {
        const int lo = (b->qs[j] & 0x0f) - 8;
        const int hi = (b->qs[j] >> 4) - 8;
        y[j] = (float)lo * d;
        y[j + NPL_QK4_0 / 2] = (float)hi * d;
    }
}

static void decode_q4_1(const void *block, float *y)
{
    const npl_block_q4_1 *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    const float m = npl_fp16_to_fp32(b->m);
    for (int j = 0; j < NPL_QK4_1 / 2; j++) {
        const int lo = b->qs[j] & 0x0f;
        const int hi = b->qs[j] >> 4;
        y[j] = (float)lo * d + m;
        y[j + NPL_QK4_1 / 2] = (float)hi * d + m;
    }
}

static uint32_t load_le32(const uint8_t bytes[4])
{
    return (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 |
           (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
}

static void decode_q5_0(const void *block, float *y)
{
    const npl_block_q5_0 *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    const uint32_t qh = load_le32(b->qh);
    for (int j = 0; j < NPL_QK5_0 / 2; j++) {
        const int bit_lo = (qh >> j) & 1u;
        const int bit_hi = (qh >> (j + NPL_QK5_0 / 2)) & 1u;
        const int lo = ((b->qs[j] & 0x0f) | bit_lo << 4) - 16;
        const int hi = ((b->qs[j] >> 4) | bit_hi << 4) - 16;
        y[j] = (float)lo * d;
        y[j + NPL_QK5_0 / 2] = (float)hi * d;
    }
}

static void decode_q5_1(const void *block, float *y)
{
    const npl_block_q5_1 *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    const float m = npl_fp16_to_fp32(b->m);
    const uint32_t qh = load_le32(b->qh);
    for (int j = 0; j < NPL_QK5_1 / 2; j++) {
        const int bit_lo = (qh >> j) & 1u;
        const int bit_hi = (qh >> (j + NPL_QK5_1 / 2)) & 1u;
        const int lo = (b->qs[j] & 0x0f) | bit_lo << 4;
        const int hi = (b->qs[j] >> 4) | bit_hi << 4;
        y[j] = (float)lo * d + m;
        y[j + NPL_QK5_1 / 2] = (float)hi * d + m;
    }
}

static void decode_q8_0(const void *block, float *y)
{
    const npl_block_q8_0 *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    for (int j = 0; j < NPL_QK8_0; j++)
        y[j] = (float)b->qs[j] * d;
}

static void decode_q2_K(const void *block, float *y)
{
    const npl_block_q2_K *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    const float dmin = npl_fp16_to_fp32(b->dmin);
    /* Each 128-element half uses 32 bytes of qs four times over, two bits
     * at a time; each pass covers two groups of 16 with their own scale. */
    int group = 0;
    for (int half = 0; half < 2; half++) {
        const uint8_t *q = b->qs + 32 * half;
        for (int shift = 0; shift < 8; shift += 2) {
            for (int part = 0; part < 2; part++, group++) {
                const float dl = d * (float)(b->scales[group] & 0x0f);
                const float ml = dmin * (float)(b->scales[group] >> 4);
                for (int l = 0; l < 16; l++)
                    *y++ = dl * (float)((q[16 * part + l] >> shift) & 3) - ml;
            }
        }
    }
}

/* The 16 signed 6-bit q3_K scales: low nibble from bytes 0-7 (low nibble
 * for groups 0-7, high nibble for 8-15), top two bits from bytes 8-11. */
static int q3_K_scale(const uint8_t packed[NPL_K_SCALE_SIZE], int group)
{
    const int low = group < 8 ? packed[group] & 0x0f : packed[group - 8] >> 4;
    const int high = (packed[8 + group % 4] >> (2 * (group / 4))) & 3;
    return (low | high << 4) - 32;
}

static void decode_q3_K(const void *block, float *y)
{
    const npl_block_q3_K *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    int group = 0;
    unsigned hbit = 0; /* hmask bit index: one per 32-element pass */
    for (int half = 0; half < 2; half++) {
        const uint8_t *q = b->qs + 32 * half;
        for (int shift = 0; shift < 8; shift += 2, hbit++) {
            for (int part = 0; part < 2; part++, group++) {
                const float dl = d * (float)q3_K_scale(b->scales, group);
                for (int l = 0; l < 16; l++) {
                    const int idx = 16 * part + l;
                    const int low = (q[idx] >> shift) & 3;
                    const int sub = (b->hmask[idx] >> hbit) & 1u ? 0 : 4;
                    *y++ = dl * (float)(low - sub);
                }
            }
        }
    }
}

/* Scale and min of q4_K/q5_K group j (0-7) from the 12 packed bytes:
 * groups 0-3 keep 6 bits in bytes 0-3 (scale) and 4-7 (min); groups 4-7
 * keep their low 4 bits in bytes 8-11 and their top 2 bits in the spare
 * top bits of bytes 0-7. */
static void k4_scale_min(const uint8_t packed[NPL_K_SCALE_SIZE], int j, int *scale, int *min)
{
    if (j < 4) {
        *scale = packed[j] & 63;
        *min = packed[j + 4] & 63;
    } else {
        *scale = (packed[j + 4] & 0x0f) | (packed[j - 4] >> 6) << 4;
        *min = (packed[j + 4] >> 4) | (packed[j] >> 6) << 4;
    }
}

static void decode_q4_K(const void *block, float *y)
{
    const npl_block_q4_K *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    const float dmin = npl_fp16_to_fp32(b->dmin);
    /* 64 elements per 32 qs bytes: low nibbles are group 2c, high 2c+1. */
    for (int chunk = 0; chunk < 4; chunk++) {
        const uint8_t *q = b->qs + 32 * chunk;
        int sc, mn;
        k4_scale_min(b->scales, 2 * chunk, &sc, &mn);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        k4_scale_min(b->scales, 2 * chunk + 1, &sc, &mn);
        const float d2 = d * (float)sc, m2 = dmin * (float)mn;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)(q[l] & 0x0f) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
}

static void decode_q5_K(const void *block, float *y)
{
    const npl_block_q5_K *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    const float dmin = npl_fp16_to_fp32(b->dmin);
    /* As q4_K; the fifth bit of group g is bit g of qh[l]. */
    for (int chunk = 0; chunk < 4; chunk++) {
        const uint8_t *q = b->qs + 32 * chunk;
        const int bit_lo = 2 * chunk, bit_hi = 2 * chunk + 1;
        int sc, mn;
        k4_scale_min(b->scales, 2 * chunk, &sc, &mn);
        const float d1 = d * (float)sc, m1 = dmin * (float)mn;
        k4_scale_min(b->scales, 2 * chunk + 1, &sc, &mn);
        const float d2 = d * (float)sc, m2 = dmin * (float)mn;
        for (int l = 0; l < 32; l++) {
            const int v = (q[l] & 0x0f) + (((b->qh[l] >> bit_lo) & 1u) ? 16 : 0);
            *y++ = d1 * (float)v - m1;
        }
        for (int l = 0; l < 32; l++) {
            const int v = (q[l] >> 4) + (((b->qh[l] >> bit_hi) & 1u) ? 16 : 0);
            *y++ = d2 * (float)v - m2;
        }
    }
}

static void decode_q6_K(const void *block, float *y)
{
    const npl_block_q6_K *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    /* Element e = 128*half + 32*k + l (k 0-3, l 0-31) takes its low 4 bits
     * from ql[64*half + 32*(k&1) + l] (low nibble for k<2, high for k>=2)
     * and its top 2 bits from bits 2k..2k+1 of qh[32*half + l]; its scale
     * is scales[e / 16]. */
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = b->ql + 64 * half;
        const uint8_t *qh = b->qh + 32 * half;
        for (int k = 0; k < 4; k++) {
            for (int l = 0; l < 32; l++) {
                const int e = 128 * half + 32 * k + l;
                const uint8_t lbyte = ql[32 * (k & 1) + l];
                const int low = k < 2 ? lbyte & 0x0f : lbyte >> 4;
                const int high = (qh[l] >> (2 * k)) & 3;
                const int q = (low | high << 4) - 32;
                y[e] = d * (float)b->scales[e / 16] * (float)q;
            }
        }
    }
}

static void decode_q8_K(const void *block, float *y)
{
    const npl_block_q8_K *b = block;
    for (int j = 0; j < NPL_QK_K; j++)
        y[j] = b->d * (float)b->qs[j];
}

static const int8_t iq4nl_levels[16] = NPL_IQ4NL_LEVELS;

static void decode_iq4_nl(const void *block, float *y)
{
    const npl_block_iq4_nl *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    for (int j = 0; j < NPL_QK4_NL / 2; j++) {
        y[j] = d * (float)iq4nl_levels[b->qs[j] & 0x0f];
        y[j + NPL_QK4_NL / 2] = d * (float)iq4nl_levels[b->qs[j] >> 4];
    }
}

static void decode_iq4_xs(const void *block, float *y)
{
    const npl_block_iq4_xs *b = block;
    const float d = npl_fp16_to_fp32(b->d);
    for (int g = 0; g < NPL_QK_K / 32; g++) {
        const int low = (b->scales_l[g / 2] >> (4 * (g % 2))) & 0x0f;
        const int high = (b->scales_h >> (2 * g)) & 3;
        const float dl = d * (float)((low | high << 4) - 32);
        const uint8_t *q = b->qs + 16 * g;
        for (int j = 0; j < 16; j++) {
            y[32 * g + j] = dl * (float)iq4nl_levels[q[j] & 0x0f];
            y[32 * g + j + 16] = dl * (float)iq4nl_levels[q[j] >> 4];
        }
    }
}

/* ggml gives e = 255 no NaN meaning, and neither do we. */
float npl_e8m0_to_fp32_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static const int8_t mxfp4_levels_x2[16] = NPL_MXFP4_LEVELS_X2;

static void decode_mxfp4(const void *block, float *y)
{
    const npl_block_mxfp4 *b = block;
    const float d = npl_e8m0_to_fp32_half(b->e);
    for (int j = 0; j < NPL_QK_MXFP4 / 2; j++) {
        y[j] = (float)mxfp4_levels_x2[b->qs[j] & 0x0f] * d;
        y[j + NPL_QK_MXFP4 / 2] = (float)mxfp4_levels_x2[b->qs[j] >> 4] * d;
    }
}

static block_decoder decoder_for(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_F32: return decode_f32;
    case NPL_TYPE_F16: return decode_f16;
    case NPL_TYPE_BF16: return decode_bf16;
    case NPL_TYPE_Q4_0: return decode_q4_0;
    case NPL_TYPE_Q4_1: return decode_q4_1;
    case NPL_TYPE_Q5_0: return decode_q5_0;
    case NPL_TYPE_Q5_1: return decode_q5_1;
    case NPL_TYPE_Q8_0: return decode_q8_0;
    case NPL_TYPE_Q2_K: return decode_q2_K;
    case NPL_TYPE_Q3_K: return decode_q3_K;
    case NPL_TYPE_Q4_K: return decode_q4_K;
    case NPL_TYPE_Q5_K: return decode_q5_K;
    case NPL_TYPE_Q6_K: return decode_q6_K;
    case NPL_TYPE_Q8_K: return decode_q8_K;
    case NPL_TYPE_IQ4_NL: return decode_iq4_nl;
    case NPL_TYPE_IQ4_XS: return decode_iq4_xs;
    case NPL_TYPE_MXFP4: return decode_mxfp4;
    default: return NULL;
    }
}

/* Aligned storage big enough for one block of any decodable type. */
typedef union any_block {
    float f32;
    uint16_t f16;
    npl_block_q4_0 q4_0;
    npl_block_q4_1 q4_1;
    npl_block_q5_0 q5_0;
    npl_block_q5_1 q5_1;
    npl_block_q8_0 q8_0;
    npl_block_q2_K q2_K;
    npl_block_q3_K q3_K;
    npl_block_q4_K q4_K;
    npl_block_q5_K q5_K;
    npl_block_q6_K q6_K;
    npl_block_q8_K q8_K;
    npl_block_iq4_nl iq4_nl;
    npl_block_iq4_xs iq4_xs;
    npl_block_mxfp4 mxfp4;
} any_block;

bool npl_dequantize_row_ref(uint32_t type, const void *src, float *dst, int64_t n)
{
    const npl_type_traits *t = npl_type_traits_get(type);
    block_decoder decode = decoder_for(type);
    if (t == NULL || !t->can_dequantize || decode == NULL || n < 0 || n % t->block_size != 0)
        return false;
    if (n > 0 && (src == NULL || dst == NULL))
        return false;
    if (t->type_size > sizeof(any_block))
        return false; /* a traits/decoder mismatch; the tests pin this */

    const unsigned char *bytes = src;
    const int64_t blocks = n / t->block_size;
    any_block local;
    for (int64_t i = 0; i < blocks; i++) {
        memcpy(&local, bytes + (size_t)i * t->type_size, t->type_size);
        decode(&local, dst + (size_t)i * t->block_size);
    }
    return true;
}
