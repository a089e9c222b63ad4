/* Matrix times a few vectors over quantized weight rows:
 * y[v][r] = sum_c W[r][c] * x[v][c].
 *
 * Each weight row is read once per call whatever the number of vectors:
 * a prefill chunk is a real matrix-matrix product (tiles of vectors pass
 * over each group of rows while it sits in L1), and a decode step of many
 * sequences costs about one pass over the weights. Every y[v][r] is
 * computed by one thread with the fixed arithmetic of matmul_ref.h, so
 * the result for a vector does not depend on the other vectors in the
 * batch, on the thread count, on timing or on the SIMD level.
 *
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q4_K, Q5_K and Q6_K rows are
 * dotted with the activations quantized to 8 bits (integer dots; MXFP4
 * against Q8_0-style blocks of 32, as llama.cpp does); with AVX2 or
 * AVX-512 they are first repacked into an interleaved layout
 * (matmul_packed.h) owned by the workspace. BF16 rows are dotted with the
 * activations rounded to BF16 (VDPBF16PS where the CPU has it); F32/F16
 * rows are read in place and dotted in float; the other types are
 * converted to floats a row at a time. */
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

/* Scratch memory for npl_matmul (quantized activations, one row buffer
 * per thread) and the repacked copies of the matrices it has multiplied.
 * Sized for the largest n_cols and batch used. */
typedef struct npl_matmul_ws npl_matmul_ws;

npl_matmul_ws *npl_matmul_ws_create(int n_threads, int64_t max_cols, size_t max_vecs);
void npl_matmul_ws_free(npl_matmul_ws *ws);

/* Repacks w now (in parallel on pool) instead of on its first use, so the
 * cost lands in load time. The copy is keyed by w->data and owned by ws.
 * Returns false only when memory for the copy could not be had (the
 * matrix is then multiplied from the file layout, slowly but correctly);
 * true also when w needs no repacking (float types, no AVX2). */
bool npl_matmul_ws_prepack(npl_matmul_ws *ws, npl_threadpool *pool, const npl_matrix *w);

/* Packed copies kept outside the workspace (a cache file mapped read-only,
 * engine/models/cpu_weight_cache.h). The layout's version: a copy made by
 * another version must not be adopted. */
uint32_t npl_matmul_pack_layout_version(void);

/* Bytes of w's packed copy when ws repacks w (a multiple of 64); 0 when
 * ws multiplies w from the file layout (float types, no AVX2, packing
 * off). */
size_t npl_matmul_ws_pack_size(const npl_matmul_ws *ws, const npl_matrix *w);

/* Packs the first row group (16 rows) of w into dst as the workspace
 * would: the bytes written, 0 when w has no packed layout or cap is too
 * small. A cache compares them with what it holds for w, so a layout
 * changed without a version bump is still noticed. */
size_t npl_matmul_pack_first_group(const npl_matrix *w, void *dst, size_t cap);

/* The packed copy ws holds for w (npl_matmul_ws_pack_size bytes), or NULL. */
const void *npl_matmul_ws_packed(const npl_matmul_ws *ws, const npl_matrix *w);

/* Makes data w's packed copy: npl_matmul_ws_pack_size(ws, w) bytes of
 * this layout version, 64-byte aligned, not owned by ws and valid until
 * ws is freed. False (nothing changed) when ws would not repack w, already
 * holds a copy of it, data is misaligned, or no memory for the entry. */
bool npl_matmul_ws_adopt_packed(npl_matmul_ws *ws, const npl_matrix *w, const void *data);

/* Bytes of repacked weights ws holds (adopted copies not counted). */
size_t npl_matmul_ws_packed_bytes(const npl_matmul_ws *ws);

/* The matrices' data are pages of a read-only file mapping: once a
 * matrix is repacked, its pages are dropped from this process (madvise
 * MADV_DONTNEED; they stay in the page cache and fault back in if read
 * again), so the copy does not double the resident memory. Never set this
 * for weights in ordinary (anonymous) memory: they would read as zeros. */
void npl_matmul_ws_set_release_source(npl_matmul_ws *ws, bool enabled);

/* Tests and benchmarks: off = never repack (the scalar file-layout path
 * for integer types; results are identical). Default on. */
void npl_matmul_ws_set_packing(npl_matmul_ws *ws, bool enabled);

/* x: n_vec vectors of w->n_cols floats, x_stride floats apart; y[v]:
 * w->n_rows floats each. n_vec and n_cols must fit the workspace and the
 * pool must have no more threads than the workspace was made for. */
void npl_matmul(npl_threadpool *pool, npl_matmul_ws *ws, const npl_matrix *w,
                const float *x, size_t x_stride, size_t n_vec, float *const *y);

/* Same with y contiguous: vector v's output at y + v * y_stride. */
void npl_matmul_contig(npl_threadpool *pool, npl_matmul_ws *ws, const npl_matrix *w,
                       const float *x, size_t x_stride, size_t n_vec, float *y, size_t y_stride);

/* Several matrices of the same n_cols against the same vectors (Q, K and
 * V; gate and up): the activations are quantized once and all products
 * run in one parallel section. Matrix i writes vector v at
 * y[i] + v * y_stride[i]. At most NPL_MATMUL_MULTI_MAX matrices. */
#define NPL_MATMUL_MULTI_MAX 4
void npl_matmul_multi(npl_threadpool *pool, npl_matmul_ws *ws, size_t n_mats, const npl_matrix *const *w,
                      const float *x, size_t x_stride, size_t n_vec, float *const *y, const size_t *y_stride);

/* One row of w as floats (n_cols of them): embedding look-ups. */
bool npl_matrix_get_row(const npl_matrix *w, int64_t row, float *out);

/* Tests: the SIMD level the workspace uses (default: the best detected). */
void npl_matmul_ws_set_simd(npl_matmul_ws *ws, npl_simd_level level);

#ifdef __cplusplus
}
#endif

#endif
