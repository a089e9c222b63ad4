/* Helpers of the tests that run a generated model (path as the argument
 * after the case name, see llama_test.h). */
#ifndef NPL_LLAMA_MODEL_TEST_H
#define NPL_LLAMA_MODEL_TEST_H

#include "llama_test.h"
#include "npullm.h"

/* The case's model with these threads and prefill chunk (0 = default);
 * NPULLM_TEST_KV_TYPE, when set, is its kv_type. */
static inline npl_model *lt_load_model(int threads, uint32_t chunk)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = threads;
    p.prefill_chunk = chunk;
    p.kv_type = getenv("NPULLM_TEST_KV_TYPE");
    npl_error err;
    npl_model *m = npl_model_load(lt_current.arg, &p, &err);
    if (!m)
        fprintf(stderr, "cannot load %s: %s\n", lt_current.arg ? lt_current.arg : "(no model given)", err.message);
    return m;
}

static inline int32_t lt_argmax(const float *v, uint32_t n)
{
    int32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = (int32_t)i;
    return best;
}

#endif
