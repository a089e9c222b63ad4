/* Tiny harness for tests/npu_engine: `prog CASE [ARG...]` runs one named
 * case (meson registers one test per case and model), failures are
 * counted per case and the process exits non-zero when any check failed. */
#ifndef NPU_ENGINE_TEST_H
#define NPU_ENGINE_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npullm.h"

typedef struct ne_case {
    const char *name;
    void (*run)(void);
} ne_case;

/* Failures so far, and the arguments after the case name. */
typedef struct ne_state {
    int failures;
    int argc;
    char **argv;
} ne_state;

extern ne_state ne_current;

/* The i-th argument after the case name, or NULL. */
static inline const char *ne_arg(int i)
{
    return i < ne_current.argc ? ne_current.argv[i] : NULL;
}

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            ne_current.failures++;                                                   \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            ne_current.failures++;                                                   \
        }                                                                            \
    } while (0)

/* Fatal for the case: records the failure and returns. */
#define REQUIRE(cond)                                                                    \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond); \
            ne_current.failures++;                                                       \
            return;                                                                      \
        }                                                                                \
    } while (0)

static inline int ne_main(int argc, char **argv, const ne_case *cases, size_t n)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s CASE [ARG...]\n", argv[0]);
        return 2;
    }
    ne_current.argc = argc - 2;
    ne_current.argv = argv + 2;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        cases[i].run();
        fprintf(stderr, "%s %s (%d failed checks)\n", ne_current.failures ? "FAIL" : "ok  ",
                cases[i].name, ne_current.failures);
        return ne_current.failures ? 1 : 0;
    }
    fprintf(stderr, "no test case named '%s'\n", argv[1]);
    return 2;
}

/* The model of the first argument on a device, one thread, prefill
 * chunks of `chunk` tokens (0: the default); NULL after a message. */
static inline npl_model *ne_load(const char *device, uint32_t chunk)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 1;
    p.prefill_chunk = chunk;
    p.device = device;
    npl_error err;
    npl_model *m = npl_model_load(ne_arg(0), &p, &err);
    if (!m)
        fprintf(stderr, "cannot load %s on %s: %s\n", ne_arg(0) ? ne_arg(0) : "(no model given)",
                device, err.message);
    return m;
}

/* n ids spread over the vocabulary, BOS-like first id. */
static inline void ne_make_prompt(int32_t *ids, size_t n, uint32_t seed, uint32_t n_vocab)
{
    uint64_t s = seed * 2654435761u + 1;
    ids[0] = 1;
    for (size_t i = 1; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % n_vocab);
    }
}

static inline int32_t ne_argmax(const float *v, uint32_t n)
{
    int32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = (int32_t)i;
    return best;
}

#define NE_MAIN(...)                                                    \
    ne_state ne_current;                                                \
    int main(int argc, char **argv)                                     \
    {                                                                   \
        static const ne_case cases[] = {__VA_ARGS__};                   \
        return ne_main(argc, argv, cases, sizeof cases / sizeof cases[0]); \
    }

#endif
