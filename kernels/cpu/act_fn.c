#include "act_fn.h"

#include "kernel_table.h"

void npl_swiglu_ref(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gate[i] = npl_swiglu_one(gate[i], up[i]);
}

void npl_swiglu_f32(npl_simd_level lv, float *gate, const float *up, size_t n)
{
    npl_kernels(lv)->swiglu(gate, up, n);
}
