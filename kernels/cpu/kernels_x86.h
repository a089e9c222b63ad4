/* Entry points of the x86 SIMD kernel files (internal to kernels/cpu).
 * Each *_avx2.c file is compiled with -mavx2 -mfma -mf16c and each
 * *_avx512.c file with the AVX-512 F/BW/VL/VNNI flags; nothing here may
 * be called unless npl_simd_detect() reported the matching level. Every
 * function gives the same bits as its scalar reference (matmul_ref.h,
 * quant_act.c). */
#ifndef NPL_KERNELS_X86_H
#define NPL_KERNELS_X86_H

#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "matmul_packed.h"
#include "matvec.h"
#include "quant_act.h"

#if defined(__x86_64__) && defined(NPL_HAVE_X86_KERNELS)
#define NPL_KERNELS_X86 1

/* Packed integer matrix: row groups [g0, g1) against n_vec vectors whose
 * activation blocks are p->n_blocks apart (npl_act_q8 or npl_act_q8k by
 * type); y[v][r] for the valid rows of those groups. */
void npl_packed_matmul_avx2(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,
                            float *const *y);
void npl_packed_matmul_avx512(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,
                              float *const *y);

#endif

#endif
