/* Float rows (vec_ops.h) written once over simd_vec.h: scaling and the
 * F16 <-> F32 conversions. Each element is one IEEE operation (a product,
 * an exact widening, a nearest-even rounding), so every level gives the
 * reference's bits; the tail past the last 16 lanes is the reference's. */
#include "ggml_types.h"
#include "kernels_isa.h"

void NPL_ISA_FN(npl_scale_row)(float a, float *y, size_t n)
{
    const vf va = vf_set1(a);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        vf_storeu(y + i, vf_mul(va, vf_loadu(y + i)));
    for (; i < n; i++)
        y[i] *= a;
}

void NPL_ISA_FN(npl_f16_to_f32_row)(const uint16_t *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        vf_storeu(dst + i, vf_load_f16(src + i));
    for (; i < n; i++)
        dst[i] = npl_fp16_to_fp32(src[i]);
}

void NPL_ISA_FN(npl_f32_to_f16_row)(const float *src, uint16_t *dst, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        vf_store_f16(dst + i, vf_loadu(src + i));
    for (; i < n; i++)
        dst[i] = npl_fp32_to_fp16(src[i]);
}
