/* npullm-bench --peak: how many multiply-adds per second the cores can
 * issue at all, for each kind of arithmetic the kernels use: f32 FMA (the
 * float and attention kernels), VDPBF16PS (BF16 pairs) and VPDPBUSD (8-bit
 * quadruples, the integer matrix kernels). Each thread runs independent
 * chains on registers only, nothing from memory, so the figure is the
 * ceiling a kernel's measured rate can be compared with: the fraction of
 * it a kernel reaches, and the least time a given amount of work can take
 * on this machine. Figures count one multiply-add per product (a
 * VDPBF16PS lane does 2, a VPDPBUSD lane 4). */
#include "bench_peak.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "bench_common.h"
#include "cpu_features.h"
#include "threadpool.h"

#if defined(__x86_64__)
#include <immintrin.h>
/* enough independent accumulators to cover the latency (unrolled: kept in
 * registers) */
#define CHAINS 12

enum { KIND_FMA_AVX2, KIND_FMA_AVX512, KIND_BF16, KIND_VNNI, N_KINDS };
static const char *const kind_names[N_KINDS] = {"f32 FMA (AVX2)", "f32 FMA (AVX-512)", "BF16 VDPBF16PS",
                                                "int8 VPDPBUSD"};
static const double macs_per_op[N_KINDS] = {8.0 * CHAINS, 16.0 * CHAINS, 32.0 * CHAINS, 64.0 * CHAINS};

typedef struct peak_job {
    int kind;
    long iters;
    volatile float sink; /* keeps the results alive */
} peak_job;

__attribute__((target("avx2,fma"))) static float run_fma_avx2(long n)
{
    __m256 a[CHAINS], m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-4f);
    for (int k = 0; k < CHAINS; k++)
        a[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < n; i++)
#pragma GCC unroll 12
        for (int k = 0; k < CHAINS; k++)
            a[k] = _mm256_fmadd_ps(a[k], m, c);
    for (int k = 1; k < CHAINS; k++)
        a[0] = _mm256_add_ps(a[0], a[k]);
    return _mm256_cvtss_f32(a[0]);
}

__attribute__((target("avx512f"))) static float run_fma_avx512(long n)
{
    __m512 a[CHAINS], m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-4f);
    for (int k = 0; k < CHAINS; k++)
        a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < n; i++)
#pragma GCC unroll 12
        for (int k = 0; k < CHAINS; k++)
            a[k] = _mm512_fmadd_ps(a[k], m, c);
    for (int k = 1; k < CHAINS; k++)
        a[0] = _mm512_add_ps(a[0], a[k]);
    return _mm512_cvtss_f32(a[0]);
}

__attribute__((target("avx512f,avx512bf16"))) static float run_bf16(long n)
{
    __m512 a[CHAINS];
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3800); /* 1, 2^-15 */
    for (int k = 0; k < CHAINS; k++)
        a[k] = _mm512_setzero_ps();
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
        for (int k = 0; k < CHAINS; k++)
            a[k] = _mm512_dpbf16_ps(a[k], x, y);
        __asm__ volatile("" : "+v"(x)); /* not hoisted out of the loop */
    }
    for (int k = 1; k < CHAINS; k++)
        a[0] = _mm512_add_ps(a[0], a[k]);
    return _mm512_cvtss_f32(a[0]);
}

__attribute__((target("avx512f,avx512vnni"))) static float run_vnni(long n)
{
    __m512i a[CHAINS], x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(1);
    for (int k = 0; k < CHAINS; k++)
        a[k] = _mm512_setzero_si512();
    for (long i = 0; i < n; i++) {
#pragma GCC unroll 12
        for (int k = 0; k < CHAINS; k++)
            a[k] = _mm512_dpbusd_epi32(a[k], x, y);
        __asm__ volatile("" : "+v"(x));
    }
    for (int k = 1; k < CHAINS; k++)
        a[0] = _mm512_add_epi32(a[0], a[k]);
    return (float)_mm_cvtsi128_si32(_mm512_castsi512_si128(a[0]));
}

static void peak_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    peak_job *j = ctx;
    for (size_t t = begin; t < end; t++) {
        switch (j->kind) {
        case KIND_FMA_AVX2: j->sink = run_fma_avx2(j->iters); break;
        case KIND_FMA_AVX512: j->sink = run_fma_avx512(j->iters); break;
        case KIND_BF16: j->sink = run_bf16(j->iters); break;
        default: j->sink = run_vnni(j->iters); break;
        }
    }
}

int bench_peak(int n_threads, long reps, bool json)
{
    npl_cpu_features f;
    npl_cpu_features_detect(&f);
    bool have[N_KINDS] = {f.avx2 && f.fma, f.avx512f, f.avx512f && f.avx512bf16, f.avx512f && f.avx512vnni};
    npl_threadpool *pool = npl_threadpool_create(n_threads);
    if (!pool)
        return 1;
    int nt = npl_threadpool_size(pool);
    if (json)
        printf("{\"threads\": %d", nt);
    else
        printf("peak multiply-adds, registers only, %d threads (one chain set per thread); G per second, "
               "best and worst of %ld rounds\n",
               nt, reps);
    for (int kind = 0; kind < N_KINDS; kind++) {
        if (!have[kind])
            continue;
        peak_job j = {.kind = kind, .iters = 50000000L / (kind == KIND_VNNI ? 4 : kind == KIND_BF16 ? 2 : 1)};
        double best = 0.0, worst = 1e30;
        for (long r = 0; r < reps; r++) {
            double t0 = bench_now_s();
            npl_threadpool_run(pool, (size_t)nt, peak_task, &j);
            double rate = macs_per_op[kind] * (double)j.iters * nt / (bench_now_s() - t0) * 1e-9;
            best = rate > best ? rate : best;
            worst = rate < worst ? rate : worst;
        }
        if (json)
            printf(", \"%s\": [%.1f, %.1f]",
                   kind == KIND_FMA_AVX2 ? "fma_avx2" : kind == KIND_FMA_AVX512 ? "fma_avx512"
                   : kind == KIND_BF16   ? "bf16"
                                         : "vnni",
                   best, worst);
        else
            printf("  %-18s %7.1f - %7.1f G/s (%.1f per thread at best)\n", kind_names[kind], worst, best,
                   best / nt);
    }
    if (json)
        printf("}\n");
    npl_threadpool_free(pool);
    return 0;
}
#else
int bench_peak(int n_threads, long reps, bool json)
{
    (void)n_threads;
    (void)reps;
    (void)json;
    fputs("npullm-bench: --peak measures x86-64 instructions only\n", stderr);
    return 1;
}
#endif
