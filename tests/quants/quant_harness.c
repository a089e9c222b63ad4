#include "quant_harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The runner is single-threaded and these counters live only for one
 * test process; they are the harness's whole state. */
static int case_failures;
static int case_checks_reported;

void quant_check_failed(const char *file, int line, const char *what)
{
    case_failures++;
    if (case_checks_reported++ < 20)
        fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, what);
}

void quant_note(const char *fmt, ...)
{
    if (case_checks_reported > 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int quant_failures(void)
{
    return case_failures;
}

uint32_t quant_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float quant_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint64_t quant_rng_next(quant_rng *rng)
{
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

float quant_rng_uniform(quant_rng *rng, float lo, float hi)
{
    const float unit = (float)(quant_rng_next(rng) >> 40) * 0x1p-24f;
    return lo + (hi - lo) * unit;
}

int quant_main(int argc, char **argv, const quant_case *cases, size_t n_cases)
{
    int passed = 0, failed = 0, ran = 0;
    for (size_t i = 0; i < n_cases; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        case_failures = 0;
        case_checks_reported = 0;
        cases[i].run();
        ran++;
        if (case_failures) {
            failed++;
            fprintf(stderr, "FAIL %s (%d failed checks)\n", cases[i].name, case_failures);
        } else {
            passed++;
            printf("ok   %s\n", cases[i].name);
        }
    }
    if (ran == 0) {
        fprintf(stderr, "no case named %s\n", argc > 1 ? argv[1] : "(none)");
        return 1;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
