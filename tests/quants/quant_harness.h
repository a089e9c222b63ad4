/* Tiny runner for the quants suite: each program lists named cases; run
 * with a case name to run just that case (meson registers one test per
 * case), or without arguments to run them all. */
#ifndef NPL_QUANT_HARNESS_H
#define NPL_QUANT_HARNESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct quant_case {
    const char *name;
    void (*run)(void);
} quant_case;

/* Records one failed check and prints where; used through the macros. */
void quant_check_failed(const char *file, int line, const char *what);

/* Printf-style detail for the most recent failure (element index etc.). */
void quant_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Failures so far in the running case; lets loops stop after the first. */
int quant_failures(void);

#define CHECK(cond)                                              \
    do {                                                         \
        if (!(cond))                                             \
            quant_check_failed(__FILE__, __LINE__, #cond);       \
    } while (0)

/* Exact float equality by bit pattern (so -0.0 != 0.0 and NaN == NaN). */
#define CHECK_FLOAT_BITS(got, want, idx)                                          \
    do {                                                                          \
        float g_ = (got), w_ = (want);                                            \
        if (quant_float_bits(g_) != quant_float_bits(w_)) {                      \
            quant_check_failed(__FILE__, __LINE__, #got " == " #want);           \
            quant_note("  at [%ld]: got %.9g (0x%08x), want %.9g (0x%08x)",       \
                       (long)(idx), g_, quant_float_bits(g_), w_, quant_float_bits(w_)); \
        }                                                                         \
    } while (0)

uint32_t quant_float_bits(float f);
float quant_bits_float(uint32_t u);

/* Deterministic xorshift64* stream for property tests. */
typedef struct quant_rng {
    uint64_t state;
} quant_rng;

uint64_t quant_rng_next(quant_rng *rng);
/* Uniform in [lo, hi). */
float quant_rng_uniform(quant_rng *rng, float lo, float hi);

/* Returns the process exit status. */
int quant_main(int argc, char **argv, const quant_case *cases, size_t n_cases);

#endif
