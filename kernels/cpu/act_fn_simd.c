/* SwiGLU (act_fn.h) written once over simd_vec.h: element-wise, the same
 * IEEE steps as act_fn.c's reference, so the same bits at every level. */
#include "act_fn.h"
#include "kernels_isa.h"

void NPL_ISA_FN(npl_swiglu)(float *gate, const float *up, size_t n)
{
    const vf one = vf_set1(1.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vf g = vf_loadu(gate + i);
        vf e = vf_exp_neg(vf_neg_abs(g));
        vf sig = vf_div(vf_select_ge0(g, one, e), vf_add(one, e));
        vf_storeu(gate + i, vf_mul(vf_mul(g, sig), vf_loadu(up + i)));
    }
    for (; i < n; i++)
        gate[i] = npl_swiglu_one(gate[i], up[i]);
}
