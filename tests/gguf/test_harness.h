/* Minimal test runner: each program registers named cases; `prog NAME`
 * runs one (meson registers one test per case), `prog` runs them all.
 * Prints the closing line "N passed, N failed". */
#ifndef NPL_TEST_HARNESS_H
#define NPL_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct test_case {
    const char *name;
    void (*run)(void);
} test_case;

/* Records a failed check; used through CHECK. */
void test_check_failed(const char *file, int line, const char *expr);

#define CHECK(cond)                                              \
    do {                                                         \
        if (!(cond))                                             \
            test_check_failed(__FILE__, __LINE__, #cond);        \
    } while (0)

/* Returns the process exit status. */
int test_main(int argc, char **argv, const test_case *cases, size_t n_cases);

#endif
