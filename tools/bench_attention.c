/* npullm-bench --attention: the attention of a follow-up turn's prefill
 * alone, in Llama-3.2-1B's shape (32 query heads on 8 KV heads of 64
 * dimensions, an F16 cache): 247 new positions after 2117 cached ones,
 * split over the thread pool as the forward pass splits them. Rounds
 * alternate the per-query kernel (npl_attention_kv once per position and
 * KV head) and the multi-position one (npl_attention_rows once per block
 * of 64 positions and KV head), each timed as wall and process CPU
 * seconds, and the two outputs are compared bit for bit. */
#include "bench_attention.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "bench_matmul.h"
#include "ggml_types.h"
#include "threadpool.h"

enum { N_HEAD = 32, N_KV = 8, HD = 64, CACHED = 2117, NEW = 247, BLOCK = 64 };
#define GROUP (N_HEAD / N_KV)
#define N_POS (CACHED + NEW)
#define Q_DIM (N_HEAD * HD)

typedef struct attn_bench {
    uint16_t *k, *v;   /* [N_KV][N_POS][HD] */
    float *q, *out;    /* [NEW][N_HEAD][HD] */
    float *scratch;    /* per thread */
    size_t scratch_floats;
    uint32_t *hi;      /* [NEW] */
    npl_simd_level lv; /* detected once, as a model does */
} attn_bench;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* task = (position, kv head) */
static void per_query_task(void *ctx, size_t begin, size_t end, int thread)
{
    attn_bench *b = ctx;
    float *scratch = b->scratch + (size_t)thread * b->scratch_floats;
    for (size_t t = begin; t < end; t++) {
        size_t i = t / N_KV, g = t % N_KV;
        size_t off = g * N_POS * HD, q_off = i * Q_DIM + g * GROUP * HD;
        npl_attention(b->lv, b->q + q_off, HD, GROUP, b->k + off, b->v + off, HD,
                      (size_t)b->hi[i] + 1, HD, 0.125f, b->out + q_off, HD, scratch);
    }
}

/* task = (block of BLOCK positions, kv head) */
static void rows_task(void *ctx, size_t begin, size_t end, int thread)
{
    attn_bench *b = ctx;
    float *scratch = b->scratch + (size_t)thread * b->scratch_floats;
    for (size_t t = begin; t < end; t++) {
        size_t i0 = t / N_KV * BLOCK, g = t % N_KV;
        size_t np = NEW - i0 < BLOCK ? NEW - i0 : BLOCK;
        size_t off = g * N_POS * HD, q_off = i0 * Q_DIM + g * GROUP * HD;
        npl_attn_rows_job job = {
            .fmt = NPL_KV_F16, .q = b->q + q_off, .q_stride = Q_DIM, .out = b->out + q_off, .out_stride = Q_DIM,
            .n_pos = np, .group = GROUP, .head_dim = HD, .key_hi = b->hi + i0, .k = b->k + off, .v = b->v + off,
            .row_bytes = HD * sizeof(uint16_t), .scale = 0.125f,
        };
        npl_attention_rows(b->lv, &job, scratch);
    }
}

int bench_attention(int n_threads, long reps, bool json)
{
    npl_threadpool *pool = npl_threadpool_create(n_threads);
    if (!pool)
        return 1;
    int nt = npl_threadpool_size(pool);
    attn_bench b = {.lv = npl_simd_detect()};
    size_t cache = (size_t)N_KV * N_POS * HD, qn = (size_t)NEW * Q_DIM;
    b.scratch_floats = npl_attention_rows_scratch_floats(BLOCK, GROUP, HD);
    b.k = malloc(cache * sizeof *b.k);
    b.v = malloc(cache * sizeof *b.v);
    b.q = malloc(qn * sizeof *b.q);
    b.out = malloc(qn * sizeof *b.out);
    float *out_pq = malloc(qn * sizeof *out_pq);
    b.scratch = malloc((size_t)nt * b.scratch_floats * sizeof *b.scratch);
    b.hi = malloc(NEW * sizeof *b.hi);
    if (!b.k || !b.v || !b.q || !b.out || !out_pq || !b.scratch || !b.hi) {
        npl_threadpool_free(pool);
        return 1;
    }
    uint64_t seed = 1;
    for (size_t i = 0; i < cache; i++) {
        b.k[i] = npl_fp32_to_fp16(bench_rand_unit(&seed) * 2.0f);
        b.v[i] = npl_fp32_to_fp16(bench_rand_unit(&seed));
    }
    for (size_t i = 0; i < qn; i++)
        b.q[i] = bench_rand_unit(&seed) * 2.0f;
    for (size_t i = 0; i < NEW; i++)
        b.hi[i] = (uint32_t)(CACHED + i);

    size_t blocks = (NEW + BLOCK - 1) / BLOCK;
    double macs = 0.0; /* q.k and p * v */
    for (size_t i = 0; i < NEW; i++)
        macs += 2.0 * N_HEAD * HD * (b.hi[i] + 1.0);
    if (!json)
        printf("attention: %d query heads on %d KV heads of %d, F16 cache, %d new positions after %d cached, "
               "%d threads; seconds per pass (wall / process CPU)\n",
               N_HEAD, N_KV, HD, NEW, CACHED, nt);
    double best[2][2] = {{1e30, 1e30}, {1e30, 1e30}}, worst[2][2] = {{0, 0}, {0, 0}};
    bool same = true;
    for (long r = 0; r < reps; r++) {
        for (int kind = 0; kind < 2; kind++) {
            double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            if (kind == 0)
                npl_threadpool_run(pool, (size_t)NEW * N_KV, per_query_task, &b);
            else
                npl_threadpool_run(pool, blocks * N_KV, rows_task, &b);
            double w = clock_s(CLOCK_MONOTONIC) - w0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            if (kind == 0)
                memcpy(out_pq, b.out, qn * sizeof *out_pq);
            else
                same = same && memcmp(out_pq, b.out, qn * sizeof *out_pq) == 0;
            double v[2] = {w, c};
            for (int m = 0; m < 2; m++) {
                if (v[m] < best[kind][m])
                    best[kind][m] = v[m];
                if (v[m] > worst[kind][m])
                    worst[kind][m] = v[m];
            }
            if (!json)
                printf("  round %ld %-10s %.4f s / %.4f s CPU (%.1f GMAC/s wall)\n", r + 1,
                       kind ? "rows" : "per-query", w, c, macs / w * 1e-9);
        }
    }
    if (json)
        printf("{\"threads\": %d, \"per_query\": {\"wall\": [%.4f, %.4f], \"cpu\": [%.4f, %.4f]}, "
               "\"rows\": {\"wall\": [%.4f, %.4f], \"cpu\": [%.4f, %.4f]}, \"bit_identical\": %s}\n",
               nt, best[0][0], worst[0][0], best[0][1], worst[0][1], best[1][0], worst[1][0], best[1][1],
               worst[1][1], same ? "true" : "false");
    else
        printf("per-query: wall %.4f-%.4f s, CPU %.4f-%.4f s\nrows:      wall %.4f-%.4f s, CPU %.4f-%.4f s\n"
               "outputs bit-identical: %s\n",
               best[0][0], worst[0][0], best[0][1], worst[0][1], best[1][0], worst[1][0], best[1][1], worst[1][1],
               same ? "yes" : "NO");
    free(b.k);
    free(b.v);
    free(b.q);
    free(b.out);
    free(out_pq);
    free(b.scratch);
    free(b.hi);
    npl_threadpool_free(pool);
    return same ? 0 : 1;
}
