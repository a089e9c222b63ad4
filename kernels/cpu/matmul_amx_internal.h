/* Layouts shared by matmul_amx.c (allocation, weight packing, dispatch)
 * and matmul_amx_tiles.c (compiled for AMX and AVX-512, called only when
 * the CPU has them). */
#ifndef NPL_MATMUL_AMX_INTERNAL_H
#define NPL_MATMUL_AMX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One tile: 16 rows of 64 bytes; a K step covers 16 columns of W (pairs
 * of BF16 per column). */
#define NPL_AMX_TILE 16u
#define NPL_AMX_TILE_BYTES 1024u

/* W's rows in groups of 16; per group and K step one tile
 * [16 k][16 rows of W][wh, wl]. kp: n_cols rounded up to 16, zeros past. */
struct npl_amx_weights {
    size_t n_rows, n_cols, kp, n_groups;
    uint16_t *tiles; /* n_groups * (kp / 16) tiles */
};

/* Each activation row rounded to F16 and then as two BF16 rows x1, x2
 * (x = x1 + x2 exactly),
 * each element doubled (x_i[k], x_i[k]) to meet a weight pair (wh, wl):
 * part[i] holds mp rows of 2 * kp BF16 values, tile by tile: for each 16
 * rows, for each K step, the 16 x 64-byte tile; rows past n_rows are zero. */
struct npl_amx_acts {
    size_t max_rows, max_cols;
    size_t n_rows, n_cols, mp, kp;
    uint16_t *part[2];
};

/* matmul_amx_tiles.c */
void npl_amx_split_rows(const struct npl_amx_acts *a, const float *x, size_t x_stride, size_t begin, size_t end);
/* y for the 32-row blocks of W [begin, end) (the last may be 16 rows);
 * false, y untouched, when its scratch memory could not be had. */
bool npl_amx_tiles_run(const struct npl_amx_acts *a, const struct npl_amx_weights *w, float *y, size_t y_stride,
                       size_t begin, size_t end);

#endif
