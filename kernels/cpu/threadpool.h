/* A persistent pool of worker threads for the compute kernels.
 *
 * Workers are created once (per model) and parked between jobs, so a
 * decode step costs a wake-up per parallel section, never a thread
 * creation. A job is a range of task indices split into contiguous,
 * equal slices, one per thread, the calling thread taking slice 0: which
 * thread computes which output is fixed by (n_tasks, n_threads), and every
 * kernel computes each output element entirely inside one task, so results
 * never depend on the thread count or on timing.
 *
 * One job at a time: npl_threadpool_run must not be called concurrently
 * or from inside a task. */
#ifndef NPL_THREADPOOL_H
#define NPL_THREADPOOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_threadpool npl_threadpool;

/* Runs tasks [begin, end) on thread `thread` (0 = the caller). */
typedef void (*npl_task_fn)(void *ctx, size_t begin, size_t end, int thread);

/* n_threads <= 0: one per online CPU. The count includes the caller.
 * NULL when memory or threads could not be had (errno tells why). */
npl_threadpool *npl_threadpool_create(int n_threads);
void npl_threadpool_free(npl_threadpool *pool);
int npl_threadpool_size(const npl_threadpool *pool);
/* How many of the pool's threads take part in jobs (1 to the size; <= 0:
 * all): the others sleep until needed again. Results do not change (see
 * above). Between jobs, from the thread that runs them. */
void npl_threadpool_set_active(npl_threadpool *pool, int n);
int npl_threadpool_active(const npl_threadpool *pool);

/* Runs fn over [0, n_tasks) and returns when every slice is done. */
void npl_threadpool_run(npl_threadpool *pool, size_t n_tasks, npl_task_fn fn, void *ctx);

/* Online CPUs (at least 1). */
int npl_cpu_count(void);

#ifdef __cplusplus
}
#endif

#endif
