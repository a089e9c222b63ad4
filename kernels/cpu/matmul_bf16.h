/* BF16 weight rows against activations rounded to BF16: the arithmetic of
 * the AVX-512 BF16 instruction VDPBF16PS, which the portable and AVX2
 * versions reproduce exactly (internal to kernels/cpu).
 *
 * Activations: x -> bf16 rounding to nearest even, subnormals flushed to
 * signed zero, NaN kept quiet (npl_act_to_bf16). Per (row, vector):
 * 16 lanes, lane l takes the column pairs (32k + 2l, 32k + 2l + 1) of every
 * whole 32-column chunk, with the products exact and DAZ/FTZ as the
 * instruction does them:
 *     acc = ftz(fmaf(daz(w_odd), x_odd, acc));  acc = ftz(fmaf(daz(w_even), x_even, acc))
 * (measured equal to VDPBF16PS on every lane of 9.6 million random cases,
 * signed zeros, infinities and subnormals included); then the lanes are
 * summed as in matmul_ref.h and the columns past the last whole chunk are
 * added with plain fmaf. Like llama.cpp's BF16 path, the activations lose
 * their low 16 bits; in exchange the product runs at twice the float
 * rate where VDPBF16PS exists. */
#ifndef NPL_MATMUL_BF16_H
#define NPL_MATMUL_BF16_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "matvec.h"
#include "vec_ops.h"

/* Bits of the BF16 activation of x. */
static inline uint16_t npl_bf16_act_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    if ((r & 0x7f80u) == 0) /* subnormal (or zero): signed zero */
        r &= 0x8000u;
    return (uint16_t)r;
}

/* A BF16 value as a float (exact). */
static inline float npl_bf16_widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The columns [c0, n) past the last whole 32-column chunk, added to s
 * with plain fmaf in order. */
static inline float npl_bf16_tail(const uint8_t *row, const uint16_t *x, size_t c0, size_t n, float s)
{
    for (size_t c = c0; c < n; c++) {
        uint16_t w;
        memcpy(&w, row + 2 * c, sizeof w);
        s = fmaf(npl_bf16_widen(w), npl_bf16_widen(x[c]), s);
    }
    return s;
}

/* n activations to BF16 (any level gives the same bits). */
void npl_act_to_bf16(npl_simd_level lv, const float *x, size_t n, uint16_t *out);
void npl_act_to_bf16_ref(const float *x, size_t n, uint16_t *out);

/* y[v][r] for rows [r0, r1) of a BF16 matrix; xb: n_vec vectors of
 * n_cols BF16 activations, xb_stride apart. */
void npl_bf16_rows_ref(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                       size_t n_vec, float *const *y);

/* Tile kernels of the SIMD files: rows[TILE_ROWS_MAX] (repeats past the
 * last real row), nv <= TILE_VECS_MAX vectors from xb, xs apart; writes
 * out[r][v]. */
#define NPL_BF16_TILE_MAX 4
typedef void (*npl_bf16_tile_fn)(const uint8_t *const rows[NPL_BF16_TILE_MAX], const uint16_t *xb, size_t xs,
                                 size_t nv, size_t n, float out[NPL_BF16_TILE_MAX][NPL_BF16_TILE_MAX]);

/* Walks rows [r0, r1) and the vectors in tiles of tile_rows x tile_vecs
 * (each at most NPL_BF16_TILE_MAX) and scatters the tiles' results. */
static inline void npl_bf16_tiles(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                                  size_t n_vec, float *const *y, int tile_rows, size_t tile_vecs,
                                  npl_bf16_tile_fn tile)
{
    for (int64_t r = r0; r < r1; r += tile_rows) {
        int nr = (int)(r1 - r < tile_rows ? r1 - r : tile_rows);
        const uint8_t *rows[NPL_BF16_TILE_MAX];
        for (int i = 0; i < NPL_BF16_TILE_MAX; i++)
            rows[i] = (const uint8_t *)w->data + (size_t)(r + (i < nr ? i : nr - 1)) * w->row_bytes;
        for (size_t v0 = 0; v0 < n_vec; v0 += tile_vecs) {
            size_t nv = n_vec - v0 < tile_vecs ? n_vec - v0 : tile_vecs;
            float out[NPL_BF16_TILE_MAX][NPL_BF16_TILE_MAX];
            tile(rows, xb + v0 * xb_stride, xb_stride, nv, (size_t)w->n_cols, out);
            for (int i = 0; i < nr; i++)
                for (size_t v = 0; v < nv; v++)
                    y[v0 + v][r + i] = out[i][v];
        }
    }
}

#endif
