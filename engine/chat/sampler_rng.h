/* The sampler's pseudo-random generator: xoshiro256** seeded through
 * splitmix64, so one 64-bit seed always yields the same stream on every
 * platform. Each sampler owns its state (no global rand()). */
#ifndef NPL_SAMPLER_RNG_H
#define NPL_SAMPLER_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_rng {
    uint64_t s[4];
} npl_rng;

void npl_rng_seed(npl_rng *r, uint64_t seed);
uint64_t npl_rng_next_u64(npl_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double npl_rng_next_double(npl_rng *r);

#ifdef __cplusplus
}
#endif

#endif
