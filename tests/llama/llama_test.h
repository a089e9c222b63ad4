/* Tiny test harness for tests/llama: named cases, `prog CASE` runs one,
 * `prog` runs all, and the run ends with "N passed, N failed". */
#ifndef NPL_LLAMA_TEST_H
#define NPL_LLAMA_TEST_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lt_case {
    const char *name;
    void (*run)(void);
} lt_case;

/* Failures of the case being run (one process runs cases one by one),
 * and the argument after the case name (e.g. a model path), if any. */
typedef struct lt_state {
    int failures;
    const char *arg;
} lt_state;

extern lt_state lt_current;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            lt_current.failures++;                                                   \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            lt_current.failures++;                                             \
        }                                                                      \
    } while (0)

/* Fatal for the case: stop it here (after recording the failure). */
#define REQUIRE(cond)                                                                  \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond); \
            lt_current.failures++;                                                     \
            return;                                                                    \
        }                                                                              \
    } while (0)

static inline int lt_main(int argc, char **argv, const lt_case *cases, size_t n)
{
    int passed = 0, failed = 0;
    bool all = argc < 2 || strcmp(argv[1], "all") == 0;
    bool found = all;
    lt_current.arg = argc >= 3 ? argv[2] : NULL;
    for (size_t i = 0; i < n; i++) {
        if (!all && strcmp(argv[1], cases[i].name) != 0)
            continue;
        found = true;
        lt_current.failures = 0;
        cases[i].run();
        if (lt_current.failures) {
            fprintf(stderr, "FAIL %s (%d failed checks)\n", cases[i].name, lt_current.failures);
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

#define LT_MAIN(...)                                                    \
    lt_state lt_current;                                                \
    int main(int argc, char **argv)                                     \
    {                                                                   \
        static const lt_case cases[] = {__VA_ARGS__};                   \
        return lt_main(argc, argv, cases, sizeof cases / sizeof cases[0]); \
    }

#endif
