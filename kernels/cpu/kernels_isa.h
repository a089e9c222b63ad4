/* The entry points each *_simd.c source defines once per instruction set,
 * with the ISA's suffix (simd_vec.h's NPL_ISA_FN): included only by files
 * compiled per ISA. Their signatures are the table's (kernel_table.h). */
#ifndef NPL_KERNELS_ISA_H
#define NPL_KERNELS_ISA_H

#include "kernel_table.h"
#include "simd_vec.h"

void NPL_ISA_FN(npl_quantize_act_q8)(const float *x, int64_t n, npl_act_q8 *out);
void NPL_ISA_FN(npl_quantize_act_q8k)(const float *x, int64_t n, npl_act_q8k *out);

#endif
