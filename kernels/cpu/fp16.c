/* IEEE binary16 and bfloat16 <-> binary32 conversions, done on the bit
 * patterns so the result never depends on the compiler, the FPU mode or
 * the presence of F16C: fp16 data in model files must decode identically
 * everywhere. */
#include "ggml_types.h"

#include <string.h>

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float npl_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f && mant == 0)
        return bits_float(sign | 0x7f800000u);
    if (exp == 0x1f) /* NaN: keep the payload, made quiet as F16C does */
        return bits_float(sign | 0x7fc00000u | (mant << 13));
    if (exp != 0) /* rebias 15 -> 127 */
        return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
    if (mant == 0)
        return bits_float(sign);
    /* Subnormal: mant * 2^-24, exact in binary32 (both factors are). */
    float magnitude = (float)mant * 0x1p-24f;
    return sign ? -magnitude : magnitude;
}

/* Shifts m right by `shift` bits rounding to nearest, ties to even. */
static uint32_t shift_right_rne(uint32_t m, unsigned shift)
{
    uint32_t kept = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    return kept;
}

uint16_t npl_fp32_to_fp16(float f)
{
    uint32_t u = float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;

    if (abs > 0x7f800000u) /* NaN: force quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x47800000u) /* >= 65536: inf, or a finite value past it */
        return (uint16_t)(sign | 0x7c00u);

    uint32_t exp = abs >> 23;
    uint32_t mant = abs & 0x7fffffu;
    if (exp >= 113) {
        /* Normal half. Rounding may carry into the exponent, and from
         * exponent 30 into 0x7c00 = inf, which is exactly right. */
        uint32_t h = ((exp - 112u) << 10) | (mant >> 13);
        uint32_t rest = mant & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    if (exp < 102) /* below 2^-25: rounds to zero (2^-25 itself ties to 0) */
        return sign;
    /* Subnormal half in units of 2^-24: (1.mant) * 2^(exp - 127 + 24).
     * A carry out of 0x3ff yields 0x400, the smallest normal: correct. */
    uint32_t m = mant | 0x800000u;
    return (uint16_t)(sign | shift_right_rne(m, 126u - exp));
}

float npl_bf16_to_fp32(uint16_t h)
{
    return bits_float((uint32_t)h << 16);
}

uint16_t npl_fp32_to_bf16(float f)
{
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncating could give inf */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Round to nearest even; overflow carries into inf, as it should. */
    uint32_t bias = 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)((u + bias) >> 16);
}
