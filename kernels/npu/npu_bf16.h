/* bfloat16 helpers for the NPU code paths that touch every element (the
 * emulated kernel groups, the Q4NX matvec): inline so the hot loops do not
 * pay a call per element. Rounding matches npl_fp32_to_bf16 (nearest-even,
 * NaN stays NaN); a test checks the two agree. */
#ifndef NPL_NPU_BF16_H
#define NPL_NPU_BF16_H

#include <stdint.h>
#include <string.h>

static inline float npu_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t npu_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The value an NPU sees after an f32 result is stored as bf16. */
static inline float npu_round_bf16(float f)
{
    return npu_bf16_to_f32(npu_f32_to_bf16(f));
}

#endif
