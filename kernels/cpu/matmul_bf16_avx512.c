/* AVX-512 BF16 rows (matmul_bf16.h) with VDPBF16PS: 32 columns of a row
 * and a vector per instruction, tiles of 4 rows x 4 vectors. Compiled
 * with -mavx512bf16; called only when the CPU has it. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "lane_sum.h"
#include "matmul_bf16.h"

#define AI static inline __attribute__((always_inline))

#define TILE_ROWS 4
#define TILE_VECS 4

AI __m512bh load_bh(const void *p)
{
    return (__m512bh)_mm512_loadu_si512(p);
}

AI void bf16_tile(const uint8_t *const rows[NPL_BF16_TILE_MAX], const uint16_t *xb, size_t xs, int V, size_t n,
                  float out[NPL_BF16_TILE_MAX][NPL_BF16_TILE_MAX])
{
    __m512 acc[TILE_ROWS][TILE_VECS];
#pragma GCC unroll 4
    for (int r = 0; r < TILE_ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            acc[r][v] = _mm512_setzero_ps();
    size_t n32 = n & ~(size_t)31;
    for (size_t c = 0; c < n32; c += 32) {
        __m512bh x[TILE_VECS];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            x[v] = load_bh(xb + (size_t)v * xs + c);
#pragma GCC unroll 4
        for (int r = 0; r < TILE_ROWS; r++) {
            __m512bh wr = load_bh(rows[r] + 2 * c);
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], wr, x[v]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < TILE_ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            float s = npl_lane_sum16_avx512(acc[r][v]);
            out[r][v] = npl_bf16_tail(rows[r], xb + (size_t)v * xs, n32, n, s);
        }
}

static void tile(const uint8_t *const rows[NPL_BF16_TILE_MAX], const uint16_t *xb, size_t xs, size_t nv, size_t n,
                 float out[NPL_BF16_TILE_MAX][NPL_BF16_TILE_MAX])
{
    switch (nv) {
    case 1: bf16_tile(rows, xb, xs, 1, n, out); break;
    case 2: bf16_tile(rows, xb, xs, 2, n, out); break;
    case 3: bf16_tile(rows, xb, xs, 3, n, out); break;
    default: bf16_tile(rows, xb, xs, 4, n, out); break;
    }
}

void npl_bf16_matmul_avx512bf16(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                                size_t n_vec, float *const *y)
{
    npl_bf16_tiles(w, r0, r1, xb, xb_stride, n_vec, y, TILE_ROWS, TILE_VECS, tile);
}
#endif
