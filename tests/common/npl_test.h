/* The one C test harness of tests/ (tests/common): a program lists named
 * cases; `prog` or `prog all` runs them all, `prog CASE [ARG...]` runs one
 * (meson registers one test per case, a model path or other input as
 * ARG), `prog --list` names them. Each case's failed checks are counted
 * and printed with file:line; the run ends with "N passed, N failed" and
 * exits 1 when anything failed, 2 for an unknown case.
 *
 * Programs without a case table (tests/chat) use the checks alone and end
 * with nt_report. Deterministic generators and temporary files for the
 * cases are here too. */
#ifndef NPL_TEST_H
#define NPL_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nt_case {
    const char *name;
    void (*run)(void);
} nt_case;

/* Checks made so far (for nt_report). */
extern unsigned long nt_checks;

/* Records a failed check and prints where (the first 20 of a case). */
void nt_check_failed(const char *file, int line, const char *what);
/* Printf-style detail for the failure just recorded. */
void nt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Failed checks of the running case; lets loops stop after the first. */
int nt_failures(void);
/* The i-th argument after the case name, or NULL. */
const char *nt_arg(int i);

#define CHECK(cond)                                       \
    do {                                                  \
        nt_checks++;                                      \
        if (!(cond))                                      \
            nt_check_failed(__FILE__, __LINE__, #cond);   \
    } while (0)

#define CHECKF(cond, ...)                                 \
    do {                                                  \
        nt_checks++;                                      \
        if (!(cond)) {                                    \
            nt_check_failed(__FILE__, __LINE__, #cond);   \
            nt_note(__VA_ARGS__);                         \
        }                                                 \
    } while (0)

/* Fatal for the case: records the failure and returns. */
#define REQUIRE(cond)                                                        \
    do {                                                                     \
        nt_checks++;                                                         \
        if (!(cond)) {                                                       \
            nt_check_failed(__FILE__, __LINE__, "requirement: " #cond);      \
            return;                                                          \
        }                                                                    \
    } while (0)

/* Fatal for the program (nt_fatal): for tests whose later steps mean
 * nothing after a failed one (a client against a daemon in an unknown
 * state). */
#define ENSURE(cond)                                                                  \
    do {                                                                              \
        nt_checks++;                                                                  \
        if (!(cond))                                                                  \
            nt_fatal("%s:%d: check failed: %s", __FILE__, __LINE__, #cond);           \
    } while (0)

/* A call returning npl_status that must succeed; prints the message. */
#define CHECK_OK(call, errp)                                                 \
    do {                                                                     \
        npl_status st_ = (call);                                             \
        nt_checks++;                                                         \
        if (st_ != NPL_OK) {                                                 \
            nt_check_failed(__FILE__, __LINE__, #call);                      \
            nt_note("  status %d: %s", (int)st_, (errp)->message);           \
        }                                                                    \
    } while (0)

/* A call that must fail with `code` and a message containing `needle`. */
#define CHECK_FAILS(call, code, errp, needle)                                \
    do {                                                                     \
        npl_status st_ = (call);                                             \
        nt_checks++;                                                         \
        if (st_ != (code) || !strstr((errp)->message, (needle))) {           \
            nt_check_failed(__FILE__, __LINE__, #call " fails with " #code); \
            nt_note("  got status %d: '%s' (wanted '%s')", (int)st_,         \
                    (errp)->message, (needle));                              \
        }                                                                    \
    } while (0)

/* Exact float equality by bit pattern (so -0.0 != 0.0 and NaN == NaN). */
#define CHECK_FLOAT_BITS(got, want, idx)                                                 \
    do {                                                                                 \
        float g_ = (got), w_ = (want);                                                   \
        nt_checks++;                                                                     \
        if (nt_float_bits(g_) != nt_float_bits(w_)) {                                    \
            nt_check_failed(__FILE__, __LINE__, #got " == " #want);                      \
            nt_note("  at [%ld]: got %.9g (0x%08x), want %.9g (0x%08x)", (long)(idx), g_, \
                    nt_float_bits(g_), w_, nt_float_bits(w_));                           \
        }                                                                                \
    } while (0)

uint32_t nt_float_bits(float f);
float nt_bits_float(uint32_t u);

/* Returns the process exit status. */
int nt_main(int argc, char **argv, const nt_case *cases, size_t n_cases);

#define NT_MAIN(...)                                                       \
    int main(int argc, char **argv)                                        \
    {                                                                      \
        static const nt_case cases[] = {__VA_ARGS__};                      \
        return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]); \
    }

/* Prints "NAME: N checks, N failed"; returns the process exit status. */
int nt_report(const char *name);

/* Deterministic xorshift64* stream (state must not be 0). */
typedef struct nt_rng {
    uint64_t state;
} nt_rng;

uint64_t nt_rng_next(nt_rng *rng);
/* Uniform in [lo, hi). */
float nt_rng_uniform(nt_rng *rng, float lo, float hi);

/* splitmix64 (any seed), and uniform in [-1, 1) from it. */
typedef struct nt_splitmix {
    uint64_t s;
} nt_splitmix;

uint64_t nt_splitmix_next(nt_splitmix *r);
float nt_splitmix_float(nt_splitmix *r);

/* Index of the largest of v[0..n). */
int32_t nt_argmax(const float *v, uint32_t n);

/* A fresh private directory under $TMPDIR (or /tmp); removed with
 * nt_rmtree. */
char *nt_tempdir(void);
void nt_rmtree(const char *path);
/* Writes a file (creating parent directories); returns 0 on success. */
int nt_write_file(const char *path, const char *text);
/* The whole file, malloc'd with a NUL after its *size bytes; NULL (and a
 * message) when it cannot be read. */
unsigned char *nt_read_file(const char *path, size_t *size);

/* Decodes the len hex digits of s in place (NUL after the bytes); the
 * number of bytes, or -1 for an odd length or a character that is no hex
 * digit (how the test drivers read text from the scripts). */
long nt_unhex(char *s, size_t len);

/* A case cannot go on (an input it needs is missing or unreadable):
 * prints the message and ends the program with a failure. */
void nt_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
