/* Matrix times a few vectors over quantized weight rows, read in place
 * from the mapped model file: y[v][r] = sum_c W[r][c] * x[v][c].
 *
 * Each weight row is read once per call whatever the number of vectors
 * (a decode step of many sequences costs about one pass over the
 * weights). Every y[v][r] is computed by one thread with a fixed
 * summation order, so the result for a vector does not depend on the
 * other vectors in the batch, on the thread count or on timing.
 *
 * Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 rows are dotted with the activations
 * quantized to 8-bit blocks of 32 (integer dots); F32/F16/BF16 and the
 * K-quants are converted to floats a row at a time and dotted in f32. */
#ifndef NPL_MATVEC_H
#define NPL_MATVEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "threadpool.h"
#include "vec_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_matrix {
    uint32_t type;     /* npl_ggml_type of the rows */
    const void *data;  /* n_rows rows of row_bytes each */
    int64_t n_cols;    /* elements per row (GGUF ne[0]) */
    int64_t n_rows;    /* GGUF ne[1] */
    size_t row_bytes;
} npl_matrix;

/* Types the kernels multiply (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4). */
bool npl_matmul_type_supported(uint32_t type);

/* Fills m for a row-major tensor; false when the type is unsupported or
 * n_cols is not a whole number of its blocks. */
bool npl_matrix_init(npl_matrix *m, uint32_t type, const void *data, int64_t n_cols, int64_t n_rows);

/* Scratch memory for npl_matmul: quantized activations and one row
 * buffer per thread. Sized for the largest n_cols and batch used. */
typedef struct npl_matmul_ws npl_matmul_ws;

npl_matmul_ws *npl_matmul_ws_create(int n_threads, int64_t max_cols, size_t max_vecs);
void npl_matmul_ws_free(npl_matmul_ws *ws);

/* x: n_vec vectors of w->n_cols floats, x_stride floats apart; y[v]:
 * w->n_rows floats each. n_vec and n_cols must fit the workspace and the
 * pool must have no more threads than the workspace was made for. */
void npl_matmul(npl_threadpool *pool, npl_matmul_ws *ws, const npl_matrix *w,
                const float *x, size_t x_stride, size_t n_vec, float *const *y);

/* Same with y contiguous: vector v's output at y + v * y_stride. */
void npl_matmul_contig(npl_threadpool *pool, npl_matmul_ws *ws, const npl_matrix *w,
                       const float *x, size_t x_stride, size_t n_vec, float *y, size_t y_stride);

/* One row of w as floats (n_cols of them): embedding look-ups. */
bool npl_matrix_get_row(const npl_matrix *w, int64_t row, float *out);

/* Tests: the SIMD level the workspace uses (default: the best detected). */
void npl_matmul_ws_set_simd(npl_matmul_ws *ws, npl_simd_level level);

#ifdef __cplusplus
}
#endif

#endif
