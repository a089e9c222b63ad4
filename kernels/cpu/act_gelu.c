/* npl_act_bias_f32 and npl_act_gated_f32: the portable references
 * (act_gelu.h) and the dispatch through the kernel table (act_gelu_simd.c
 * at the SIMD levels). */
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

void npl_act_gated_ref(npl_act_kind act, float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gate[i] = npl_act_one(act, gate[i]) * up[i];
}

void npl_act_gated_f32(npl_simd_level lv, npl_act_kind act, float *gate, const float *up, size_t n)
{
    npl_kernels(lv)->act_gated(act, gate, up, n);
}
