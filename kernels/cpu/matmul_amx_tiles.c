/* The tile loops of matmul_amx.h, compiled with AMX and AVX-512 enabled
 * and called only when the CPU has them (npl_amx_usable).
 *
 * Tiles: 0, 1 = two 16 x 16 f32 blocks of y (32 rows of W side by side);
 * 2, 3 = the activation parts x1, x2 of 16 rows over 16 columns (as
 * doubled pairs); 5, 6 = the (wh, wl) pairs of the two row groups of W.
 * Each K step is four TDPBF16PS: y += x1 (wh + wl) + x2 (wh + wl). The K dimension is walked in slices of KSLICE steps so
 * that a slice of the activations (2 KiB per row) stays in L2 while every
 * block of W passes over it; a compact copy of this thread's part of y
 * holds the partial sums between slices. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_amx_internal.h"

enum { KSLICE = 16 };

typedef struct tile_config {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

void npl_amx_split_rows(const struct npl_amx_acts *a, const float *x, size_t x_stride, size_t begin, size_t end)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    size_t row_elems = 2 * a->kp;
    for (size_t r = begin; r < end; r++) {
        /* tile-major: [16-row tile][K step][row in tile][32 values] */
        size_t at = (r / NPL_AMX_TILE) * row_elems * NPL_AMX_TILE + (r % NPL_AMX_TILE) * 32;
        uint16_t *dst[2] = {a->part[0] + at, a->part[1] + at};
        if (r >= a->n_rows) {
            for (int i = 0; i < 2; i++)
                for (size_t k = 0; k < a->kp; k += 16)
                    memset(dst[i] + k * 32, 0, 64);
            continue;
        }
        const float *src = x + r * x_stride;
        for (size_t k = 0; k < a->kp; k += 16) {
            size_t left = a->n_cols > k ? a->n_cols - k : 0;
            __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
            /* rounded to F16 as llama.cpp's F16 product does (round to
             * nearest even; out of range becomes infinity as there) */
            __m512 v = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + k), _MM_FROUND_TO_NEAREST_INT));
            __m512i b1 = _mm512_and_si512(_mm512_castps_si512(v), hi);
            __m512 r1 = _mm512_sub_ps(v, _mm512_castsi512_ps(b1));
            /* an F16 value has 11 significant bits: the rest r1 has at
             * most 3 and is exact in BF16 */
            __m512i b2 = _mm512_castps_si512(r1);
            __m512i parts[2] = {b1, b2};
            for (int i = 0; i < 2; i++) {
                __m512i pair = _mm512_or_si512(parts[i], _mm512_srli_epi32(parts[i], 16));
                _mm512_store_si512((void *)(dst[i] + k * 32), pair);
            }
        }
    }
}

bool npl_amx_tiles_run(const struct npl_amx_acts *a, const struct npl_amx_weights *w, float *y, size_t y_stride,
                       size_t begin, size_t end)
{
    /* y's blocks are summed in a compact copy, tile by tile ([block][16
     * rows][32 floats], 2 KiB each): y's own rows are far apart (a tile
     * there spans 16 pages), which makes reloading it between slices slow. */
    size_t m_tiles = a->mp / NPL_AMX_TILE;
    float *acc = aligned_alloc(64, (end - begin) * m_tiles * NPL_AMX_TILE * 32 * sizeof(float));
    if (!acc)
        return false;
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 7; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = NPL_AMX_TILE;
    }
    _tile_loadconfig(&cfg);

    size_t steps = w->kp / NPL_AMX_TILE;
    size_t a_tiles = 2 * a->kp * sizeof(uint16_t) * NPL_AMX_TILE; /* bytes per 16 rows */
    const uint8_t *parts[2] = {(const uint8_t *)a->part[0], (const uint8_t *)a->part[1]};
    for (size_t s0 = 0; s0 < steps; s0 += KSLICE) {
        size_t s1 = s0 + KSLICE < steps ? s0 + KSLICE : steps;
        for (size_t b = begin; b < end; b++) {
            size_t g0 = 2 * b;
            bool two = g0 + 1 < w->n_groups;
            const uint8_t *w0 = (const uint8_t *)w->tiles + g0 * steps * NPL_AMX_TILE_BYTES;
            const uint8_t *w1 = w0 + steps * NPL_AMX_TILE_BYTES;
            for (size_t mt = 0; mt < m_tiles; mt++) {
                float *c = acc + ((b - begin) * m_tiles + mt) * NPL_AMX_TILE * 32;
                if (s0 == 0) {
                    _tile_zero(0);
                    _tile_zero(1);
                } else {
                    _tile_loadd(0, c, 128);
                    _tile_loadd(1, c + 16, 128);
                }
                for (size_t s = s0; s < s1; s++) {
                    size_t at = mt * a_tiles + s * NPL_AMX_TILE_BYTES;
                    _tile_loadd(2, parts[0] + at, 64);
                    _tile_loadd(3, parts[1] + at, 64);
                    _tile_loadd(5, w0 + s * NPL_AMX_TILE_BYTES, 64);
                    _tile_dpbf16ps(0, 2, 5);
                    _tile_dpbf16ps(0, 3, 5);
                    if (two) {
                        _tile_loadd(6, w1 + s * NPL_AMX_TILE_BYTES, 64);
                        _tile_dpbf16ps(1, 2, 6);
                        _tile_dpbf16ps(1, 3, 6);
                    }
                }
                _tile_stored(0, c, 128);
                _tile_stored(1, c + 16, 128);
            }
        }
    }
    _tile_release();

    for (size_t b = begin; b < end; b++) {
        size_t n0 = 2 * b * NPL_AMX_TILE;
        size_t cols = w->n_rows - n0 < 32 ? w->n_rows - n0 : 32;
        for (size_t r = 0; r < a->n_rows; r++)
            memcpy(y + r * y_stride + n0,
                   acc + (((b - begin) * m_tiles + r / NPL_AMX_TILE) * NPL_AMX_TILE + r % NPL_AMX_TILE) * 32,
                   cols * sizeof(float));
    }
    free(acc);
    return true;
}
