/* Reference quantizers. The ggml-exact ones (q4_0, q4_1, q5_0, q5_1, q8_0,
 * q8_K) are checked byte for byte on inputs whose result follows by hand
 * from ggml's documented rules, including their tie-breaking; every
 * quantizer is then checked for its error bound after a round trip
 * through the reference dequantizer, on several rows of random and
 * adversarial data. */
#include "ggml_blocks.h"
#include "ggml_types.h"
#include "npl_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void check_bytes(const void *got, const void *want, size_t n)
{
    const unsigned char *g = got, *w = want;
    for (size_t i = 0; i < n; i++) {
        if (g[i] != w[i]) {
            CHECK(g[i] == w[i]);
            nt_note("  byte %zu: got 0x%02x, want 0x%02x", i, g[i], w[i]);
            return;
        }
    }
}

/* ---- ggml's rules on hand-worked blocks ---------------------------------- */

/* x[j] = j - 8, x[16 + j] = (j - 8) / 2. max = -8 (x[0]) so d = -8 / -8 =
 * 1 and q = trunc(x + 8.5): the low half gives q = j; the high half gives
 * 4 5 5 6 6 7 7 8 8 9 9 10 10 11 11 12, i.e. a tie such as -3.5 goes up
 * to q = 5 (decoding as -3), as ggml's "+ 8.5 then truncate" does. */
static void q4_0_follows_ggml_rule(void)
{
    float x[32];
    for (int j = 0; j < 16; j++) {
        x[j] = (float)(j - 8);
        x[16 + j] = (float)(j - 8) * 0.5f;
    }
    static const unsigned char want[18] = {
        0x00, 0x3c, 0x40, 0x51, 0x52, 0x63, 0x64, 0x75, 0x76, 0x87,
        0x88, 0x99, 0x9a, 0xab, 0xac, 0xbd, 0xbe, 0xcf,
    };
    unsigned char got[18];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_0, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* The signed maximum is positive: x[3] = 10 wins over x[20] = -10 (same
 * magnitude, later), so d = 10 / -8 = -1.25 (fp16 0xbd00) and id = -0.8.
 * 10 -> trunc(-8 + 8.5) = 0; -10 -> 16.5 -> 16, clamped to 15; 5 -> 4.5
 * -> 4; -2.5 -> 10.5 -> 10; zeros -> 8; and -0.625 -> 0.5 + 8.5 = 9 (a
 * tie that round-to-even would have sent to 8). */
static void q4_0_positive_max_and_clamp(void)
{
    float x[32] = { 0 };
    x[3] = 10.0f;
    x[20] = -10.0f;
    x[7] = 5.0f;
    x[25] = -2.5f;
    x[1] = -0.625f;
    unsigned char want[18] = { 0x00, 0xbd };
    memset(want + 2, 0x88, 16);
    want[2 + 1] = 0x89;  /* x[1] -> 9 */
    want[2 + 3] = 0x80;  /* x[3] low nibble 0, x[19] high nibble 8 */
    want[2 + 7] = 0x84;  /* x[7] -> 4 */
    want[2 + 4] = 0xf8;  /* x[20] -> 15 in the high nibble of qs[4] */
    want[2 + 9] = 0xa8;  /* x[25] -> 10 in the high nibble of qs[9] */
    unsigned char got[18];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_0, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* ggml quantizes with the float d, not the stored fp16 one. max = -10.3:
 * d = 1.2875, stored as fp16 0x3d26 = 1.2871094. x = 8.3675 gives
 * x / d + 8.5 = 14.99903 -> 14 (with the fp16 d it would be 15.001 -> 15);
 * x = -8.3675 gives 2.00097 -> 2 (fp16 d: 1.99899 -> 1). */
static void q4_0_quantizes_with_the_float_scale(void)
{
    float x[32] = { -10.3f, 8.3675f };
    x[17] = -8.3675f;
    unsigned char want[18] = { 0x26, 0x3d, 0x80, 0x2e };
    memset(want + 4, 0x88, 14);
    unsigned char got[18];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_0, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* All zeros: max stays 0.0, d = 0 / -8 = -0 (fp16 0x8000), q = 8. */
static void q4_0_zero_block(void)
{
    float x[32] = { 0 };
    unsigned char want[18] = { 0x00, 0x80 };
    memset(want + 2, 0x88, 16);
    unsigned char got[18];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_0, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* x[j] = j - 1, x[16 + j] = j/2 - 1/2: min = -1, max = 14, d = 1 (0x3c00),
 * m = -1 (0xbc00); q = trunc(x + 1 + 0.5): j for the low half and
 * 1 + j/2 (integer) for the high half, ties going up. x[3] = 1.5 instead
 * of 2 still gives 3 (2.5 ties up; round-to-even would give 2). */
static void q4_1_follows_ggml_rule(void)
{
    float x[32];
    for (int j = 0; j < 16; j++) {
        x[j] = (float)(j - 1);
        x[16 + j] = (float)j * 0.5f - 0.5f;
    }
    x[3] = 1.5f;
    static const unsigned char want[20] = {
        0x00, 0x3c, 0x00, 0xbc, 0x10, 0x11, 0x22, 0x23, 0x34, 0x35,
        0x46, 0x47, 0x58, 0x59, 0x6a, 0x6b, 0x7c, 0x7d, 0x8e, 0x8f,
    };
    unsigned char got[20];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_1, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* x[j] = j - 16, x[16 + j] = j, except x[30] = 13.5 and x[31] = 15.5.
 * max = -16 so d = 1; q = trunc(x + 16.5): j for the low half, j + 16 for
 * the high half (13.5 ties up to 30; 15.5 -> 32 clamps to 31). Every
 * high-half element has bit 4: qh = 0xffff0000. Ties that round-to-even
 * would send down: x[2] = -13.5 -> 3 and x[29] = 12.5 -> 29, the same
 * quants as the -13 and 13 they replace. */
static void q5_0_follows_ggml_rule(void)
{
    float x[32];
    for (int j = 0; j < 16; j++) {
        x[j] = (float)(j - 16);
        x[16 + j] = (float)j;
    }
    x[30] = 13.5f;
    x[31] = 15.5f;
    x[2] = -13.5f;
    x[29] = 12.5f;
    unsigned char want[22] = { 0x00, 0x3c, 0x00, 0x00, 0xff, 0xff };
    for (int j = 0; j < 16; j++)
        want[6 + j] = (unsigned char)(j | j << 4);
    want[6 + 2] = 0x23; /* x[2] = -13.5 -> 3 */
    unsigned char got[22];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q5_0, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* x[j] = j/2 (0 .. 15.5) except x[5] = 2.75 and x[6] = 3.25: min 0, max
 * 15.5, d = 0.5 (0x3800), m = 0; q = trunc(2x + 0.5) = j; x[5] ties up to
 * 6 and x[6] ties up to 7 (round-to-even would give 6). */
static void q5_1_follows_ggml_rule(void)
{
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = (float)j * 0.5f;
    x[5] = 2.75f;
    x[6] = 3.25f;
    unsigned char want[24] = { 0x00, 0x38, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff };
    for (int j = 0; j < 16; j++)
        want[8 + j] = (unsigned char)(j | j << 4);
    want[8 + 5] = 0x56;
    want[8 + 6] = 0x67;
    unsigned char got[24];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q5_1, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* amax = 127 so d = 1 (0x3c00); q = roundf(x), which rounds halves away
 * from zero: 63.5 -> 64, -63.5 -> -64, 62.5 -> 63 (not 62), 2.5 -> 3,
 * -0.5 -> -1, 0.49 -> 0. The rest: x[j] = j - 20. */
static void q8_0_follows_ggml_rule(void)
{
    float x[32] = { 127.0f, -127.0f, 63.5f, -63.5f, 62.5f, -62.5f, 0.49f, -0.5f, 0.5f, 1.5f, 2.5f, -2.5f };
    for (int j = 12; j < 32; j++)
        x[j] = (float)(j - 20);
    static const signed char q[12] = { 127, -127, 64, -64, 63, -63, 0, -1, 1, 2, 3, -3 };
    unsigned char want[34] = { 0x00, 0x3c };
    for (int j = 0; j < 12; j++)
        want[2 + j] = (unsigned char)q[j];
    for (int j = 12; j < 32; j++)
        want[2 + j] = (unsigned char)(signed char)(j - 20);
    unsigned char got[34];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q8_0, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* The quants come from the float d, not the stored fp16 one: amax = 100
 * gives d = 100/127 = 0.787402, stored as fp16 0x3a4d = 0.787598. For
 * x = 79.142, x / d = 100.510 -> 101 (x divided by the fp16 d would be
 * 100.485 -> 100). */
static void q8_0_quantizes_with_the_float_scale(void)
{
    float x[32] = { 100.0f, 79.142f };
    unsigned char want[34] = { 0x4d, 0x3a, 127, 101 };
    unsigned char got[34];
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q8_0, x, got, 32));
    check_bytes(got, want, sizeof want);
}

/* q8_K: max = -127 so iscale = -127 / -127 = 1 and d = 1; q rounds half to
 * even (2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 0.5 -> 0, 1.5 -> 2, 126.5 -> 126).
 * Group 1 holds 0..15. bsums: group 0 = -127+2+4-2+0+2+126+127 = 132,
 * group 1 = 120, the rest 0. */
static void q8_K_follows_ggml_rule(void)
{
    float x[256] = { -127.0f, 2.5f, 3.5f, -2.5f, 0.5f, 1.5f, 126.5f, 127.0f };
    for (int i = 0; i < 16; i++)
        x[16 + i] = (float)i;
    npl_block_q8_K b;
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q8_K, x, &b, 256));
    CHECK(b.d == 1.0f);
    static const int8_t q0[8] = { -127, 2, 4, -2, 0, 2, 126, 127 };
    for (int i = 0; i < 8; i++)
        CHECK(b.qs[i] == q0[i]);
    for (int i = 0; i < 16; i++)
        CHECK(b.qs[16 + i] == i);
    CHECK(b.bsums[0] == 132);
    CHECK(b.bsums[1] == 120);
    for (int g = 2; g < 16; g++)
        CHECK(b.bsums[g] == 0);

    /* A lone positive value: iscale = -127 / 2, d = 1 / iscale, q = -127. */
    float y[256] = { 0 };
    y[10] = 2.0f;
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q8_K, y, &b, 256));
    CHECK(b.d == 1.0f / (-127.0f / 2.0f));
    CHECK(b.qs[10] == -127);
    CHECK(b.bsums[0] == -127);

    /* All zeros: d = 0 and every quant 0. */
    memset(y, 0, sizeof y);
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q8_K, y, &b, 256));
    CHECK(b.d == 0.0f);
    for (int i = 0; i < 256; i++)
        CHECK(b.qs[i] == 0);
}

static void plain_types_quantize_exactly(void)
{
    static const float x[6] = { 1.0f, -0.0f, 0.1f, 65520.0f, 3.0e-8f, -1.0e30f };
    float f32[6];
    uint16_t f16[6], bf16[6];
    CHECK(npl_quantize_row_ref(NPL_TYPE_F32, x, f32, 6));
    CHECK(npl_quantize_row_ref(NPL_TYPE_F16, x, f16, 6));
    CHECK(npl_quantize_row_ref(NPL_TYPE_BF16, x, bf16, 6));
    for (int i = 0; i < 6; i++) {
        CHECK(nt_float_bits(f32[i]) == nt_float_bits(x[i]));
        CHECK(f16[i] == npl_fp32_to_fp16(x[i]));
        CHECK(bf16[i] == npl_fp32_to_bf16(x[i]));
    }
    /* By hand: 1 -> 0x3c00 / 0x3f80; -0 -> 0x8000; 0.1 -> 0x2e66 / 0x3dcd;
     * 65520 -> inf in half; -1e30 -> -inf in half. */
    CHECK(f16[0] == 0x3c00 && bf16[0] == 0x3f80);
    CHECK(f16[1] == 0x8000 && bf16[1] == 0x8000);
    CHECK(f16[2] == 0x2e66 && bf16[2] == 0x3dcd);
    CHECK(f16[3] == 0x7c00);
    CHECK(f16[5] == 0xfc00);
}

static void quantize_rejects_bad_arguments(void)
{
    float x[256] = { 0 };
    unsigned char out[512];
    CHECK(!npl_quantize_row_ref(NPL_TYPE_Q4_0, x, out, 31));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_Q4_K, x, out, 32));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_Q8_0, x, out, -32));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_Q8_0, NULL, out, 32));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_Q8_0, x, NULL, 32));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_Q2_K, x, out, 256));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_Q3_K, x, out, 256));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_Q8_1, x, out, 32));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_IQ4_NL, x, out, 32));
    CHECK(!npl_quantize_row_ref(NPL_TYPE_I8, x, out, 4));
    CHECK(!npl_quantize_row_ref(5, x, out, 32));
    CHECK(!npl_quantize_row_ref(999, x, out, 32));
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_0, NULL, NULL, 0));
}

/* ---- round-trip error bounds ------------------------------------------- */

enum { ROWS = 5 };

/* Input rows of one test: random at two scales, all positive, all
 * negative, constant, with an outlier, and zeros. */
static void fill_row(float *x, int64_t n, int kind, nt_rng *rng)
{
    for (int64_t i = 0; i < n; i++) {
        switch (kind % 7) {
        case 0: x[i] = nt_rng_uniform(rng, -1.0f, 1.0f); break;
        case 1: x[i] = nt_rng_uniform(rng, -0.03f, 0.05f); break;
        case 2: x[i] = nt_rng_uniform(rng, 0.5f, 4.0f); break;
        case 3: x[i] = nt_rng_uniform(rng, -300.0f, -100.0f); break;
        case 4: x[i] = 0.375f; break;
        case 5: x[i] = i % 97 == 3 ? 50.0f : nt_rng_uniform(rng, -0.5f, 0.5f); break;
        default: x[i] = 0.0f; break;
        }
    }
}

static float block_amax(const float *x, int n)
{
    float a = 0.0f;
    for (int i = 0; i < n; i++)
        a = fmaxf(a, fabsf(x[i]));
    return a;
}

static void block_min_max(const float *x, int n, float *lo, float *hi)
{
    *lo = x[0];
    *hi = x[0];
    for (int i = 1; i < n; i++) {
        *lo = fminf(*lo, x[i]);
        *hi = fmaxf(*hi, x[i]);
    }
}

static float half_rounded(float v)
{
    return npl_fp16_to_fp32(npl_fp32_to_fp16(v));
}

/* Allowed |x[i] - y[i]| for every element of one block. */
typedef void (*bound_fn)(const float *x, const void *block, float *bound);

/* Symmetric types with d = max / -L (q4_0: L = 8, q5_0: L = 16): half a
 * step, a whole step where the opposite extreme clamps, plus what fp16
 * rounding of d costs over at most L steps. */
static void bound_symmetric(const float *x, int levels, float *bound)
{
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < 32; i++)
        if (amax < fabsf(x[i])) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    const float d = max / -(float)levels;
    const float slack = (float)levels * fabsf(d - half_rounded(d)) + 1e-6f * amax;
    for (int i = 0; i < 32; i++) {
        const float t = d != 0.0f ? x[i] / d : 0.0f;
        const float steps = t > (float)levels - 0.51f ? 1.0f : 0.5f;
        bound[i] = steps * fabsf(d) * 1.00001f + slack;
    }
}

static void bound_q4_0(const float *x, const void *block, float *bound)
{
    bound_symmetric(x, 8, bound);
}

static void bound_q5_0(const float *x, const void *block, float *bound)
{
    bound_symmetric(x, 16, bound);
}

/* min/max types: half a step plus fp16 rounding of d and m. */
static void bound_affine(const float *x, int levels, float *bound)
{
    float lo, hi;
    block_min_max(x, 32, &lo, &hi);
    const float d = (hi - lo) / (float)levels;
    const float b = 0.5f * d * 1.00001f + (float)levels * fabsf(d - half_rounded(d)) +
                    fabsf(lo - half_rounded(lo)) + 1e-6f * fmaxf(fabsf(lo), fabsf(hi));
    for (int i = 0; i < 32; i++)
        bound[i] = b;
}

static void bound_q4_1(const float *x, const void *block, float *bound)
{
    bound_affine(x, 15, bound);
}

static void bound_q5_1(const float *x, const void *block, float *bound)
{
    bound_affine(x, 31, bound);
}

static void bound_q8_0(const float *x, const void *block, float *bound)
{
    const float amax = block_amax(x, 32);
    const float d = amax / 127.0f;
    const float b = 0.5f * d * 1.00001f + 127.0f * fabsf(d - half_rounded(d)) + 1e-6f * amax;
    for (int i = 0; i < 32; i++)
        bound[i] = b;
}

/* q8_K keeps d as a float: just half a step. */
static void bound_q8_K(const float *x, const void *block, float *bound)
{
    const float amax = block_amax(x, 256);
    for (int i = 0; i < 256; i++)
        bound[i] = 0.5f * amax / 127.0f * 1.00001f + 1e-6f * amax;
}

/* Simple q4_K/q5_K: each group's step is below (range + dmin) / L + d,
 * where range spans the group's values and 0, and errors stay within
 * half a step. */
static void bound_scale_min(const float *x, const void *block, int levels, float *bound)
{
    uint16_t dh, dminh;
    memcpy(&dh, block, 2);
    memcpy(&dminh, (const unsigned char *)block + 2, 2);
    const float d = npl_fp16_to_fp32(dh), dmin = npl_fp16_to_fp32(dminh);
    const float amax = block_amax(x, 256);
    for (int g = 0; g < 8; g++) {
        float lo, hi;
        block_min_max(x + 32 * g, 32, &lo, &hi);
        lo = fminf(lo, 0.0f);
        hi = fmaxf(hi, lo);
        const float step_max = (hi - lo + dmin) / (float)levels + d;
        for (int l = 0; l < 32; l++)
            bound[32 * g + l] = 0.5f * step_max * 1.0001f + 1e-6f * amax;
    }
}

static void bound_q4_K(const float *x, const void *block, float *bound)
{
    bound_scale_min(x, block, 15, bound);
}

static void bound_q5_K(const float *x, const void *block, float *bound)
{
    bound_scale_min(x, block, 31, bound);
}

/* Simple q6_K: the step of group g is below amax_g / 32 + d; half a step
 * of error, a whole one where a value clamps at +31 steps. */
static void bound_q6_K(const float *x, const void *block, float *bound)
{
    npl_block_q6_K b;
    memcpy(&b, block, sizeof b);
    const float d = npl_fp16_to_fp32(b.d);
    const float amax = block_amax(x, 256);
    for (int g = 0; g < 16; g++) {
        const float step = d * (float)b.scales[g];
        const float step_max = block_amax(x + 16 * g, 16) / 32.0f + d;
        CHECK(fabsf(step) <= step_max * 1.0001f);
        for (int l = 0; l < 16; l++) {
            const float t = step != 0.0f ? x[16 * g + l] / step : 0.0f;
            const float steps = t > 31.49f ? 1.0f : 0.5f;
            bound[16 * g + l] = steps * step_max * 1.0001f + 1e-6f * amax;
        }
    }
}

/* Quantizes ROWS rows of `blocks_per_row` blocks each (row by row, so
 * row starts fall mid-buffer), dequantizes, and checks every element
 * against its bound. */
static void check_round_trip(uint32_t type, int blocks_per_row, bound_fn bound)
{
    const npl_type_traits *t = npl_type_traits_get(type);
    CHECK(t != NULL);
    if (t == NULL)
        return;
    const int64_t n = (int64_t)blocks_per_row * t->block_size;
    const size_t row_bytes = npl_type_row_size(type, n);
    CHECK(row_bytes == (size_t)blocks_per_row * t->type_size);
    float *x = malloc((size_t)(n * ROWS) * sizeof *x);
    float *y = malloc((size_t)(n * ROWS) * sizeof *y);
    float *allowed = malloc(t->block_size * sizeof *allowed);
    unsigned char *q = malloc(row_bytes * ROWS);
    CHECK(x && y && allowed && q);
    if (x && y && allowed && q) {
        nt_rng rng = { 0x9E3779B97F4A7C15ull ^ type };
        for (int r = 0; r < ROWS; r++)
            fill_row(x + r * n, n, r + (int)type, &rng);
        for (int r = 0; r < ROWS; r++)
            CHECK(npl_quantize_row_ref(type, x + r * n, q + r * row_bytes, n));
        /* Dequantize all rows at once: rows are just consecutive blocks. */
        CHECK(npl_dequantize_row_ref(type, q, y, n * ROWS));
        const int64_t blocks = (int64_t)blocks_per_row * ROWS;
        for (int64_t b = 0; b < blocks && !nt_failures(); b++) {
            const float *xb = x + b * t->block_size;
            const float *yb = y + b * t->block_size;
            bound(xb, q + b * t->type_size, allowed);
            for (uint32_t i = 0; i < t->block_size; i++) {
                const float err = fabsf(xb[i] - yb[i]);
                if (!(err <= allowed[i])) {
                    CHECK(err <= allowed[i]);
                    nt_note("  %s block %lld elem %u: x %.9g y %.9g err %.3g > %.3g", t->name,
                               (long long)b, i, xb[i], yb[i], err, allowed[i]);
                    break;
                }
            }
        }
        /* Zeros and constants must survive whole where the format can. */
        for (int r = 0; r < ROWS; r++) {
            const int kind = (r + (int)type) % 7;
            if (kind == 6)
                for (int64_t i = 0; i < n; i++)
                    CHECK(y[r * n + i] == 0.0f);
        }
    }
    free(x);
    free(y);
    free(allowed);
    free(q);
}

static void q4_0_round_trip(void) { check_round_trip(NPL_TYPE_Q4_0, 7, bound_q4_0); }
static void q4_1_round_trip(void) { check_round_trip(NPL_TYPE_Q4_1, 7, bound_q4_1); }
static void q5_0_round_trip(void) { check_round_trip(NPL_TYPE_Q5_0, 7, bound_q5_0); }
static void q5_1_round_trip(void) { check_round_trip(NPL_TYPE_Q5_1, 7, bound_q5_1); }
static void q8_0_round_trip(void) { check_round_trip(NPL_TYPE_Q8_0, 7, bound_q8_0); }
static void q8_K_round_trip(void) { check_round_trip(NPL_TYPE_Q8_K, 3, bound_q8_K); }
static void q4_K_round_trip(void) { check_round_trip(NPL_TYPE_Q4_K, 3, bound_q4_K); }
static void q5_K_round_trip(void) { check_round_trip(NPL_TYPE_Q5_K, 3, bound_q5_K); }
static void q6_K_round_trip(void) { check_round_trip(NPL_TYPE_Q6_K, 3, bound_q6_K); }

/* Inputs already on a grid the simple k-quantizers can represent come
 * back as exactly that grid of quants; the decoded values then differ from
 * the input only by the fp16 rounding of d (relative 2^-10 or less). */
static void k_quants_keep_exact_grids(void)
{
    /* q4_K: every group is 0, 0.25, ..., 3.75 twice: no offset (dmin = 0),
     * sc = 63 in every group, and element e gets quant e % 16. */
    float x[256], y[256];
    for (int i = 0; i < 256; i++)
        x[i] = (float)(i % 16) * 0.25f;
    npl_block_q4_K b4;
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_K, x, &b4, 256));
    CHECK(b4.dmin == 0);
    for (int i = 0; i < 128; i++)
        CHECK(b4.qs[i] == (uint8_t)((i % 16) * 0x11));
    CHECK(npl_dequantize_row_ref(NPL_TYPE_Q4_K, &b4, y, 256));
    for (int i = 0; i < 256; i++)
        CHECK(fabsf(x[i] - y[i]) <= 15.0f * 0.25f * 0x1p-10f);

    /* q6_K: every group is -2, -1.875, ..., -0.125: all groups want the
     * step 2/32, so all scales are equal and quant - 32 = i % 16 - 16. */
    for (int i = 0; i < 256; i++)
        x[i] = (float)(i % 16 - 16) * 0.125f;
    npl_block_q6_K b6;
    CHECK(npl_quantize_row_ref(NPL_TYPE_Q6_K, x, &b6, 256));
    for (int g = 1; g < 16; g++)
        CHECK(b6.scales[g] == b6.scales[0]);
    CHECK(npl_dequantize_row_ref(NPL_TYPE_Q6_K, &b6, y, 256));
    for (int i = 0; i < 256; i++)
        CHECK(fabsf(x[i] - y[i]) <= 2.0f * 0x1p-10f);
}

/* Hostile inputs (NaN, inf, huge) must give defined blocks, not UB. */
static void quantizers_survive_non_finite_input(void)
{
    static const uint32_t types[] = { NPL_TYPE_Q4_0, NPL_TYPE_Q4_1, NPL_TYPE_Q5_0, NPL_TYPE_Q5_1,
                                      NPL_TYPE_Q8_0, NPL_TYPE_Q8_K, NPL_TYPE_Q4_K, NPL_TYPE_Q5_K,
                                      NPL_TYPE_Q6_K, NPL_TYPE_F16, NPL_TYPE_BF16 };
    float x[256];
    unsigned char out[512];
    float y[256];
    for (int pattern = 0; pattern < 3; pattern++) {
        for (int i = 0; i < 256; i++) {
            x[i] = (float)(i % 7) - 3.0f;
            if (i % 5 == 0)
                x[i] = pattern == 0 ? NAN : pattern == 1 ? INFINITY : -3.0e38f;
        }
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            /* 256 elements fit `out` for every type but the 2-byte plain
             * ones, which get 64 (out holds 512 bytes). */
            const npl_type_traits *t = npl_type_traits_get(types[k]);
            const int64_t n = t->block_size == 1 ? 64 : 256;
            CHECK(npl_type_row_size(types[k], n) <= sizeof out);
            CHECK(npl_quantize_row_ref(types[k], x, out, n));
            CHECK(npl_dequantize_row_ref(types[k], out, y, n));
        }
    }
}

static const nt_case cases[] = {
    { "q4_0_follows_ggml_rule", q4_0_follows_ggml_rule },
    { "q4_0_positive_max_and_clamp", q4_0_positive_max_and_clamp },
    { "q4_0_quantizes_with_the_float_scale", q4_0_quantizes_with_the_float_scale },
    { "q4_0_zero_block", q4_0_zero_block },
    { "q4_1_follows_ggml_rule", q4_1_follows_ggml_rule },
    { "q5_0_follows_ggml_rule", q5_0_follows_ggml_rule },
    { "q5_1_follows_ggml_rule", q5_1_follows_ggml_rule },
    { "q8_0_follows_ggml_rule", q8_0_follows_ggml_rule },
    { "q8_0_quantizes_with_the_float_scale", q8_0_quantizes_with_the_float_scale },
    { "q8_K_follows_ggml_rule", q8_K_follows_ggml_rule },
    { "plain_types_quantize_exactly", plain_types_quantize_exactly },
    { "quantize_rejects_bad_arguments", quantize_rejects_bad_arguments },
    { "q4_0_round_trip", q4_0_round_trip },
    { "q4_1_round_trip", q4_1_round_trip },
    { "q5_0_round_trip", q5_0_round_trip },
    { "q5_1_round_trip", q5_1_round_trip },
    { "q8_0_round_trip", q8_0_round_trip },
    { "q8_K_round_trip", q8_K_round_trip },
    { "q4_K_round_trip", q4_K_round_trip },
    { "q5_K_round_trip", q5_K_round_trip },
    { "q6_K_round_trip", q6_K_round_trip },
    { "k_quants_keep_exact_grids", k_quants_keep_exact_grids },
    { "quantizers_survive_non_finite_input", quantizers_survive_non_finite_input },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
