/* Reference dequantizers against blocks built byte by byte here, with the
 * expected floats written out as literals derived from the format
 * definition (element by element, not by running any decoder). Exact
 * equality throughout: every chosen scale is a short binary fraction, so
 * every product is exact in float. */
#include "ggml_blocks.h"
#include "ggml_types.h"
#include "npl_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Dequantizes one block from a copy placed at an odd address (GGUF rows
 * pack blocks at any alignment) into exactly-sized heap memory, so ASan
 * catches any read or write past the block, then compares bit for bit. */
static void check_block(uint32_t type, const void *block, size_t block_bytes,
                        const float *want, int64_t n)
{
    CHECK(npl_type_row_size(type, n) == block_bytes);
    unsigned char *raw = malloc(block_bytes + 1);
    float *out = malloc((size_t)n * sizeof *out);
    CHECK(raw != NULL && out != NULL);
    if (raw == NULL || out == NULL) {
        free(raw);
        free(out);
        return;
    }
    memcpy(raw + 1, block, block_bytes);
    CHECK(npl_dequantize_row_ref(type, raw + 1, out, n));
    for (int64_t i = 0; i < n && !nt_failures(); i++)
        CHECK_FLOAT_BITS(out[i], want[i], i);
    free(raw);
    free(out);
}

/* ---- 32-element types ---------------------------------------------------- */

/* d = 0.5 (fp16 0x3800); qs[j] = j | (15 - j) << 4. Element j < 16 is the
 * low nibble of qs[j]: (j - 8) * 0.5; element j + 16 the high nibble:
 * (15 - j - 8) * 0.5. */
static void q4_0_hand_block(void)
{
    unsigned char b[18] = { 0x00, 0x38 };
    for (int j = 0; j < 16; j++)
        b[2 + j] = (unsigned char)(j | (15 - j) << 4);
    static const float want[32] = {
        -4.0f, -3.5f, -3.0f, -2.5f, -2.0f, -1.5f, -1.0f, -0.5f,
        0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f,
        3.5f, 3.0f, 2.5f, 2.0f, 1.5f, 1.0f, 0.5f, 0.0f,
        -0.5f, -1.0f, -1.5f, -2.0f, -2.5f, -3.0f, -3.5f, -4.0f,
    };
    check_block(NPL_TYPE_Q4_0, b, sizeof b, want, 32);
}

/* Two blocks in one row: the second has d = -2 (0xc000) and every byte
 * 0x0f, so low nibbles give (15 - 8) * -2 = -14 and high ones (0 - 8) *
 * -2 = 16. */
static void q4_0_two_blocks(void)
{
    unsigned char row[36] = { 0x00, 0x3c }; /* block 0: d = 1, all nibbles 8 -> 0 */
    memset(row + 2, 0x88, 16);
    row[18] = 0x00;
    row[19] = 0xc0;
    memset(row + 20, 0x0f, 16);
    float want[64];
    for (int i = 0; i < 32; i++)
        want[i] = 0.0f;
    for (int i = 32; i < 48; i++)
        want[i] = -14.0f;
    for (int i = 48; i < 64; i++)
        want[i] = 16.0f;
    check_block(NPL_TYPE_Q4_0, row, sizeof row, want, 64);
}

/* d = 0.25 (0x3400), m = -1 (0xbc00); qs[j] = (15 - j) | j << 4:
 * element j = (15 - j) * 0.25 - 1, element j + 16 = j * 0.25 - 1. */
static void q4_1_hand_block(void)
{
    unsigned char b[20] = { 0x00, 0x34, 0x00, 0xbc };
    for (int j = 0; j < 16; j++)
        b[4 + j] = (unsigned char)((15 - j) | j << 4);
    static const float want[32] = {
        2.75f, 2.5f, 2.25f, 2.0f, 1.75f, 1.5f, 1.25f, 1.0f,
        0.75f, 0.5f, 0.25f, 0.0f, -0.25f, -0.5f, -0.75f, -1.0f,
        -1.0f, -0.75f, -0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.75f,
        1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.25f, 2.5f, 2.75f,
    };
    check_block(NPL_TYPE_Q4_1, b, sizeof b, want, 32);
}

/* d = 1 (0x3c00); qh = 0xaaaa5555 little-endian (bytes 55 55 aa aa):
 * bit j (element j) is set for even j, bit j + 16 (element j + 16) for odd
 * j; qs[j] = j | j << 4. So element j = j + 16*(j even) - 16 and element
 * j + 16 = j + 16*(j odd) - 16. */
static void q5_0_hand_block(void)
{
    unsigned char b[22] = { 0x00, 0x3c, 0x55, 0x55, 0xaa, 0xaa };
    for (int j = 0; j < 16; j++)
        b[6 + j] = (unsigned char)(j | j << 4);
    static const float want[32] = {
        0.0f, -15.0f, 2.0f, -13.0f, 4.0f, -11.0f, 6.0f, -9.0f,
        8.0f, -7.0f, 10.0f, -5.0f, 12.0f, -3.0f, 14.0f, -1.0f,
        -16.0f, 1.0f, -14.0f, 3.0f, -12.0f, 5.0f, -10.0f, 7.0f,
        -8.0f, 9.0f, -6.0f, 11.0f, -4.0f, 13.0f, -2.0f, 15.0f,
    };
    check_block(NPL_TYPE_Q5_0, b, sizeof b, want, 32);
}

/* d = 0.5 (0x3800), m = 2 (0x4000); qh = 0xffff0000 (only the upper 16
 * elements get bit 4); qs[j] = j | (15 - j) << 4. Element j = j * 0.5 + 2,
 * element j + 16 = (16 + 15 - j) * 0.5 + 2. */
static void q5_1_hand_block(void)
{
    unsigned char b[24] = { 0x00, 0x38, 0x00, 0x40, 0x00, 0x00, 0xff, 0xff };
    for (int j = 0; j < 16; j++)
        b[8 + j] = (unsigned char)(j | (15 - j) << 4);
    static const float want[32] = {
        2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 4.5f, 5.0f, 5.5f,
        6.0f, 6.5f, 7.0f, 7.5f, 8.0f, 8.5f, 9.0f, 9.5f,
        17.5f, 17.0f, 16.5f, 16.0f, 15.5f, 15.0f, 14.5f, 14.0f,
        13.5f, 13.0f, 12.5f, 12.0f, 11.5f, 11.0f, 10.5f, 10.0f,
    };
    check_block(NPL_TYPE_Q5_1, b, sizeof b, want, 32);
}

/* d = 0.125 (0x3000); qs[j] = -128 + 8j (as int8), except qs[31] = 127:
 * element j = -16 + j, element 31 = 127 / 8 = 15.875. */
static void q8_0_hand_block(void)
{
    unsigned char b[34] = { 0x00, 0x30 };
    for (int j = 0; j < 31; j++)
        b[2 + j] = (unsigned char)(0x80 + 8 * j);
    b[33] = 0x7f;
    static const float want[32] = {
        -16.0f, -15.0f, -14.0f, -13.0f, -12.0f, -11.0f, -10.0f, -9.0f,
        -8.0f, -7.0f, -6.0f, -5.0f, -4.0f, -3.0f, -2.0f, -1.0f,
        0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f,
        8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.875f,
    };
    check_block(NPL_TYPE_Q8_0, b, sizeof b, want, 32);
}

/* iq4_nl: d = 0.5, qs[j] = j | (15 - j) << 4, so element j is half of
 * level j and element j + 16 half of level 15 - j. Levels: -127 -104 -83
 * -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113. */
static void iq4_nl_hand_block(void)
{
    unsigned char b[18] = { 0x00, 0x38 };
    for (int j = 0; j < 16; j++)
        b[2 + j] = (unsigned char)(j | (15 - j) << 4);
    static const float want[32] = {
        -63.5f, -52.0f, -41.5f, -32.5f, -24.5f, -17.5f, -11.0f, -5.0f,
        0.5f, 6.5f, 12.5f, 19.0f, 26.5f, 34.5f, 44.5f, 56.5f,
        56.5f, 44.5f, 34.5f, 26.5f, 19.0f, 12.5f, 6.5f, 0.5f,
        -5.0f, -11.0f, -17.5f, -24.5f, -32.5f, -41.5f, -52.0f, -63.5f,
    };
    check_block(NPL_TYPE_IQ4_NL, b, sizeof b, want, 32);
}

/* mxfp4: three blocks. e = 127 scales the doubled E2M1 levels by 2^-1,
 * giving the plain E2M1 values 0 .5 1 1.5 2 3 4 6 and their negatives
 * (code 8 is a zero: +0 here). e = 1 scales by 2^-127 (a float
 * subnormal), e = 130 by 2^2. qs[j] = j | (15 - j) << 4 in each. */
static void mxfp4_hand_blocks(void)
{
    unsigned char row[51];
    const unsigned char exps[3] = { 127, 1, 130 };
    for (int k = 0; k < 3; k++) {
        row[17 * k] = exps[k];
        for (int j = 0; j < 16; j++)
            row[17 * k + 1 + j] = (unsigned char)(j | (15 - j) << 4);
    }
    static const float want[96] = {
        0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
        0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
        -6.0f, -4.0f, -3.0f, -2.0f, -1.5f, -1.0f, -0.5f, 0.0f,
        6.0f, 4.0f, 3.0f, 2.0f, 1.5f, 1.0f, 0.5f, 0.0f,
        0.0f, 0x1p-127f, 0x1p-126f, 0x3p-127f, 0x1p-125f, 0x3p-126f, 0x1p-124f, 0x3p-125f,
        0.0f, -0x1p-127f, -0x1p-126f, -0x3p-127f, -0x1p-125f, -0x3p-126f, -0x1p-124f, -0x3p-125f,
        -0x3p-125f, -0x1p-124f, -0x3p-126f, -0x1p-125f, -0x3p-127f, -0x1p-126f, -0x1p-127f, 0.0f,
        0x3p-125f, 0x1p-124f, 0x3p-126f, 0x1p-125f, 0x3p-127f, 0x1p-126f, 0x1p-127f, 0.0f,
        0.0f, 4.0f, 8.0f, 12.0f, 16.0f, 24.0f, 32.0f, 48.0f,
        0.0f, -4.0f, -8.0f, -12.0f, -16.0f, -24.0f, -32.0f, -48.0f,
        -48.0f, -32.0f, -24.0f, -16.0f, -12.0f, -8.0f, -4.0f, 0.0f,
        48.0f, 32.0f, 24.0f, 16.0f, 12.0f, 8.0f, 4.0f, 0.0f,
    };
    check_block(NPL_TYPE_MXFP4, row, sizeof row, want, 96);
}

/* ---- 256-element k-quant blocks ------------------------------------------ */

/* q4_K: d = 0.5 (0x3800), dmin = 0.25 (0x3400). Group scales 1 2 3 4 60
 * 33 17 63 and mins 0 4 8 12 48 20 5 63, packed by hand:
 *   bytes 0-3  = sc[j] | (sc[j+4] >> 4) << 6  -> c1 82 43 c4
 *   bytes 4-7  = mn[j] | (mn[j+4] >> 4) << 6  -> c0 44 08 cc
 *   bytes 8-11 = (sc[j+4] & 15) | (mn[j+4] & 15) << 4 -> 0c 41 51 ff
 * e.g. byte 0: 1 | (60 >> 4 = 3) << 6 = 0xc1. Group g covers elements
 * 32g..32g+31; groups 2c and 2c+1 share qs[32c..32c+31] as low and high
 * nibbles. Nibbles: low = l for l < 16 else 31 - l, high = 15 - low.
 * Element = 0.5*sc*q - 0.25*mn; e.g. element 0 of group 7:
 * 0.5*63*(15 - 0) - 0.25*63 = 472.5 - 15.75 = 456.75. */
static void q4_K_hand_block(void)
{
    npl_block_q4_K b;
    b.d = 0x3800;
    b.dmin = 0x3400;
    static const uint8_t scales[12] = { 0xc1, 0x82, 0x43, 0xc4, 0xc0, 0x44, 0x08, 0xcc, 0x0c, 0x41, 0x51, 0xff };
    memcpy(b.scales, scales, sizeof scales);
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            const int low = l < 16 ? l : 31 - l;
            b.qs[32 * c + l] = (uint8_t)(low | (15 - low) << 4);
        }
    }
    static const float want[256] = {
    0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f,
    4.0f, 4.5f, 5.0f, 5.5f, 6.0f, 6.5f, 7.0f, 7.5f,
    7.5f, 7.0f, 6.5f, 6.0f, 5.5f, 5.0f, 4.5f, 4.0f,
    3.5f, 3.0f, 2.5f, 2.0f, 1.5f, 1.0f, 0.5f, 0.0f,
    14.0f, 13.0f, 12.0f, 11.0f, 10.0f, 9.0f, 8.0f, 7.0f,
    6.0f, 5.0f, 4.0f, 3.0f, 2.0f, 1.0f, 0.0f, -1.0f,
    -1.0f, 0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f,
    7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f,
    -2.0f, -0.5f, 1.0f, 2.5f, 4.0f, 5.5f, 7.0f, 8.5f,
    10.0f, 11.5f, 13.0f, 14.5f, 16.0f, 17.5f, 19.0f, 20.5f,
    20.5f, 19.0f, 17.5f, 16.0f, 14.5f, 13.0f, 11.5f, 10.0f,
    8.5f, 7.0f, 5.5f, 4.0f, 2.5f, 1.0f, -0.5f, -2.0f,
    27.0f, 25.0f, 23.0f, 21.0f, 19.0f, 17.0f, 15.0f, 13.0f,
    11.0f, 9.0f, 7.0f, 5.0f, 3.0f, 1.0f, -1.0f, -3.0f,
    -3.0f, -1.0f, 1.0f, 3.0f, 5.0f, 7.0f, 9.0f, 11.0f,
    13.0f, 15.0f, 17.0f, 19.0f, 21.0f, 23.0f, 25.0f, 27.0f,
    -12.0f, 18.0f, 48.0f, 78.0f, 108.0f, 138.0f, 168.0f, 198.0f,
    228.0f, 258.0f, 288.0f, 318.0f, 348.0f, 378.0f, 408.0f, 438.0f,
    438.0f, 408.0f, 378.0f, 348.0f, 318.0f, 288.0f, 258.0f, 228.0f,
    198.0f, 168.0f, 138.0f, 108.0f, 78.0f, 48.0f, 18.0f, -12.0f,
    242.5f, 226.0f, 209.5f, 193.0f, 176.5f, 160.0f, 143.5f, 127.0f,
    110.5f, 94.0f, 77.5f, 61.0f, 44.5f, 28.0f, 11.5f, -5.0f,
    -5.0f, 11.5f, 28.0f, 44.5f, 61.0f, 77.5f, 94.0f, 110.5f,
    127.0f, 143.5f, 160.0f, 176.5f, 193.0f, 209.5f, 226.0f, 242.5f,
    -1.25f, 7.25f, 15.75f, 24.25f, 32.75f, 41.25f, 49.75f, 58.25f,
    66.75f, 75.25f, 83.75f, 92.25f, 100.75f, 109.25f, 117.75f, 126.25f,
    126.25f, 117.75f, 109.25f, 100.75f, 92.25f, 83.75f, 75.25f, 66.75f,
    58.25f, 49.75f, 41.25f, 32.75f, 24.25f, 15.75f, 7.25f, -1.25f,
    456.75f, 425.25f, 393.75f, 362.25f, 330.75f, 299.25f, 267.75f, 236.25f,
    204.75f, 173.25f, 141.75f, 110.25f, 78.75f, 47.25f, 15.75f, -15.75f,
    -15.75f, 15.75f, 47.25f, 78.75f, 110.25f, 141.75f, 173.25f, 204.75f,
    236.25f, 267.75f, 299.25f, 330.75f, 362.25f, 393.75f, 425.25f, 456.75f,
    };
    check_block(NPL_TYPE_Q4_K, &b, sizeof b, want, 256);
}

/* q5_K: d = 0.25 (0x3400), dmin = 0.5 (0x3800); scales 63 1 10 20 31 32
 * 47 5, mins 1 2 3 4 16 62 0 33, packed as for q4_K -> 7f 81 8a 14 41 c2
 * 03 84 0f e0 0f 15. qs[32c + l] = (l & 15) | (l >> 1) << 4; qh[l] =
 * (37*l + 11) & 255, whose bit g is the fifth bit of element l of group g.
 * e.g. element 0: qh[0] = 11 has bit 0 set, q = 0 + 16, so
 * 0.25*63*16 - 0.5*1 = 251.5. */
static void q5_K_hand_block(void)
{
    npl_block_q5_K b;
    b.d = 0x3400;
    b.dmin = 0x3800;
    static const uint8_t scales[12] = { 0x7f, 0x81, 0x8a, 0x14, 0x41, 0xc2, 0x03, 0x84, 0x0f, 0xe0, 0x0f, 0x15 };
    memcpy(b.scales, scales, sizeof scales);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b.qs[32 * c + l] = (uint8_t)((l & 15) | (l >> 1) << 4);
    for (int l = 0; l < 32; l++)
        b.qh[l] = (uint8_t)(37 * l + 11);
    static const float want[256] = {
    251.5f, 15.25f, 283.0f, 46.75f, 314.5f, 78.25f, 346.0f, 109.75f,
    377.5f, 141.25f, 409.0f, 172.75f, 440.5f, 204.25f, 472.0f, 235.75f,
    251.5f, 15.25f, 283.0f, 46.75f, 314.5f, 78.25f, 346.0f, 109.75f,
    377.5f, 141.25f, 409.0f, 172.75f, 440.5f, 204.25f, 472.0f, 235.75f,
    3.0f, -1.0f, -0.75f, 3.25f, 3.5f, -0.5f, -0.25f, 3.75f,
    4.0f, 0.0f, 0.25f, 4.25f, 4.5f, 0.5f, 0.75f, 4.75f,
    5.0f, 1.0f, 1.25f, 5.25f, 5.5f, 1.5f, 1.75f, 5.75f,
    6.0f, 2.0f, 2.25f, 6.25f, 6.5f, 2.5f, 2.75f, 6.75f,
    -1.5f, 1.0f, 43.5f, 6.0f, 48.5f, 51.0f, 13.5f, 56.0f,
    18.5f, 21.0f, 63.5f, 26.0f, 68.5f, 71.0f, 33.5f, 76.0f,
    -1.5f, 1.0f, 43.5f, 6.0f, 48.5f, 51.0f, 13.5f, 56.0f,
    18.5f, 21.0f, 63.5f, 26.0f, 68.5f, 71.0f, 33.5f, 76.0f,
    78.0f, -2.0f, 3.0f, 83.0f, 88.0f, 8.0f, 93.0f, 93.0f,
    18.0f, 98.0f, 103.0f, 23.0f, 28.0f, 108.0f, 33.0f, 33.0f,
    118.0f, 38.0f, 43.0f, 123.0f, 128.0f, 48.0f, 133.0f, 133.0f,
    58.0f, 138.0f, 143.0f, 63.0f, 68.0f, 148.0f, 73.0f, 73.0f,
    -8.0f, 123.75f, 131.5f, 139.25f, 147.0f, 30.75f, 38.5f, 46.25f,
    178.0f, 185.75f, 193.5f, 77.25f, 85.0f, 92.75f, 224.5f, 232.25f,
    116.0f, -0.25f, 7.5f, 15.25f, 23.0f, 154.75f, 162.5f, 170.25f,
    54.0f, 61.75f, 69.5f, 201.25f, 209.0f, 216.75f, 100.5f, 108.25f,
    -31.0f, 97.0f, -23.0f, 105.0f, -15.0f, -15.0f, 121.0f, -7.0f,
    129.0f, 1.0f, 137.0f, 137.0f, 17.0f, 145.0f, 25.0f, 153.0f,
    33.0f, 33.0f, 169.0f, 41.0f, 177.0f, 49.0f, 185.0f, 57.0f,
    65.0f, 193.0f, 73.0f, 201.0f, 81.0f, 209.0f, 217.0f, 89.0f,
    0.0f, 11.75f, 211.5f, 223.25f, 47.0f, 246.75f, 258.5f, 82.25f,
    94.0f, 293.75f, 305.5f, 129.25f, 329.0f, 340.75f, 164.5f, 176.25f,
    188.0f, 11.75f, 23.5f, 223.25f, 235.0f, 58.75f, 70.5f, 270.25f,
    94.0f, 105.75f, 305.5f, 317.25f, 141.0f, 152.75f, 352.5f, 176.25f,
    -16.5f, -16.5f, -15.25f, -15.25f, 6.0f, 6.0f, 7.25f, -12.75f,
    -11.5f, -11.5f, -10.25f, 9.75f, 11.0f, 11.0f, -7.75f, -7.75f,
    -6.5f, 13.5f, 14.75f, 14.75f, 16.0f, -4.0f, -2.75f, -2.75f,
    18.5f, 18.5f, 19.75f, 19.75f, 1.0f, 1.0f, 2.25f, 22.25f,
    };
    check_block(NPL_TYPE_Q5_K, &b, sizeof b, want, 256);
}

/* q6_K: d = 1/16 (0x2c00); int8 scales 1 -1 2 -2 3 -3 4 -4 127 -128 10
 * -10 5 7 -7 0 (one per 16 elements); ql[i] = 29i + 3, qh[i] = 53i + 7
 * (mod 256). Element e = 128h + 32k + l has low bits from ql[64h + 32(k&1)
 * + l] (low nibble if k < 2, else high), top bits = bits 2k,2k+1 of
 * qh[32h + l], value d * scale[e/16] * (q - 32). e.g. element 0: ql[0] = 3,
 * qh[0] = 7 -> top bits 3, q = 3 | 48 = 51, 1/16 * 1 * 19 = 1.1875. */
static void q6_K_hand_block(void)
{
    npl_block_q6_K b;
    static const int8_t scales[16] = { 1, -1, 2, -2, 3, -3, 4, -4, 127, -128, 10, -10, 5, 7, -7, 0 };
    memcpy(b.scales, scales, sizeof scales);
    for (int i = 0; i < 128; i++)
        b.ql[i] = (uint8_t)(29 * i + 3);
    for (int i = 0; i < 64; i++)
        b.qh[i] = (uint8_t)(53 * i + 7);
    b.d = 0x2c00;
    static const float want[256] = {
    1.1875f, -2.0f, -0.1875f, 0.625f, 1.4375f, -1.75f, -0.9375f, 0.875f,
    1.6875f, -1.5f, -0.6875f, 0.125f, 1.9375f, -1.25f, -0.4375f, 0.375f,
    -1.1875f, 2.0f, 0.1875f, -0.625f, -1.4375f, 1.75f, 0.9375f, -0.875f,
    -1.6875f, 1.5f, 0.6875f, -0.125f, -1.9375f, 1.25f, 0.4375f, -0.375f,
    -1.625f, 2.0f, -2.375f, -0.75f, 0.875f, -3.5f, -1.875f, 1.75f,
    3.375f, -1.0f, 0.625f, 2.25f, -2.125f, 1.5f, 3.125f, -3.25f,
    1.625f, -2.0f, 2.375f, 0.75f, -0.875f, 3.5f, 1.875f, -1.75f,
    -3.375f, 1.0f, -0.625f, -2.25f, 2.125f, -1.5f, -3.125f, 3.25f,
    -6.0f, 3.375f, 3.5625f, 0.9375f, -1.6875f, -1.3125f, -3.9375f, 5.25f,
    2.625f, 0.0f, -2.625f, -5.25f, -5.0625f, 4.3125f, 1.6875f, 2.0625f,
    0.5625f, 3.1875f, 6.0f, -3.375f, -0.75f, -1.125f, 1.5f, 4.3125f,
    -5.0625f, -5.4375f, -2.8125f, 2.8125f, 2.625f, 5.25f, -4.125f, -4.5f,
    -5.5f, -5.0f, -0.75f, 3.75f, 4.25f, -7.25f, -2.75f, -2.5f,
    2.0f, 6.5f, -5.0f, -0.5f, 3.75f, 0.25f, 4.75f, -6.75f,
    2.25f, -2.25f, -6.5f, -7.0f, 4.5f, 4.0f, -0.5f, -4.75f,
    -5.25f, 6.25f, 1.75f, -2.75f, -7.0f, 4.5f, 8.0f, 3.5f,
    150.8125f, -254.0f, -23.8125f, 79.375f, 182.5625f, -222.25f, -119.0625f, 111.125f,
    214.3125f, -190.5f, -87.3125f, 15.875f, 246.0625f, -158.75f, -55.5625f, 47.625f,
    -152.0f, 256.0f, 24.0f, -80.0f, -184.0f, 224.0f, 120.0f, -112.0f,
    -216.0f, 192.0f, 88.0f, -16.0f, -248.0f, 160.0f, 56.0f, -48.0f,
    -8.125f, 10.0f, -11.875f, -3.75f, 4.375f, -17.5f, -9.375f, 8.75f,
    16.875f, -5.0f, 3.125f, 11.25f, -10.625f, 7.5f, 15.625f, -16.25f,
    8.125f, -10.0f, 11.875f, 3.75f, -4.375f, 17.5f, 9.375f, -8.75f,
    -16.875f, 5.0f, -3.125f, -11.25f, 10.625f, -7.5f, -15.625f, 16.25f,
    1.25f, -3.125f, -2.8125f, -7.1875f, 8.4375f, 9.0625f, 4.6875f, -5.0f,
    -9.375f, -8.75f, 6.875f, 2.5f, 2.8125f, -1.5625f, -5.9375f, -5.3125f,
    7.4375f, 1.3125f, 1.75f, -4.375f, -10.5f, -9.625f, 12.25f, 5.6875f,
    -0.4375f, -6.5625f, -12.6875f, 9.1875f, 9.625f, 3.5f, -2.625f, -1.75f,
    -6.125f, -7.0f, 13.5625f, 5.6875f, 4.8125f, -3.0625f, -10.9375f, 9.625f,
    1.75f, -6.125f, -0.0f, -7.875f, 12.6875f, 4.8125f, -3.0625f, -10.9375f,
    0.0f, -0.0f, -0.0f, 0.0f, 0.0f, -0.0f, -0.0f, -0.0f,
    0.0f, 0.0f, -0.0f, -0.0f, -0.0f, 0.0f, 0.0f, -0.0f,
    };
    check_block(NPL_TYPE_Q6_K, &b, sizeof b, want, 256);
}

/* q2_K: d = 0.5, dmin = 1; scales[g] = g | ((5g + 3) & 15) << 4 (low
 * nibble scale, high nibble min); qs[i] = 97i + 13. Element e = 128h + 32j
 * + 16p + l takes bits 2j,2j+1 of qs[32h + 16p + l]; value 0.5*sc*q - mn.
 * e.g. element 0: qs[0] = 13 -> q = 1, group 0 scale 0 min 3: -3. */
static void q2_K_hand_block(void)
{
    npl_block_q2_K b;
    for (int g = 0; g < 16; g++)
        b.scales[g] = (uint8_t)(g | ((5 * g + 3) & 15) << 4);
    for (int i = 0; i < 64; i++)
        b.qs[i] = (uint8_t)(97 * i + 13);
    b.d = 0x3800;
    b.dmin = 0x3c00;
    static const float want[256] = {
    -3.0f, -3.0f, -3.0f, -3.0f, -3.0f, -3.0f, -3.0f, -3.0f,
    -3.0f, -3.0f, -3.0f, -3.0f, -3.0f, -3.0f, -3.0f, -3.0f,
    -7.5f, -7.0f, -6.5f, -8.0f, -7.5f, -7.0f, -6.5f, -8.0f,
    -7.5f, -7.0f, -6.5f, -8.0f, -7.5f, -7.0f, -6.5f, -8.0f,
    -10.0f, -10.0f, -10.0f, -13.0f, -13.0f, -13.0f, -13.0f, -12.0f,
    -12.0f, -12.0f, -12.0f, -11.0f, -11.0f, -11.0f, -11.0f, -10.0f,
    2.5f, 2.5f, 2.5f, -2.0f, -2.0f, -2.0f, -2.0f, -0.5f,
    -0.5f, -0.5f, -0.5f, 1.0f, 1.0f, 1.0f, 1.0f, 2.5f,
    -7.0f, -3.0f, -7.0f, -1.0f, -5.0f, -1.0f, -5.0f, -1.0f,
    -5.0f, -1.0f, -5.0f, -1.0f, -5.0f, -1.0f, -5.0f, -1.0f,
    -9.5f, -4.5f, -9.5f, -12.0f, -7.0f, -12.0f, -7.0f, -12.0f,
    -7.0f, -12.0f, -7.0f, -12.0f, -7.0f, -12.0f, -7.0f, -12.0f,
    -1.0f, 2.0f, 8.0f, -1.0f, 5.0f, 8.0f, 2.0f, 5.0f,
    -1.0f, 2.0f, 8.0f, -1.0f, 5.0f, 8.0f, 2.0f, 5.0f,
    -6.0f, -2.5f, 4.5f, -2.5f, 1.0f, -6.0f, -2.5f, 4.5f,
    -6.0f, 1.0f, 4.5f, -2.5f, 1.0f, -6.0f, -2.5f, 4.5f,
    -7.0f, -3.0f, 1.0f, -11.0f, -7.0f, -3.0f, 1.0f, -11.0f,
    -7.0f, -3.0f, 1.0f, -11.0f, -7.0f, -3.0f, 1.0f, -11.0f,
    4.5f, 9.0f, 13.5f, 0.0f, 4.5f, 9.0f, 13.5f, 0.0f,
    4.5f, 9.0f, 13.5f, 0.0f, 4.5f, 9.0f, 13.5f, 0.0f,
    10.0f, 10.0f, 10.0f, -5.0f, -5.0f, -5.0f, -5.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 5.0f, 5.0f, 5.0f, 5.0f, 10.0f,
    6.5f, 6.5f, 6.5f, -10.0f, -10.0f, -10.0f, -10.0f, -4.5f,
    -4.5f, -4.5f, -4.5f, 1.0f, 1.0f, 1.0f, 1.0f, 6.5f,
    -3.0f, -15.0f, -3.0f, -9.0f, 3.0f, -9.0f, 3.0f, -9.0f,
    3.0f, -9.0f, 3.0f, -9.0f, 3.0f, -9.0f, 3.0f, -9.0f,
    15.5f, 2.5f, 15.5f, 9.0f, -4.0f, 9.0f, -4.0f, 9.0f,
    -4.0f, 9.0f, -4.0f, 9.0f, -4.0f, 9.0f, -4.0f, 9.0f,
    -9.0f, 5.0f, 12.0f, -2.0f, 5.0f, -9.0f, -2.0f, 12.0f,
    -9.0f, 5.0f, 12.0f, -2.0f, 5.0f, -9.0f, -2.0f, 12.0f,
    -14.0f, 1.0f, 8.5f, -6.5f, 8.5f, -14.0f, 1.0f, 8.5f,
    -6.5f, 1.0f, -14.0f, -6.5f, 8.5f, -14.0f, 1.0f, 8.5f,
    };
    check_block(NPL_TYPE_Q2_K, &b, sizeof b, want, 256);
}

/* q3_K: d = 0.25; signed scales -32 31 0 1 -1 5 -7 12 20 -20 3 -3 15 -16
 * 8 -8, stored as u = s + 32: bytes 0-7 hold u[i] & 15 (low nibble) and
 * u[i+8] & 15 (high nibble); byte 8+k holds u >> 4 of groups k, k+4, k+8,
 * k+12 in bit pairs 0-1, 2-3, 4-5, 6-7 -> 40 cf 30 d1 ff 05 89 8c b4 4b a6
 * 5a. hmask[i] = 71i + 5, qs[i] = 13i + 200. Element e = 128h + 32j + 16p
 * + l: low = bits 2j,2j+1 of qs[32h + 16p + l], minus 4 unless bit 4h + j
 * of hmask[16p + l] is set; value 0.25 * scale[e/16] * q. A zero q with a
 * negative scale gives -0, as in ggml. e.g. element 1: qs[1] = 213 -> low
 * 1, hmask[1] = 76 bit 0 clear -> q = -3, 0.25 * -32 * -3 = 24. */
static void q3_K_hand_block(void)
{
    npl_block_q3_K b;
    for (int i = 0; i < 32; i++)
        b.hmask[i] = (uint8_t)(71 * i + 5);
    for (int i = 0; i < 64; i++)
        b.qs[i] = (uint8_t)(13 * i + 200);
    static const uint8_t scales[12] = { 0x40, 0xcf, 0x30, 0xd1, 0xff, 0x05, 0x89, 0x8c, 0xb4, 0x4b, 0xa6, 0x5a };
    memcpy(b.scales, scales, sizeof scales);
    b.d = 0x3400;
    static const float want[256] = {
    -0.0f, 24.0f, -16.0f, 8.0f, -0.0f, 24.0f, -16.0f, 8.0f,
    -0.0f, 24.0f, -16.0f, 8.0f, -0.0f, 24.0f, -16.0f, 8.0f,
    0.0f, -23.25f, 15.5f, -7.75f, 0.0f, -23.25f, 15.5f, -7.75f,
    0.0f, -23.25f, 15.5f, -7.75f, 0.0f, -23.25f, 15.5f, -7.75f,
    -0.0f, -0.0f, 0.0f, 0.0f, -0.0f, -0.0f, 0.0f, 0.0f,
    -0.0f, -0.0f, 0.0f, 0.0f, -0.0f, -0.0f, 0.0f, 0.0f,
    -0.5f, -0.75f, 0.0f, 0.75f, -0.25f, -0.5f, 0.25f, 0.0f,
    -1.0f, -0.25f, 0.5f, 0.25f, -0.75f, -1.0f, 0.75f, 0.5f,
    -0.0f, -0.25f, 0.5f, 0.5f, 0.25f, 1.0f, -0.25f, -0.5f,
    -0.75f, -0.75f, 1.0f, 0.75f, 0.5f, 0.25f, -0.75f, -0.0f,
    1.25f, 2.5f, -1.25f, -1.25f, -5.0f, -3.75f, 2.5f, 3.75f,
    0.0f, 0.0f, -3.75f, -2.5f, -1.25f, -5.0f, 0.0f, 1.25f,
    1.75f, -5.25f, 1.75f, -5.25f, 1.75f, -0.0f, -0.0f, 7.0f,
    -0.0f, 7.0f, -1.75f, 5.25f, -1.75f, 5.25f, 5.25f, -3.5f,
    -6.0f, 6.0f, -6.0f, 6.0f, -3.0f, 9.0f, 9.0f, -3.0f,
    0.0f, -12.0f, 0.0f, -12.0f, 0.0f, -9.0f, -9.0f, 3.0f,
    -20.0f, -15.0f, 10.0f, 15.0f, -20.0f, -15.0f, -10.0f, 15.0f,
    0.0f, -15.0f, -10.0f, 15.0f, 0.0f, -15.0f, -10.0f, -5.0f,
    -0.0f, -5.0f, 10.0f, 5.0f, -0.0f, -5.0f, -10.0f, 5.0f,
    20.0f, -5.0f, -10.0f, 5.0f, 20.0f, -5.0f, -10.0f, -15.0f,
    -1.5f, -2.25f, -3.0f, -0.75f, 2.25f, 1.5f, 0.75f, 0.0f,
    0.0f, -0.75f, -1.5f, -2.25f, -2.25f, 0.0f, 2.25f, 1.5f,
    -1.5f, -0.75f, 3.0f, 0.75f, 0.75f, 1.5f, 2.25f, -0.0f,
    -0.0f, -2.25f, -1.5f, 2.25f, 2.25f, 3.0f, 0.75f, 1.5f,
    -7.5f, 11.25f, -15.0f, 0.0f, -11.25f, 7.5f, -3.75f, 0.0f,
    -11.25f, -11.25f, 7.5f, -3.75f, 0.0f, -11.25f, 3.75f, -7.5f,
    -12.0f, 16.0f, 12.0f, -4.0f, 8.0f, -12.0f, 16.0f, -4.0f,
    8.0f, -8.0f, 4.0f, 16.0f, -4.0f, 8.0f, -8.0f, 4.0f,
    -6.0f, -6.0f, 4.0f, 4.0f, -4.0f, -4.0f, 4.0f, 6.0f,
    -2.0f, 6.0f, 6.0f, -2.0f, -8.0f, 0.0f, 0.0f, -8.0f,
    8.0f, -2.0f, 6.0f, 6.0f, -2.0f, -2.0f, 4.0f, 4.0f,
    -4.0f, -4.0f, 4.0f, -6.0f, -6.0f, 2.0f, 2.0f, -6.0f,
    };
    check_block(NPL_TYPE_Q3_K, &b, sizeof b, want, 256);
}

/* iq4_xs: d = 1; 6-bit scales 0 63 32 33 31 40 16 48 -> scales_l (low
 * nibbles, two per byte) f0 10 8f 00, scales_h (top bits, two per group)
 * 0xd9ac. qs[i] = 7i + 1; group g uses qs[16g..16g+15], low nibbles for
 * its first 16 elements. Value (ls - 32) * level. e.g. element 0: ls 0,
 * qs[0] = 1 -> level 1 = -104, -32 * -104 = 3328. */
static void iq4_xs_hand_block(void)
{
    npl_block_iq4_xs b;
    b.d = 0x3c00;
    b.scales_h = 0xd9ac;
    static const uint8_t scales_l[4] = { 0xf0, 0x10, 0x8f, 0x00 };
    memcpy(b.scales_l, scales_l, sizeof scales_l);
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)(7 * i + 1);
    static const float want[256] = {
    3328.0f, -32.0f, -3616.0f, 704.0f, -2208.0f, 1568.0f, -1216.0f, 2656.0f,
    -416.0f, 4064.0f, 320.0f, -2848.0f, 1120.0f, -1696.0f, 2080.0f, -800.0f,
    4064.0f, 4064.0f, 4064.0f, 3328.0f, 3328.0f, 2656.0f, 2656.0f, 2080.0f,
    2080.0f, 1568.0f, 1568.0f, 1568.0f, 1120.0f, 1120.0f, 704.0f, 704.0f,
    -3224.0f, 31.0f, 3503.0f, -682.0f, 2139.0f, -1519.0f, 1178.0f, -2573.0f,
    403.0f, -3937.0f, -310.0f, 2759.0f, -1085.0f, 1643.0f, -2015.0f, 775.0f,
    -310.0f, -310.0f, -310.0f, 31.0f, 31.0f, 403.0f, 403.0f, 775.0f,
    775.0f, 1178.0f, 1178.0f, 1178.0f, 1643.0f, 1643.0f, 2139.0f, 2139.0f,
    -0.0f, 0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f,
    0.0f, -0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, -0.0f, -0.0f, -0.0f,
    -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f,
    -104.0f, 1.0f, 113.0f, -22.0f, 69.0f, -49.0f, 38.0f, -83.0f,
    13.0f, -127.0f, -10.0f, 89.0f, -35.0f, 53.0f, -65.0f, 25.0f,
    -35.0f, -35.0f, -35.0f, -22.0f, -22.0f, -10.0f, -10.0f, 1.0f,
    1.0f, 13.0f, 13.0f, 13.0f, 25.0f, 25.0f, 38.0f, 38.0f,
    104.0f, -1.0f, -113.0f, 22.0f, -69.0f, 49.0f, -38.0f, 83.0f,
    -13.0f, 127.0f, 10.0f, -89.0f, 35.0f, -53.0f, 65.0f, -25.0f,
    -53.0f, -53.0f, -53.0f, -69.0f, -69.0f, -89.0f, -89.0f, -113.0f,
    -113.0f, 127.0f, 127.0f, 127.0f, 104.0f, 104.0f, 83.0f, 83.0f,
    -832.0f, 8.0f, 904.0f, -176.0f, 552.0f, -392.0f, 304.0f, -664.0f,
    104.0f, -1016.0f, -80.0f, 712.0f, -280.0f, 424.0f, -520.0f, 200.0f,
    -520.0f, -520.0f, -520.0f, -392.0f, -392.0f, -280.0f, -280.0f, -176.0f,
    -176.0f, -80.0f, -80.0f, -80.0f, 8.0f, 8.0f, 104.0f, 104.0f,
    1664.0f, -16.0f, -1808.0f, 352.0f, -1104.0f, 784.0f, -608.0f, 1328.0f,
    -208.0f, 2032.0f, 160.0f, -1424.0f, 560.0f, -848.0f, 1040.0f, -400.0f,
    -400.0f, -400.0f, -400.0f, -608.0f, -608.0f, -848.0f, -848.0f, -1104.0f,
    -1104.0f, -1424.0f, -1424.0f, -1424.0f, -1808.0f, -1808.0f, 2032.0f, 2032.0f,
    -1664.0f, 16.0f, 1808.0f, -352.0f, 1104.0f, -784.0f, 608.0f, -1328.0f,
    208.0f, -2032.0f, -160.0f, 1424.0f, -560.0f, 848.0f, -1040.0f, 400.0f,
    -1664.0f, -1664.0f, -1664.0f, -1328.0f, -1328.0f, -1040.0f, -1040.0f, -784.0f,
    -784.0f, -560.0f, -560.0f, -560.0f, -352.0f, -352.0f, -160.0f, -160.0f,

    };
    check_block(NPL_TYPE_IQ4_XS, &b, sizeof b, want, 256);
}

/* q8_K: d = 0.5 as a float, qs[i] = i - 128: element i = (i - 128) / 2.
 * bsums do not take part in dequantization. */
static void q8_K_hand_block(void)
{
    npl_block_q8_K b;
    b.d = 0.5f;
    for (int i = 0; i < 256; i++)
        b.qs[i] = (int8_t)(i - 128);
    memset(b.bsums, 0x7f, sizeof b.bsums);
    float want[256];
    for (int i = 0; i < 256; i++)
        want[i] = -64.0f + 0.5f * (float)i;
    check_block(NPL_TYPE_Q8_K, &b, sizeof b, want, 256);
}

/* ---- plain types: exact ------------------------------------------------- */

static void f16_row_is_exact(void)
{
    uint16_t *h = malloc(65536 * sizeof *h);
    float *out = malloc(65536 * sizeof *out);
    CHECK(h != NULL && out != NULL);
    if (h && out) {
        for (uint32_t i = 0; i < 65536; i++)
            h[i] = (uint16_t)i;
        CHECK(npl_dequantize_row_ref(NPL_TYPE_F16, h, out, 65536));
        for (uint32_t i = 0; i < 65536 && !nt_failures(); i++)
            CHECK_FLOAT_BITS(out[i], npl_fp16_to_fp32((uint16_t)i), i);
        /* Spot values by hand: 0x3c00 = 1, 0xc500 = -5, 0x0001 = 2^-24. */
        CHECK(out[0x3c00] == 1.0f);
        CHECK(out[0xc500] == -5.0f);
        CHECK(out[0x0001] == 0x1p-24f);
    }
    free(h);
    free(out);
}

static void bf16_row_is_exact(void)
{
    uint16_t *h = malloc(65536 * sizeof *h);
    float *out = malloc(65536 * sizeof *out);
    CHECK(h != NULL && out != NULL);
    if (h && out) {
        for (uint32_t i = 0; i < 65536; i++)
            h[i] = (uint16_t)i;
        CHECK(npl_dequantize_row_ref(NPL_TYPE_BF16, h, out, 65536));
        for (uint32_t i = 0; i < 65536 && !nt_failures(); i++)
            CHECK(nt_float_bits(out[i]) == i << 16);
        CHECK(out[0x3f80] == 1.0f);
        CHECK(out[0xc0a0] == -5.0f);
    }
    free(h);
    free(out);
}

/* f32 passes through bit for bit, NaN payloads and -0 included, from an
 * unaligned source. */
static void f32_row_is_exact(void)
{
    static const uint32_t bits[] = { 0x00000000u, 0x80000000u, 0x3f800000u, 0x00000001u,
                                     0x7f800000u, 0xff800000u, 0x7fc12345u, 0x7f800001u,
                                     0x7f7fffffu, 0xc2f6e979u };
    enum { N = sizeof bits / sizeof bits[0] };
    unsigned char raw[N * 4 + 1];
    memcpy(raw + 1, bits, sizeof bits);
    float out[N];
    CHECK(npl_dequantize_row_ref(NPL_TYPE_F32, raw + 1, out, N));
    for (int i = 0; i < N; i++)
        CHECK(nt_float_bits(out[i]) == bits[i]);
}

/* ---- argument checking ------------------------------------------------- */

static void dequantize_rejects_bad_arguments(void)
{
    unsigned char zeros[300] = { 0 };
    float out[256];
    CHECK(!npl_dequantize_row_ref(NPL_TYPE_Q4_0, zeros, out, 33));   /* not whole blocks */
    CHECK(!npl_dequantize_row_ref(NPL_TYPE_Q4_K, zeros, out, 32));
    CHECK(!npl_dequantize_row_ref(NPL_TYPE_Q4_0, zeros, out, -32));  /* negative */
    CHECK(!npl_dequantize_row_ref(NPL_TYPE_Q4_0, NULL, out, 32));    /* missing buffers */
    CHECK(!npl_dequantize_row_ref(NPL_TYPE_Q4_0, zeros, NULL, 32));
    CHECK(!npl_dequantize_row_ref(4, zeros, out, 32));               /* removed id */
    CHECK(!npl_dequantize_row_ref(NPL_TYPE_IQ2_XXS, zeros, out, 256)); /* no decoder */
    CHECK(!npl_dequantize_row_ref(NPL_TYPE_I32, zeros, out, 4));
    CHECK(!npl_dequantize_row_ref(1000, zeros, out, 32));
    CHECK(npl_dequantize_row_ref(NPL_TYPE_Q4_0, NULL, NULL, 0));     /* empty row is fine */
}

static const nt_case cases[] = {
    { "q4_0_hand_block", q4_0_hand_block },
    { "q4_0_two_blocks", q4_0_two_blocks },
    { "q4_1_hand_block", q4_1_hand_block },
    { "q5_0_hand_block", q5_0_hand_block },
    { "q5_1_hand_block", q5_1_hand_block },
    { "q8_0_hand_block", q8_0_hand_block },
    { "iq4_nl_hand_block", iq4_nl_hand_block },
    { "mxfp4_hand_blocks", mxfp4_hand_blocks },
    { "q2_K_hand_block", q2_K_hand_block },
    { "q3_K_hand_block", q3_K_hand_block },
    { "q4_K_hand_block", q4_K_hand_block },
    { "q5_K_hand_block", q5_K_hand_block },
    { "q6_K_hand_block", q6_K_hand_block },
    { "q8_K_hand_block", q8_K_hand_block },
    { "iq4_xs_hand_block", iq4_xs_hand_block },
    { "f16_row_is_exact", f16_row_is_exact },
    { "bf16_row_is_exact", bf16_row_is_exact },
    { "f32_row_is_exact", f32_row_is_exact },
    { "dequantize_rejects_bad_arguments", dequantize_rejects_bad_arguments },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
