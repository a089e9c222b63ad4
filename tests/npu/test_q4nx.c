/* Q4NX: byte layout, repacking from q4_0/q4_1/q4_K (exact codes, scales
 * rounded to bf16), quantizing from floats, padding, and the reference
 * dequantizer and matvec. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_blocks.h"
#include "ggml_types.h"
#include "npu_bf16.h"
#include "npl_test.h"
#include "q4nx.h"

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

static void *xcalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        abort();
    return p;
}

static void layout_shapes(void)
{
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, 1, 1, &err), &err);
    CHECK(l.rows_padded == 32 && l.cols_padded == 256 && l.bytes == 5120);
    CHECK_OK(npl_q4nx_layout_init(&l, 33, 257, &err), &err);
    CHECK(l.row_blocks == 2 && l.col_blocks == 2 && l.bytes == 4 * 5120);
    CHECK_OK(npl_q4nx_layout_init(&l, 2048, 8192, &err), &err);
    CHECK(l.bytes == (size_t)64 * 32 * 5120);
    CHECK_OK(npl_q4nx_layout_init(&l, 262144, 1152, &err), &err);
    CHECK(l.cols_padded == 1280 && l.bytes == (size_t)8192 * 5 * 5120);
    CHECK_FAILS(npl_q4nx_layout_init(&l, 0, 5, &err), NPL_ERR_INVALID_ARG, &err, "outside");
    CHECK_FAILS(npl_q4nx_layout_init(&l, 5, (int64_t)NPL_Q4NX_MAX_DIM + 1, &err),
                NPL_ERR_INVALID_ARG, &err, "outside");
}

/* Fields written by hand at the documented offsets decode as documented:
 * scales/mins indexed [group][row], codes in bands of 16 rows where one
 * byte holds two adjacent rows of one column. */
static void hand_block_layout(void)
{
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, 64, 512, &err), &err);
    uint8_t *q = xcalloc(l.bytes);
    /* Block (row block 1, col block 1) is the 4th: row-block major. */
    uint8_t *blk = q + 3 * NPL_Q4NX_BLOCK_BYTES;
    int r = 3, g = 5; /* row 35, columns 256+160 .. 256+191 */
    put16(blk + 2 * (g * 32 + r), 0x3f00);        /* d = 0.5 */
    put16(blk + 512 + 2 * (g * 32 + r), 0xbf80);  /* m = -1 */
    /* Row 3 is the high nibble of byte 1 of its column (band 0). */
    blk[1024 + 160 * 8 + 1] = 0x10;               /* col 160: q=1 */
    blk[1024 + 161 * 8 + 1] = 0x20;               /* col 161: q=2 */
    blk[1024 + 191 * 8 + 1] = 0xf0;               /* col 191: q=15 */
    float row[512];
    npl_q4nx_dequantize_row(q, &l, 35, row);
    for (int c = 0; c < 512; c++) {
        float want = 0.0f;
        if (c >= 256 + 160 && c < 256 + 192)
            want = -1.0f;
        if (c == 256 + 160)
            want = -0.5f;
        if (c == 256 + 161)
            want = 0.0f;
        if (c == 256 + 191)
            want = 6.5f;
        if (row[c] != want) {
            CHECK(row[c] == want);
            nt_note("  col %d: got %g want %g", c, (double)row[c], (double)want);
            break;
        }
    }
    CHECK(npl_q4nx_scale_bits(q, &l, 35, 8 + 5) == 0x3f00);
    CHECK(npl_q4nx_min_bits(q, &l, 35, 8 + 5) == 0xbf80);
    CHECK(npl_q4nx_code(q, &l, 35, 256 + 161) == 2);
    CHECK(npl_q4nx_code(q, &l, 35, 256 + 191) == 15);
    CHECK(npl_q4nx_code(q, &l, 34, 256 + 191) == 0); /* the low nibble's row */
    /* Every other row is zero. */
    npl_q4nx_dequantize_row(q, &l, 3, row);
    for (int c = 0; c < 512; c++)
        CHECK(row[c] == 0.0f);
    free(q);
}

/* A test vector worked out by hand from the public reference's byte order
 * (docs/npu.md, Q4NX): a q4_1 matrix of 32 rows x 256 columns whose codes
 * are all 0 except four, and one group with a scale and min, repacked; the
 * bytes at the hand-computed offsets, and nothing else, are non-zero. */
static void reference_byte_order_vector(void)
{
    enum { ROWS = 32, COLS = 256, BLOCKS = COLS / 32 };
    npl_block_q4_1 src[ROWS][BLOCKS];
    memset(src, 0, sizeof src);
    /* q4_1 block: element j < 16 in the low nibble of qs[j], j >= 16 in
     * the high nibble of qs[j - 16]. */
    src[0][0].qs[0] = 0x03;   /* row 0,  col 0:   q = 3  */
    src[1][0].qs[0] = 0x0a;   /* row 1,  col 0:   q = 10 */
    src[17][0].qs[3] = 0x07;  /* row 17, col 3:   q = 7  */
    src[30][7].qs[15] = 0xf0; /* row 30, col 255: q = 15 (element 31 of block 7) */
    src[5][2].d = 0x3c00;     /* row 5, cols 64-95: d = 1.0 (fp16) */
    src[5][2].m = 0xc000;     /* m = -2.0 (fp16) */
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, ROWS, COLS, &err), &err);
    CHECK(l.bytes == 5120);
    uint8_t *q = xcalloc(l.bytes);
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_Q4_1, src, sizeof src, q, l.bytes, NULL, &err), &err);
    /* By hand:
     *   scale of (row 5, group 2) at 2 * (2*32 + 5) = 138: bf16 1.0 = 0x3f80
     *   min at 512 + 138 = 650: bf16 -2.0 = 0xc000
     *   rows 0 and 1, col 0: band 0, byte 1024 + 0*8 + 0: 0xa3 (row 1 high)
     *   row 17, col 3: band 1, byte 1024 + 2048 + 3*8 + 0 = 3096, high: 0x70
     *   row 30, col 255: band 1, byte 1024 + 2048 + 255*8 + 7 = 5119, low: 0x0f */
    static const struct { unsigned at; uint8_t value; } want[] = {
        { 138, 0x80 }, { 139, 0x3f }, { 650, 0x00 }, { 651, 0xc0 },
        { 1024, 0xa3 }, { 3096, 0x70 }, { 5119, 0x0f },
    };
    size_t next = 0;
    for (unsigned i = 0; i < l.bytes; i++) {
        uint8_t expect = 0;
        if (next < sizeof want / sizeof want[0] && want[next].at == i)
            expect = want[next++].value;
        if (q[i] != expect) {
            CHECK(q[i] == expect);
            nt_note("  byte %u: got 0x%02x want 0x%02x", i, q[i], expect);
            break;
        }
    }
    free(q);
}

static uint16_t random_fp16_scale(nt_rng *rng, float lo, float hi)
{
    return npl_fp32_to_fp16(nt_rng_uniform(rng, lo, hi) * (nt_rng_next(rng) & 1 ? 1.0f : -1.0f));
}

static void q4_0_hand_block(void)
{
    npl_block_q4_0 b[2];
    b[0].d = npl_fp32_to_fp16(0.25f);
    b[1].d = npl_fp32_to_fp16(-3.0f);
    for (int j = 0; j < 16; j++) {
        b[0].qs[j] = (uint8_t)(j | ((15 - j) << 4));
        b[1].qs[j] = (uint8_t)((j * 7) & 0xff);
    }
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, 1, 64, &err), &err);
    uint8_t *q = xcalloc(l.bytes);
    npl_q4nx_repack_kind kind = 0;
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_Q4_0, b, sizeof b, q, l.bytes, &kind, &err), &err);
    CHECK(kind == NPL_Q4NX_REPACK_SCALES_ROUNDED);
    float got[64], want[64];
    npl_q4nx_dequantize_row(q, &l, 0, got);
    CHECK(npl_dequantize_row_ref(NPL_TYPE_Q4_0, b, want, 64));
    for (int i = 0; i < 64; i++)
        CHECK(got[i] == want[i]);
    CHECK(npl_q4nx_scale_bits(q, &l, 0, 0) == 0x3e80);  /* 0.25 */
    CHECK(npl_q4nx_min_bits(q, &l, 0, 0) == 0xc000);    /* -2 */
    free(q);
}

/* q4_0 keeps its codes; only d is rounded to bf16, so each weight moves by
 * exactly |q-8| * |bf16(d) - d| <= |q-8| * 2^-8 * |d|. */
static void q4_0_random_bound(void)
{
    nt_rng rng = { 0x1234567ull };
    const int rows = 40, cols = 512;
    size_t row_bytes = npl_type_row_size(NPL_TYPE_Q4_0, cols);
    uint8_t *src = xcalloc(row_bytes * rows);
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < cols / 32; b++) {
            npl_block_q4_0 blk;
            blk.d = random_fp16_scale(&rng, 1e-4f, 2.0f);
            for (int j = 0; j < 16; j++)
                blk.qs[j] = (uint8_t)nt_rng_next(&rng);
            memcpy(src + r * row_bytes + b * sizeof blk, &blk, sizeof blk);
        }
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, rows, cols, &err), &err);
    uint8_t *q = xcalloc(l.bytes);
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_Q4_0, src, row_bytes * rows, q, l.bytes, NULL, &err), &err);
    float got[512], want[512];
    for (int r = 0; r < rows && !nt_failures(); r++) {
        npl_q4nx_dequantize_row(q, &l, (uint32_t)r, got);
        npl_dequantize_row_ref(NPL_TYPE_Q4_0, src + r * row_bytes, want, cols);
        for (int c = 0; c < cols; c++) {
            npl_block_q4_0 blk;
            memcpy(&blk, src + r * row_bytes + (c / 32) * sizeof blk, sizeof blk);
            float d = npl_fp16_to_fp32(blk.d);
            float d16 = npu_round_bf16(d);
            int code = (c % 32) < 16 ? blk.qs[c % 32] & 15 : blk.qs[c % 32 - 16] >> 4;
            CHECK(npl_q4nx_code(q, &l, (uint32_t)r, (uint32_t)c) == code);
            CHECK(got[c] == d16 * (float)(code - 8));
            CHECK(fabsf(got[c] - want[c]) <= fabsf((float)(code - 8)) * 0x1p-8f * fabsf(d));
        }
    }
    free(src);
    free(q);
}

static void q4_1_random_bound(void)
{
    nt_rng rng = { 0xfeedull };
    const int rows = 33, cols = 256;
    size_t row_bytes = npl_type_row_size(NPL_TYPE_Q4_1, cols);
    uint8_t *src = xcalloc(row_bytes * rows);
    for (int r = 0; r < rows; r++)
        for (int b = 0; b < cols / 32; b++) {
            npl_block_q4_1 blk;
            blk.d = random_fp16_scale(&rng, 1e-3f, 1.0f);
            blk.m = random_fp16_scale(&rng, 0.0f, 8.0f);
            for (int j = 0; j < 16; j++)
                blk.qs[j] = (uint8_t)nt_rng_next(&rng);
            memcpy(src + r * row_bytes + b * sizeof blk, &blk, sizeof blk);
        }
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, rows, cols, &err), &err);
    uint8_t *q = xcalloc(l.bytes);
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_Q4_1, src, row_bytes * rows, q, l.bytes, NULL, &err), &err);
    float got[256], want[256];
    for (int r = 0; r < rows && !nt_failures(); r++) {
        npl_q4nx_dequantize_row(q, &l, (uint32_t)r, got);
        npl_dequantize_row_ref(NPL_TYPE_Q4_1, src + r * row_bytes, want, cols);
        for (int c = 0; c < cols; c++) {
            npl_block_q4_1 blk;
            memcpy(&blk, src + r * row_bytes + (c / 32) * sizeof blk, sizeof blk);
            float d = npl_fp16_to_fp32(blk.d), m = npl_fp16_to_fp32(blk.m);
            int code = npl_q4nx_code(q, &l, (uint32_t)r, (uint32_t)c);
            float bound = (float)code * 0x1p-8f * fabsf(d) + 0x1p-8f * fabsf(m)
                        + 0x1p-22f * fabsf(want[c]);
            CHECK(fabsf(got[c] - want[c]) <= bound);
        }
    }
    free(src);
    free(q);
}

/* Scale and min codes of q4_K group j, written out from the format spec
 * independently of the repacker. */
static void q4_K_codes(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 0x3f;
        *mn = s[j + 4] & 0x3f;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] & 0xc0) >> 2);
        *mn = (s[j + 4] >> 4) | ((s[j] & 0xc0) >> 2);
    }
}

static void q4_K_random_bound(void)
{
    nt_rng rng = { 0xabcdefull };
    const int rows = 35, cols = 512;
    float *f = xcalloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++)
        f[i] = nt_rng_uniform(&rng, -1.0f, 1.0f) * (1.0f + (float)(i % 97));
    size_t row_bytes = npl_type_row_size(NPL_TYPE_Q4_K, cols);
    uint8_t *src = xcalloc(row_bytes * rows);
    for (int r = 0; r < rows; r++)
        CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_K, f + r * cols, src + r * row_bytes, cols));
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, rows, cols, &err), &err);
    uint8_t *q = xcalloc(l.bytes);
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_Q4_K, src, row_bytes * rows, q, l.bytes, NULL, &err), &err);
    float got[512], want[512];
    for (int r = 0; r < rows && !nt_failures(); r++) {
        npl_q4nx_dequantize_row(q, &l, (uint32_t)r, got);
        npl_dequantize_row_ref(NPL_TYPE_Q4_K, src + r * row_bytes, want, cols);
        for (int c = 0; c < cols; c++) {
            npl_block_q4_K blk;
            memcpy(&blk, src + r * row_bytes + (c / 256) * sizeof blk, sizeof blk);
            int sc, mn, j = (c % 256) / 32;
            q4_K_codes(blk.scales, j, &sc, &mn);
            float D = npl_fp16_to_fp32(blk.d) * (float)sc;
            float M = npl_fp16_to_fp32(blk.dmin) * (float)mn;
            CHECK(npl_q4nx_scale_bits(q, &l, (uint32_t)r, (uint32_t)c / 32) == npl_fp32_to_bf16(D));
            float bound = 15.0f * 0x1p-8f * fabsf(D) + 0x1p-8f * fabsf(M) + 0x1p-21f * fabsf(want[c]);
            CHECK(fabsf(got[c] - want[c]) <= bound);
        }
    }
    free(f);
    free(src);
    free(q);
}

/* Powers of two everywhere, so the repack must be exact; groups 4-7 use
 * the high bits of the packed scales. */
static void q4_K_hand_block(void)
{
    npl_block_q4_K b;
    memset(&b, 0, sizeof b);
    b.d = npl_fp32_to_fp16(0.125f);
    b.dmin = npl_fp32_to_fp16(0.0625f);
    const uint8_t scales[12] = { 0x41, 0x82, 0xc4, 0x08, 0x50, 0x91, 0xe2, 0x03, 0x12, 0x34, 0x56, 0x78 };
    memcpy(b.scales, scales, sizeof scales);
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)(i * 37 + 11);
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, 1, 256, &err), &err);
    uint8_t *q = xcalloc(l.bytes);
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_Q4_K, &b, sizeof b, q, l.bytes, NULL, &err), &err);
    float got[256], want[256];
    npl_q4nx_dequantize_row(q, &l, 0, got);
    CHECK(npl_dequantize_row_ref(NPL_TYPE_Q4_K, &b, want, 256));
    for (int i = 0; i < 256; i++)
        if (got[i] != want[i]) {
            CHECK(got[i] == want[i]);
            nt_note("  at %d: got %g want %g", i, (double)got[i], (double)want[i]);
            break;
        }
    free(q);
}

/* Checks |x - w| <= d/2 per element (plus f32 rounding of d*q+m) for a
 * float-quantized matrix, and zeros in every padded place. */
static void check_float_quantized(const uint8_t *q, const npl_q4nx_layout *l, const float *src)
{
    float *row = xcalloc(sizeof(float) * l->cols);
    for (uint32_t r = 0; r < l->rows && !nt_failures(); r++) {
        npl_q4nx_dequantize_row(q, l, r, row);
        for (uint32_t c = 0; c < l->cols; c++) {
            float x = src[(size_t)r * l->cols + c];
            float d = npu_bf16_to_f32(npl_q4nx_scale_bits(q, l, r, c / 32));
            float bound = 0.5f * d * (1.0f + 0x1p-12f) + 0x1p-22f * fabsf(x);
            if (!(fabsf(row[c] - x) <= bound)) {
                CHECK(fabsf(row[c] - x) <= bound);
                nt_note("  [%u][%u]: x %g w %g d %g", r, c, (double)x, (double)row[c], (double)d);
                break;
            }
        }
    }
    /* Padded rows and wholly padded groups are exact zeros. */
    for (uint32_t r = 0; r < l->rows_padded; r++)
        for (uint32_t g = 0; g < l->cols_padded / 32; g++) {
            bool pad = r >= l->rows || g * 32 >= l->cols;
            if (pad)
                CHECK(npl_q4nx_scale_bits(q, l, r, g) == 0 && npl_q4nx_min_bits(q, l, r, g) == 0);
        }
    free(row);
}

static void float_quantize_bound(void)
{
    nt_rng rng = { 99 };
    const int rows = 37, cols = 300;
    float *f = xcalloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++)
        f[i] = nt_rng_uniform(&rng, -2.0f, 3.0f) * (i % 7 == 0 ? 10.0f : 1.0f) + (i / cols == 5 ? 100.0f : 0.0f);
    for (int c = 0; c < cols; c++)
        f[7 * cols + c] = 0.3f; /* a constant row */
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, rows, cols, &err), &err);
    uint8_t *q = xcalloc(l.bytes);
    CHECK_OK(npl_q4nx_quantize_f32(&l, f, q, l.bytes, &err), &err);
    check_float_quantized(q, &l, f);
    float row[300];
    npl_q4nx_dequantize_row(q, &l, 7, row);
    for (int c = 0; c < cols; c++)
        CHECK(fabsf(row[c] - 0.3f) <= 0.3f * 0x1p-8f);

    /* The same through the repack entry point from f32, f16 and bf16. */
    uint8_t *q2 = xcalloc(l.bytes);
    npl_q4nx_repack_kind kind = 0;
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_F32, f, sizeof(float) * rows * cols, q2, l.bytes, &kind, &err), &err);
    CHECK(kind == NPL_Q4NX_REPACK_REQUANTIZED);
    CHECK(memcmp(q, q2, l.bytes) == 0);
    uint16_t *h = xcalloc(sizeof(uint16_t) * rows * cols);
    float *hf = xcalloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++) {
        h[i] = npl_fp32_to_fp16(f[i]);
        hf[i] = npl_fp16_to_fp32(h[i]);
    }
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_F16, h, sizeof(uint16_t) * rows * cols, q2, l.bytes, NULL, &err), &err);
    check_float_quantized(q2, &l, hf);
    for (int i = 0; i < rows * cols; i++) {
        h[i] = npl_fp32_to_bf16(f[i]);
        hf[i] = npl_bf16_to_fp32(h[i]);
    }
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_BF16, h, sizeof(uint16_t) * rows * cols, q2, l.bytes, NULL, &err), &err);
    check_float_quantized(q2, &l, hf);
    free(f);
    free(q);
    free(q2);
    free(h);
    free(hf);
}

/* A 33 x 288 q4_0 tensor pads to 64 x 512; padding stays zero. */
static void odd_shapes_padding(void)
{
    nt_rng rng = { 7 };
    const int rows = 33, cols = 288;
    float *f = xcalloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++)
        f[i] = nt_rng_uniform(&rng, -1.0f, 1.0f);
    size_t row_bytes = npl_type_row_size(NPL_TYPE_Q4_0, cols);
    uint8_t *src = xcalloc(row_bytes * rows);
    for (int r = 0; r < rows; r++)
        CHECK(npl_quantize_row_ref(NPL_TYPE_Q4_0, f + r * cols, src + r * row_bytes, cols));
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, rows, cols, &err), &err);
    CHECK(l.rows_padded == 64 && l.cols_padded == 512);
    uint8_t *q = xcalloc(l.bytes);
    memset(q, 0xa5, l.bytes); /* the repack must overwrite padding too */
    CHECK_OK(npl_q4nx_repack(&l, NPL_TYPE_Q4_0, src, row_bytes * rows, q, l.bytes, NULL, &err), &err);
    for (uint32_t r = 0; r < l.rows_padded; r++)
        for (uint32_t c = 0; c < l.cols_padded; c++)
            if (r >= (uint32_t)rows || c >= (uint32_t)cols) {
                if (npl_q4nx_code(q, &l, r, c) != 0
                    || npl_q4nx_scale_bits(q, &l, r, c / 32) != 0
                    || npl_q4nx_min_bits(q, &l, r, c / 32) != 0) {
                    CHECK(!"padding is zero");
                    nt_note("  at [%u][%u]", r, c);
                    r = l.rows_padded;
                    break;
                }
            }
    /* The matvec over the padded matrix only sees the logical part. */
    uint16_t x[288];
    for (int c = 0; c < cols; c++)
        x[c] = npl_fp32_to_bf16(nt_rng_uniform(&rng, -1.0f, 1.0f));
    float y[33];
    npl_q4nx_matvec_ref(q, &l, x, y);
    float wrow[288];
    for (int r = 0; r < rows; r++) {
        npl_q4nx_dequantize_row_bf16(q, &l, (uint32_t)r, wrow);
        double ref = 0.0, mag = 0.0;
        for (int c = 0; c < cols; c++) {
            ref += (double)wrow[c] * npl_bf16_to_fp32(x[c]);
            mag += fabs((double)wrow[c] * npl_bf16_to_fp32(x[c]));
        }
        CHECK(fabs(y[r] - ref) <= mag * 300 * 0x1p-24);
    }
    free(f);
    free(src);
    free(q);
}

/* Other quant types are dequantized and requantized: within half a step
 * of the source's own reference dequantization. */
static void requantize_other_types(void)
{
    nt_rng rng = { 5 };
    const uint32_t types[] = { NPL_TYPE_Q8_0, NPL_TYPE_Q6_K, NPL_TYPE_Q5_K };
    const int rows = 4, cols = 256;
    float f[4 * 256], ref[256];
    for (int i = 0; i < rows * cols; i++)
        f[i] = nt_rng_uniform(&rng, -1.0f, 1.0f);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t row_bytes = npl_type_row_size(types[t], cols);
        uint8_t *src = xcalloc(row_bytes * rows);
        for (int r = 0; r < rows; r++)
            CHECK(npl_quantize_row_ref(types[t], f + r * cols, src + r * row_bytes, cols));
        npl_q4nx_layout l;
        npl_error err;
        CHECK_OK(npl_q4nx_layout_init(&l, rows, cols, &err), &err);
        uint8_t *q = xcalloc(l.bytes);
        npl_q4nx_repack_kind kind = 0;
        CHECK(npl_q4nx_can_repack(types[t]));
        CHECK_OK(npl_q4nx_repack(&l, types[t], src, row_bytes * rows, q, l.bytes, &kind, &err), &err);
        CHECK(kind == NPL_Q4NX_REPACK_REQUANTIZED);
        float *all = xcalloc(sizeof(float) * rows * cols);
        for (int r = 0; r < rows; r++) {
            npl_dequantize_row_ref(types[t], src + r * row_bytes, ref, cols);
            memcpy(all + r * cols, ref, sizeof ref);
        }
        check_float_quantized(q, &l, all);
        free(all);
        free(src);
        free(q);
    }
}

static void matvec_matches_reference(void)
{
    nt_rng rng = { 11 };
    const int rows = 70, cols = 520;
    float *f = xcalloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++)
        f[i] = nt_rng_uniform(&rng, -1.0f, 1.0f);
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, rows, cols, &err), &err);
    uint8_t *q = xcalloc(l.bytes);
    CHECK_OK(npl_q4nx_quantize_f32(&l, f, q, l.bytes, &err), &err);
    const int nv = 3;
    uint16_t x[3 * 520];
    for (int i = 0; i < nv * cols; i++)
        x[i] = npl_fp32_to_bf16(nt_rng_uniform(&rng, -2.0f, 2.0f));
    float y[3 * 70], y1[70];
    CHECK_OK(npl_q4nx_matmul_ref(q, &l, x, cols, nv, y, rows, &err), &err);
    float wrow[520];
    for (int v = 0; v < nv; v++) {
        npl_q4nx_matvec_ref(q, &l, x + v * cols, y1);
        for (int r = 0; r < rows; r++) {
            CHECK(y1[r] == y[v * rows + r]); /* same summation order */
            npl_q4nx_dequantize_row_bf16(q, &l, (uint32_t)r, wrow);
            double ref = 0.0, mag = 0.0;
            for (int c = 0; c < cols; c++) {
                CHECK(wrow[c] == npu_round_bf16(wrow[c]));
                ref += (double)wrow[c] * npl_bf16_to_fp32(x[v * cols + c]);
                mag += fabs((double)wrow[c] * npl_bf16_to_fp32(x[v * cols + c]));
            }
            CHECK(fabs(y1[r] - ref) <= mag * cols * 0x1p-24);
        }
    }
    free(f);
    free(q);
}

static void repack_rejects_bad_input(void)
{
    npl_q4nx_layout l;
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&l, 2, 40, &err), &err);
    uint8_t src[4096] = {0};
    uint8_t *q = xcalloc(l.bytes);
    CHECK_FAILS(npl_q4nx_repack(&l, 4, src, sizeof src, q, l.bytes, NULL, &err),
                NPL_ERR_UNSUPPORTED, &err, "cannot repack");
    CHECK_FAILS(npl_q4nx_repack(&l, NPL_TYPE_Q4_0, src, sizeof src, q, l.bytes, NULL, &err),
                NPL_ERR_FORMAT, &err, "whole q4_0 blocks");
    CHECK_OK(npl_q4nx_layout_init(&l, 2, 64, &err), &err);
    CHECK_FAILS(npl_q4nx_repack(&l, NPL_TYPE_Q4_0, src, 71, q, l.bytes, NULL, &err),
                NPL_ERR_FORMAT, &err, "source holds 71 bytes");
    CHECK_FAILS(npl_q4nx_repack(&l, NPL_TYPE_Q4_0, src, sizeof src, q, 100, NULL, &err),
                NPL_ERR_INVALID_ARG, &err, "destination holds 100");
    float bad[128] = {0};
    bad[70] = NAN;
    CHECK_FAILS(npl_q4nx_quantize_f32(&l, bad, q, l.bytes, &err), NPL_ERR_FORMAT, &err,
                "row 1 column 6");
    bad[70] = 0.0f;
    bad[3] = 1e31f;
    CHECK_FAILS(npl_q4nx_repack(&l, NPL_TYPE_F32, bad, sizeof bad, q, l.bytes, NULL, &err),
                NPL_ERR_FORMAT, &err, "not finite or beyond");
    free(q);
}

/* The inline bf16 helpers agree with the shared reference conversions. */
static void bf16_helpers_match_reference(void)
{
    nt_rng rng = { 3 };
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)nt_rng_next(&rng);
        float f;
        memcpy(&f, &u, sizeof f);
        CHECK(npu_f32_to_bf16(f) == npl_fp32_to_bf16(f));
        if (nt_failures())
            break;
    }
    for (uint32_t h = 0; h < 65536; h++) {
        float a = npu_bf16_to_f32((uint16_t)h), b = npl_bf16_to_fp32((uint16_t)h);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
    }
}

static const nt_case cases[] = {
    { "layout_shapes", layout_shapes },
    { "hand_block_layout", hand_block_layout },
    { "reference_byte_order_vector", reference_byte_order_vector },
    { "q4_0_hand_block", q4_0_hand_block },
    { "q4_0_random_bound", q4_0_random_bound },
    { "q4_1_random_bound", q4_1_random_bound },
    { "q4_K_random_bound", q4_K_random_bound },
    { "q4_K_hand_block", q4_K_hand_block },
    { "float_quantize_bound", float_quantize_bound },
    { "odd_shapes_padding", odd_shapes_padding },
    { "requantize_other_types", requantize_other_types },
    { "matvec_matches_reference", matvec_matches_reference },
    { "repack_rejects_bad_input", repack_rejects_bad_input },
    { "bf16_helpers_match_reference", bf16_helpers_match_reference },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
