#include "quant_act.h"

#include <math.h>

#include "ggml_types.h"
#include "kernel_table.h"

/* Round to nearest even and clamp; a NaN (from a NaN or infinite input)
 * gives -127, as the SIMD conversion's "integer indefinite" does. */
static int quant_round(float v)
{
    if (!(v >= -2147483648.0f && v < 2147483648.0f))
        return -127;
    long q = lrintf(v);
    return q > 127 ? 127 : q < -127 ? -127 : (int)q;
}

void npl_quantize_act_q8_ref(const float *x, int64_t n, npl_act_q8 *out)
{
    for (int64_t b = 0; b < n / NPL_ACT_QK; b++) {
        const float *xb = x + b * NPL_ACT_QK;
        float amax = 0.0f;
        for (int j = 0; j < NPL_ACT_QK; j++) {
            float a = fabsf(xb[j]);
            if (a > amax)
                amax = a;
        }
        float d = amax / 127.0f;
        float id = npl_act_inverse_scale(d);
        int sum = 0;
        for (int j = 0; j < NPL_ACT_QK; j++) {
            int q = quant_round(xb[j] * id);
            out[b].q[j] = (int8_t)q;
            sum += q;
        }
        /* The scale is kept at half precision, like the weights' scales
         * and like llama.cpp's 8-bit activations. */
        out[b].d = npl_fp16_to_fp32(npl_fp32_to_fp16(d));
        out[b].sum = sum;
        out[b].s = out[b].d * (float)sum;
        out[b].nsum8 = -8 * sum;
    }
}

void npl_quantize_act_q8k_ref(const float *x, int64_t n, npl_act_q8k *out)
{
    for (int64_t b = 0; b < n / NPL_ACT_QKK; b++) {
        const float *xb = x + b * NPL_ACT_QKK;
        float amax = 0.0f;
        for (int j = 0; j < NPL_ACT_QKK; j++) {
            float a = fabsf(xb[j]);
            if (a > amax)
                amax = a;
        }
        float d = amax / 127.0f;
        float id = npl_act_inverse_scale(d);
        npl_act_q8k *o = &out[b];
        for (int g = 0; g < NPL_ACT_QKK / 16; g++) {
            int sum = 0;
            for (int j = 16 * g; j < 16 * g + 16; j++) {
                int q = quant_round(xb[j] * id);
                o->q[j] = (int8_t)q;
                sum += q;
            }
            o->bsum16[g] = (int16_t)sum;
        }
        for (int g = 0; g < NPL_ACT_QKK / 32; g++)
            o->bsum32[g] = (int16_t)(o->bsum16[2 * g] + o->bsum16[2 * g + 1]);
        o->d = d;
        o->pad[0] = o->pad[1] = o->pad[2] = 0;
    }
}

void npl_quantize_act_q8(npl_simd_level lv, const float *x, int64_t n, npl_act_q8 *out)
{
    npl_kernels(lv)->quantize_q8(x, n, out);
}

void npl_quantize_act_q8k(npl_simd_level lv, const float *x, int64_t n, npl_act_q8k *out)
{
    npl_kernels(lv)->quantize_q8k(x, n, out);
}
