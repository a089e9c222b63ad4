/* Tiny runner for the npu suite: a program lists named cases; given a
 * case name it runs that case only (meson registers one test per case),
 * otherwise all of them. */
#ifndef NPU_TEST_H
#define NPU_TEST_H

#include <stddef.h>
#include <stdint.h>

typedef struct npu_case {
    const char *name;
    void (*run)(void);
} npu_case;

void npu_check_failed(const char *file, int line, const char *what);
void npu_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int npu_failures(void);

#define CHECK(cond)                                         \
    do {                                                    \
        if (!(cond))                                        \
            npu_check_failed(__FILE__, __LINE__, #cond);    \
    } while (0)

/* A call returning npl_status that must succeed; prints the message. */
#define CHECK_OK(call, errp)                                                    \
    do {                                                                        \
        npl_status st_ = (call);                                                \
        if (st_ != NPL_OK) {                                                    \
            npu_check_failed(__FILE__, __LINE__, #call);                        \
            npu_note("  status %d: %s", (int)st_, (errp)->message);             \
        }                                                                       \
    } while (0)

/* A call that must fail with `code` and a message containing `needle`. */
#define CHECK_FAILS(call, code, errp, needle)                                   \
    do {                                                                        \
        npl_status st_ = (call);                                                \
        if (st_ != (code) || !strstr((errp)->message, (needle))) {              \
            npu_check_failed(__FILE__, __LINE__, #call " fails with " #code);   \
            npu_note("  got status %d: '%s' (wanted '%s')", (int)st_,           \
                     (errp)->message, (needle));                                \
        }                                                                       \
    } while (0)

typedef struct npu_rng {
    uint64_t state;
} npu_rng;

uint64_t npu_rng_next(npu_rng *rng);
float npu_rng_uniform(npu_rng *rng, float lo, float hi);

/* A fresh private directory under $TMPDIR (or /tmp); removed with
 * npu_rmtree. */
char *npu_tempdir(void);
void npu_rmtree(const char *path);
/* Writes a file (creating parent directories); returns 0 on success. */
int npu_write_file(const char *path, const char *text);

int npu_main(int argc, char **argv, const npu_case *cases, size_t n_cases);

#endif
