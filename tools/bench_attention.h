/* npullm-bench --attention: prefill attention alone (bench_attention.c). */
#ifndef NPULLM_BENCH_ATTENTION_H
#define NPULLM_BENCH_ATTENTION_H

#include <stdbool.h>

/* Prints the figures; 0 on success, 1 when memory or threads ran out. */
int bench_attention(int n_threads, long reps, bool json);

#endif
