/* BF16 rows against BF16 activations (matmul_bf16.h) and the activations'
 * rounding, written once over simd_vec.h. Compiled for AVX2 and AVX-512
 * (VDPBF16PS's arithmetic emulated with FMA under FTZ/DAZ) and once more
 * with AVX512_BF16 (the instruction itself): the same bits everywhere. */
#include <math.h>

#include "kernels_isa.h"
#include "matmul_bf16.h"

#define TILE_ROWS NPL_V_TILE_ROWS
#define TILE_VECS NPL_V_TILE_VECS

#ifndef __AVX512BF16__
/* npl_bf16_act_bits on 16 lanes: nearest even, NaN kept quiet, subnormal
 * results to signed zero. */
void NPL_ISA_FN(npl_act_to_bf16)(const float *x, size_t n, uint16_t *out)
{
    const vi abs_mask = vi_set1(0x7fffffff), inf = vi_set1(0x7f800000), one = vi_set1(1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vi u = vi_loadu(x + i);
        vi nan = vi_cmpgt(vi_and(u, abs_mask), inf);
        vi lsb = vi_and(vi_srli(u, 16), one);
        vi v = vi_srli(vi_add(u, vi_add(vi_set1(0x7fff), lsb)), 16);
        v = vi_blend(v, vi_or(vi_srli(u, 16), vi_set1(0x40)), nan);
        vi sub = vi_cmpeq(vi_and(v, vi_set1(0x7f80)), vi_set1(0));
        vi_store_u16(out + i, vi_blend(v, vi_and(v, vi_set1(0x8000)), sub));
    }
    for (; i < n; i++)
        out[i] = npl_bf16_act_bits(x[i]);
}
#endif

NPL_V_AI void bf16_tile(const uint8_t *const rows[NPL_BF16_TILE_MAX], const uint16_t *xb, size_t xs, int V, size_t n,
                        float out[NPL_BF16_TILE_MAX][NPL_BF16_TILE_MAX])
{
    vf acc[TILE_ROWS][TILE_VECS];
    memset(acc, 0, sizeof acc); /* all-zero bits: 0.0f in every lane */
    size_t n32 = n & ~(size_t)31;
    unsigned csr = npl_v_bf16_begin();
    for (size_t c = 0; c < n32; c += 32) {
        vbh x[TILE_VECS];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            x[v] = vbh_loadu(xb + (size_t)v * xs + c);
#pragma GCC unroll 4
        for (int r = 0; r < TILE_ROWS; r++) {
            vbh wr = vbh_loadu(rows[r] + 2 * c);
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                acc[r][v] = vf_dot_bf16(acc[r][v], wr, x[v]);
        }
    }
    npl_v_bf16_end(csr);
#pragma GCC unroll 4
    for (int r = 0; r < TILE_ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            out[r][v] = npl_bf16_tail(rows[r], xb + (size_t)v * xs, n32, n, vf_hsum(acc[r][v]));
}

static void tile(const uint8_t *const rows[NPL_BF16_TILE_MAX], const uint16_t *xb, size_t xs, size_t nv, size_t n,
                 float out[NPL_BF16_TILE_MAX][NPL_BF16_TILE_MAX])
{
    switch (nv) {
    case 1: bf16_tile(rows, xb, xs, 1, n, out); break;
#if TILE_VECS == 4
    case 2: bf16_tile(rows, xb, xs, 2, n, out); break;
    case 3: bf16_tile(rows, xb, xs, 3, n, out); break;
    default: bf16_tile(rows, xb, xs, 4, n, out); break;
#else
    default: bf16_tile(rows, xb, xs, 2, n, out); break;
#endif
    }
}

void NPL_ISA_FN(npl_bf16_matmul)(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                                 size_t n_vec, float *const *y)
{
    npl_bf16_tiles(w, r0, r1, xb, xb_stride, n_vec, y, TILE_ROWS, TILE_VECS, tile);
}
