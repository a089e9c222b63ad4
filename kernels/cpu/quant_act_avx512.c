/* AVX-512 activation quantization; same bytes as quant_act.c's reference. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>

/* q = clamp(round_even(x * id), -127, 127) for 16 floats, as int32. */
static inline __m512i quant16(__m512 x, __m512 id)
{
    __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(x, id));
    q = _mm512_max_epi32(q, _mm512_set1_epi32(-127));
    return _mm512_min_epi32(q, _mm512_set1_epi32(127));
}

static inline __m512 abs16(__m512 x)
{
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

void npl_quantize_act_q8_avx512(const float *x, int64_t n, npl_act_q8 *out)
{
    for (int64_t b = 0; b < n / NPL_ACT_QK; b++) {
        const float *xb = x + b * NPL_ACT_QK;
        __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
        /* (new, old) operand order: a NaN element leaves the maximum alone,
         * as in the reference */
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs16(x1), _mm512_max_ps(abs16(x0), _mm512_setzero_ps())));
        float d = amax / 127.0f;
        __m512 id = _mm512_set1_ps(npl_act_inverse_scale(d));
        __m512i q0 = quant16(x0, id), q1 = quant16(x1, id);
        _mm_storeu_si128((__m128i *)out[b].q, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(out[b].q + 16), _mm512_cvtepi32_epi8(q1));
        int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        float dh = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
        out[b].d = dh;
        out[b].sum = sum;
        out[b].s = dh * (float)sum;
        out[b].nsum8 = -8 * sum;
    }
}

void npl_quantize_act_q8k_avx512(const float *x, int64_t n, npl_act_q8k *out)
{
    for (int64_t b = 0; b < n / NPL_ACT_QKK; b++) {
        const float *xb = x + b * NPL_ACT_QKK;
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < NPL_ACT_QKK; j += 16)
            m = _mm512_max_ps(abs16(_mm512_loadu_ps(xb + j)), m);
        float amax = _mm512_reduce_max_ps(m);
        float d = amax / 127.0f;
        __m512 id = _mm512_set1_ps(npl_act_inverse_scale(d));
        npl_act_q8k *o = &out[b];
        for (int g = 0; g < NPL_ACT_QKK / 16; g++) {
            __m512i q = quant16(_mm512_loadu_ps(xb + 16 * g), id);
            _mm_storeu_si128((__m128i *)(o->q + 16 * g), _mm512_cvtepi32_epi8(q));
            o->bsum16[g] = (int16_t)_mm512_reduce_add_epi32(q);
        }
        for (int g = 0; g < NPL_ACT_QKK / 32; g++)
            o->bsum32[g] = (int16_t)(o->bsum16[2 * g] + o->bsum16[2 * g + 1]);
        o->d = d;
        o->pad[0] = o->pad[1] = o->pad[2] = 0;
    }
}
#endif
