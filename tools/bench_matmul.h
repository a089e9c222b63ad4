/* npullm-bench --matmul: the matrix kernels alone (bench_matmul.c). */
#ifndef NPULLM_BENCH_MATMUL_H
#define NPULLM_BENCH_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

/* Prints the figures; 0 on success, 1 when memory ran out. */
int bench_matmul(int n_threads, long reps, bool json);

/* Uniform in [-1, 1) from the generator state *s (any seed); the kernel
 * benchmarks' test data. */
float bench_rand_unit(uint64_t *s);

#endif
