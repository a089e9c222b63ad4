/* What npullm-bench's benchmarks share: the clock and loading a model. */
#ifndef NPL_BENCH_COMMON_H
#define NPL_BENCH_COMMON_H

#include "npullm.h"

/* CLOCK_MONOTONIC in seconds. */
double bench_now_s(void);

/* The model at path with the default parameters on n_threads threads
 * (0: all) and block_rows (npl_model_params: a paired projector's
 * max_tokens, else 0); NULL with err filled when it cannot be loaded. */
npl_model *bench_load_model(const char *path, int n_threads, uint32_t block_rows, npl_error *err);

#endif
