/* Minimal harness for tests/kernels: named cases, `prog CASE` runs one,
 * `prog` runs all; ends with "N passed, N failed". Plus a deterministic
 * random generator shared by the cases. */
#ifndef NPL_KERNELS_TEST_H
#define NPL_KERNELS_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct kt_case {
    const char *name;
    void (*run)(void);
} kt_case;

extern int kt_failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            kt_failures++;                                                           \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            kt_failures++;                                                           \
        }                                                                            \
    } while (0)

#define REQUIRE(cond)                                                                      \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond); \
            kt_failures++;                                                                 \
            return;                                                                        \
        }                                                                                  \
    } while (0)

static inline int kt_main(int argc, char **argv, const kt_case *cases, size_t n)
{
    int passed = 0, failed = 0;
    bool all = argc < 2 || strcmp(argv[1], "all") == 0;
    bool found = all;
    for (size_t i = 0; i < n; i++) {
        if (!all && strcmp(argv[1], cases[i].name) != 0)
            continue;
        found = true;
        kt_failures = 0;
        cases[i].run();
        if (kt_failures) {
            fprintf(stderr, "FAIL %s (%d failed checks)\n", cases[i].name, kt_failures);
            failed++;
        } else {
            fprintf(stderr, "ok   %s\n", cases[i].name);
            passed++;
        }
    }
    if (!found) {
        fprintf(stderr, "no test case named '%s'\n", argv[1]);
        return 2;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#define KT_MAIN(...)                                                    \
    int kt_failures;                                                    \
    int main(int argc, char **argv)                                     \
    {                                                                   \
        static const kt_case cases[] = {__VA_ARGS__};                   \
        return kt_main(argc, argv, cases, sizeof cases / sizeof cases[0]); \
    }

/* splitmix64 */
typedef struct kt_rng {
    uint64_t s;
} kt_rng;

static inline uint64_t kt_next(kt_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static inline float kt_float(kt_rng *r)
{
    return (float)((double)(kt_next(r) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

#endif
