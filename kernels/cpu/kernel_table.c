/* Picks the dispatch table of each level once, from what the CPU reports
 * (cpu_features.h). */
#include "kernel_table.h"

#include <pthread.h>

#include "attention_noncausal.h"
#include "attention_internal.h"
#include "cpu_features.h"
#include "deltanet.h"
#include "matmul_bf16.h"
#include "matmul_ref.h"
#include "vec_ops.h"

#ifdef NPL_HAVE_X86_KERNELS
extern const npl_kernel_table npl_kernel_table_avx2, npl_kernel_table_avx512;
void npl_bf16_matmul_avx512bf16(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                                size_t n_vec, float *const *y);
#endif

static const npl_kernel_table portable = {
    .quantize_q8 = npl_quantize_act_q8_ref,
    .quantize_q8k = npl_quantize_act_q8k_ref,
    .act_to_bf16 = npl_act_to_bf16_ref,
    .float_matmul = npl_float_rows_ref,
    .bf16_matmul = npl_bf16_rows_ref,
    .packed_matmul = NULL,
    .attention = npl_attention_ref,
    .attention_rows = npl_attention_rows_ref,
    .attention_nc = npl_attention_nc_ref,
    .act_bias = npl_act_bias_ref,
    .act_gated = npl_act_gated_ref,
    .scale_row = npl_scale_row_ref,
    .f16_to_f32_row = npl_f16_to_f32_row_ref,
    .f32_to_f16_row = npl_f32_to_f16_row_ref,
    .deltanet_step = npl_deltanet_step_ref,
};

static npl_kernel_table tables[NPL_SIMD_AVX512 + 1];
static npl_simd_level detected;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void choose(void)
{
    npl_cpu_features f;
    npl_cpu_features_detect(&f);
    detected = npl_simd_detect();
    tables[NPL_SIMD_NONE] = portable;
#ifdef NPL_HAVE_X86_KERNELS
    tables[NPL_SIMD_AVX2] = npl_kernel_table_avx2;
    tables[NPL_SIMD_AVX512] = npl_kernel_table_avx512;
    /* VDPBF16PS where the CPU has it; else the FMA emulation (same bits) */
    if (f.avx512bf16)
        tables[NPL_SIMD_AVX512].bf16_matmul = npl_bf16_matmul_avx512bf16;
#else
    tables[NPL_SIMD_AVX2] = tables[NPL_SIMD_AVX512] = portable;
#endif
}

const npl_kernel_table *npl_kernels(npl_simd_level lv)
{
    pthread_once(&once, choose);
    if (lv > detected)
        lv = detected;
    if (lv < NPL_SIMD_NONE)
        lv = NPL_SIMD_NONE;
    return &tables[lv];
}
