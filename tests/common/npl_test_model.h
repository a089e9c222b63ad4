/* For the cases that run a generated model (path: the argument after the
 * case name, see npl_test.h). */
#ifndef NPL_TEST_MODEL_H
#define NPL_TEST_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* n prompt ids, the same for the same seed: bos first when it is >= 0,
 * then ids spread over [lo, hi). */
static inline void nt_make_prompt(int32_t *ids, size_t n, uint32_t seed, int32_t bos, uint32_t lo, uint32_t hi)
{
    uint64_t s = seed * 2654435761u + 1;
    size_t i = 0;
    if (bos >= 0)
        ids[i++] = bos;
    for (; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)(lo + (s >> 33) % (hi - lo));
    }
}

/* Prefills what s does not hold yet of prompt[0..n), in pieces of
 * `piece` tokens (0: as many as a call takes; the service's interleaving).
 * False after a message. */
static inline bool nt_prefill_rest(npl_model *m, npl_seq *s, const int32_t *prompt, size_t n, size_t piece)
{
    npl_error err;
    for (size_t at = npl_seq_pos(s); at < n;) {
        size_t used = 0;
        if (npl_prefill(m, s, prompt + at, n - at, piece, &used, &err) != NPL_OK || used == 0) {
            fprintf(stderr, "prefill: %s\n", err.message);
            return false;
        }
        at += used;
    }
    return true;
}

/* Both sequences have logits and they are bit-identical. */
static inline bool nt_same_logits(const npl_seq *a, const npl_seq *b, uint32_t n_vocab)
{
    const float *la = npl_seq_logits(a), *lb = npl_seq_logits(b);
    return la && lb && memcmp(la, lb, n_vocab * sizeof(float)) == 0;
}

#endif
