/* Activation quantization (quant_act.h), written once over simd_vec.h and
 * compiled per instruction set; the same bytes as quant_act.c's
 * reference: the maximum is exact, the scale one IEEE division, the
 * rounding CVTPS2DQ's nearest even, clamped to [-127, 127]. */
#include "kernels_isa.h"

/* q = clamp(round_even(x * id), -127, 127): a NaN gives INT32_MIN, then
 * -127, as the reference does. */
NPL_V_AI vi quant16(vf x, vf id)
{
    return vi_min(vi_max(vi_round(vf_mul(x, id)), vi_set1(-127)), vi_set1(127));
}

/* max(|x|, m) with MAXPS's operand order (new, old): a NaN element leaves
 * the maximum alone, as in the reference. */
NPL_V_AI vf absmax(vf x, vf m)
{
    return vf_max(vf_abs(x), m);
}

void NPL_ISA_FN(npl_quantize_act_q8)(const float *x, int64_t n, npl_act_q8 *out)
{
    for (int64_t b = 0; b < n / NPL_ACT_QK; b++) {
        const float *xb = x + b * NPL_ACT_QK;
        vf x0 = vf_loadu(xb), x1 = vf_loadu(xb + 16);
        float amax = vf_hmax(absmax(x1, absmax(x0, vf_zero())));
        float d = amax / 127.0f;
        vf id = vf_set1(npl_act_inverse_scale(d));
        vi q0 = quant16(x0, id), q1 = quant16(x1, id);
        vi_store_i8(out[b].q, q0);
        vi_store_i8(out[b].q + 16, q1);
        int32_t sum = vi_hsum(vi_add(q0, q1));
        float dh = npl_v_round_f16(d);
        out[b].d = dh;
        out[b].sum = sum;
        out[b].s = dh * (float)sum;
        out[b].nsum8 = -8 * sum;
    }
}

void NPL_ISA_FN(npl_quantize_act_q8k)(const float *x, int64_t n, npl_act_q8k *out)
{
    for (int64_t b = 0; b < n / NPL_ACT_QKK; b++) {
        const float *xb = x + b * NPL_ACT_QKK;
        vf m = vf_zero();
        for (int j = 0; j < NPL_ACT_QKK; j += 16)
            m = absmax(vf_loadu(xb + j), m);
        float d = vf_hmax(m) / 127.0f;
        vf id = vf_set1(npl_act_inverse_scale(d));
        npl_act_q8k *o = &out[b];
        for (int g = 0; g < NPL_ACT_QKK / 16; g++) {
            vi q = quant16(vf_loadu(xb + 16 * g), id);
            vi_store_i8(o->q + 16 * g, q);
            o->bsum16[g] = (int16_t)vi_hsum(q);
        }
        for (int g = 0; g < NPL_ACT_QKK / 32; g++)
            o->bsum32[g] = (int16_t)(o->bsum16[2 * g] + o->bsum16[2 * g + 1]);
        o->d = d;
        o->pad[0] = o->pad[1] = o->pad[2] = 0;
    }
}
