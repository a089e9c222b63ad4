/* matmul_amx.h: the AMX products of F16 weights against the F16 float
 * kernel (matvec.h) and double-precision sums (the tiles' of activations
 * rounded to F16), on odd sizes and several
 * thread counts; with NPULLM_NO_AMX=1 (the no_amx case) nothing is
 * packed and the callers keep their other kernels. On a CPU without AMX
 * the comparison is skipped with a note. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "matmul_amx.h"
#include "npl_test.h"

typedef struct problem {
    size_t n, k, m; /* rows of W, columns, activation rows */
    uint16_t *w;
    float *x, *y, *y_ref;
    npl_matrix mat;
} problem;

static void problem_init(problem *p, size_t n, size_t k, size_t m, uint64_t seed)
{
    p->n = n, p->k = k, p->m = m;
    p->w = malloc(n * k * sizeof *p->w);
    p->x = malloc(m * (k + 3) * sizeof *p->x); /* stride k + 3 */
    p->y = malloc(m * (n + 5) * sizeof *p->y); /* stride n + 5 */
    p->y_ref = malloc(m * n * sizeof *p->y_ref);
    REQUIRE(p->w && p->x && p->y && p->y_ref);
    nt_splitmix r = {seed};
    for (size_t i = 0; i < n * k; i++)
        p->w[i] = npl_fp32_to_fp16(nt_splitmix_float(&r) * (i % 7 == 0 ? 0.002f : 0.2f));
    for (size_t i = 0; i < m * (k + 3); i++)
        p->x[i] = nt_splitmix_float(&r) * (i % 5 == 0 ? 30.0f : 1.0f);
    for (size_t i = 0; i < m * (n + 5); i++)
        p->y[i] = NAN; /* must all be written (the padding columns stay NAN) */
    REQUIRE(npl_matrix_init(&p->mat, NPL_TYPE_F16, p->w, (int64_t)k, (int64_t)n));
}

static void problem_free(problem *p)
{
    free(p->w);
    free(p->x);
    free(p->y);
    free(p->y_ref);
}

static void test_matches_f16(void)
{
    if (!npl_amx_usable()) {
        nt_note("skipped: this CPU (or NPULLM_NO_AMX) gives no AMX-BF16 tiles");
        return;
    }
    static const size_t sizes[][3] = {{40, 70, 37}, {32, 16, 16}, {16, 1, 1}, {96, 600, 50}, {17, 33, 3},
                                      {160, 96, 256}, {48, 4304, 20}};
    for (int threads = 1; threads <= 3; threads += 2) {
        npl_threadpool *pool = npl_threadpool_create(threads);
        REQUIRE(pool);
        for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
            problem p;
            problem_init(&p, sizes[c][0], sizes[c][1], sizes[c][2], 7 + c);
            size_t xs = p.k + 3, ys = p.n + 5;
            npl_matmul_ws *ws = npl_matmul_ws_create(threads, (int64_t)p.k, p.m);
            npl_amx_weights *w = npl_amx_weights_pack(pool, &p.mat);
            npl_amx_acts *a = npl_amx_acts_create(p.m + 1, p.k);
            REQUIRE(ws && w && a);
            CHECK(npl_amx_weights_bytes(w) >= p.n * p.k * 4);
            npl_matmul_contig(pool, ws, &p.mat, p.x, xs, p.m, p.y_ref, p.n);
            CHECK(npl_amx_acts_load(pool, a, p.x, xs, p.m, p.k));
            CHECK(npl_amx_matmul(pool, a, w, p.y, ys));
            double worst = 0.0;
            for (size_t r = 0; r < p.m; r++)
                for (size_t n = 0; n < p.n; n++) {
                    /* exact: of f32 activations (the float kernel); exact16:
                     * of activations rounded to F16 (the tiles) */
                    double exact = 0.0, exact16 = 0.0, mag = 0.0;
                    for (size_t k = 0; k < p.k; k++) {
                        double wk = npl_fp16_to_fp32(p.w[n * p.k + k]);
                        double t = wk * p.x[r * xs + k];
                        exact += t;
                        exact16 += wk * npl_fp16_to_fp32(npl_fp32_to_fp16(p.x[r * xs + k]));
                        mag += fabs(t);
                    }
                    double got = p.y[r * ys + n], ref = p.y_ref[r * p.n + n];
                    /* both are f32 sums of exact products: each within a
                     * few f32 roundings of the magnitude's sum */
                    double bound = 1e-6 * mag * (1.0 + sqrt((double)p.k) / 8.0) + 1e-30;
                    double err = fabs(got - exact16) / bound;
                    CHECKF(err <= 1.0 && fabs(ref - exact) <= bound, "size %zu, row %zu, out %zu: %g vs %g (exact %g)",
                           c, r, n, got, ref, exact);
                    if (err > worst)
                        worst = err;
                }
            for (size_t r = 0; r < p.m; r++)
                for (size_t n = p.n; n < ys; n++)
                    CHECK(isnan(p.y[r * ys + n]));
            nt_note("%d threads, %zu x %zu x %zu: worst error %.3g of the bound", threads, p.m, p.n, p.k, worst);
            /* the same bits whatever the thread count */
            npl_threadpool *one = npl_threadpool_create(1);
            float *again = malloc(p.m * ys * sizeof *again);
            REQUIRE(one && again);
            memcpy(again, p.y, p.m * ys * sizeof *again);
            CHECK(npl_amx_acts_load(one, a, p.x, xs, p.m, p.k) && npl_amx_matmul(one, a, w, again, ys));
            CHECK(memcmp(again, p.y, p.m * ys * sizeof *again) == 0);
            free(again);
            npl_threadpool_free(one);
            /* wrong shapes are refused, y untouched */
            CHECK(!npl_amx_acts_load(pool, a, p.x, xs, p.m + 2, p.k));
            CHECK(!npl_amx_acts_load(pool, a, p.x, xs, p.m, p.k + 1));
            CHECK(npl_amx_acts_load(pool, a, p.x, xs, p.m, p.k - (p.k > 1)));
            if (p.k > 1)
                CHECK(!npl_amx_matmul(pool, a, w, p.y, ys));
            CHECK(!npl_amx_matmul(pool, a, w, p.y, p.n - 1));
            npl_amx_acts_free(a);
            npl_amx_weights_free(w);
            npl_matmul_ws_free(ws);
            problem_free(&p);
        }
        npl_threadpool_free(pool);
    }
}

/* Only F16 matrices are packed. */
static void test_types(void)
{
    npl_threadpool *pool = npl_threadpool_create(2);
    static float f[64 * 32];
    npl_matrix m;
    REQUIRE(pool && npl_matrix_init(&m, NPL_TYPE_F32, f, 64, 32));
    CHECK(npl_amx_weights_pack(pool, &m) == NULL);
    CHECK(npl_amx_weights_pack(pool, NULL) == NULL);
    npl_amx_weights_free(NULL);
    npl_amx_acts_free(NULL);
    npl_threadpool_free(pool);
}

/* Run with NPULLM_NO_AMX=1: the AMX path is off even on an AMX CPU. */
static void test_no_amx(void)
{
    CHECK(!npl_amx_usable());
    problem p;
    problem_init(&p, 32, 64, 4, 3);
    npl_threadpool *pool = npl_threadpool_create(2);
    npl_amx_acts *a = npl_amx_acts_create(4, 64);
    REQUIRE(pool && a);
    CHECK(npl_amx_weights_pack(pool, &p.mat) == NULL);
    CHECK(!npl_amx_acts_load(pool, a, p.x, 64, 4, 64));
    npl_amx_acts_free(a);
    npl_threadpool_free(pool);
    problem_free(&p);
}

NT_MAIN({"matches_f16", test_matches_f16}, {"types", test_types}, {"no_amx", test_no_amx})
