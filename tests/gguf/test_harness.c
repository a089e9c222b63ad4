#include "test_harness.h"

#include <stdio.h>
#include <string.h>

/* Failed checks of the case that is running. */
static int failed_checks;

void test_check_failed(const char *file, int line, const char *expr)
{
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, expr);
    failed_checks++;
}

static bool run_case(const test_case *tc)
{
    failed_checks = 0;
    printf("--- %s\n", tc->name);
    fflush(stdout);
    tc->run();
    printf("%s %s\n", failed_checks ? "FAIL" : "ok  ", tc->name);
    return failed_checks == 0;
}

int test_main(int argc, char **argv, const test_case *cases, size_t n_cases)
{
    int passed = 0, failed = 0;
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n_cases; i++)
            printf("%s\n", cases[i].name);
        return 0;
    }
    for (size_t i = 0; i < n_cases; i++) {
        bool selected = argc <= 1;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], cases[i].name) == 0)
                selected = true;
        if (selected)
            run_case(&cases[i]) ? passed++ : failed++;
    }
    for (int a = 1; a < argc; a++) {
        bool known = false;
        for (size_t i = 0; i < n_cases; i++)
            known = known || strcmp(argv[a], cases[i].name) == 0;
        if (!known) {
            fprintf(stderr, "unknown test case '%s'\n", argv[a]);
            failed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
