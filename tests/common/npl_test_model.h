/* For the cases that run a generated model (path: the argument after the
 * case name, see npl_test.h). */
#ifndef NPL_TEST_MODEL_H
#define NPL_TEST_MODEL_H

#include <stdio.h>
#include <stdlib.h>

#include "npl_test.h"
#include "npullm.h"

/* The case's model on device (NULL: the CPU) with these threads and
 * prefill chunk (0 = default); NPULLM_TEST_KV_TYPE, when set, is its
 * kv_type. NULL after a message. */
static inline npl_model *nt_load_model(const char *device, int threads, uint32_t chunk)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = threads;
    p.prefill_chunk = chunk;
    p.kv_type = getenv("NPULLM_TEST_KV_TYPE");
    if (device)
        p.device = device;
    npl_error err;
    npl_model *m = npl_model_load(nt_arg(0), &p, &err);
    if (!m)
        fprintf(stderr, "cannot load %s on %s: %s\n", nt_arg(0) ? nt_arg(0) : "(no model given)",
                device ? device : "cpu", err.message);
    return m;
}

#endif
