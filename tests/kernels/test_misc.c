/* The thread pool (every task exactly once, contiguous slices in thread
 * order, whatever the thread and task counts, run after run) and the
 * huge-page buffers (zeroed, aligned). */
#include <stdint.h>
#include <string.h>

#include "huge_alloc.h"

#include "npl_test.h"
#include "threadpool.h"
#include "vec_ops.h"

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

static void test_threadpool(void)
{
    static int counts[300], thread_of[300];
    for (int nt = 1; nt <= 5; nt++) {
        npl_threadpool *pool = npl_threadpool_create(nt);
        REQUIRE(pool);
        CHECK(npl_threadpool_size(pool) == nt);
        for (int rep = 0; rep < 400; rep++) {
            size_t n = (size_t)(rep * 7919) % 300;
            memset(counts, 0, sizeof counts);
            count_job j = {counts, thread_of};
            npl_threadpool_run(pool, n, count_task, &j);
            for (size_t i = 0; i < n; i++)
                CHECKF(counts[i] == 1, "threads %d tasks %zu: task %zu ran %d times", nt, n, i, counts[i]);
            for (size_t i = 1; i < n; i++)
                CHECK(thread_of[i] >= thread_of[i - 1]);
            /* slice boundaries are n * t / threads (one task runs inline) */
            for (size_t i = 0; i < n && nt > 1 && n > 1; i++)
                CHECK((size_t)thread_of[i] * n / (size_t)nt <= i && i < ((size_t)thread_of[i] + 1) * n / (size_t)nt);
        }
        npl_threadpool_free(pool);
    }
}

/* Fewer active threads (the power policy): every task once, only on the
 * active threads, in their slices; the others rejoin when needed again,
 * also when changed between every job. */
static void test_threadpool_active(void)
{
    static int counts[300], thread_of[300];
    npl_threadpool *pool = npl_threadpool_create(4);
    REQUIRE(pool);
    for (int rep = 0; rep < 600; rep++) {
        int active = 1 + (rep / 3) % 4; /* kept for three jobs, then changed */
        if (rep % 3 == 0)
            npl_threadpool_set_active(pool, active);
        CHECK(npl_threadpool_active(pool) == active);
        size_t n = 2 + (size_t)(rep * 7919) % 298;
        memset(counts, 0, sizeof counts);
        count_job j = {counts, thread_of};
        npl_threadpool_run(pool, n, count_task, &j);
        for (size_t i = 0; i < n; i++) {
            CHECKF(counts[i] == 1, "active %d tasks %zu: task %zu ran %d times", active, n, i, counts[i]);
            CHECK(thread_of[i] < active);
            CHECK((size_t)thread_of[i] * n / (size_t)active <= i && i < ((size_t)thread_of[i] + 1) * n / (size_t)active);
        }
    }
    npl_threadpool_set_active(pool, 0); /* all */
    CHECK(npl_threadpool_active(pool) == 4);
    npl_threadpool_free(pool);
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static void test_huge_alloc(void)
{
    const size_t mib = (size_t)1 << 20;
    /* below one huge page: malloc'd, 64-byte aligned, zeroed */
    size_t map = 1;
    uint8_t *small = npl_huge_alloc(100, &map);
    REQUIRE(small);
    CHECK(map == 0 && (uintptr_t)small % 64 == 0 && all_zero(small, 100));
    npl_huge_free(small, map);
    /* a mapping: 2 MiB-aligned and zeroed */
    size_t n = 3 * mib + 123;
    uint8_t *p = npl_huge_alloc(n, &map);
    REQUIRE(p);
    CHECK(map >= n && (uintptr_t)p % (2 * mib) == 0 && all_zero(p, n));
    memset(p, 0xab, n); /* all of it writable */
    npl_huge_free(p, map);
    npl_huge_free(NULL, 0);
}

NT_MAIN({"threadpool", test_threadpool}, {"threadpool_active", test_threadpool_active},
        {"huge_alloc", test_huge_alloc})
