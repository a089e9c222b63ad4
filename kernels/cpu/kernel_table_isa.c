/* This instruction set's row of the dispatch table (kernel_table.h),
 * compiled once per ISA like the kernels it points to. */
#include "kernels_isa.h"

#ifndef __AVX512BF16__
const npl_kernel_table NPL_ISA_FN(npl_kernel_table) = {
    .quantize_q8 = NPL_ISA_FN(npl_quantize_act_q8),
    .quantize_q8k = NPL_ISA_FN(npl_quantize_act_q8k),
    .act_to_bf16 = NPL_ISA_FN(npl_act_to_bf16),
    .float_matmul = NPL_ISA_FN(npl_float_matmul),
    .bf16_matmul = NPL_ISA_FN(npl_bf16_matmul),
    .packed_matmul = NPL_ISA_FN(npl_packed_matmul),
    .attention = NPL_ISA_FN(npl_attention),
    .attention_rows = NPL_ISA_FN(npl_attention_rows),
    .attention_nc = NPL_ISA_FN(npl_attention_nc),
    .act_bias = NPL_ISA_FN(npl_act_bias),
    .act_gated = NPL_ISA_FN(npl_act_gated),
    .scale_row = NPL_ISA_FN(npl_scale_row),
    .f16_to_f32_row = NPL_ISA_FN(npl_f16_to_f32_row),
    .f32_to_f16_row = NPL_ISA_FN(npl_f32_to_f16_row),
    .deltanet_step = NPL_ISA_FN(npl_deltanet_step),
};
#endif
