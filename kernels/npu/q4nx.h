/* Q4NX: the NPU's 4-bit weight format (byte layout in docs/npu.md).
 *
 * A weight matrix W has `rows` outputs and `cols` inputs (y = W x; in GGUF
 * terms ne[0] = cols is the contiguous dimension, ne[1] = rows). It is
 * padded to a multiple of 32 rows and 256 columns and cut into blocks of
 * 32 rows x 256 columns, stored row-block major (all column blocks of rows
 * 0-31, then rows 32-63, ...), so the 32 output rows a tile computes read
 * one contiguous stripe. Each block is 5120 bytes:
 *
 *   [   0,  512)  256 bf16 scales d, index g*32 + r ([group][row])
 *   [ 512, 1024)  256 bf16 mins   m, index g*32 + r
 *   [1024, 5120)  4-bit q in two bands of 16 rows (2048 bytes each); in a
 *                 band, column c owns bytes c*8 .. c*8+7 and byte k of them
 *                 holds row 2k in its low nibble and row 2k+1 in its high
 *                 nibble: one byte, two adjacent output rows
 *
 * This is the byte order of the public Q4NX reference (FastFlowLM's
 * FLM_Q4NX_Converter, q4nx/model_converter.py `_pack_q4nx` with
 * row_block_size 32, col_block_size 256, parallel_size 16), so kernels
 * written for it read these buffers as they are.
 *
 * r is the row within the block (0-31), g the 32-column group (0-7), and
 * an element is w = d*q + m (q = 0..15). All fields are little-endian.
 * Padded rows and fully padded groups have d = m = q = 0, so they are
 * exact zeros; activations must be zero-padded to cols_padded as well. */
#ifndef NPL_Q4NX_H
#define NPL_Q4NX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPL_Q4NX_BLOCK_ROWS 32
#define NPL_Q4NX_BLOCK_COLS 256
#define NPL_Q4NX_GROUP_COLS 32
#define NPL_Q4NX_GROUPS_PER_BLOCK_ROW 8 /* 256 / 32 */
#define NPL_Q4NX_SCALES_OFFSET 0
#define NPL_Q4NX_MINS_OFFSET 512
#define NPL_Q4NX_QS_OFFSET 1024
#define NPL_Q4NX_BAND_ROWS 16     /* rows sharing one code band */
#define NPL_Q4NX_BAND_BYTES 2048  /* 256 columns x 16 rows / 2 */
#define NPL_Q4NX_BLOCK_BYTES 5120

/* Largest magnitude the float quantizer takes: far from the f32 limit, so
 * a group's range and step never overflow. */
#define NPL_Q4NX_MAX_ABS_WEIGHT 1e30f

/* Largest dimension accepted: keeps every index in 32 bits. */
#define NPL_Q4NX_MAX_DIM (1u << 30)

typedef struct npl_q4nx_layout {
    uint32_t rows, cols;               /* logical shape */
    uint32_t rows_padded, cols_padded; /* multiples of 32 and 256 */
    uint32_t row_blocks, col_blocks;
    size_t bytes;                      /* row_blocks * col_blocks * 5120 */
} npl_q4nx_layout;

npl_status npl_q4nx_layout_init(npl_q4nx_layout *layout, int64_t rows, int64_t cols,
                                npl_error *err);

/* How faithfully a repack kept the source weights. */
typedef enum npl_q4nx_repack_kind {
    /* q4_0, q4_1, q4_K: same 4-bit codes, only the per-group scale and
     * min are rounded to bf16 (error bounds in docs/npu.md). */
    NPL_Q4NX_REPACK_SCALES_ROUNDED = 1,
    /* Floats (f32/f16/bf16) or another quant type dequantized first:
     * requantized to 4 bits, error up to half a quantization step. */
    NPL_Q4NX_REPACK_REQUANTIZED = 2,
} npl_q4nx_repack_kind;

/* True when npl_q4nx_repack accepts tensors of this ggml type. */
bool npl_q4nx_can_repack(uint32_t src_type);

/* Repacks a GGUF tensor of `src_type` whose shape matches `layout`
 * (rows rows of cols elements each, rows back to back) into dst, which
 * must hold layout->bytes. kind may be NULL. */
npl_status npl_q4nx_repack(const npl_q4nx_layout *layout, uint32_t src_type,
                           const void *src, size_t src_bytes, void *dst, size_t dst_bytes,
                           npl_q4nx_repack_kind *kind, npl_error *err);

/* Quantizes rows x cols floats (row-major) per 32-column group with an
 * asymmetric 4-bit grid whose min is rounded down and scale rounded up to
 * bf16, so the grid covers the group and each element is within half a
 * step. Rejects non-finite input and |w| > NPL_Q4NX_MAX_ABS_WEIGHT. */
npl_status npl_q4nx_quantize_f32(const npl_q4nx_layout *layout, const float *src,
                                 void *dst, size_t dst_bytes, npl_error *err);

/* Reference dequantizer: w = d*q + m in f32 for the `cols` logical
 * columns of one row. */
void npl_q4nx_dequantize_row(const void *q4nx, const npl_q4nx_layout *layout,
                             uint32_t row, float *dst);

/* The weights as the NPU's MAC units see them: d*q + m rounded to bf16. */
void npl_q4nx_dequantize_row_bf16(const void *q4nx, const npl_q4nx_layout *layout,
                                  uint32_t row, float *dst);

/* Fused reference matrix-vector product with NPU numerics: x is bf16 (cols
 * elements), weights dequantized to bf16, products summed in f32 (each
 * 32-column group first, then the groups in order). y gets rows floats. */
void npl_q4nx_matvec_ref(const void *q4nx, const npl_q4nx_layout *layout,
                         const uint16_t *x, float *y);

/* The same for n_vectors inputs (x rows x_stride apart, y rows y_stride
 * apart, in elements); dequantizes each weight row once. */
npl_status npl_q4nx_matmul_ref(const void *q4nx, const npl_q4nx_layout *layout,
                               const uint16_t *x, size_t x_stride, uint32_t n_vectors,
                               float *y, size_t y_stride, npl_error *err);

/* Field access for tests and tools: group g (0 .. cols_padded/32 - 1) of
 * row `row` (0 .. rows_padded - 1). */
uint16_t npl_q4nx_scale_bits(const void *q4nx, const npl_q4nx_layout *layout,
                             uint32_t row, uint32_t group);
uint16_t npl_q4nx_min_bits(const void *q4nx, const npl_q4nx_layout *layout,
                           uint32_t row, uint32_t group);
uint8_t npl_q4nx_code(const void *q4nx, const npl_q4nx_layout *layout,
                      uint32_t row, uint32_t col);

#ifdef __cplusplus
}
#endif

#endif
