/* The DeltaNet step (deltanet.h) written once over simd_vec.h: per state
 * row, decay, the dot with k, the update and the dot with q, 16 lanes at a
 * time with fused multiply-adds and the reference's lane pairing, so every
 * level gives npl_deltanet_step_ref's bits. */
#include <math.h>

#include "kernels_isa.h"

NPL_V_AI float dot(const float *a, const float *b, size_t n)
{
    vf acc = vf_zero();
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        acc = vf_fmadd(vf_loadu(a + i), vf_loadu(b + i), acc);
    if (i < n)
        acc = vf_fmadd(vf_loadu_n(a + i, n - i), vf_loadu_n(b + i, n - i), acc);
    return vf_hsum(acc);
}

void NPL_ISA_FN(npl_deltanet_step)(float *S, const float *q, const float *k, const float *v, float decay, float beta,
                                   float scale, size_t dk, size_t dv, float *o)
{
    const vf vdecay = vf_set1(decay);
    for (size_t j = 0; j < dv; j++) {
        float *row = S + j * dk;
        size_t i = 0;
        for (; i + 16 <= dk; i += 16)
            vf_storeu(row + i, vf_mul(vf_loadu(row + i), vdecay));
        for (; i < dk; i++)
            row[i] *= decay;
        float d = (v[j] - dot(row, k, dk)) * beta;
        const vf vd = vf_set1(d);
        for (i = 0; i + 16 <= dk; i += 16)
            vf_storeu(row + i, vf_fmadd(vd, vf_loadu(k + i), vf_loadu(row + i)));
        for (; i < dk; i++)
            row[i] = fmaf(d, k[i], row[i]);
        o[j] = dot(row, q, dk) * scale;
    }
}
