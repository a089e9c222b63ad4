/* Float rows times float vectors in the 16-lane order of matmul_ref.h,
 * written once over simd_vec.h: F32, F16 and BF16 rows are widened
 * exactly and read in place (other types through the reference
 * dequantizer); tiles of rows x vectors share their loads, as many as the
 * ISA's registers hold. */
#include <math.h>

#include "ggml_types.h"
#include "kernels_isa.h"
#include "matmul_ref.h"

#define TILE_ROWS NPL_V_TILE_ROWS
#define TILE_VECS NPL_V_TILE_VECS
_Static_assert(TILE_ROWS * TILE_VECS == NPL_V_HSUM_BATCH, "one batch of horizontal sums per tile");

NPL_V_AI vf load16(uint32_t type, const uint8_t *row, size_t c)
{
    switch (type) {
    case NPL_TYPE_F16: return vf_load_f16(row + 2 * c);
    case NPL_TYPE_BF16: return vf_load_bf16(row + 2 * c);
    default: return vf_loadu((const float *)(const void *)row + c);
    }
}

NPL_V_AI float load1(uint32_t type, const uint8_t *row, size_t c)
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

NPL_V_AI void float_tile(uint32_t type, const uint8_t *const rows[TILE_ROWS], const float *x, size_t xs, int V,
                         size_t n, float out[TILE_ROWS][TILE_VECS])
{
    vf acc[TILE_ROWS * TILE_VECS]; /* [row][vector] */
    memset(acc, 0, sizeof acc);     /* all-zero bits: 0.0f in every lane */
    size_t n16 = n & ~(size_t)15;
    for (size_t c = 0; c < n16; c += 16) {
        vf xv[TILE_VECS];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            xv[v] = vf_loadu(x + (size_t)v * xs + c);
#pragma GCC unroll 4
        for (int r = 0; r < TILE_ROWS; r++) {
            vf w = load16(type, rows[r], c);
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                acc[r * TILE_VECS + v] = vf_fmadd(w, xv[v], acc[r * TILE_VECS + v]);
        }
    }
    /* the tile's horizontal sums at once, each in vf_hsum's order */
    float sums[TILE_ROWS * TILE_VECS];
    vf_hsum_batch(acc, sums);
#pragma GCC unroll 4
    for (int r = 0; r < TILE_ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            float s = sums[r * TILE_VECS + v];
            for (size_t c = n16; c < n; c++)
                s = fmaf(load1(type, rows[r], c), x[(size_t)v * xs + c], s);
            out[r][v] = s;
        }
}

#if TILE_VECS == 4
#define TILE_SWITCH(T)                                                        \
    switch (nv) {                                                             \
    case 1: float_tile(T, tr, xv, x_stride, 1, n, out); break;              \
    case 2: float_tile(T, tr, xv, x_stride, 2, n, out); break;              \
    case 3: float_tile(T, tr, xv, x_stride, 3, n, out); break;              \
    default: float_tile(T, tr, xv, x_stride, 4, n, out); break;             \
    }
#else
#define TILE_SWITCH(T)                                                        \
    switch (nv) {                                                             \
    case 1: float_tile(T, tr, xv, x_stride, 1, n, out); break;              \
    default: float_tile(T, tr, xv, x_stride, 2, n, out); break;             \
    }
#endif

/* Rows of one block: its tiles take turns on each tile of vectors, so
 * a tile of vectors is read from memory once per block instead of once
 * per tile while the block's rows stay in cache. */
#define BLOCK_ROWS 16
/* Bytes of vectors that stay in a core's L2 while every row block of the
 * call passes over them (the vision encoder multiplies 256 patch rows of
 * up to 4304 floats, more than an L2 holds). Which tile runs when does
 * not change any result. */
#define VEC_BLOCK_BYTES (512 * 1024)

/* Rows [b, b1) (at most BLOCK_ROWS; not read in place: at most TILE_ROWS,
 * widened into buf) times vectors [v_begin, v_end). */
NPL_V_AI void row_block(const npl_matrix *w, bool in_place, int64_t b, int64_t b1, const float *x, size_t x_stride,
                        size_t v_begin, size_t v_end, float *const *y, float *buf)
{
    size_t n = (size_t)w->n_cols;
    const uint8_t *rows[BLOCK_ROWS / TILE_ROWS][TILE_ROWS];
    int tile_rows[BLOCK_ROWS / TILE_ROWS]; /* rows of each tile that exist */
    int n_tiles = 0;
    for (int64_t r = b; r < b1; r += TILE_ROWS, n_tiles++) {
        int nr = tile_rows[n_tiles] = (int)(b1 - r < TILE_ROWS ? b1 - r : TILE_ROWS);
        for (int i = 0; i < TILE_ROWS; i++) {
            int64_t ri = r + (i < nr ? i : nr - 1); /* padding rows repeat the last one */
            if (in_place)
                rows[n_tiles][i] = (const uint8_t *)w->data + (size_t)ri * w->row_bytes;
            else if (i < nr)
                rows[n_tiles][i] = (const uint8_t *)npl_row_as_f32(w, ri, buf + (size_t)i * n);
            else
                rows[n_tiles][i] = rows[n_tiles][0]; /* any computed row: its results are dropped */
        }
    }
    for (size_t v0 = v_begin; v0 < v_end; v0 += TILE_VECS) {
        size_t nv = v_end - v0 < TILE_VECS ? v_end - v0 : TILE_VECS;
        const float *xv = x + v0 * x_stride;
        for (int tile = 0; tile < n_tiles; tile++) {
            const uint8_t *const *tr = rows[tile];
            int64_t r = b + (int64_t)tile * TILE_ROWS;
            int nr = tile_rows[tile];
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

void NPL_ISA_FN(npl_float_matmul)(const npl_matrix *w, int64_t r0, int64_t r1, const float *x, size_t x_stride,
                                  size_t n_vec, float *const *y, float *buf)
{
    size_t n = (size_t)w->n_cols;
    bool in_place = w->type == NPL_TYPE_F32 || w->type == NPL_TYPE_F16 || w->type == NPL_TYPE_BF16;
    int64_t block = in_place ? BLOCK_ROWS : TILE_ROWS;
    /* rows widened into buf are widened once: all vectors in one block */
    size_t vec_block = n_vec;
    if (in_place) {
        vec_block = VEC_BLOCK_BYTES / (n * sizeof(float)) / TILE_VECS * TILE_VECS;
        if (vec_block < TILE_VECS)
            vec_block = TILE_VECS;
    }
    for (size_t vb = 0; vb < n_vec; vb += vec_block) {
        size_t ve = n_vec - vb < vec_block ? n_vec : vb + vec_block;
        for (int64_t b = r0; b < r1; b += block)
            row_block(w, in_place, b, r1 - b < block ? r1 : b + block, x, x_stride, vb, ve, y, buf);
    }
}
