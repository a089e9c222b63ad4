/* npl_attention_tiled: where it runs, its scratch, and the call into the
 * AMX kernel (attention_tiled_amx.c). */
#include "attention_tiled.h"

#include "attention_tiled_internal.h"
#include "cpu_features.h"

bool npl_attention_tiled_available(npl_simd_level lv, npl_kv_format fmt, size_t head_dim)
{
#if defined(NPL_HAVE_X86_KERNELS)
    static int amx = -1; /* detected once; the answer never changes */
    if (amx < 0) {
        npl_cpu_features f;
        npl_cpu_features_detect(&f);
        amx = f.amx_bf16 && f.avx512f && f.avx512bw && f.f16c;
    }
    return amx && lv >= NPL_SIMD_AVX512 && fmt == NPL_KV_F16 && head_dim > 0 && head_dim % 64 == 0 &&
           head_dim <= 512;
#else
    (void)lv;
    (void)fmt;
    (void)head_dim;
    return false;
#endif
}

size_t npl_attention_tiled_scratch_bytes(size_t n_pos, size_t group, size_t head_dim)
{
    npl_attn_tiled_layout L;
    return npl_attn_tiled_layout_of(n_pos, group, head_dim, NULL, &L) + 64;
}

void npl_attention_tiled(const npl_attn_tiled_job *job, void *scratch)
{
#if defined(NPL_HAVE_X86_KERNELS)
    uint8_t *base = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    npl_attn_tiled_layout L;
    npl_attn_tiled_layout_of(job->n_pos, job->group, job->head_dim, base, &L);
    npl_attention_tiled_amx(job, &L);
#else
    (void)job;
    (void)scratch;
#endif
}
