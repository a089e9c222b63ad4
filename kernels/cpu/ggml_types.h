/* The ggml tensor types found in GGUF files: ids, block geometry, and the
 * scalar reference dequantizers every faster kernel is tested against. */
#ifndef NPL_GGML_TYPES_H
#define NPL_GGML_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values are the on-disk ggml type ids; never renumber. */
typedef enum npl_ggml_type {
    NPL_TYPE_F32 = 0,
    NPL_TYPE_F16 = 1,
    NPL_TYPE_Q4_0 = 2,
    NPL_TYPE_Q4_1 = 3,
    /* 4 and 5 were Q4_2/Q4_3, removed from ggml */
    NPL_TYPE_Q5_0 = 6,
    NPL_TYPE_Q5_1 = 7,
    NPL_TYPE_Q8_0 = 8,
    NPL_TYPE_Q8_1 = 9,
    NPL_TYPE_Q2_K = 10,
    NPL_TYPE_Q3_K = 11,
    NPL_TYPE_Q4_K = 12,
    NPL_TYPE_Q5_K = 13,
    NPL_TYPE_Q6_K = 14,
    NPL_TYPE_Q8_K = 15,
    NPL_TYPE_IQ2_XXS = 16,
    NPL_TYPE_IQ2_XS = 17,
    NPL_TYPE_IQ3_XXS = 18,
    NPL_TYPE_IQ1_S = 19,
    NPL_TYPE_IQ4_NL = 20,
    NPL_TYPE_IQ3_S = 21,
    NPL_TYPE_IQ2_S = 22,
    NPL_TYPE_IQ4_XS = 23,
    NPL_TYPE_I8 = 24,
    NPL_TYPE_I16 = 25,
    NPL_TYPE_I32 = 26,
    NPL_TYPE_I64 = 27,
    NPL_TYPE_F64 = 28,
    NPL_TYPE_IQ1_M = 29,
    NPL_TYPE_BF16 = 30,
    /* 31-33 were Q4_0_4_4 etc., 34 TQ1_0, 35 TQ2_0, 36-38 removed, 39 MXFP4 */
    NPL_TYPE_TQ1_0 = 34,
    NPL_TYPE_TQ2_0 = 35,
    NPL_TYPE_MXFP4 = 39,
    NPL_TYPE_COUNT_MAX = 40,
} npl_ggml_type;

typedef struct npl_type_traits {
    const char *name;      /* "q4_0", "f16", ... as llama.cpp spells it */
    uint32_t block_size;   /* elements per block (1 for plain types) */
    uint32_t type_size;    /* bytes per block */
    bool can_dequantize;   /* a reference dequantizer exists here */
} npl_type_traits;

/* Traits of a known on-disk type id, or NULL for ids ggml never defined
 * (or removed). The GGUF loader rejects tensors whose type yields NULL. */
const npl_type_traits *npl_type_traits_get(uint32_t type);

/* Bytes needed for a row of n elements; 0 when n is not a multiple of the
 * block size or the type is unknown. */
size_t npl_type_row_size(uint32_t type, int64_t n);

/* Scalar reference: dequantize n elements (n a multiple of block_size) of
 * a type with can_dequantize set. Returns false for other types. */
bool npl_dequantize_row_ref(uint32_t type, const void *src, float *dst, int64_t n);

/* Reference quantizers for the types the fixtures and repacking need
 * (f32, f16, bf16, q8_0, q4_0 at least). Returns false when unsupported. */
bool npl_quantize_row_ref(uint32_t type, const float *src, void *dst, int64_t n);

/* IEEE half and bfloat16 conversions (round-to-nearest-even on the way in). */
float npl_fp16_to_fp32(uint16_t h);
uint16_t npl_fp32_to_fp16(float f);
float npl_bf16_to_fp32(uint16_t h);
uint16_t npl_fp32_to_bf16(float f);

/* 2^(e - 128): half the value of an E8M0 exponent byte, the scale of
 * mxfp4's doubled levels (NPL_MXFP4_LEVELS_X2); exact for every e. */
float npl_e8m0_to_fp32_half(uint8_t e);

#ifdef __cplusplus
}
#endif

#endif
