/* The table of ggml tensor types: names and block geometry as the GGUF
 * format defines them. Ids that ggml removed stay holes (name NULL) so a
 * file using them is rejected instead of misread. */
#include "ggml_types.h"

#include "ggml_blocks.h"

#include <stdint.h>

#define TRAITS(id_, name_, block_, size_, deq_) \
    [id_] = { .name = (name_), .block_size = (block_), .type_size = (size_), .can_dequantize = (deq_) }

static const npl_type_traits type_table[NPL_TYPE_COUNT_MAX] = {
    TRAITS(NPL_TYPE_F32, "f32", 1, 4, true),
    TRAITS(NPL_TYPE_F16, "f16", 1, 2, true),
    TRAITS(NPL_TYPE_Q4_0, "q4_0", NPL_QK4_0, sizeof(npl_block_q4_0), true),
    TRAITS(NPL_TYPE_Q4_1, "q4_1", NPL_QK4_1, sizeof(npl_block_q4_1), true),
    TRAITS(NPL_TYPE_Q5_0, "q5_0", NPL_QK5_0, sizeof(npl_block_q5_0), true),
    TRAITS(NPL_TYPE_Q5_1, "q5_1", NPL_QK5_1, sizeof(npl_block_q5_1), true),
    TRAITS(NPL_TYPE_Q8_0, "q8_0", NPL_QK8_0, sizeof(npl_block_q8_0), true),
    TRAITS(NPL_TYPE_Q8_1, "q8_1", NPL_QK8_1, sizeof(npl_block_q8_1), false),
    TRAITS(NPL_TYPE_Q2_K, "q2_K", NPL_QK_K, sizeof(npl_block_q2_K), true),
    TRAITS(NPL_TYPE_Q3_K, "q3_K", NPL_QK_K, sizeof(npl_block_q3_K), true),
    TRAITS(NPL_TYPE_Q4_K, "q4_K", NPL_QK_K, sizeof(npl_block_q4_K), true),
    TRAITS(NPL_TYPE_Q5_K, "q5_K", NPL_QK_K, sizeof(npl_block_q5_K), true),
    TRAITS(NPL_TYPE_Q6_K, "q6_K", NPL_QK_K, sizeof(npl_block_q6_K), true),
    TRAITS(NPL_TYPE_Q8_K, "q8_K", NPL_QK_K, sizeof(npl_block_q8_K), true),
    /* The iq and tq types: sizes only; no dequantizer here (yet). */
    TRAITS(NPL_TYPE_IQ2_XXS, "iq2_xxs", NPL_QK_K, 66, false),
    TRAITS(NPL_TYPE_IQ2_XS, "iq2_xs", NPL_QK_K, 74, false),
    TRAITS(NPL_TYPE_IQ3_XXS, "iq3_xxs", NPL_QK_K, 98, false),
    TRAITS(NPL_TYPE_IQ1_S, "iq1_s", NPL_QK_K, 50, false),
    TRAITS(NPL_TYPE_IQ4_NL, "iq4_nl", NPL_QK4_NL, sizeof(npl_block_iq4_nl), true),
    TRAITS(NPL_TYPE_IQ3_S, "iq3_s", NPL_QK_K, 110, false),
    TRAITS(NPL_TYPE_IQ2_S, "iq2_s", NPL_QK_K, 82, false),
    TRAITS(NPL_TYPE_IQ4_XS, "iq4_xs", NPL_QK_K, sizeof(npl_block_iq4_xs), true),
    TRAITS(NPL_TYPE_I8, "i8", 1, 1, false),
    TRAITS(NPL_TYPE_I16, "i16", 1, 2, false),
    TRAITS(NPL_TYPE_I32, "i32", 1, 4, false),
    TRAITS(NPL_TYPE_I64, "i64", 1, 8, false),
    TRAITS(NPL_TYPE_F64, "f64", 1, 8, false),
    TRAITS(NPL_TYPE_IQ1_M, "iq1_m", NPL_QK_K, 56, false),
    TRAITS(NPL_TYPE_BF16, "bf16", 1, 2, true),
    TRAITS(NPL_TYPE_TQ1_0, "tq1_0", NPL_QK_K, 54, false),
    TRAITS(NPL_TYPE_TQ2_0, "tq2_0", NPL_QK_K, 66, false),
    TRAITS(NPL_TYPE_MXFP4, "mxfp4", NPL_QK_MXFP4, sizeof(npl_block_mxfp4), true),
};

const npl_type_traits *npl_type_traits_get(uint32_t type)
{
    if (type >= NPL_TYPE_COUNT_MAX || type_table[type].name == NULL)
        return NULL;
    return &type_table[type];
}

size_t npl_type_row_size(uint32_t type, int64_t n)
{
    const npl_type_traits *t = npl_type_traits_get(type);
    if (t == NULL || n < 0 || n % t->block_size != 0)
        return 0;
    uint64_t blocks = (uint64_t)n / t->block_size;
    if (blocks > SIZE_MAX / t->type_size)
        return 0;
    return (size_t)blocks * t->type_size;
}
