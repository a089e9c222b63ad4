/* fp16 and bf16 conversions: exhaustive over every 16-bit pattern, checked
 * against the rounding definition on a dense sample of floats, against the
 * F16C instructions when the CPU has them, and on hand-picked edges. */
#include "ggml_types.h"
#include "npl_test.h"

#include <math.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#endif

static bool half_is_nan(uint16_t h)
{
    return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
}

static bool bf16_is_nan(uint16_t h)
{
    return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
}

/* Every non-NaN half survives half -> float -> half bit for bit; every
 * NaN stays a NaN of the same sign. */
static void fp16_round_trip_all(void)
{
    for (uint32_t i = 0; i < 65536 && !nt_failures(); i++) {
        const uint16_t h = (uint16_t)i;
        const float f = npl_fp16_to_fp32(h);
        const uint16_t back = npl_fp32_to_fp16(f);
        if (half_is_nan(h)) {
            CHECK(isnan(f));
            CHECK(half_is_nan(back));
            CHECK((back & 0x8000u) == (h & 0x8000u));
        } else {
            CHECK(back == h);
        }
        if (nt_failures())
            nt_note("  half 0x%04x -> %.9g -> 0x%04x", h, f, back);
    }
}

/* The decoded value from first principles: (-1)^s * 2^(e-15) * 1.m, or
 * 2^-14 * 0.m for subnormals, computed in double. */
static void fp16_to_fp32_matches_definition(void)
{
    for (uint32_t i = 0; i < 65536 && !nt_failures(); i++) {
        const uint16_t h = (uint16_t)i;
        const int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31)
            continue;
        double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        if (h & 0x8000u)
            v = -v;
        CHECK_FLOAT_BITS(npl_fp16_to_fp32(h), (float)v, i);
    }
    CHECK(npl_fp16_to_fp32(0x7c00) == INFINITY);
    CHECK(npl_fp16_to_fp32(0xfc00) == -INFINITY);
}

/* Checks that h is the correctly rounded half of f: no other half is
 * nearer, and on a tie the mantissa is even. Finite f only. */
static bool is_nearest_even_half(float f, uint16_t h)
{
    const double x = f;
    if (half_is_nan(h))
        return false;
    /* Overflow: RNE sends |x| >= 65520 (half-way to 2^16) to inf. */
    if (fabs(x) >= 65520.0)
        return (h & 0x7fffu) == 0x7c00u && ((h & 0x8000u) != 0) == (signbit(f) != 0);
    if ((h & 0x7fffu) >= 0x7c00u)
        return false;
    const double v = npl_fp16_to_fp32(h);
    if (x != 0.0 && v != 0.0 && (signbit(f) != 0) != (signbit((float)v) != 0))
        return false;
    const double err = fabs(x - v);
    /* Neighbours on each side (same sign, magnitude +-1 ulp). */
    const uint16_t mag = h & 0x7fffu;
    const uint16_t sign = h & 0x8000u;
    if (mag < 0x7bffu) {
        const double up = npl_fp16_to_fp32((uint16_t)(sign | (mag + 1)));
        if (fabs(x - up) < err || (fabs(x - up) == err && (mag & 1u)))
            return false;
    }
    if (mag > 0) {
        const double down = npl_fp16_to_fp32((uint16_t)(sign | (mag - 1)));
        if (fabs(x - down) < err || (fabs(x - down) == err && (mag & 1u)))
            return false;
    }
    /* Values of the other sign are farther than zero, which is checked
     * through the mag - 1 neighbour chain ending at +-0. */
    return true;
}

static void fp32_to_fp16_rounds_to_nearest_even(void)
{
    /* A stride through all 2^32 patterns ... */
    for (uint64_t u = 0; u < (1ull << 32) && !nt_failures(); u += 1021) {
        const float f = nt_bits_float((uint32_t)u);
        if (isnan(f))
            continue;
        const uint16_t h = npl_fp32_to_fp16(f);
        CHECK(is_nearest_even_half(f, h));
        if (nt_failures())
            nt_note("  float 0x%08x (%.9g) -> 0x%04x", (uint32_t)u, f, h);
    }
    /* ... and, around every finite half, the value itself, the exact
     * midpoint to the next half and the floats on either side of it. */
    for (uint32_t i = 0; i < 0x7c00u && !nt_failures(); i++) {
        const float lo = npl_fp16_to_fp32((uint16_t)i);
        const float hi = i + 1 < 0x7c00u ? npl_fp16_to_fp32((uint16_t)(i + 1)) : 65536.0f;
        const float mid = (float)(((double)lo + (double)hi) / 2.0);
        const float probes[] = { lo, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY) };
        for (int p = 0; p < 4; p++) {
            for (int s = 0; s < 2; s++) {
                const float f = s ? -probes[p] : probes[p];
                const uint16_t h = npl_fp32_to_fp16(f);
                CHECK(is_nearest_even_half(f, h));
                if (nt_failures()) {
                    nt_note("  float %a -> 0x%04x", (double)f, h);
                    return;
                }
            }
        }
    }
}

static void fp16_edge_cases(void)
{
    static const struct { uint32_t f; uint16_t h; } cases[] = {
        { 0x00000000u, 0x0000 }, /* +0 */
        { 0x80000000u, 0x8000 }, /* -0 keeps its sign */
        { 0x3f800000u, 0x3c00 }, /* 1 */
        { 0xc0000000u, 0xc000 }, /* -2 */
        { 0x3dcccccdu, 0x2e66 }, /* 0.1f: 0x2e66 is 0.0999755859375, nearest */
        { 0x477fe000u, 0x7bff }, /* 65504, the largest half */
        { 0x477fefffu, 0x7bff }, /* just below half-way to 65536 */
        { 0x477ff000u, 0x7c00 }, /* 65520 ties; 0x7bff is odd -> rounds up to inf */
        { 0x47800000u, 0x7c00 }, /* 65536 */
        { 0x501502f9u, 0x7c00 }, /* 1e10 */
        { 0x7f7fffffu, 0x7c00 }, /* FLT_MAX */
        { 0x7f800000u, 0x7c00 }, /* +inf */
        { 0xff800000u, 0xfc00 }, /* -inf */
        { 0x38800000u, 0x0400 }, /* 2^-14, smallest normal half */
        { 0x387fc000u, 0x03ff }, /* largest subnormal half */
        { 0x387fe000u, 0x0400 }, /* tie between 0x03ff and 0x0400 -> even 0x0400 */
        { 0x33800000u, 0x0001 }, /* 2^-24, smallest subnormal */
        { 0x33000000u, 0x0000 }, /* 2^-25: tie between 0 and 2^-24 -> 0 */
        { 0x33000001u, 0x0001 }, /* just above that tie */
        { 0x33c00000u, 0x0002 }, /* 1.5 * 2^-24: tie between 1 and 2 -> 2 */
        { 0x34200000u, 0x0002 }, /* 2.5 * 2^-24: tie between 2 and 3 -> 2 */
        { 0xb3c00000u, 0x8002 }, /* negative subnormal tie */
        { 0x00000001u, 0x0000 }, /* float subnormal -> 0 */
        { 0x80000001u, 0x8000 },
        { 0x3f801000u, 0x3c00 }, /* 1 + 2^-11: tie -> even 0x3c00 */
        { 0x3f803000u, 0x3c02 }, /* 1 + 3*2^-11: tie -> even 0x3c02 */
        { 0x3f801001u, 0x3c01 }, /* just above the tie */
        { 0x3f7ff000u, 0x3c00 }, /* 1 - 2^-12: tie between 0x3bff and 0x3c00 -> 0x3c00 */
        { 0x7fc00000u, 0x7e00 }, /* quiet NaN */
        { 0xffc00000u, 0xfe00 }, /* negative NaN keeps its sign */
        { 0x7f800001u, 0x7e00 }, /* signalling NaN whose payload would vanish: still NaN */
        { 0x7fa02000u, 0x7f01 }, /* NaN payload top bits are kept, made quiet */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint16_t h = npl_fp32_to_fp16(nt_bits_float(cases[i].f));
        CHECK(h == cases[i].h);
        if (h != cases[i].h)
            nt_note("  case %zu: 0x%08x -> 0x%04x, want 0x%04x", i, cases[i].f, h, cases[i].h);
    }
    static const struct { uint16_t h; uint32_t f; } back[] = {
        { 0x0001, 0x33800000u }, /* 2^-24 */
        { 0x8001, 0xb3800000u },
        { 0x03ff, 0x387fc000u }, /* 1023 * 2^-24 */
        { 0x0400, 0x38800000u },
        { 0x3555, 0x3eaaa000u }, /* 0.333251953125 */
        { 0x7bff, 0x477fe000u },
        { 0x7c00, 0x7f800000u },
        { 0xfc00, 0xff800000u },
        { 0x7e00, 0x7fc00000u },
        { 0x7c01, 0x7fc02000u }, /* signalling half NaN comes back quiet */
        { 0xfdff, 0xffffe000u },
        { 0x8000, 0x80000000u },
    };
    for (size_t i = 0; i < sizeof back / sizeof back[0]; i++)
        CHECK_FLOAT_BITS(npl_fp16_to_fp32(back[i].h), nt_bits_float(back[i].f), i);
}

#ifdef HAVE_X86
/* GCC's __builtin_cpu_supports knows "f16c"; clang 14's does not, so
 * there we ask for usable AVX (F16C is VEX-encoded) plus the CPUID bit. */
static bool cpu_has_f16c(void)
{
    __builtin_cpu_init();
#if defined(__clang__)
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
#else
    return __builtin_cpu_supports("f16c");
#endif
}

__attribute__((target("f16c"))) static uint16_t hw_fp32_to_fp16(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

__attribute__((target("f16c"))) static float hw_fp16_to_fp32(uint16_t h)
{
    return _cvtsh_ss(h);
}
#endif

/* Bit-for-bit agreement with the hardware converter, NaNs included. */
static void fp16_matches_f16c(void)
{
#ifdef HAVE_X86
    if (!cpu_has_f16c()) {
        printf("  (no F16C on this CPU: skipped)\n");
        return;
    }
    for (uint32_t i = 0; i < 65536 && !nt_failures(); i++)
        CHECK_FLOAT_BITS(npl_fp16_to_fp32((uint16_t)i), hw_fp16_to_fp32((uint16_t)i), i);
    for (uint64_t u = 0; u < (1ull << 32) && !nt_failures(); u += 997) {
        const float f = nt_bits_float((uint32_t)u);
        const uint16_t mine = npl_fp32_to_fp16(f), hw = hw_fp32_to_fp16(f);
        CHECK(mine == hw);
        if (mine != hw)
            nt_note("  float 0x%08x: 0x%04x vs F16C 0x%04x", (uint32_t)u, mine, hw);
    }
    /* Every tie and near-tie around each half, both signs. */
    for (uint32_t i = 0; i < 0x7c00u && !nt_failures(); i++) {
        /* For normal halves the float midpoint is 0x1000 bits above. */
        static const int32_t offsets[] = { -1, 0, 1, 0xfff, 0x1000, 0x1001 };
        const uint32_t lo = nt_float_bits(npl_fp16_to_fp32((uint16_t)i));
        for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
            const uint32_t u = lo + (uint32_t)offsets[k];
            const float f = nt_bits_float(u), nf = -f;
            CHECK(npl_fp32_to_fp16(f) == hw_fp32_to_fp16(f));
            CHECK(npl_fp32_to_fp16(nf) == hw_fp32_to_fp16(nf));
            if (nt_failures()) {
                nt_note("  float 0x%08x", u);
                break;
            }
        }
    }
#else
    printf("  (not x86: skipped)\n");
#endif
}

static void bf16_round_trip_all(void)
{
    for (uint32_t i = 0; i < 65536 && !nt_failures(); i++) {
        const uint16_t h = (uint16_t)i;
        const float f = npl_bf16_to_fp32(h);
        CHECK(nt_float_bits(f) == (uint32_t)h << 16);
        const uint16_t back = npl_fp32_to_bf16(f);
        if (bf16_is_nan(h)) {
            CHECK(isnan(f));
            CHECK(bf16_is_nan(back));
        } else {
            CHECK(back == h);
        }
        if (nt_failures())
            nt_note("  bf16 0x%04x -> 0x%04x", h, back);
    }
}

/* Nearest-even, checked on the bits: the dropped low half decides. */
static void bf16_rounds_to_nearest_even(void)
{
    for (uint64_t u = 0; u < (1ull << 32) && !nt_failures(); u += 1009) {
        const uint32_t x = (uint32_t)u;
        const uint16_t h = npl_fp32_to_bf16(nt_bits_float(x));
        if ((x & 0x7fffffffu) > 0x7f800000u) {
            CHECK(bf16_is_nan(h));
            CHECK((h & 0x8000u) == (x >> 16 & 0x8000u));
            continue;
        }
        const uint32_t kept = x >> 16, dropped = x & 0xffffu;
        uint32_t want = kept;
        if (dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u)))
            want++;
        CHECK(h == (uint16_t)want);
        if (nt_failures())
            nt_note("  float 0x%08x -> 0x%04x", x, h);
    }
}

static void bf16_edge_cases(void)
{
    static const struct { uint32_t f; uint16_t h; } cases[] = {
        { 0x3f800000u, 0x3f80 }, /* 1 */
        { 0x3f808000u, 0x3f80 }, /* tie, 0x3f80 even -> down */
        { 0x3f818000u, 0x3f82 }, /* tie, 0x3f81 odd -> up */
        { 0x3f808001u, 0x3f81 }, /* above the tie */
        { 0x3f807fffu, 0x3f80 }, /* below the tie */
        { 0x7f7fffffu, 0x7f80 }, /* FLT_MAX overflows to inf */
        { 0x7f7f7fffu, 0x7f7f }, /* largest value that does not */
        { 0x7f800000u, 0x7f80 }, /* +inf */
        { 0xff800000u, 0xff80 }, /* -inf */
        { 0x7f800001u, 0x7fc0 }, /* NaN whose truncation would read as inf */
        { 0xff800001u, 0xffc0 },
        { 0x7fc00000u, 0x7fc0 },
        { 0x7fff0000u, 0x7fff },
        { 0x00008000u, 0x0000 }, /* subnormal tie -> even 0 */
        { 0x00018000u, 0x0002 }, /* subnormal tie -> even 2 */
        { 0x80000000u, 0x8000 }, /* -0 */
        { 0x40490fdbu, 0x4049 }, /* pi: 0x0fdb dropped, below half */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint16_t h = npl_fp32_to_bf16(nt_bits_float(cases[i].f));
        CHECK(h == cases[i].h);
        if (h != cases[i].h)
            nt_note("  case %zu: 0x%08x -> 0x%04x, want 0x%04x", i, cases[i].f, h, cases[i].h);
    }
}

static const nt_case cases[] = {
    { "fp16_round_trip_all", fp16_round_trip_all },
    { "fp16_to_fp32_matches_definition", fp16_to_fp32_matches_definition },
    { "fp32_to_fp16_rounds_to_nearest_even", fp32_to_fp16_rounds_to_nearest_even },
    { "fp16_edge_cases", fp16_edge_cases },
    { "fp16_matches_f16c", fp16_matches_f16c },
    { "bf16_round_trip_all", bf16_round_trip_all },
    { "bf16_rounds_to_nearest_even", bf16_rounds_to_nearest_even },
    { "bf16_edge_cases", bf16_edge_cases },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
