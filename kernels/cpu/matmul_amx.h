/* Matrix products on AMX tiles (TDPBF16PS) for F16 weights, for the
 * vision tower where hundreds of patch rows meet each weight:
 * y[r][n] = sum_k W[n][k] * x[r][k].
 *
 * The activations are rounded to F16 first, as llama.cpp's CPU F16 product
 * does (its F16 weights meet F16 activations); from there the products
 * are exact and only the order of the float additions differs: an F16
 * weight is exactly wh + wl with wh, wl in BF16 (8 + 3 significant
 * bits), and so is an F16 activation (x1 + x2). Every BF16 x BF16
 * product is exact in f32, so the four partial products add up to w * x
 * with f32 accumulation. The F16 float kernel (matvec.h), used where
 * there is no AMX, keeps f32 activations. The weights are packed once
 * (npl_amx_weights_pack, 4 bytes per weight: the wh, wl pairs in the
 * tiles' VNNI layout); the activations once per call
 * (npl_amx_acts_load), then shared by several matrices.
 *
 * Only where npl_cpu_features reports amx_bf16 (NPULLM_NO_AMX=1 turns it
 * off): elsewhere npl_amx_usable() is false, npl_amx_weights_pack returns
 * NULL and the caller keeps its other kernels. Each worker thread loads
 * its tile configuration at the start of every call and releases the
 * tiles at its end. */
#ifndef NPL_MATMUL_AMX_H
#define NPL_MATMUL_AMX_H

#include <stdbool.h>
#include <stddef.h>

#include "matvec.h"
#include "threadpool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_amx_weights npl_amx_weights;
typedef struct npl_amx_acts npl_amx_acts;

/* The CPU and OS give this process AMX-BF16 tiles. */
bool npl_amx_usable(void);

/* w packed for the tiles (in parallel on pool), or NULL: no AMX, a type
 * other than F16, or no memory. */
npl_amx_weights *npl_amx_weights_pack(npl_threadpool *pool, const npl_matrix *w);
void npl_amx_weights_free(npl_amx_weights *w);
size_t npl_amx_weights_bytes(const npl_amx_weights *w);

/* Room for up to max_rows activation rows of up to max_cols floats. */
npl_amx_acts *npl_amx_acts_create(size_t max_rows, size_t max_cols);
void npl_amx_acts_free(npl_amx_acts *a);

/* Splits n_rows rows of n_cols floats (x_stride apart) for the tiles.
 * False (nothing loaded) beyond the sizes a was made for. */
bool npl_amx_acts_load(npl_threadpool *pool, npl_amx_acts *a, const float *x, size_t x_stride, size_t n_rows,
                       size_t n_cols);

/* y[r] (r < the rows loaded, y_stride floats apart) = w times row r;
 * w->n_cols must equal the loaded n_cols (false, y untouched, when not).
 * Also false when scratch memory ran out: y may then be partly written
 * and the caller computes it its other way. */
bool npl_amx_matmul(npl_threadpool *pool, const npl_amx_acts *a, const npl_amx_weights *w, float *y,
                    size_t y_stride);

#ifdef __cplusplus
}
#endif

#endif
