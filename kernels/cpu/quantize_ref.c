/* Reference quantizers. For q4_0, q4_1, q5_0, q5_1, q8_0 and q8_K they
 * follow ggml's reference rules exactly (documented per function), so a
 * file we write holds the same bytes llama.cpp's reference quantizer would
 * produce. The k-quant quantizers (q4_K, q5_K, q6_K) are deliberately
 * simple max-based ones: valid blocks with a proven error bound, not the
 * iterative search llama-quantize runs, so their bytes differ from it.
 *
 * ggml's rules convert floats to small ints with C casts, which is
 * undefined for NaN and out-of-range values. Here every such conversion
 * goes through to_int_clamped, which is identical for finite in-range
 * values and gives a defined (if meaningless) block otherwise. Products
 * are kept in their own statements, as in ggml, so no compiler fuses them
 * with the following add into an FMA that would round differently. */
#include "ggml_types.h"

#include "ggml_blocks.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Truncates v toward zero into [lo, hi]; NaN gives lo. */
static int to_int_clamped(float v, int lo, int hi)
{
    if (!(v > (float)lo))
        return lo;
    if (v >= (float)hi)
        return hi;
    return (int)v;
}

/* Round to nearest, ties to even (ggml's nearest_int), clamped. */
static int round_even_clamped(float v, int lo, int hi)
{
    return to_int_clamped(nearbyintf(v), lo, hi);
}

/* The value with the largest magnitude, keeping its sign; the first one
 * wins a tie (ggml scans with a strict `amax < |v|`). */
static float signed_absmax(const float *x, int n, float *amax_out)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax_out)
        *amax_out = amax;
    return max;
}

static void min_max(const float *x, int n, float *min_out, float *max_out)
{
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

static void store_le32(uint8_t bytes[4], uint32_t v)
{
    for (int i = 0; i < 4; i++)
        bytes[i] = (uint8_t)(v >> (8 * i));
}

/* ---- the ggml-exact 32-element types ----------------------------------- */

/* q4_0: max = signed absmax, d = max / -8, id = 1/d (from the float d,
 * not the stored fp16), q = min(15, trunc(x * id + 8.5)). The extreme
 * value lands on q = 0; the opposite extreme would be 16 and clamps. */
static void quantize_block_q4_0(const float *x, void *out)
{
    npl_block_q4_0 b;
    const float max = signed_absmax(x, NPL_QK4_0, NULL);
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = npl_fp32_to_fp16(d);
    for (int j = 0; j < NPL_QK4_0 / 2; j++) {
        const float x0 = x[j] * id, x1 = x[j + NPL_QK4_0 / 2] * id;
        const int lo = to_int_clamped(x0 + 8.5f, 0, 15);
        const int hi = to_int_clamped(x1 + 8.5f, 0, 15);
        b.qs[j] = (uint8_t)(lo | hi << 4);
    }
    memcpy(out, &b, sizeof b);
}

/* q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min)/d + 0.5)). */
static void quantize_block_q4_1(const float *x, void *out)
{
    npl_block_q4_1 b;
    float min, max;
    min_max(x, NPL_QK4_1, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = npl_fp32_to_fp16(d);
    b.m = npl_fp32_to_fp16(min);
    for (int j = 0; j < NPL_QK4_1 / 2; j++) {
        const float x0 = (x[j] - min) * id, x1 = (x[j + NPL_QK4_1 / 2] - min) * id;
        const int lo = to_int_clamped(x0 + 0.5f, 0, 15);
        const int hi = to_int_clamped(x1 + 0.5f, 0, 15);
        b.qs[j] = (uint8_t)(lo | hi << 4);
    }
    memcpy(out, &b, sizeof b);
}

/* q5_0: as q4_0 with d = max / -16 and q = min(31, trunc(x * id + 16.5)). */
static void quantize_block_q5_0(const float *x, void *out)
{
    npl_block_q5_0 b;
    const float max = signed_absmax(x, NPL_QK5_0, NULL);
    const float d = max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t qh = 0;
    b.d = npl_fp32_to_fp16(d);
    for (int j = 0; j < NPL_QK5_0 / 2; j++) {
        const float x0 = x[j] * id, x1 = x[j + NPL_QK5_0 / 2] * id;
        const int lo = to_int_clamped(x0 + 16.5f, 0, 31);
        const int hi = to_int_clamped(x1 + 16.5f, 0, 31);
        b.qs[j] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
        qh |= (uint32_t)(lo >> 4) << j;
        qh |= (uint32_t)(hi >> 4) << (j + NPL_QK5_0 / 2);
    }
    store_le32(b.qh, qh);
    memcpy(out, &b, sizeof b);
}

/* q5_1: d = (max - min) / 31, m = min, q = trunc((x - min)/d + 0.5). */
static void quantize_block_q5_1(const float *x, void *out)
{
    npl_block_q5_1 b;
    float min, max;
    min_max(x, NPL_QK5_1, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t qh = 0;
    b.d = npl_fp32_to_fp16(d);
    b.m = npl_fp32_to_fp16(min);
    for (int j = 0; j < NPL_QK5_1 / 2; j++) {
        const float x0 = (x[j] - min) * id, x1 = (x[j + NPL_QK5_1 / 2] - min) * id;
        const int lo = to_int_clamped(x0 + 0.5f, 0, 31);
        const int hi = to_int_clamped(x1 + 0.5f, 0, 31);
        b.qs[j] = (uint8_t)((lo & 0x0f) | (hi & 0x0f) << 4);
        qh |= (uint32_t)(lo >> 4) << j;
        qh |= (uint32_t)(hi >> 4) << (j + NPL_QK5_1 / 2);
    }
    store_le32(b.qh, qh);
    memcpy(out, &b, sizeof b);
}

/* q8_0: d = amax / 127, q = roundf(x / d) (ties away from zero). */
static void quantize_block_q8_0(const float *x, void *out)
{
    npl_block_q8_0 b;
    float amax;
    signed_absmax(x, NPL_QK8_0, &amax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = npl_fp32_to_fp16(d);
    for (int j = 0; j < NPL_QK8_0; j++)
        b.qs[j] = (int8_t)to_int_clamped(roundf(x[j] * id), -128, 127);
    memcpy(out, &b, sizeof b);
}

/* q8_K: iscale = -127 / max (signed absmax), q = min(127, round-even(x *
 * iscale)), d = 1 / iscale kept as a full float; an all-zero block gets
 * d = 0. bsums are the sums of each group of 16 quants. */
static void quantize_block_q8_K(const float *x, void *out)
{
    npl_block_q8_K b;
    float amax;
    const float max = signed_absmax(x, NPL_QK_K, &amax);
    memset(&b, 0, sizeof b);
    if (amax != 0.0f) {
        const float iscale = -127.0f / max;
        for (int j = 0; j < NPL_QK_K; j++)
            b.qs[j] = (int8_t)round_even_clamped(iscale * x[j], -128, 127);
        b.d = iscale != 0.0f ? 1.0f / iscale : 0.0f; /* 0 only for infinite max */
    }
    for (int g = 0; g < NPL_QK_K / 16; g++) {
        int sum = 0;
        for (int l = 0; l < 16; l++)
            sum += b.qs[16 * g + l];
        b.bsums[g] = (int16_t)sum;
    }
    memcpy(out, &b, sizeof b);
}

/* ---- simple k-quants ---------------------------------------------------- */

/* The smallest fp16 not below v (v >= 0), capped at the largest finite
 * half so scales never become inf. Rounding super-scales up guarantees
 * that the 6-bit sub-scales derived from them never need to exceed 63. */
static uint16_t fp16_not_below(float v)
{
    if (!(v > 0.0f))
        return 0;
    uint16_t h = npl_fp32_to_fp16(v);
    if (h < 0x7c00u && npl_fp16_to_fp32(h) < v)
        h++;
    return h >= 0x7c00u ? 0x7bffu : h;
}

/* Packs 8 six-bit scales and mins the way q4_K/q5_K store them (the
 * inverse of the k4_scale_min unpacking in dequant_ref.c). */
static void pack_k4_scales(const uint8_t sc[8], const uint8_t mn[8], uint8_t out[NPL_K_SCALE_SIZE])
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | (mn[j + 4] & 0x0f) << 4);
    }
}

/* Scale/min quantization shared by q4_K (levels 15) and q5_K (levels 31),
 * for 8 groups of 32. Each group's decoded range is [-dmin*m,
 * -dmin*m + levels*d*sc]: m is rounded up so the range reaches the group
 * minimum (clamped to <= 0), then sc is rounded up so it reaches the
 * maximum. Every element is thus within half a step d*sc of its decoded
 * value (up to float rounding). */
static void quantize_scale_min_k(const float *x, int levels, uint16_t *d_out, uint16_t *dmin_out,
                                 uint8_t sc[8], uint8_t mn[8], uint8_t q[NPL_QK_K])
{
    float lo[8], hi[8], offset[8], step_need[8];
    float max_offset = 0.0f, max_step = 0.0f;

    for (int g = 0; g < 8; g++) {
        min_max(x + 32 * g, 32, &lo[g], &hi[g]);
        if (lo[g] > 0.0f)
            lo[g] = 0.0f;
        if (hi[g] < lo[g])
            hi[g] = lo[g];
        if (-lo[g] > max_offset)
            max_offset = -lo[g];
    }
    *dmin_out = fp16_not_below(max_offset / 63.0f);
    const float dmin = npl_fp16_to_fp32(*dmin_out);
    for (int g = 0; g < 8; g++) {
        mn[g] = dmin > 0.0f ? (uint8_t)to_int_clamped(ceilf(-lo[g] / dmin), 0, 63) : 0;
        offset[g] = dmin * (float)mn[g];
        step_need[g] = (hi[g] + offset[g]) / (float)levels;
        if (step_need[g] > max_step)
            max_step = step_need[g];
    }
    *d_out = fp16_not_below(max_step / 63.0f);
    const float d = npl_fp16_to_fp32(*d_out);
    for (int g = 0; g < 8; g++) {
        sc[g] = d > 0.0f ? (uint8_t)to_int_clamped(ceilf(step_need[g] / d), 0, 63) : 0;
        const float step = d * (float)sc[g];
        const float inv = step > 0.0f ? 1.0f / step : 0.0f;
        for (int l = 0; l < 32; l++)
            q[32 * g + l] = (uint8_t)round_even_clamped((x[32 * g + l] + offset[g]) * inv, 0, levels);
    }
}

static void quantize_block_q4_K(const float *x, void *out)
{
    npl_block_q4_K b;
    uint8_t sc[8], mn[8], q[NPL_QK_K];
    quantize_scale_min_k(x, 15, &b.d, &b.dmin, sc, mn, q);
    pack_k4_scales(sc, mn, b.scales);
    /* Groups 2c and 2c+1 share qs[32c .. 32c+31]: low and high nibbles. */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b.qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    memcpy(out, &b, sizeof b);
}

static void quantize_block_q5_K(const float *x, void *out)
{
    npl_block_q5_K b;
    uint8_t sc[8], mn[8], q[NPL_QK_K];
    quantize_scale_min_k(x, 31, &b.d, &b.dmin, sc, mn, q);
    pack_k4_scales(sc, mn, b.scales);
    memset(b.qh, 0, sizeof b.qh);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            const uint8_t a = q[64 * c + l], h = q[64 * c + 32 + l];
            b.qs[32 * c + l] = (uint8_t)((a & 0x0f) | (h & 0x0f) << 4);
            b.qh[l] |= (uint8_t)((a >> 4) << (2 * c) | (h >> 4) << (2 * c + 1));
        }
    }
    memcpy(out, &b, sizeof b);
}

/* q6_K: per group of 16 the wanted step is s = max / -32 (max the signed
 * absmax), so max decodes to exactly -32 steps; d >= max|s| / 127 is
 * rounded up to fp16 and each int8 scale is |s|/d rounded up, with the sign
 * of s. Errors are within half a step, except that a value of the opposite
 * sign and (nearly) the same magnitude as max clamps at +31 steps. */
static void quantize_block_q6_K(const float *x, void *out)
{
    npl_block_q6_K b;
    float want[16], max_want = 0.0f;
    for (int g = 0; g < 16; g++) {
        want[g] = signed_absmax(x + 16 * g, 16, NULL) / -32.0f;
        if (fabsf(want[g]) > max_want)
            max_want = fabsf(want[g]);
    }
    b.d = fp16_not_below(max_want / 127.0f);
    const float d = npl_fp16_to_fp32(b.d);
    memset(b.ql, 0, sizeof b.ql);
    memset(b.qh, 0, sizeof b.qh);
    for (int g = 0; g < 16; g++) {
        const int mag = d > 0.0f ? to_int_clamped(ceilf(fabsf(want[g]) / d), 0, 127) : 0;
        b.scales[g] = (int8_t)(want[g] < 0.0f ? -mag : mag);
    }
    for (int e = 0; e < NPL_QK_K; e++) {
        /* Same step expression as the dequantizer: d * sc. */
        const float step = d * (float)b.scales[e / 16];
        const float inv = step != 0.0f ? 1.0f / step : 0.0f;
        const int q = round_even_clamped(x[e] * inv, -32, 31) + 32;
        /* e = 128*half + 32*k + l, layout as in decode_q6_K. */
        const int half = e / 128, k = (e % 128) / 32, l = e % 32;
        uint8_t *lbyte = &b.ql[64 * half + 32 * (k & 1) + l];
        *lbyte |= (uint8_t)(k < 2 ? (q & 0x0f) : (q & 0x0f) << 4);
        b.qh[32 * half + l] |= (uint8_t)((q >> 4) << (2 * k));
    }
    memcpy(out, &b, sizeof b);
}

/* ---- plain types and dispatch ------------------------------------------ */

static void quantize_f32(const float *x, void *out)
{
    memcpy(out, x, sizeof *x);
}

static void quantize_f16(const float *x, void *out)
{
    const uint16_t h = npl_fp32_to_fp16(*x);
    memcpy(out, &h, sizeof h);
}

static void quantize_bf16(const float *x, void *out)
{
    const uint16_t h = npl_fp32_to_bf16(*x);
    memcpy(out, &h, sizeof h);
}

typedef void (*block_encoder)(const float *x, void *out);

static block_encoder encoder_for(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_F32: return quantize_f32;
    case NPL_TYPE_F16: return quantize_f16;
    case NPL_TYPE_BF16: return quantize_bf16;
    case NPL_TYPE_Q4_0: return quantize_block_q4_0;
    case NPL_TYPE_Q4_1: return quantize_block_q4_1;
    case NPL_TYPE_Q5_0: return quantize_block_q5_0;
    case NPL_TYPE_Q5_1: return quantize_block_q5_1;
    case NPL_TYPE_Q8_0: return quantize_block_q8_0;
    case NPL_TYPE_Q8_K: return quantize_block_q8_K;
    case NPL_TYPE_Q4_K: return quantize_block_q4_K;
    case NPL_TYPE_Q5_K: return quantize_block_q5_K;
    case NPL_TYPE_Q6_K: return quantize_block_q6_K;
    default: return NULL;
    }
}

bool npl_quantize_row_ref(uint32_t type, const float *src, void *dst, int64_t n)
{
    const npl_type_traits *t = npl_type_traits_get(type);
    block_encoder encode = encoder_for(type);
    if (t == NULL || encode == NULL || n < 0 || n % t->block_size != 0)
        return false;
    if (n > 0 && (src == NULL || dst == NULL))
        return false;

    unsigned char *bytes = dst;
    const int64_t blocks = n / t->block_size;
    for (int64_t i = 0; i < blocks; i++)
        encode(src + (size_t)i * t->block_size, bytes + (size_t)i * t->type_size);
    return true;
}
