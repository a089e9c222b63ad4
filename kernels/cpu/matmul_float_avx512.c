/* AVX-512 float rows times float vectors, in the 16-lane order of
 * matmul_ref.h: F32, F16 (VCVTPH2PS) and BF16 (a shift) rows are widened
 * exactly and read in place; tiles of 4 rows x up to 4 vectors share
 * their loads. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "lane_sum.h"
#include "ggml_types.h"
#include "matmul_ref.h"

#define AI static inline __attribute__((always_inline))

#define TILE_ROWS 4
#define TILE_VECS 4

AI __m512 load16(uint32_t type, const uint8_t *row, size_t c)
{
    switch (type) {
    case NPL_TYPE_F16:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * c)));
    case NPL_TYPE_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * c))), 16));
    default:
        return _mm512_loadu_ps((const float *)(const void *)row + c);
    }
}

AI float load1(uint32_t type, const uint8_t *row, size_t c)
{
    uint16_t h;
    switch (type) {
    case NPL_TYPE_F16:
        memcpy(&h, row + 2 * c, sizeof h);
        return npl_fp16_to_fp32(h);
    case NPL_TYPE_BF16:
        memcpy(&h, row + 2 * c, sizeof h);
        return npl_bf16_to_fp32(h);
    default: {
        float f;
        memcpy(&f, row + 4 * c, sizeof f);
        return f;
    }
    }
}

/* (l0 + l8), ... halving down to one value: matmul_ref.h's order. */
AI void float_tile(uint32_t type, const uint8_t *const rows[TILE_ROWS], const float *x, size_t xs, int V, size_t n,
                   float out[TILE_ROWS][TILE_VECS])
{
    __m512 acc[TILE_ROWS][TILE_VECS];
#pragma GCC unroll 4
    for (int r = 0; r < TILE_ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            acc[r][v] = _mm512_setzero_ps();
    size_t n16 = n & ~(size_t)15;
    for (size_t c = 0; c < n16; c += 16) {
        __m512 xv[TILE_VECS];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            xv[v] = _mm512_loadu_ps(x + (size_t)v * xs + c);
#pragma GCC unroll 4
        for (int r = 0; r < TILE_ROWS; r++) {
            __m512 w = load16(type, rows[r], c);
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                acc[r][v] = _mm512_fmadd_ps(w, xv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < TILE_ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            float s = npl_lane_sum16_avx512(acc[r][v]);
            for (size_t c = n16; c < n; c++)
                s = fmaf(load1(type, rows[r], c), x[(size_t)v * xs + c], s);
            out[r][v] = s;
        }
}

#define TILE_SWITCH(T)                                                        \
    switch (nv) {                                                             \
    case 1: float_tile(T, rows, xv, x_stride, 1, n, out); break;              \
    case 2: float_tile(T, rows, xv, x_stride, 2, n, out); break;              \
    case 3: float_tile(T, rows, xv, x_stride, 3, n, out); break;              \
    default: float_tile(T, rows, xv, x_stride, 4, n, out); break;             \
    }

void npl_float_matmul_avx512(const npl_matrix *w, int64_t r0, int64_t r1, const float *x, size_t x_stride,
                             size_t n_vec, float *const *y, float *buf)
{
    size_t n = (size_t)w->n_cols;
    bool in_place = w->type == NPL_TYPE_F32 || w->type == NPL_TYPE_F16 || w->type == NPL_TYPE_BF16;
    for (int64_t r = r0; r < r1; r += TILE_ROWS) {
        int nr = (int)(r1 - r < TILE_ROWS ? r1 - r : TILE_ROWS);
        const uint8_t *rows[TILE_ROWS];
        for (int i = 0; i < TILE_ROWS; i++) {
            int64_t ri = r + (i < nr ? i : nr - 1); /* padding rows repeat the last one */
            if (in_place)
                rows[i] = (const uint8_t *)w->data + (size_t)ri * w->row_bytes;
            else if (i < nr)
                rows[i] = (const uint8_t *)npl_row_as_f32(w, ri, buf + (size_t)i * n);
            else
                rows[i] = rows[0]; /* any computed row: its results are dropped */
        }
        for (size_t v0 = 0; v0 < n_vec; v0 += TILE_VECS) {
            size_t nv = n_vec - v0 < TILE_VECS ? n_vec - v0 : TILE_VECS;
            const float *xv = x + v0 * x_stride;
            float out[TILE_ROWS][TILE_VECS];
            if (!in_place || w->type == NPL_TYPE_F32) {
                TILE_SWITCH(NPL_TYPE_F32)
            } else if (w->type == NPL_TYPE_F16) {
                TILE_SWITCH(NPL_TYPE_F16)
            } else {
                TILE_SWITCH(NPL_TYPE_BF16)
            }
            for (int i = 0; i < nr; i++)
                for (size_t v = 0; v < nv; v++)
                    y[v0 + v][r + i] = out[i][v];
        }
    }
}
#endif
