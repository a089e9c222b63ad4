/* AVX2 float rows times float vectors, in the 16-lane order of
 * matmul_ref.h (lanes 0..7 and 8..15 in two registers); tiles of 2 rows x
 * up to 2 vectors fit the 16 YMM registers. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "lane_sum.h"
#include "ggml_types.h"
#include "matmul_ref.h"

#define AI static inline __attribute__((always_inline))

#define TILE_ROWS 2
#define TILE_VECS 2

AI __m256 load8(uint32_t type, const uint8_t *row, size_t c)
{
    switch (type) {
    case NPL_TYPE_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * c)));
    case NPL_TYPE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * c))), 16));
    default:
        return _mm256_loadu_ps((const float *)(const void *)row + c);
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

AI void float_tile(uint32_t type, const uint8_t *const rows[TILE_ROWS], const float *x, size_t xs, int V, size_t n,
                   float out[TILE_ROWS][TILE_VECS])
{
    __m256 lo[TILE_ROWS][TILE_VECS], hi[TILE_ROWS][TILE_VECS];
#pragma GCC unroll 2
    for (int r = 0; r < TILE_ROWS; r++)
#pragma GCC unroll 2
        for (int v = 0; v < V; v++)
            lo[r][v] = hi[r][v] = _mm256_setzero_ps();
    size_t n16 = n & ~(size_t)15;
    for (size_t c = 0; c < n16; c += 16) {
#pragma GCC unroll 2
        for (int r = 0; r < TILE_ROWS; r++) {
            __m256 w0 = load8(type, rows[r], c), w1 = load8(type, rows[r], c + 8);
#pragma GCC unroll 2
            for (int v = 0; v < V; v++) {
                const float *xv = x + (size_t)v * xs + c;
                lo[r][v] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xv), lo[r][v]);
                hi[r][v] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xv + 8), hi[r][v]);
            }
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < TILE_ROWS; r++)
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) {
            float s = npl_lane_sum16_avx2(lo[r][v], hi[r][v]);
            for (size_t c = n16; c < n; c++)
                s = fmaf(load1(type, rows[r], c), x[(size_t)v * xs + c], s);
            out[r][v] = s;
        }
}

#define TILE_SWITCH(T)                                                        \
    if (nv == 1)                                                              \
        float_tile(T, rows, xv, x_stride, 1, n, out);                         \
    else                                                                      \
        float_tile(T, rows, xv, x_stride, 2, n, out);

void npl_float_matmul_avx2(const npl_matrix *w, int64_t r0, int64_t r1, const float *x, size_t x_stride,
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
