/* npl_act_bias_f32: the portable reference (act_gelu.h) and the dispatch
 * through the kernel table (act_gelu_simd.c at the SIMD levels). */
#include "act_gelu.h"

#include "kernel_table.h"

void npl_act_bias_ref(npl_act_kind act, float *x, const float *bias, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = npl_act_one(act, bias ? x[i] + bias[i] : x[i]);
}

void npl_act_bias_f32(npl_simd_level lv, npl_act_kind act, float *x, const float *bias, size_t n)
{
    npl_kernels(lv)->act_bias(act, x, bias, n);
}
