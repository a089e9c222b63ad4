/* xoshiro256** (Blackman & Vigna) with splitmix64 seeding. */
#include "sampler_rng.h"

static uint64_t splitmix64_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t v, int k)
{
    return (v << k) | (v >> (64 - k));
}

void npl_rng_seed(npl_rng *r, uint64_t seed)
{
    /* splitmix64 never yields four zero words, the one state xoshiro
     * must avoid. */
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64_next(&x);
}

uint64_t npl_rng_next_u64(npl_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

double npl_rng_next_double(npl_rng *r)
{
    return (double)(npl_rng_next_u64(r) >> 11) * 0x1.0p-53;
}
