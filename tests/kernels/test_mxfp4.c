/* MXFP4 weights in the integer kernels: every exponent byte (the SIMD
 * levels build 2^(e - 128) differently from the scalar reference), the
 * code table, and llama.cpp's arithmetic (blocks of Q8_0-style
 * activations, d = d_a * 2^(e - 128) times the integer dot). matmul_exact
 * in test_matmul.c covers the odd shapes with ordinary exponents. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_blocks.h"
#include "ggml_types.h"
#include "npl_test.h"
#include "matvec.h"
#include "quant_act.h"
#include "threadpool.h"

enum { ROWS = 33, COLS = 256, NVEC = 3, NB = COLS / 32 };

/* Row r, block b has exponent 8r + b (all 256 values; the last row wraps
 * to small ones), random codes. */
static void make_matrix(npl_block_mxfp4 *w, nt_splitmix *r)
{
    for (int row = 0; row < ROWS; row++)
        for (int b = 0; b < NB; b++) {
            npl_block_mxfp4 *blk = &w[row * NB + b];
            blk->e = (uint8_t)(8 * row + b);
            for (int j = 0; j < 16; j++)
                blk->qs[j] = (uint8_t)nt_splitmix_next(r);
        }
}

/* Activations near 1e-3, so that even e = 255 (2^127) stays finite. */
static void make_vectors(float *x, nt_splitmix *r)
{
    for (int i = 0; i < NVEC * COLS; i++)
        x[i] = 1e-3f * nt_splitmix_float(r);
}

/* llama.cpp's dot of an MXFP4 row with Q8_0 activations, in double. */
static double ggml_dot(const npl_block_mxfp4 *w, const npl_act_q8 *a)
{
    static const int8_t lv[16] = NPL_MXFP4_LEVELS_X2;
    double s = 0.0;
    for (int b = 0; b < NB; b++) {
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            isum += a[b].q[j] * lv[w[b].qs[j] & 0x0f];
            isum += a[b].q[j + 16] * lv[w[b].qs[j] >> 4];
        }
        s += (double)a[b].d * (double)npl_e8m0_to_fp32_half(w[b].e) * isum;
    }
    return s;
}

static void test_exponents(void)
{
    static npl_block_mxfp4 w[ROWS * NB];
    static float x[NVEC * COLS], yref[NVEC * ROWS], y[NVEC * ROWS];
    static npl_act_q8 act[NVEC * NB];
    nt_splitmix r = {31};
    make_matrix(w, &r);
    make_vectors(x, &r);
    npl_threadpool *pool = npl_threadpool_create(2);
    npl_matmul_ws *ws = npl_matmul_ws_create(2, COLS, NVEC);
    npl_matrix m;
    REQUIRE(pool && ws && npl_matrix_init(&m, NPL_TYPE_MXFP4, w, COLS, ROWS));

    npl_matmul_ws_set_simd(ws, NPL_SIMD_NONE);
    npl_matmul_contig(pool, ws, &m, x, COLS, NVEC, yref, ROWS);
    for (int v = 0; v < NVEC; v++) {
        npl_quantize_act_q8_ref(x + v * COLS, COLS, act + v * NB);
        for (int row = 0; row < ROWS; row++) {
            double want = ggml_dot(w + row * NB, act + v * NB);
            float got = yref[v * ROWS + row];
            CHECKF(isfinite(got) && fabs(got - want) <= 1e-6 * fabs(want) + 1e-38,
                   "row %d vec %d: %.9g, llama.cpp's arithmetic %.9g", row, v, (double)got, want);
        }
    }
    for (int lv = 1; lv <= (int)npl_simd_detect(); lv++) {
        npl_matmul_ws_set_simd(ws, (npl_simd_level)lv);
        memset(y, 0xff, sizeof y);
        npl_matmul_contig(pool, ws, &m, x, COLS, NVEC, y, ROWS);
        for (int i = 0; i < NVEC * ROWS; i++)
            CHECKF(memcmp(&y[i], &yref[i], sizeof *y) == 0, "level %d vec %d row %d (e %d..%d): %.9g, reference %.9g",
                   lv, i / ROWS, i % ROWS, 8 * (i % ROWS) % 256, (8 * (i % ROWS) + 7) % 256, (double)y[i],
                   (double)yref[i]);
    }
    npl_matmul_ws_free(ws);
    npl_threadpool_free(pool);
}

/* The scale of every exponent byte is exactly 2^(e - 128). */
static void test_scale_table(void)
{
    for (int e = 0; e < 256; e++)
        CHECKF(npl_e8m0_to_fp32_half((uint8_t)e) == ldexpf(1.0f, e - 128), "e = %d", e);
}

NT_MAIN({"exponents", test_exponents}, {"scale_table", test_scale_table})
