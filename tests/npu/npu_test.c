#include "npu_test.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Per-process counters of the running case: the harness's only state. */
static int case_failures;
static int case_reports;

void npu_check_failed(const char *file, int line, const char *what)
{
    case_failures++;
    if (case_reports++ < 20)
        fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, what);
}

void npu_note(const char *fmt, ...)
{
    if (case_reports > 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int npu_failures(void)
{
    return case_failures;
}

uint64_t npu_rng_next(npu_rng *rng)
{
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

float npu_rng_uniform(npu_rng *rng, float lo, float hi)
{
    float unit = (float)(npu_rng_next(rng) >> 40) * 0x1p-24f;
    return lo + (hi - lo) * unit;
}

char *npu_tempdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/npullm-npu-XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    if (!dir) {
        fprintf(stderr, "mkdtemp failed: %s\n", strerror(errno));
        exit(99);
    }
    return strdup(dir);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void npu_rmtree(const char *path)
{
    if (path)
        nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void make_parents(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
}

int npu_write_file(const char *path, const char *text)
{
    make_parents(path);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

int npu_main(int argc, char **argv, const npu_case *cases, size_t n_cases)
{
    int passed = 0, failed = 0, ran = 0;
    for (size_t i = 0; i < n_cases; i++) {
        if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
            continue;
        case_failures = 0;
        case_reports = 0;
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
        return 2;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
