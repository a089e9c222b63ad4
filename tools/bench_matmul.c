/* npullm-bench --matmul: the matrix kernels alone, on matrices of
 * Llama-3.2-1B's feed-forward shape (8192 rows of 2048 columns), 16 of
 * them in turn so the weights stream from memory as a model's do rather
 * than sit in the last-level cache. Per weight type it reports:
 *  - 1 vector (a decode step): GB/s of weight bytes read;
 *  - 64 vectors (a prefill tile): multiply-adds per second;
 * for the repacked SIMD kernels and for the scalar file-layout reference
 * they are tested against, with the time of the repack itself. */
#include "bench_matmul.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "ggml_types.h"
#include "matvec.h"
#include "threadpool.h"

enum { ROWS = 8192, COLS = 2048, N_MATS = 16, PREFILL_VECS = 64 };

static uint64_t next_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

float bench_rand_unit(uint64_t *s)
{
    return (float)next_rand(s) / (float)(1u << 30) - 1.0f;
}

typedef struct weights {
    uint8_t *data; /* N_MATS matrices back to back */
    size_t mat_bytes;
    npl_matrix mats[N_MATS];
} weights;

/* One random matrix quantized with the reference quantizer, copied to
 * every slot: the same values, at addresses far enough apart that each
 * pass reads them from memory. */
static bool make_weights(uint32_t type, weights *w)
{
    size_t row_bytes = npl_type_row_size(type, COLS);
    w->mat_bytes = row_bytes * ROWS;
    w->data = malloc(w->mat_bytes * N_MATS);
    float *row = malloc(COLS * sizeof *row);
    if (!w->data || !row) {
        free(row);
        return false;
    }
    uint64_t rng = 7;
    for (int r = 0; r < ROWS; r++) {
        for (int c = 0; c < COLS; c++)
            row[c] = bench_rand_unit(&rng) * 0.05f;
        if (!npl_quantize_row_ref(type, row, w->data + (size_t)r * row_bytes, COLS)) {
            free(row);
            return false;
        }
    }
    free(row);
    for (int m = 1; m < N_MATS; m++)
        memcpy(w->data + (size_t)m * w->mat_bytes, w->data, w->mat_bytes);
    for (int m = 0; m < N_MATS; m++)
        if (!npl_matrix_init(&w->mats[m], type, w->data + (size_t)m * w->mat_bytes, COLS, ROWS))
            return false;
    return true;
}

/* Seconds for one pass over all matrices with n_vec vectors, best of reps. */
static double time_pass(npl_threadpool *pool, npl_matmul_ws *ws, const weights *w, const float *x,
                        size_t n_vec, float *y, long reps)
{
    double best = 1e30;
    for (long r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        for (int m = 0; m < N_MATS; m++)
            npl_matmul_contig(pool, ws, &w->mats[m], x, COLS, n_vec, y, ROWS);
        double t = bench_now_s() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

typedef struct result {
    const char *type;
    double repack_s;
    double packed_gbs, packed_gmacs; /* 1 vector; 64 vectors */
    double ref_gbs, ref_gmacs;
} result;

static bool bench_type(uint32_t type, npl_threadpool *pool, int threads, long reps, result *out)
{
    weights w;
    memset(&w, 0, sizeof w);
    float *x = malloc((size_t)PREFILL_VECS * COLS * sizeof *x);
    float *y = malloc((size_t)PREFILL_VECS * ROWS * sizeof *y);
    npl_matmul_ws *packed = npl_matmul_ws_create(threads, COLS, PREFILL_VECS);
    npl_matmul_ws *ref = npl_matmul_ws_create(threads, COLS, PREFILL_VECS);
    bool ok = x && y && packed && ref && make_weights(type, &w);
    if (ok) {
        uint64_t rng = 11;
        for (size_t i = 0; i < (size_t)PREFILL_VECS * COLS; i++)
            x[i] = bench_rand_unit(&rng);
        npl_matmul_ws_set_packing(ref, false);
        double t0 = bench_now_s();
        for (int m = 0; m < N_MATS; m++)
            ok = ok && npl_matmul_ws_prepack(packed, pool, &w.mats[m]);
        out->repack_s = (bench_now_s() - t0) / N_MATS;
        double bytes = (double)w.mat_bytes * N_MATS, macs = (double)ROWS * COLS * N_MATS * PREFILL_VECS;
        out->packed_gbs = bytes / time_pass(pool, packed, &w, x, 1, y, reps) * 1e-9;
        out->packed_gmacs = macs / time_pass(pool, packed, &w, x, PREFILL_VECS, y, reps) * 1e-9;
        out->ref_gbs = bytes / time_pass(pool, ref, &w, x, 1, y, reps) * 1e-9;
        /* the scalar reference is slow: one pass is plenty */
        out->ref_gmacs = macs / time_pass(pool, ref, &w, x, PREFILL_VECS, y, 1) * 1e-9;
    }
    npl_matmul_ws_free(packed);
    npl_matmul_ws_free(ref);
    free(w.data);
    free(x);
    free(y);
    return ok;
}

int bench_matmul(int n_threads, long reps, bool json)
{
    static const struct {
        uint32_t id;
        const char *name;
    } types[] = {{NPL_TYPE_Q4_0, "q4_0"}, {NPL_TYPE_Q8_0, "q8_0"}, {NPL_TYPE_Q4_K, "q4_k"},
                 {NPL_TYPE_Q6_K, "q6_k"}}; /* a Q4_K_M file's other type */
    npl_threadpool *pool = npl_threadpool_create(n_threads);
    if (!pool) {
        fprintf(stderr, "npullm-bench: cannot start the thread pool: %s\n", strerror(errno));
        return 1;
    }
    int threads = npl_threadpool_size(pool);
    if (json)
        printf("{\"threads\": %d, \"rows\": %d, \"cols\": %d, \"matrices\": %d, \"types\": [", threads, ROWS, COLS,
               N_MATS);
    else
        printf("matrices     %d x (%d rows x %d columns), %d threads; best of %ld\n", N_MATS, ROWS, COLS, threads,
               reps);
    int status = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        result r = {types[i].name, 0, 0, 0, 0, 0};
        if (!bench_type(types[i].id, pool, threads, reps, &r)) {
            fprintf(stderr, "npullm-bench: out of memory for the %s matrices\n", types[i].name);
            status = 1;
            break;
        }
        if (json)
            printf("%s{\"type\": \"%s\", \"repack_ms_per_matrix\": %.2f, \"packed_1vec_gbs\": %.2f, "
                   "\"packed_64vec_gmacs\": %.2f, \"reference_1vec_gbs\": %.2f, \"reference_64vec_gmacs\": %.2f}",
                   i ? ", " : "", r.type, r.repack_s * 1e3, r.packed_gbs, r.packed_gmacs, r.ref_gbs, r.ref_gmacs);
        else
            printf("%-5s  repack %.1f ms/matrix   1 vector: %6.2f GB/s (scalar reference %5.2f)   "
                   "64 vectors: %6.1f GMAC/s (scalar reference %5.2f)\n",
                   r.type, r.repack_s * 1e3, r.packed_gbs, r.ref_gbs, r.packed_gmacs, r.ref_gmacs);
    }
    if (json)
        printf("]}\n");
    npl_threadpool_free(pool);
    return status;
}
