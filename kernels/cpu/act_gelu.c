/* npl_act_bias_f32: portable, AVX2 and AVX-512 versions of the same
 * operation sequence (act_gelu.h). */
#include "act_gelu.h"

#include "fast_exp.h"

/* z(x): the sigmoid's argument. */
static inline float act_z(npl_act_kind act, float x)
{
    switch (act) {
    case NPL_ACT_GELU_TANH: {
        float x2 = x * x;
        float p = 0.044715f * x2 + 1.0f;
        return (1.5957691216057308f * x) * p; /* 2 sqrt(2/pi) */
    }
    case NPL_ACT_GELU_QUICK:
        return 1.702f * x;
    default:
        return x;
    }
}

static inline float act_one(npl_act_kind act, float x)
{
    float z = act_z(act, x);
    float t = npl_exp_neg(-fabsf(z));
    float s = (z >= 0.0f ? 1.0f : t) / (1.0f + t);
    return x * s;
}

static void act_ref(npl_act_kind act, float *x, const float *bias, size_t n, size_t i)
{
    for (; i < n; i++)
        x[i] = act_one(act, bias ? x[i] + bias[i] : x[i]);
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void act_avx512(npl_act_kind act, float *x, const float *bias, size_t n)
{
    size_t i = 0;
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        if (bias)
            v = _mm512_add_ps(v, _mm512_loadu_ps(bias + i));
        __m512 z;
        if (act == NPL_ACT_GELU_TANH) {
            __m512 p = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), _mm512_mul_ps(v, v)), one);
            z = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(1.5957691216057308f), v), p);
        } else if (act == NPL_ACT_GELU_QUICK) {
            z = _mm512_mul_ps(_mm512_set1_ps(1.702f), v);
        } else {
            z = v;
        }
        __m512 az = _mm512_abs_ps(z);
        __m512 t = npl_exp_neg_avx512(_mm512_sub_ps(_mm512_setzero_ps(), az));
        __mmask16 pos = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_GE_OQ);
        __m512 num = _mm512_mask_blend_ps(pos, t, one);
        __m512 s = _mm512_div_ps(num, _mm512_add_ps(one, t));
        _mm512_storeu_ps(x + i, _mm512_mul_ps(v, s));
    }
    act_ref(act, x, bias, n, i);
}

__attribute__((target("avx2,fma"))) static void act_avx2(npl_act_kind act, float *x, const float *bias, size_t n)
{
    size_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (bias)
            v = _mm256_add_ps(v, _mm256_loadu_ps(bias + i));
        __m256 z;
        if (act == NPL_ACT_GELU_TANH) {
            __m256 p = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), _mm256_mul_ps(v, v)), one);
            z = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(1.5957691216057308f), v), p);
        } else if (act == NPL_ACT_GELU_QUICK) {
            z = _mm256_mul_ps(_mm256_set1_ps(1.702f), v);
        } else {
            z = v;
        }
        __m256 t = npl_exp_neg_avx2(_mm256_or_ps(z, sign)); /* -|z| */
        __m256 pos = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_GE_OQ);
        __m256 num = _mm256_blendv_ps(t, one, pos);
        __m256 s = _mm256_div_ps(num, _mm256_add_ps(one, t));
        _mm256_storeu_ps(x + i, _mm256_mul_ps(v, s));
    }
    act_ref(act, x, bias, n, i);
}
#endif

void npl_act_bias_f32(npl_simd_level lv, npl_act_kind act, float *x, const float *bias, size_t n)
{
#if defined(__x86_64__)
    if (lv >= NPL_SIMD_AVX512) {
        act_avx512(act, x, bias, n);
        return;
    }
    if (lv >= NPL_SIMD_AVX2) {
        act_avx2(act, x, bias, n);
        return;
    }
#endif
    act_ref(act, x, bias, n, 0);
}
