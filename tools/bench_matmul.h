/* npullm-bench --matmul: the matrix kernels alone (bench_matmul.c). */
#ifndef NPULLM_BENCH_MATMUL_H
#define NPULLM_BENCH_MATMUL_H

#include <stdbool.h>

/* Prints the figures; 0 on success, 1 when memory ran out. */
int bench_matmul(int n_threads, long reps, bool json);

#endif
