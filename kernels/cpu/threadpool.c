#include "threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a parked worker (or the waiting caller) spins before sleeping
 * on the condition variable: long enough to bridge the short single-
 * threaded gaps between the parallel sections of one forward step, short
 * enough not to burn a shared core between steps. */
#define SPIN_ITERATIONS 20000

#define CACHE_LINE 64

/* The job descriptor and its generation counter are written once per job
 * by the caller and only read by the workers; the countdown of running
 * workers is written by every worker at the end of a job. They live on
 * separate cache lines so that the workers' polling of the generation
 * does not bounce the line the finishing workers write. */
struct npl_threadpool {
    int n_threads; /* including the caller */
    pthread_t *threads;
    int n_started;

    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    pthread_cond_t done_cv;
    pthread_cond_t active_cv; /* a parked worker is needed again */
    /* Threads that take part in jobs (the first n_active); the others
     * sleep on active_cv and miss every job until they are needed again,
     * from the generation active_gen on. Changed between jobs only. */
    atomic_int n_active;
    unsigned active_gen;

    /* The current job; published by the release-increment of generation. */
    _Alignas(CACHE_LINE) npl_task_fn fn;
    void *ctx;
    size_t n_tasks;
    atomic_uint generation;
    atomic_bool stop;

    _Alignas(CACHE_LINE) atomic_int pending; /* workers still running the current job */
    char pad_end[CACHE_LINE - sizeof(atomic_int)];
};

typedef struct worker_arg {
    npl_threadpool *pool;
    int index;
} worker_arg;

/* Every YIELD_EVERY spins the waiting thread offers its core to the
 * scheduler: when the machine is oversubscribed, the thread being waited
 * for may be queued on this very core, and pure spinning would only burn
 * the time it needs. On an idle machine sched_yield returns at once. */
#ifndef YIELD_EVERY
#define YIELD_EVERY 256
#endif

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int npl_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return n > 1024 ? 1024 : (int)n;
}

static void run_slice(npl_threadpool *pool, int index)
{
    size_t n = pool->n_tasks;
    size_t t = (size_t)atomic_load_explicit(&pool->n_active, memory_order_relaxed);
    size_t begin = n * (size_t)index / t;
    size_t end = n * (size_t)(index + 1) / t;
    if (begin < end)
        pool->fn(pool->ctx, begin, end, index);
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    npl_threadpool *pool = wa->pool;
    int index = wa->index;
    free(wa);

    /* Not the current value: a job may already have been posted before
     * this thread got to run, and it must not be missed. */
    unsigned seen = 0;
    for (;;) {
        unsigned gen = seen;
        for (int i = 0; i < SPIN_ITERATIONS; i++) {
            gen = atomic_load_explicit(&pool->generation, memory_order_acquire);
            if (gen != seen || atomic_load_explicit(&pool->stop, memory_order_relaxed))
                break;
            if (i % YIELD_EVERY == YIELD_EVERY - 1)
                sched_yield();
            else
                cpu_relax();
        }
        if (gen == seen) {
            pthread_mutex_lock(&pool->mu);
            while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
                   !atomic_load_explicit(&pool->stop, memory_order_relaxed))
                pthread_cond_wait(&pool->work_cv, &pool->mu);
            pthread_mutex_unlock(&pool->mu);
        }
        if (atomic_load_explicit(&pool->stop, memory_order_acquire))
            return NULL;
        seen = gen;
        if (index >= atomic_load_explicit(&pool->n_active, memory_order_relaxed)) {
            /* not one of this job's threads: sleep until needed */
            pthread_mutex_lock(&pool->mu);
            while (!atomic_load_explicit(&pool->stop, memory_order_relaxed) &&
                   index >= atomic_load_explicit(&pool->n_active, memory_order_relaxed))
                pthread_cond_wait(&pool->active_cv, &pool->mu);
            seen = pool->active_gen;
            pthread_mutex_unlock(&pool->mu);
            continue;
        }

        run_slice(pool, index);

        if (atomic_fetch_sub_explicit(&pool->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&pool->mu);
            pthread_cond_signal(&pool->done_cv);
            pthread_mutex_unlock(&pool->mu);
        }
    }
}

static void stop_workers(npl_threadpool *pool)
{
    pthread_mutex_lock(&pool->mu);
    atomic_store_explicit(&pool->stop, true, memory_order_release);
    pthread_cond_broadcast(&pool->work_cv);
    pthread_cond_broadcast(&pool->active_cv);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 0; i < pool->n_started; i++)
        pthread_join(pool->threads[i], NULL);
    pool->n_started = 0;
}

npl_threadpool *npl_threadpool_create(int n_threads)
{
    if (n_threads <= 0)
        n_threads = npl_cpu_count();
    if (n_threads > 1024) {
        errno = EINVAL;
        return NULL;
    }
    npl_threadpool *pool = aligned_alloc(CACHE_LINE, sizeof *pool);
    if (!pool)
        return NULL;
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    atomic_init(&pool->n_active, n_threads);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->stop, false);
    if (pthread_mutex_init(&pool->mu, NULL) != 0) {
        free(pool);
        return NULL;
    }
    if (pthread_cond_init(&pool->work_cv, NULL) != 0) {
        pthread_mutex_destroy(&pool->mu);
        free(pool);
        return NULL;
    }
    if (pthread_cond_init(&pool->done_cv, NULL) != 0) {
        pthread_cond_destroy(&pool->work_cv);
        pthread_mutex_destroy(&pool->mu);
        free(pool);
        return NULL;
    }
    if (pthread_cond_init(&pool->active_cv, NULL) != 0) {
        pthread_cond_destroy(&pool->done_cv);
        pthread_cond_destroy(&pool->work_cv);
        pthread_mutex_destroy(&pool->mu);
        free(pool);
        return NULL;
    }
    if (n_threads > 1) {
        pool->threads = calloc((size_t)n_threads - 1, sizeof *pool->threads);
        if (!pool->threads) {
            npl_threadpool_free(pool);
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            npl_threadpool_free(pool);
            errno = ENOMEM;
            return NULL;
        }
        wa->pool = pool;
        wa->index = i;
        int rc = pthread_create(&pool->threads[pool->n_started], NULL, worker_main, wa);
        if (rc != 0) {
            free(wa);
            npl_threadpool_free(pool);
            errno = rc;
            return NULL;
        }
        pool->n_started++;
    }
    return pool;
}

void npl_threadpool_free(npl_threadpool *pool)
{
    if (!pool)
        return;
    stop_workers(pool);
    pthread_cond_destroy(&pool->active_cv);
    pthread_cond_destroy(&pool->done_cv);
    pthread_cond_destroy(&pool->work_cv);
    pthread_mutex_destroy(&pool->mu);
    free(pool->threads);
    free(pool);
}

int npl_threadpool_size(const npl_threadpool *pool)
{
    return pool->n_threads;
}

int npl_threadpool_active(const npl_threadpool *pool)
{
    return atomic_load_explicit(&pool->n_active, memory_order_relaxed);
}

void npl_threadpool_set_active(npl_threadpool *pool, int n)
{
    if (n <= 0 || n > pool->n_threads)
        n = pool->n_threads;
    pthread_mutex_lock(&pool->mu);
    atomic_store_explicit(&pool->n_active, n, memory_order_relaxed);
    pool->active_gen = atomic_load_explicit(&pool->generation, memory_order_relaxed);
    pthread_cond_broadcast(&pool->active_cv);
    pthread_mutex_unlock(&pool->mu);
}

void npl_threadpool_run(npl_threadpool *pool, size_t n_tasks, npl_task_fn fn, void *ctx)
{
    if (n_tasks == 0)
        return;
    /* A job smaller than the pool, or a pool of one, runs inline: waking
     * workers that would get empty slices only costs latency. */
    int n_active = atomic_load_explicit(&pool->n_active, memory_order_relaxed);
    if (n_active == 1 || n_tasks == 1) {
        fn(ctx, 0, n_tasks, 0);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n_tasks = n_tasks;
    atomic_store_explicit(&pool->pending, n_active - 1, memory_order_relaxed);
    pthread_mutex_lock(&pool->mu);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    pthread_cond_broadcast(&pool->work_cv);
    pthread_mutex_unlock(&pool->mu);

    run_slice(pool, 0);

    for (int i = 0; i < SPIN_ITERATIONS; i++) {
        if (atomic_load_explicit(&pool->pending, memory_order_acquire) == 0)
            return;
        if (i % YIELD_EVERY == YIELD_EVERY - 1)
            sched_yield();
        else
            cpu_relax();
    }
    pthread_mutex_lock(&pool->mu);
    while (atomic_load_explicit(&pool->pending, memory_order_acquire) != 0)
        pthread_cond_wait(&pool->done_cv, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
}
