/* The activations with a bias or gated (act_gelu.h) written once over
 * simd_vec.h: element-wise, the same IEEE steps as npl_act_one, so the
 * same bits at every level. */
#include "act_gelu.h"
#include "kernels_isa.h"

/* z(x) on 16 lanes, npl_act_z's steps. */
NPL_V_AI vf act_z(npl_act_kind act, vf x)
{
    switch (act) {
    case NPL_ACT_GELU_TANH: {
        vf p = vf_add(vf_mul(vf_set1(0.044715f), vf_mul(x, x)), vf_set1(1.0f));
        return vf_mul(vf_mul(vf_set1(1.5957691216057308f), x), p);
    }
    case NPL_ACT_GELU_QUICK:
        return vf_mul(vf_set1(1.702f), x);
    default:
        return x;
    }
}

/* x = act(x + bias) [* up]; bias and up may be NULL. act is a constant
 * in each call of act_any, so each gets its own loop. */
NPL_V_AI void act_run(npl_act_kind act, float *x, const float *bias, const float *up, size_t n)
{
    const vf one = vf_set1(1.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vf v = vf_loadu(x + i);
        if (bias)
            v = vf_add(v, vf_loadu(bias + i));
        vf z = act_z(act, v);
        vf t = vf_exp_neg(vf_neg_abs(z));
        vf s = vf_div(vf_select_ge0(z, one, t), vf_add(one, t));
        vf a = vf_mul(v, s);
        vf_storeu(x + i, up ? vf_mul(a, vf_loadu(up + i)) : a);
    }
    for (; i < n; i++) {
        float a = npl_act_one(act, bias ? x[i] + bias[i] : x[i]);
        x[i] = up ? a * up[i] : a;
    }
}

/* act_run with act as a constant. */
NPL_V_AI void act_any(npl_act_kind act, float *x, const float *bias, const float *up, size_t n)
{
    switch (act) {
    case NPL_ACT_GELU_TANH:
        act_run(NPL_ACT_GELU_TANH, x, bias, up, n);
        break;
    case NPL_ACT_GELU_QUICK:
        act_run(NPL_ACT_GELU_QUICK, x, bias, up, n);
        break;
    default:
        act_run(NPL_ACT_SILU, x, bias, up, n);
        break;
    }
}

void NPL_ISA_FN(npl_act_bias)(npl_act_kind act, float *x, const float *bias, size_t n)
{
    act_any(act, x, bias, NULL, n);
}

void NPL_ISA_FN(npl_act_gated)(npl_act_kind act, float *gate, const float *up, size_t n)
{
    act_any(act, gate, NULL, up, n);
}
