/* npullm-bench --peak: the core's multiply-add ceiling (bench_peak.c). */
#ifndef NPULLM_BENCH_PEAK_H
#define NPULLM_BENCH_PEAK_H

#include <stdbool.h>

/* Prints the figures; 0 on success, 1 when threads ran out. */
int bench_peak(int n_threads, long reps, bool json);

#endif
