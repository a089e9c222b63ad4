/* tests/common/npl_test.h */
#include "npl_test.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npl_hex.h"

/* One process runs its cases one by one: these are the harness's state. */
unsigned long nt_checks;
static int case_failures;
static int case_reports;
static int case_argc;
static char **case_argv;

enum { REPORTS_PER_CASE = 20 };

void nt_check_failed(const char *file, int line, const char *what)
{
    case_failures++;
    if (case_reports++ < REPORTS_PER_CASE)
        fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, what);
}

void nt_note(const char *fmt, ...)
{
    if (case_reports > REPORTS_PER_CASE)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int nt_failures(void)
{
    return case_failures;
}

const char *nt_arg(int i)
{
    return i >= 0 && i < case_argc ? case_argv[i] : NULL;
}

static bool run_case(const nt_case *c)
{
    case_failures = 0;
    case_reports = 0;
    c->run();
    if (case_failures) {
        fprintf(stderr, "FAIL %s (%d failed checks)\n", c->name, case_failures);
        return false;
    }
    printf("ok   %s\n", c->name);
    fflush(stdout);
    return true;
}

int nt_main(int argc, char **argv, const nt_case *cases, size_t n_cases)
{
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n_cases; i++)
            printf("%s\n", cases[i].name);
        return 0;
    }
    bool all = argc < 2 || strcmp(argv[1], "all") == 0;
    int passed = 0, failed = 0;
    if (!all) {
        case_argc = argc - 2;
        case_argv = argv + 2;
    }
    for (size_t i = 0; i < n_cases; i++) {
        if (!all && strcmp(argv[1], cases[i].name) != 0)
            continue;
        run_case(&cases[i]) ? passed++ : failed++;
    }
    if (passed + failed == 0) {
        fprintf(stderr, "no test case named '%s'\n", argc > 1 ? argv[1] : "(none)");
        return 2;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

int nt_report(const char *name)
{
    printf("%s: %lu checks, %d failed\n", name, nt_checks, case_failures);
    return case_failures ? 1 : 0;
}

uint32_t nt_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float nt_bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint64_t nt_rng_next(nt_rng *rng)
{
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

float nt_rng_uniform(nt_rng *rng, float lo, float hi)
{
    const float unit = (float)(nt_rng_next(rng) >> 40) * 0x1p-24f;
    return lo + (hi - lo) * unit;
}

uint64_t nt_splitmix_next(nt_splitmix *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float nt_splitmix_float(nt_splitmix *r)
{
    return (float)((double)(nt_splitmix_next(r) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

int32_t nt_argmax(const float *v, uint32_t n)
{
    int32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = (int32_t)i;
    return best;
}

char *nt_tempdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/npullm-test-XXXXXX", base && *base ? base : "/tmp");
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

void nt_rmtree(const char *path)
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

int nt_write_file(const char *path, const char *text)
{
    make_parents(path);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

unsigned char *nt_read_file(const char *path, size_t *size)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    unsigned char *data = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n + 1) : NULL;
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    }
    if (f)
        fclose(f);
    if (!data) {
        fprintf(stderr, "cannot read %s\n", path ? path : "(no file given)");
        return NULL;
    }
    data[n] = '\0';
    *size = (size_t)n;
    return data;
}

void nt_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FATAL ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

long nt_unhex(char *s, size_t len)
{
    if (len % 2)
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = npl_hex_digit((unsigned char)s[2 * i]), lo = npl_hex_digit((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        s[i] = (char)(hi * 16 + lo); /* in place: i < 2i */
    }
    s[len / 2] = '\0';
    return (long)(len / 2);
}
