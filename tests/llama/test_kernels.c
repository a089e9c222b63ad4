/* CPU compute kernels: thread pool, matrix x vectors for every supported
 * weight type (against the reference dequantizer and a double-precision
 * dot), determinism across batch sizes and thread counts, and the
 * online-softmax attention against a naive softmax. Both the portable and
 * the AVX2 paths run where the CPU has AVX2. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "ggml_blocks.h"
#include "ggml_types.h"
#include "npl_test.h"
#include "matvec.h"
#include "threadpool.h"

/* ---- deterministic random numbers ---------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float rng_float(rng *r)
{
    return (float)((double)(rng_next(r) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float rng_range(rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (rng_float(r) * 0.5f + 0.5f);
}

/* ---- thread pool ----------------------------------------------------------- */

typedef struct count_job {
    int *counts;
    int *thread_of;
} count_job;

static void count_task(void *ctx, size_t begin, size_t end, int thread)
{
    count_job *j = ctx;
    for (size_t i = begin; i < end; i++) {
        j->counts[i]++;
        j->thread_of[i] = thread;
    }
}

static void test_threadpool_covers_every_task_once(void)
{
    for (int nt = 1; nt <= 4; nt++) {
        npl_threadpool *pool = npl_threadpool_create(nt);
        REQUIRE(pool);
        CHECK(npl_threadpool_size(pool) == nt);
        int counts[97], thread_of[97];
        for (size_t n = 0; n <= 97; n += 1 + n / 4) {
            for (int rep = 0; rep < 20; rep++) {
                memset(counts, 0, sizeof counts);
                count_job j = {counts, thread_of};
                npl_threadpool_run(pool, n, count_task, &j);
                for (size_t i = 0; i < n; i++)
                    CHECKF(counts[i] == 1, "threads %d tasks %zu: task %zu ran %d times", nt, n, i, counts[i]);
                /* Slices are contiguous and in thread order. */
                for (size_t i = 1; i < n && n > 1; i++)
                    CHECK(thread_of[i] >= thread_of[i - 1]);
            }
        }
        npl_threadpool_free(pool);
    }
    npl_threadpool *def = npl_threadpool_create(0);
    REQUIRE(def);
    CHECK(npl_threadpool_size(def) == npl_cpu_count());
    npl_threadpool_free(def);
}

/* ---- matrix x vectors ------------------------------------------------------ */

typedef struct type_case {
    uint32_t type;
    int scale_off;   /* fp16 scale d in each block, -1 none */
    int min_off;     /* fp16 min/dmin, -1 none */
    int e8m0_off;    /* mxfp4 shared exponent, -1 none */
    bool quant_acts; /* activations quantized to 8 bits in the kernel */
} type_case;

static const type_case type_cases[] = {
    {NPL_TYPE_F32, -1, -1, -1, false},
    {NPL_TYPE_F16, -1, -1, -1, false},
    {NPL_TYPE_BF16, -1, -1, -1, false},
    {NPL_TYPE_Q4_0, offsetof(npl_block_q4_0, d), -1, -1, true},
    {NPL_TYPE_Q4_1, offsetof(npl_block_q4_1, d), offsetof(npl_block_q4_1, m), -1, true},
    {NPL_TYPE_Q5_0, offsetof(npl_block_q5_0, d), -1, -1, true},
    {NPL_TYPE_Q5_1, offsetof(npl_block_q5_1, d), offsetof(npl_block_q5_1, m), -1, true},
    {NPL_TYPE_Q8_0, offsetof(npl_block_q8_0, d), -1, -1, true},
    {NPL_TYPE_Q2_K, offsetof(npl_block_q2_K, d), offsetof(npl_block_q2_K, dmin), -1, false},
    {NPL_TYPE_Q3_K, offsetof(npl_block_q3_K, d), -1, -1, false},
    {NPL_TYPE_Q4_K, offsetof(npl_block_q4_K, d), offsetof(npl_block_q4_K, dmin), -1, true},
    {NPL_TYPE_Q5_K, offsetof(npl_block_q5_K, d), offsetof(npl_block_q5_K, dmin), -1, true},
    {NPL_TYPE_Q6_K, offsetof(npl_block_q6_K, d), -1, -1, true},
    {NPL_TYPE_IQ4_NL, offsetof(npl_block_iq4_nl, d), -1, -1, false},
    {NPL_TYPE_IQ4_XS, offsetof(npl_block_iq4_xs, d), -1, -1, false},
    {NPL_TYPE_MXFP4, -1, -1, offsetof(npl_block_mxfp4, e), true}, /* dotted against q8_0 activations, as llama.cpp */
};

static void put_f16(uint8_t *p, float v)
{
    uint16_t h = npl_fp32_to_fp16(v);
    memcpy(p, &h, sizeof h);
}

/* Random rows of a type: plain floats encoded, or random block bytes
 * whose scales are set to sane magnitudes. */
static uint8_t *make_rows(const type_case *tc, int64_t rows, int64_t cols, rng *r)
{
    const npl_type_traits *tr = npl_type_traits_get(tc->type);
    size_t rb = npl_type_row_size(tc->type, cols);
    uint8_t *data = malloc(rb * (size_t)rows + 64);
    if (!data)
        return NULL;
    /* Rows start 32-byte aligned like tensors in a GGUF file. */
    uint8_t *base = data;
    for (int64_t i = 0; i < rows * cols; i++) {
        float v = rng_float(r);
        if (tc->type == NPL_TYPE_F32)
            memcpy(base + 4 * i, &v, 4);
        else if (tc->type == NPL_TYPE_F16)
            put_f16(base + 2 * i, v);
        else if (tc->type == NPL_TYPE_BF16) {
            uint16_t h = npl_fp32_to_bf16(v);
            memcpy(base + 2 * i, &h, 2);
        }
    }
    if (tr->block_size > 1) {
        size_t n_blocks = rb * (size_t)rows / tr->type_size;
        for (size_t i = 0; i < rb * (size_t)rows; i++)
            base[i] = (uint8_t)rng_next(r);
        for (size_t b = 0; b < n_blocks; b++) {
            uint8_t *blk = base + b * tr->type_size;
            if (tc->scale_off >= 0)
                put_f16(blk + tc->scale_off, rng_range(r, 0.001f, 0.05f));
            if (tc->min_off >= 0)
                put_f16(blk + tc->min_off, rng_range(r, -0.03f, 0.03f));
            if (tc->e8m0_off >= 0)
                blk[tc->e8m0_off] = (uint8_t)(120 + rng_next(r) % 8);
        }
    }
    return data;
}

/* Bound on |kernel - exact| for one row and vector: float rounding of the
 * dot, plus the 8-bit quantization of the activations when used, or their
 * rounding to BF16 (8 significant bits) against BF16 rows. */
static double tolerance(const type_case *tc, const float *w, const float *x, int64_t cols)
{
    double abs_dot = 0.0;
    for (int64_t i = 0; i < cols; i++)
        abs_dot += fabs((double)w[i] * x[i]);
    double tol = 1e-5 * abs_dot + 1e-6;
    if (tc->type == NPL_TYPE_BF16)
        tol += abs_dot / 256.0;
    if (tc->quant_acts) {
        /* The K-quants pair with 256-element activation blocks (one scale
         * each), the others with 32-element ones. */
        const int64_t ab = npl_type_traits_get(tc->type)->block_size == 256 ? 256 : 32;
        for (int64_t b = 0; b < cols / ab; b++) {
            double amax = 0.0, wsum = 0.0;
            for (int64_t i = 0; i < ab; i++) {
                amax = fmax(amax, fabs(x[b * ab + i]));
                wsum += fabs(w[b * ab + i]);
            }
            tol += amax / 127.0 * 0.5 * 1.01 * wsum;
        }
        tol += 2e-3 * abs_dot; /* scales kept at half precision */
    }
    return tol;
}

static void run_type_case(const type_case *tc, npl_simd_level lv)
{
    enum { ROWS = 37, COLS = 512, NVEC = 5 };
    const char *name = npl_type_traits_get(tc->type)->name;
    rng r = {tc->type * 1000 + (uint64_t)lv};
    uint8_t *data = make_rows(tc, ROWS, COLS, &r);
    REQUIRE(data);
    npl_matrix w;
    CHECK(npl_matmul_type_supported(tc->type));
    REQUIRE(npl_matrix_init(&w, tc->type, data, COLS, ROWS));

    static float x[NVEC][COLS], y[NVEC][ROWS], y1[ROWS], yt[NVEC][ROWS], wrow[COLS];
    for (int v = 0; v < NVEC; v++)
        for (int i = 0; i < COLS; i++)
            x[v][i] = rng_float(&r) * (v == 3 ? 100.0f : 1.0f) * (i % 7 == 0 ? 3.0f : 1.0f);

    npl_threadpool *pool = npl_threadpool_create(2);
    npl_threadpool *pool3 = npl_threadpool_create(3);
    npl_matmul_ws *ws = npl_matmul_ws_create(3, COLS, NVEC);
    REQUIRE(pool && pool3 && ws);
    npl_matmul_ws_set_simd(ws, lv);

    npl_matmul_contig(pool, ws, &w, &x[0][0], COLS, NVEC, &y[0][0], ROWS);
    for (int row = 0; row < ROWS; row++) {
        REQUIRE(npl_matrix_get_row(&w, row, wrow));
        float ref_row[COLS];
        REQUIRE(npl_dequantize_row_ref(tc->type, (const uint8_t *)data + (size_t)row * w.row_bytes, ref_row, COLS));
        CHECK(memcmp(ref_row, wrow, sizeof wrow) == 0);
        for (int v = 0; v < NVEC; v++) {
            double exact = 0.0;
            for (int i = 0; i < COLS; i++)
                exact += (double)ref_row[i] * x[v][i];
            double tol = tolerance(tc, ref_row, x[v], COLS);
            CHECKF(fabs(y[v][row] - exact) <= tol, "%s simd %d row %d vec %d: got %.9g want %.9g (tol %.3g)", name,
                   (int)lv, row, v, (double)y[v][row], exact, tol);
        }
    }

    /* A vector's result does not depend on its batch or the threads. */
    for (int v = 0; v < NVEC; v++) {
        float *out = y1;
        npl_matmul(pool, ws, &w, x[v], COLS, 1, &out);
        CHECKF(memcmp(y1, y[v], sizeof y1) == 0, "%s: vector %d alone differs from the batch", name, v);
    }
    npl_matmul_contig(pool3, ws, &w, &x[0][0], COLS, NVEC, &yt[0][0], ROWS);
    CHECKF(memcmp(yt, y, sizeof yt) == 0, "%s: 3 threads differ from 2", name);

    npl_matmul_ws_free(ws);
    npl_threadpool_free(pool3);
    npl_threadpool_free(pool);
    free(data);
}

static void run_all_types(npl_simd_level lv)
{
    for (size_t i = 0; i < sizeof type_cases / sizeof type_cases[0]; i++)
        run_type_case(&type_cases[i], lv);
}

static void test_matmul_portable(void)
{
    run_all_types(NPL_SIMD_NONE);
}

static void test_matmul_simd(void)
{
    if (npl_simd_detect() == NPL_SIMD_NONE) {
        fprintf(stderr, "no AVX2 here: the portable path was tested instead\n");
        run_all_types(NPL_SIMD_NONE);
        return;
    }
    run_all_types(npl_simd_detect());
}

static void test_matrix_init_rejects(void)
{
    static float data[64];
    npl_matrix w;
    CHECK(!npl_matrix_init(&w, NPL_TYPE_Q4_0, data, 48, 1)); /* not whole blocks */
    CHECK(!npl_matrix_init(&w, NPL_TYPE_IQ2_XXS, data, 256, 1));
    CHECK(!npl_matrix_init(&w, NPL_TYPE_F32, (const char *)data + 2, 8, 1)); /* misaligned */
    CHECK(!npl_matrix_init(&w, NPL_TYPE_F32, data, 0, 1));
    CHECK(npl_matrix_init(&w, NPL_TYPE_F32, data, 8, 8));
    float row[8];
    CHECK(!npl_matrix_get_row(&w, 8, row));
    CHECK(!npl_matrix_get_row(&w, -1, row));
    CHECK(npl_matmul_ws_create(0, 8, 1) == NULL);
}

/* ---- vector helpers ---------------------------------------------------------- */

/* Every level gives the portable reference's bits, on random values and on
 * the edges of the half format (NaN, infinities, subnormals, overflow,
 * ties), for every length up to 301 (tails included). */
static void test_vec_ops(void)
{
    rng r = {7};
    static float a[301], y_ref[301], y[301], back_ref[301], back[301];
    static uint16_t h_ref[301], h[301];
    const float edges[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 65504.0f, 65520.0f, 1e9f, -1e9f,
                           5.96e-8f, 2.98e-8f, 1e-10f, 6.1e-5f, 1.0f + 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-22f,
                           2049.0f, 2051.0f, -3.0e-5f};
    const size_t n_edges = sizeof edges / sizeof edges[0];
    for (int i = 0; i < 301; i++)
        a[i] = (size_t)i % 7 == 3 ? edges[(size_t)i / 7 % n_edges] : rng_float(&r) * 70000.0f;
    for (int lv = 0; lv <= (int)npl_simd_detect(); lv++) {
        for (size_t n = 0; n <= 301; n += 1 + n / 3) {
            memcpy(y_ref, a, sizeof a);
            memcpy(y, a, sizeof a);
            npl_scale_row_ref(0.37f, y_ref, n);
            npl_scale_f32((npl_simd_level)lv, 0.37f, y, n);
            CHECK(memcmp(y, y_ref, n * sizeof *y) == 0);
            npl_f32_to_f16_row_ref(a, h_ref, n);
            npl_f32_to_f16_row((npl_simd_level)lv, a, h, n);
            CHECK(memcmp(h, h_ref, n * sizeof *h) == 0);
            npl_f16_to_f32_row_ref(h_ref, back_ref, n);
            npl_f16_to_f32_row((npl_simd_level)lv, h_ref, back, n);
            CHECK(memcmp(back, back_ref, n * sizeof *back) == 0);
        }
    }
    /* the reference itself: nearest even, and exact widening */
    CHECK(npl_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3c00);         /* a tie goes to the even 1.0 */
    CHECK(npl_fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-22f) == 0x3c01); /* past the tie: up */
    CHECK(npl_fp32_to_fp16(65520.0f) == 0x7c00);                /* rounds to infinity */
    CHECK(npl_fp16_to_fp32(0x0001) == 0x1p-24f);                /* the smallest subnormal */
}

/* ---- attention ----------------------------------------------------------------- */

static void test_attention_matches_softmax(void)
{
    enum { HD = 24, NQ = 3, MAXKV = 200 };
    rng r = {99};
    static float q[NQ][HD], out[NQ][HD], kf[MAXKV][HD];
    static uint16_t k[MAXKV][HD], v[MAXKV][HD];
    for (int j = 0; j < MAXKV; j++)
        for (int d = 0; d < HD; d++) {
            k[j][d] = npl_fp32_to_fp16(rng_float(&r) * 2.0f);
            v[j][d] = npl_fp32_to_fp16(rng_float(&r));
            kf[j][d] = npl_fp16_to_fp32(k[j][d]);
        }
    float *scratch = malloc(npl_attention_scratch_floats(NQ, HD) * sizeof(float));
    REQUIRE(scratch);
    const size_t kvs[] = {1, 2, 63, 64, 65, 128, 129, 200};
    for (int lv = 0; lv <= (int)npl_simd_detect(); lv++) {
        for (size_t t = 0; t < sizeof kvs / sizeof kvs[0]; t++) {
            size_t n_kv = kvs[t];
            for (int h = 0; h < NQ; h++)
                for (int d = 0; d < HD; d++)
                    q[h][d] = rng_float(&r) * (float)(h + 1) * 2.0f;
            float scale = 1.0f / sqrtf((float)HD);
            npl_attention((npl_simd_level)lv, &q[0][0], HD, NQ, &k[0][0], &v[0][0], HD, n_kv, HD, scale, &out[0][0],
                          HD, scratch);
            for (int h = 0; h < NQ; h++) {
                double s[MAXKV], max = -INFINITY, sum = 0.0;
                for (size_t j = 0; j < n_kv; j++) {
                    double dot = 0.0;
                    for (int d = 0; d < HD; d++)
                        dot += (double)q[h][d] * kf[j][d];
                    s[j] = dot * scale;
                    max = fmax(max, s[j]);
                }
                for (size_t j = 0; j < n_kv; j++) {
                    s[j] = exp(s[j] - max);
                    sum += s[j];
                }
                for (int d = 0; d < HD; d++) {
                    double o = 0.0;
                    for (size_t j = 0; j < n_kv; j++)
                        o += s[j] / sum * npl_fp16_to_fp32(v[j][d]);
                    CHECKF(fabs(out[h][d] - o) <= 2e-5, "simd %d n_kv %zu head %d dim %d: %.8g vs %.8g", lv, n_kv, h,
                           d, (double)out[h][d], o);
                }
            }
        }
    }
    free(scratch);
}

NT_MAIN({"threadpool", test_threadpool_covers_every_task_once}, {"matmul_portable", test_matmul_portable},
        {"matmul_simd", test_matmul_simd}, {"matrix_init", test_matrix_init_rejects}, {"vec_ops", test_vec_ops},
        {"attention", test_attention_matches_softmax})
