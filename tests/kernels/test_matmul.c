/* The matrix kernels against their scalar reference (kernels/cpu/
 * matmul_ref.h), on random data and odd sizes:
 *  - every SIMD level gives the reference's bits exactly, for every
 *    weight type, row count (partial row groups), column count (float
 *    tails) and number of vectors (partial tiles);
 *  - the reference is close to the exact double-precision product (its
 *    only error is the 8-bit rounding of the activations, bounded);
 *  - a vector's result does not depend on its batch, the thread count,
 *    repacking, or being multiplied together with other matrices;
 *  - the integer decoding of every native block reproduces the
 *    reference dequantizer, and the packed sizes are the documented ones;
 *  - activation quantization gives the same bytes at every level. */
#include <math.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_features.h"
#include "ggml_blocks.h"
#include "ggml_types.h"
#include "npl_test.h"
#include "matmul_bf16.h"
#include "matmul_packed.h"
#include "matmul_ref.h"
#include "matvec.h"
#include "quant_act.h"
#include "threadpool.h"

/* ---- random weights ---------------------------------------------------------- */

typedef struct type_case {
    uint32_t type;
    int scale_off; /* fp16 scale, -1 none */
    int min_off;   /* fp16 min / dmin, -1 none */
    int e8m0_off;  /* mxfp4 exponent, -1 none */
} type_case;

static const type_case type_cases[] = {
    {NPL_TYPE_F32, -1, -1, -1},
    {NPL_TYPE_F16, -1, -1, -1},
    {NPL_TYPE_BF16, -1, -1, -1},
    {NPL_TYPE_Q4_0, offsetof(npl_block_q4_0, d), -1, -1},
    {NPL_TYPE_Q4_1, offsetof(npl_block_q4_1, d), offsetof(npl_block_q4_1, m), -1},
    {NPL_TYPE_Q5_0, offsetof(npl_block_q5_0, d), -1, -1},
    {NPL_TYPE_Q5_1, offsetof(npl_block_q5_1, d), offsetof(npl_block_q5_1, m), -1},
    {NPL_TYPE_Q8_0, offsetof(npl_block_q8_0, d), -1, -1},
    {NPL_TYPE_Q2_K, offsetof(npl_block_q2_K, d), offsetof(npl_block_q2_K, dmin), -1},
    {NPL_TYPE_Q3_K, offsetof(npl_block_q3_K, d), -1, -1},
    {NPL_TYPE_Q4_K, offsetof(npl_block_q4_K, d), offsetof(npl_block_q4_K, dmin), -1},
    {NPL_TYPE_Q5_K, offsetof(npl_block_q5_K, d), offsetof(npl_block_q5_K, dmin), -1},
    {NPL_TYPE_Q6_K, offsetof(npl_block_q6_K, d), -1, -1},
    {NPL_TYPE_IQ4_NL, offsetof(npl_block_iq4_nl, d), -1, -1},
    {NPL_TYPE_IQ4_XS, offsetof(npl_block_iq4_xs, d), -1, -1},
    {NPL_TYPE_MXFP4, -1, -1, offsetof(npl_block_mxfp4, e)},
};
#define N_TYPES (sizeof type_cases / sizeof type_cases[0])

static void put_f16(uint8_t *p, float v)
{
    uint16_t h = npl_fp32_to_fp16(v);
    memcpy(p, &h, sizeof h);
}

/* rows x cols of a type, plus 1..7 bytes of offset so nothing is aligned
 * beyond what a GGUF tensor guarantees for its type. */
static uint8_t *make_rows(const type_case *tc, int64_t rows, int64_t cols, nt_splitmix *r, uint8_t **alloc)
{
    const npl_type_traits *tr = npl_type_traits_get(tc->type);
    size_t rb = npl_type_row_size(tc->type, cols);
    size_t n = rb * (size_t)rows;
    *alloc = malloc(n + 16);
    if (!*alloc)
        return NULL;
    size_t align = tc->type == NPL_TYPE_F32 ? 4 : tr->block_size == 1 ? 2 : 1;
    uint8_t *base = *alloc + align * (1 + nt_splitmix_next(r) % (8 / align));
    for (int64_t i = 0; i < rows * cols && tr->block_size == 1; i++) {
        float v = nt_splitmix_float(r);
        if (tc->type == NPL_TYPE_F32) {
            memcpy(base + 4 * i, &v, 4);
        } else if (tc->type == NPL_TYPE_F16) {
            put_f16(base + 2 * i, v);
        } else {
            uint16_t h = npl_fp32_to_bf16(v);
            memcpy(base + 2 * i, &h, 2);
        }
    }
    if (tr->block_size > 1) {
        for (size_t i = 0; i < n; i++)
            base[i] = (uint8_t)nt_splitmix_next(r);
        for (size_t b = 0; b < n / tr->type_size; b++) {
            uint8_t *blk = base + b * tr->type_size;
            if (tc->scale_off >= 0)
                put_f16(blk + tc->scale_off, 0.001f + 0.05f * (nt_splitmix_float(r) * 0.5f + 0.5f));
            if (tc->min_off >= 0)
                put_f16(blk + tc->min_off, 0.03f * nt_splitmix_float(r));
            if (tc->e8m0_off >= 0)
                blk[tc->e8m0_off] = (uint8_t)(120 + nt_splitmix_next(r) % 8);
        }
    }
    return base;
}

/* Vectors with different characters: plain, scaled up, with outliers,
 * all zero, tiny (subnormal-range scales). */
static void make_vectors(float *x, size_t n_vec, int64_t cols, nt_splitmix *r)
{
    for (size_t v = 0; v < n_vec; v++)
        for (int64_t i = 0; i < cols; i++) {
            float f = nt_splitmix_float(r);
            switch (v % 5) {
            case 1: f *= 100.0f; break;
            case 2: f *= i % 7 == 0 ? 30.0f : 1.0f; break;
            case 3: f = (v / 5) % 2 ? 0.0f : f * 1e-6f; break;
            case 4: f = i % 33 == 0 ? f * 1e-30f : f; break;
            default: break;
            }
            x[v * (size_t)cols + (size_t)i] = f;
        }
}

static bool is_int_path(uint32_t t)
{
    return npl_pack_type_supported(t);
}

/* ---- bit-exact against the reference --------------------------------------------- */

static int64_t elems_per_block(uint32_t t)
{
    return npl_type_traits_get(t)->block_size;
}

static void check_type_exact(const type_case *tc, int64_t rows, int64_t cols, size_t n_vec, nt_splitmix *r,
                             npl_threadpool *pool)
{
    const char *name = npl_type_traits_get(tc->type)->name;
    uint8_t *alloc;
    uint8_t *data = make_rows(tc, rows, cols, r, &alloc);
    float *x = malloc(n_vec * (size_t)cols * sizeof *x);
    float *yref = malloc(n_vec * (size_t)rows * sizeof *yref);
    float *y = malloc(n_vec * (size_t)rows * sizeof *y);
    npl_matmul_ws *ws = npl_matmul_ws_create(npl_threadpool_size(pool), cols, n_vec);
    REQUIRE(data && x && yref && y && ws);
    make_vectors(x, n_vec, cols, r);
    npl_matrix w;
    REQUIRE(npl_matrix_init(&w, tc->type, data, cols, rows));

    npl_matmul_ws_set_simd(ws, NPL_SIMD_NONE);
    npl_matmul_contig(pool, ws, &w, x, (size_t)cols, n_vec, yref, (size_t)rows);
    for (int lv = 1; lv <= (int)npl_simd_detect(); lv++) {
        npl_matmul_ws_set_simd(ws, (npl_simd_level)lv);
        memset(y, 0xff, n_vec * (size_t)rows * sizeof *y);
        npl_matmul_contig(pool, ws, &w, x, (size_t)cols, n_vec, y, (size_t)rows);
        size_t bad = 0;
        for (size_t i = 0; i < n_vec * (size_t)rows; i++)
            if (memcmp(&y[i], &yref[i], sizeof *y) != 0 && bad++ < 3)
                fprintf(stderr, "  %s level %d %lldx%lld vec %zu row %zu: %.9g, reference %.9g\n", name, lv,
                        (long long)rows, (long long)cols, i / (size_t)rows, i % (size_t)rows, (double)y[i],
                        (double)yref[i]);
        CHECKF(bad == 0, "%s level %d, %lld rows x %lld cols, %zu vectors: %zu results differ from the reference",
               name, lv, (long long)rows, (long long)cols, n_vec, bad);
    }
    npl_matmul_ws_free(ws);
    free(y);
    free(yref);
    free(x);
    free(alloc);
}

static void test_matmul_exact(void)
{
    npl_threadpool *pool = npl_threadpool_create(2);
    REQUIRE(pool);
    nt_splitmix r = {1};
    static const int64_t rows_set[] = {1, 15, 16, 17, 37};
    static const size_t vecs_set[] = {1, 3, 8, 9, 13};
    for (size_t t = 0; t < N_TYPES; t++) {
        const type_case *tc = &type_cases[t];
        int64_t be = elems_per_block(tc->type);
        int64_t cols_set[4];
        size_t n_cols;
        if (be == 1) {
            int64_t c[] = {1, 17, 100, 512};
            memcpy(cols_set, c, sizeof c);
            n_cols = 4;
        } else if (be == 32) {
            int64_t c[] = {32, 96, 512};
            memcpy(cols_set, c, sizeof c);
            n_cols = 3;
        } else {
            int64_t c[] = {256, 768};
            memcpy(cols_set, c, sizeof c);
            n_cols = 2;
        }
        for (size_t ci = 0; ci < n_cols; ci++)
            for (size_t ri = 0; ri < sizeof rows_set / sizeof rows_set[0]; ri++)
                for (size_t vi = 0; vi < sizeof vecs_set / sizeof vecs_set[0]; vi++) {
                    /* keep the portable float path's run time small */
                    if (!is_int_path(tc->type) && vecs_set[vi] > 9 && cols_set[ci] > 100)
                        continue;
                    check_type_exact(tc, rows_set[ri], cols_set[ci], vecs_set[vi], &r, pool);
                }
    }
    npl_threadpool_free(pool);
}

/* Packed copies of 2 MiB or more live in their own huge-page mapping
 * (matvec.c): the same bits as the reference there too, with a last row
 * group past the whole huge pages, only partly filled (4107 rows = 257
 * groups, 2.4 MB of Q4_0 or Q4_K). */
static void test_matmul_huge_copy(void)
{
    npl_threadpool *pool = npl_threadpool_create(2);
    REQUIRE(pool);
    nt_splitmix r = {9};
    static const size_t types[] = {3, 10}; /* q4_0, q4_k */
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        REQUIRE(type_cases[types[t]].type == (t ? NPL_TYPE_Q4_K : NPL_TYPE_Q4_0));
        check_type_exact(&type_cases[types[t]], 4107, 1024, 1, &r, pool);
        check_type_exact(&type_cases[types[t]], 4107, 1024, 3, &r, pool);
    }
    npl_threadpool_free(pool);
}

/* ---- the reference against exact arithmetic ------------------------------------------- */

/* |ref - exact| bound: float rounding, plus for the integer paths the
 * 8-bit rounding of the activations (half a step of each block's scale
 * times the weights' magnitudes) and the half-precision scale. */
static double tolerance(uint32_t type, const float *w, const float *x, int64_t cols)
{
    double abs_dot = 0.0;
    for (int64_t i = 0; i < cols; i++)
        abs_dot += fabs((double)w[i] * x[i]);
    double tol = 2e-6 * abs_dot + 1e-30;
    if (type == NPL_TYPE_BF16)
        tol += abs_dot / 256.0; /* activations rounded to bf16 (8 bits) */
    if (is_int_path(type)) {
        int64_t blk = npl_quant_kind_is_k(type) ? 256 : 32;
        for (int64_t b = 0; b < cols / blk; b++) {
            double amax = 0.0, wsum = 0.0, wx = 0.0;
            for (int64_t i = b * blk; i < (b + 1) * blk; i++) {
                amax = fmax(amax, fabs(x[i]));
                wsum += fabs(w[i]);
                wx += fabs((double)w[i] * x[i]);
            }
            tol += amax / 127.0 * 0.5 * 1.01 * wsum;
            /* the legacy formats' activation scale is a half: relative
             * rounding, or all of it when it underflows */
            float d = (float)amax / 127.0f;
            if (!npl_quant_kind_is_k(type) && d > 0.0f)
                tol += fabs(npl_fp16_to_fp32(npl_fp32_to_fp16(d)) - d) / d * 1.01 * wx;
        }
    }
    return tol;
}

static void test_reference_accuracy(void)
{
    npl_threadpool *pool = npl_threadpool_create(1);
    REQUIRE(pool);
    nt_splitmix r = {2};
    enum { ROWS = 19, COLS = 512, NVEC = 5 };
    for (size_t t = 0; t < N_TYPES; t++) {
        const type_case *tc = &type_cases[t];
        const char *name = npl_type_traits_get(tc->type)->name;
        uint8_t *alloc;
        uint8_t *data = make_rows(tc, ROWS, COLS, &r, &alloc);
        static float x[NVEC * COLS], y[NVEC * ROWS], wrow[COLS];
        npl_matmul_ws *ws = npl_matmul_ws_create(1, COLS, NVEC);
        REQUIRE(data && ws);
        make_vectors(x, NVEC, COLS, &r);
        npl_matrix w;
        REQUIRE(npl_matrix_init(&w, tc->type, data, COLS, ROWS));
        npl_matmul_ws_set_simd(ws, NPL_SIMD_NONE);
        npl_matmul_contig(pool, ws, &w, x, COLS, NVEC, y, ROWS);
        for (int row = 0; row < ROWS; row++) {
            REQUIRE(npl_dequantize_row_ref(tc->type, data + (size_t)row * w.row_bytes, wrow, COLS));
            for (int v = 0; v < NVEC; v++) {
                double exact = 0.0;
                for (int i = 0; i < COLS; i++)
                    exact += (double)wrow[i] * x[v * COLS + i];
                double tol = tolerance(tc->type, wrow, x + v * COLS, COLS);
                CHECKF(fabs(y[v * ROWS + row] - exact) <= tol, "%s row %d vec %d: %.9g, exact %.9g, tolerance %.3g",
                       name, row, v, (double)y[v * ROWS + row], exact, tol);
            }
        }
        npl_matmul_ws_free(ws);
        free(alloc);
    }
    npl_threadpool_free(pool);
}

/* ---- independence from batch, threads, packing, grouping ------------------------------ */

static void test_batch_threads_packing(void)
{
    enum { ROWS = 77, COLS = 512, NVEC = 11 };
    npl_threadpool *pools[3] = {npl_threadpool_create(1), npl_threadpool_create(2), npl_threadpool_create(3)};
    REQUIRE(pools[0] && pools[1] && pools[2]);
    nt_splitmix r = {3};
    for (size_t t = 0; t < N_TYPES; t++) {
        const type_case *tc = &type_cases[t];
        const char *name = npl_type_traits_get(tc->type)->name;
        uint8_t *alloc;
        uint8_t *data = make_rows(tc, ROWS, COLS, &r, &alloc);
        static float x[NVEC * COLS], y[NVEC * ROWS], y2[NVEC * ROWS];
        npl_matmul_ws *ws = npl_matmul_ws_create(3, COLS, NVEC);
        REQUIRE(data && ws);
        make_vectors(x, NVEC, COLS, &r);
        npl_matrix w;
        REQUIRE(npl_matrix_init(&w, tc->type, data, COLS, ROWS));
        npl_matmul_contig(pools[1], ws, &w, x, COLS, NVEC, y, ROWS);
        for (int v = 0; v < NVEC; v++) {
            float *out = y2;
            npl_matmul(pools[1], ws, &w, x + v * COLS, COLS, 1, &out);
            CHECKF(memcmp(y2, y + v * ROWS, ROWS * sizeof(float)) == 0, "%s: vector %d alone differs from the batch",
                   name, v);
        }
        /* the same vectors in another order and grouping */
        for (int v = 0; v < NVEC; v++) {
            float *out[2] = {y2 + v * ROWS, y2 + ((v + 5) % NVEC) * ROWS};
            float pair[2 * COLS];
            memcpy(pair, x + v * COLS, sizeof(float) * COLS);
            memcpy(pair + COLS, x + ((v + 5) % NVEC) * COLS, sizeof(float) * COLS);
            npl_matmul(pools[2], ws, &w, pair, COLS, 2, out);
        }
        CHECKF(memcmp(y2, y, sizeof y) == 0, "%s: regrouped vectors differ", name);
        for (int p = 0; p < 3; p++) {
            memset(y2, 0, sizeof y2);
            npl_matmul_contig(pools[p], ws, &w, x, COLS, NVEC, y2, ROWS);
            CHECKF(memcmp(y2, y, sizeof y) == 0, "%s: %d threads differ from 2", name, p + 1);
        }
        npl_matmul_ws *ws_np = npl_matmul_ws_create(2, COLS, NVEC);
        REQUIRE(ws_np);
        npl_matmul_ws_set_packing(ws_np, false);
        npl_matmul_contig(pools[1], ws_np, &w, x, COLS, NVEC, y2, ROWS);
        CHECKF(memcmp(y2, y, sizeof y) == 0, "%s: the file layout differs from the packed one", name);
        CHECK(npl_matmul_ws_packed_bytes(ws_np) == 0);
        npl_matmul_ws_free(ws_np);
        npl_matmul_ws_free(ws);
        free(alloc);
    }
    for (int p = 0; p < 3; p++)
        npl_threadpool_free(pools[p]);
}

static void test_multi_equals_single(void)
{
    enum { COLS = 512, NVEC = 6 };
    static const int64_t rows[3] = {48, 16, 33};
    /* mixed types in one call, as a Q4_K_M file mixes Q4_K and Q6_K */
    static const size_t types[3] = {10, 12, 7}; /* indexes into type_cases: q4_K, q6_K, q8_0 */
    npl_threadpool *pool = npl_threadpool_create(2);
    npl_matmul_ws *ws = npl_matmul_ws_create(2, COLS, NVEC);
    REQUIRE(pool && ws);
    nt_splitmix r = {4};
    uint8_t *allocs[3];
    npl_matrix w[3];
    const npl_matrix *wp[3];
    static float x[NVEC * COLS], y[3][NVEC * 48], ym[3][NVEC * 48];
    for (int i = 0; i < 3; i++) {
        const type_case *tc = &type_cases[types[i]];
        uint8_t *data = make_rows(tc, rows[i], COLS, &r, &allocs[i]);
        REQUIRE(data);
        REQUIRE(npl_matrix_init(&w[i], tc->type, data, COLS, rows[i]));
        wp[i] = &w[i];
    }
    make_vectors(x, NVEC, COLS, &r);
    float *outs[3] = {ym[0], ym[1], ym[2]};
    size_t strides[3] = {(size_t)rows[0], (size_t)rows[1], (size_t)rows[2]};
    npl_matmul_multi(pool, ws, 3, wp, x, COLS, NVEC, outs, strides);
    for (int i = 0; i < 3; i++) {
        npl_matmul_contig(pool, ws, &w[i], x, COLS, NVEC, y[i], (size_t)rows[i]);
        CHECKF(memcmp(y[i], ym[i], NVEC * (size_t)rows[i] * sizeof(float)) == 0, "matrix %d: multi differs", i);
    }
    for (int i = 0; i < 3; i++)
        free(allocs[i]);
    npl_matmul_ws_free(ws);
    npl_threadpool_free(pool);
}

/* ---- decoding blocks to integers; packed sizes ------------------------------------------ */

static void test_block_ints(void)
{
    nt_splitmix r = {5};
    for (size_t t = 0; t < N_TYPES; t++) {
        const type_case *tc = &type_cases[t];
        if (!is_int_path(tc->type))
            continue;
        const char *name = npl_type_traits_get(tc->type)->name;
        int64_t be = elems_per_block(tc->type);
        for (int rep = 0; rep < 50; rep++) {
            uint8_t *alloc;
            uint8_t *blk = make_rows(tc, 1, be, &r, &alloc);
            REQUIRE(blk);
            float ref[256], got[256];
            REQUIRE(npl_dequantize_row_ref(tc->type, blk, ref, be));
            npl_block_ints bi;
            npl_block_to_ints(tc->type, blk, &bi);
            float d = npl_fp16_to_fp32(bi.d), m = npl_fp16_to_fp32(bi.m);
            for (int64_t i = 0; i < be; i++) {
                int q = bi.q[i];
                switch (tc->type) {
                case NPL_TYPE_Q4_0: got[i] = (float)(q - 8) * d; break;
                case NPL_TYPE_Q5_0: got[i] = (float)(q - 16) * d; break;
                case NPL_TYPE_Q8_0: got[i] = (float)(q - 128) * d; break;
                case NPL_TYPE_MXFP4: got[i] = (float)(q - 12) * npl_e8m0_to_fp32_half((uint8_t)bi.d); break;
                case NPL_TYPE_Q4_1:
                case NPL_TYPE_Q5_1: got[i] = (float)q * d + m; break;
                case NPL_TYPE_Q6_K: got[i] = d * (float)bi.sc[i / 16] * (float)(q - 32); break;
                default: /* Q4_K, Q5_K */
                    got[i] = (d * (float)bi.sc[i / 32]) * (float)q - m * (float)bi.mn[i / 32];
                    break;
                }
            }
            CHECKF(memcmp(got, ref, (size_t)be * sizeof(float)) == 0, "%s: integers do not reproduce the block", name);
            free(alloc);
        }
        /* packed bytes per row and block: the file's, except the K-quants'
         * byte-wide sub-block scales */
        npl_matrix w;
        static uint8_t zeros[16 * 210 * 2];
        REQUIRE(npl_matrix_init(&w, tc->type, zeros, be * 2, 16));
        npl_packed_matrix pk;
        REQUIRE(npl_packed_geometry(&w, &pk));
        size_t per_row = pk.group_bytes / NPL_PACK_ROWS;
        size_t extra = tc->type == NPL_TYPE_Q4_K || tc->type == NPL_TYPE_Q5_K ? 8 : 0;
        CHECKF(per_row == w.row_bytes + extra, "%s: %zu packed bytes per row, %zu in the file", name, per_row,
               w.row_bytes);
    }
}

static void test_prepack(void)
{
    npl_threadpool *pool = npl_threadpool_create(2);
    npl_matmul_ws *ws = npl_matmul_ws_create(2, 512, 4);
    REQUIRE(pool && ws);
    nt_splitmix r = {6};
    uint8_t *a1, *a2;
    uint8_t *q = make_rows(&type_cases[3], 40, 512, &r, &a1); /* q4_0, 3 groups */
    uint8_t *f = make_rows(&type_cases[0], 40, 512, &r, &a2); /* f32 */
    REQUIRE(q && f);
    npl_matrix wq, wf;
    REQUIRE(npl_matrix_init(&wq, NPL_TYPE_Q4_0, q, 512, 40));
    REQUIRE(npl_matrix_init(&wf, NPL_TYPE_F32, f, 512, 40));
    CHECK(npl_matmul_ws_prepack(ws, pool, &wf));
    CHECK(npl_matmul_ws_packed_bytes(ws) == 0);
    CHECK(npl_matmul_ws_prepack(ws, pool, &wq));
    CHECK(npl_matmul_ws_prepack(ws, pool, &wq)); /* a second time is a look-up */
    size_t expect = npl_simd_detect() >= NPL_SIMD_AVX2 ? (size_t)3 * 16 * 16 * 18 : 0;
    CHECKF(npl_matmul_ws_packed_bytes(ws) == expect, "%zu packed bytes, expected %zu", npl_matmul_ws_packed_bytes(ws),
           expect);
    free(a1);
    free(a2);
    npl_matmul_ws_free(ws);
    npl_threadpool_free(pool);
}

/* Weights in a read-only private file mapping, as a model's are: after
 * repacking, the kernels drop the mapping's pages (release_source); the
 * results are unchanged and the mapping still reads the file's bytes. */
static void test_release_source(void)
{
    enum { ROWS = 64, COLS = 1024, NVEC = 3 };
    nt_splitmix r = {8};
    uint8_t *alloc;
    uint8_t *q = make_rows(&type_cases[3], ROWS, COLS, &r, &alloc); /* q4_0 */
    REQUIRE(q);
    size_t bytes = npl_type_row_size(NPL_TYPE_Q4_0, COLS) * ROWS;
    char path[] = "/tmp/npl-kernels-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    unlink(path);
    REQUIRE(write(fd, q, bytes) == (ssize_t)bytes);
    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    REQUIRE(map != MAP_FAILED);
    npl_threadpool *pool = npl_threadpool_create(2);
    npl_matmul_ws *ws = npl_matmul_ws_create(2, COLS, NVEC), *plain = npl_matmul_ws_create(2, COLS, NVEC);
    REQUIRE(pool && ws && plain);
    static float x[NVEC * COLS], y0[NVEC * ROWS], y1[NVEC * ROWS], y2[NVEC * ROWS];
    make_vectors(x, NVEC, COLS, &r);
    npl_matrix wm, wp;
    REQUIRE(npl_matrix_init(&wm, NPL_TYPE_Q4_0, map, COLS, ROWS));
    REQUIRE(npl_matrix_init(&wp, NPL_TYPE_Q4_0, q, COLS, ROWS));
    npl_matmul_ws_set_packing(plain, false);
    npl_matmul_contig(pool, plain, &wp, x, COLS, NVEC, y0, ROWS);
    npl_matmul_ws_set_release_source(ws, true);
    npl_matmul_contig(pool, ws, &wm, x, COLS, NVEC, y1, ROWS); /* packs, then drops the pages */
    npl_matmul_contig(pool, ws, &wm, x, COLS, NVEC, y2, ROWS);
    CHECK(memcmp(y0, y1, sizeof y0) == 0);
    CHECK(memcmp(y0, y2, sizeof y0) == 0);
    CHECK(memcmp(map, q, bytes) == 0); /* faulted back in from the file */
    npl_matmul_ws_free(ws);
    npl_matmul_ws_free(plain);
    npl_threadpool_free(pool);
    munmap(map, bytes);
    free(alloc);
}

/* ---- activation quantization ------------------------------------------------------------ */

static void test_quantize_levels(void)
{
    enum { N = 1024 };
    nt_splitmix r = {7};
    static float x[N];
    static npl_act_q8 a0[N / 32], a1[N / 32];
    static npl_act_q8k k0[N / 256], k1[N / 256];
    for (int rep = 0; rep < 40; rep++) {
        float scale = rep % 4 == 0 ? 1e-3f : rep % 4 == 1 ? 1e4f : rep % 4 == 2 ? 1e-40f : 1.0f;
        for (int i = 0; i < N; i++)
            x[i] = nt_splitmix_float(&r) * scale;
        for (int i = 0; i < 32; i++)
            x[64 + i] = 0.0f;                      /* a zero block */
        x[300] = 500.0f * (rep % 2 ? -1.0f : 1.0f); /* an outlier */
        x[301] = x[300] * 0.5f * (1.0f + 1.0f / 254.0f); /* near half-way */
        if (rep == 5) {
            x[700] = NAN; /* garbage in: the same garbage out at every level */
            x[900] = INFINITY;
        }
        npl_quantize_act_q8(NPL_SIMD_NONE, x, N, a0);
        npl_quantize_act_q8k(NPL_SIMD_NONE, x, N, k0);
        for (int lv = 1; lv <= (int)npl_simd_detect(); lv++) {
            npl_quantize_act_q8((npl_simd_level)lv, x, N, a1);
            npl_quantize_act_q8k((npl_simd_level)lv, x, N, k1);
            CHECKF(memcmp(a0, a1, sizeof a0) == 0, "q8 level %d rep %d differs", lv, rep);
            CHECKF(memcmp(k0, k1, sizeof k0) == 0, "q8k level %d rep %d differs", lv, rep);
        }
        static uint16_t b0[N], b1[N];
        npl_act_to_bf16(NPL_SIMD_NONE, x, N, b0);
        for (int lv = 1; lv <= (int)npl_simd_detect(); lv++) {
            npl_act_to_bf16((npl_simd_level)lv, x, N, b1);
            CHECKF(memcmp(b0, b1, sizeof b0) == 0, "bf16 level %d rep %d differs", lv, rep);
        }
        for (int i = 0; i < N; i++)
            if (!isnan(x[i]) && fabsf(x[i]) >= 0x1p-126f && fabsf(x[i]) < 0x1p+127f)
                CHECK(fabsf(npl_bf16_to_fp32(b0[i]) - x[i]) <= fabsf(x[i]) * 0x1p-8f);
        /* the blocks say what they hold */
        for (int b = 0; b < N / 32 && rep != 5; b++) {
            int sum = 0;
            for (int j = 0; j < 32; j++)
                sum += a0[b].q[j];
            CHECK(sum == a0[b].sum);
        }
        for (int b = 0; b < N / 256; b++)
            for (int g = 0; g < 8; g++)
                CHECK(k0[b].bsum32[g] == k0[b].bsum16[2 * g] + k0[b].bsum16[2 * g + 1]);
    }
    CHECK(a0[2].d == 0.0f && a0[2].sum == 0);
}

static void test_cpu_features(void)
{
    /* NPULLM_NO_AMX turns the tiles off, whatever the CPU has. */
    setenv("NPULLM_NO_AMX", "1", 1);
    npl_cpu_features off;
    npl_cpu_features_detect(&off);
    CHECK(!off.amx_bf16 && !off.amx_int8);
    unsetenv("NPULLM_NO_AMX");
    npl_cpu_features f;
    npl_cpu_features_detect(&f);
    npl_simd_level lv = npl_simd_detect();
    const char *d = npl_cpu_features_describe(&f);
    fprintf(stderr, "cpu: %s, level %d\n", d, (int)lv);
    if (lv >= NPL_SIMD_AVX2)
        CHECK(f.avx2 && f.fma && f.f16c);
    if (lv >= NPL_SIMD_AVX512)
        CHECK(f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni);
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni && f.avx2 && f.fma && f.f16c)
        CHECK(lv == NPL_SIMD_AVX512);
    if (f.amx_bf16 || f.amx_int8)
        CHECK(f.avx512bf16 && f.avx512vnni);
    CHECK(strcmp(d, lv == NPL_SIMD_AVX512 ? (f.amx_bf16 ? "avx512 (vnni, bf16, amx)" : f.avx512bf16 ? "avx512 (vnni, bf16)" : "avx512 (vnni)")
                 : lv == NPL_SIMD_AVX2   ? "avx2"
                                         : "portable") == 0);
}

NT_MAIN({"cpu_features", test_cpu_features}, {"quantize_levels", test_quantize_levels},
        {"block_ints", test_block_ints}, {"matmul_exact", test_matmul_exact},
        {"matmul_huge_copy", test_matmul_huge_copy},
        {"reference_accuracy", test_reference_accuracy}, {"batch_threads_packing", test_batch_threads_packing},
        {"multi_equals_single", test_multi_equals_single}, {"prepack", test_prepack},
        {"release_source", test_release_source})
