#include "bench_common.h"

#include <time.h>

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

npl_model *bench_load_model(const char *path, int n_threads, uint32_t block_rows, npl_error *err)
{
    npl_model_params mp;
    npl_model_params_default(&mp);
    mp.n_threads = n_threads;
    mp.block_rows = block_rows;
    return npl_model_load(path, &mp, err);
}
