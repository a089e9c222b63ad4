/* Tiny harness for tests/npu_engine: `prog CASE [ARG...]` runs one named
 * case (meson registers one test per case and model), failures are
 * counted per case and the process exits non-zero when any check failed. */
#ifndef NPU_ENGINE_TEST_H
#define NPU_ENGINE_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define NE_MAIN(...)                                                    \
    ne_state ne_current;                                                \
    int main(int argc, char **argv)                                     \
    {                                                                   \
        static const ne_case cases[] = {__VA_ARGS__};                   \
        return ne_main(argc, argv, cases, sizeof cases / sizeof cases[0]); \
    }

#endif
