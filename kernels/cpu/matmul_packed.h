/* The repacked ("interleaved") layout of quantized weight matrices that the
 * SIMD integer kernels read. Internal to kernels/cpu.
 *
 * Rows are taken 16 at a time (a row group: one AVX-512 register of int32
 * or float lanes, two AVX2 registers). For each block of the format (32
 * elements for Q4_0..Q8_0, 256 for the K-quants) a group stores, in this
 * order, the scales of its 16 rows and then its quants, 4 bytes per row
 * per 64-byte "unit": unit u holds bytes 4u..4u+3 of row 0, then of row 1,
 * ... row 15. One unit times a broadcast of 4 activation bytes is one
 * VPDPBUSD giving all 16 rows 4 more products, so a block needs no
 * horizontal sums, and a row's dot product is accumulated in its own lane
 * in the same order whatever the number of vectors or the SIMD level.
 *
 * Nibbles: in every 4-bit family, a 32-element chunk is 16 bytes whose low
 * nibbles are elements 0..15 and high nibbles elements 16..31 (the native
 * Q4_0 order; the K-quants are re-paired to it when packing). Unit u of a
 * chunk thus carries elements 4u..4u+3 (low) and 16+4u..16+4u+3 (high).
 * A fifth (sixth) bit lives in a 64-bit mask per (unit, low/high half):
 * bit 4r + k is the bit of row r's k-th byte lane, ready for a masked
 * byte add. Q8_0 quants are stored biased by 128 (unsigned), 8 units per
 * block.
 *
 * Sizes equal the file's except the K-quants' sub-block scales, stored one
 * byte each (Q4_K 148 bytes per row and super-block instead of 144, Q5_K
 * 180 instead of 176). Byte offsets inside one group block: */
#ifndef NPL_MATMUL_PACKED_H
#define NPL_MATMUL_PACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "matvec.h"

/* Version of everything above: bump it whenever a byte of the packed
 * layout changes, so caches of packed weights on disk (engine/
 * cpu_weight_cache.c) made by an older layout are rebuilt, not misread. */
#define NPL_PACK_LAYOUT_VERSION 1u

#define NPL_PACK_ROWS 16
#define NPL_PACK_UNIT 64 /* bytes of one unit: 16 rows x 4 */

/* Legacy 32-element blocks: d[16] halves first. */
#define NPL_PK_Q4_0_QS 32
#define NPL_PK_Q4_0_BYTES 288
#define NPL_PK_Q4_1_M 32 /* m[16] halves */
#define NPL_PK_Q4_1_QS 64
#define NPL_PK_Q4_1_BYTES 320
#define NPL_PK_Q5_0_MASK 32 /* u64 [4 units][lo, hi] */
#define NPL_PK_Q5_0_QS 96
#define NPL_PK_Q5_0_BYTES 352
#define NPL_PK_Q5_1_M 32
#define NPL_PK_Q5_1_MASK 64
#define NPL_PK_Q5_1_QS 128
#define NPL_PK_Q5_1_BYTES 384
#define NPL_PK_Q8_0_QS 32 /* 8 units, quants + 128 */
#define NPL_PK_Q8_0_BYTES 544
/* MXFP4: e[16] exponent bytes, then the 4-bit codes as Q4_0's nibbles;
 * the kernels map codes to doubled E2M1 levels + 12 (0..24, zero point
 * 12) with a byte shuffle, so the copy is as small as the file. */
#define NPL_PK_MXFP4_QS 16
#define NPL_PK_MXFP4_BYTES 272

/* K-quant super-blocks: 8 chunks of 32. */
#define NPL_PK_K_DMIN 32   /* Q4_K/Q5_K: dmin[16] halves after d[16] */
#define NPL_PK_K_SC 64     /* Q4_K/Q5_K: sc[chunk][row] bytes */
#define NPL_PK_K_MN 192    /* Q4_K/Q5_K: mins [chunk pair][row][2] bytes */
#define NPL_PK_K_CHUNKS 320
#define NPL_PK_Q4_K_CHUNK 256 /* per chunk: quants */
#define NPL_PK_Q4_K_BYTES (320 + 8 * 256)
#define NPL_PK_Q5_K_CHUNK 320 /* per chunk: u64 masks [4][lo, hi], quants */
#define NPL_PK_Q5_K_BYTES (320 + 8 * 320)
#define NPL_PK_Q6_K_SC 32      /* int8 scales [group pair][row][2] */
#define NPL_PK_Q6_K_CHUNKS 288
#define NPL_PK_Q6_K_CHUNK 384  /* per chunk: u64 masks [4][lo, hi][bit 4, bit 5], quants */
#define NPL_PK_Q6_K_BYTES (288 + 8 * 384)

typedef struct npl_packed_matrix {
    uint32_t type;
    int64_t n_rows, n_cols;
    int64_t n_groups;   /* ceil(n_rows / 16); the last group is zero-padded */
    size_t n_blocks;    /* blocks per row */
    size_t block_bytes; /* one block of one group */
    size_t group_bytes; /* n_blocks * block_bytes */
    uint8_t *data;      /* n_groups * group_bytes, 64-byte aligned */
} npl_packed_matrix;

/* Types with a packed layout (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K,
 * MXFP4). */
bool npl_pack_type_supported(uint32_t type);

/* Fills the geometry of p for w (data left NULL); false when w's type has
 * no packed layout. */
bool npl_packed_geometry(const npl_matrix *w, npl_packed_matrix *p);

/* Writes groups [g0, g1) of p from w (any thread may do any range). */
void npl_pack_groups(const npl_matrix *w, const npl_packed_matrix *p, int64_t g0, int64_t g1);

/* Integer values of one native block, in element order, as the packed
 * layout stores them (Q4_*: 0..15, Q5_*: 0..31, Q8_0: quant + 128,
 * Q4_K/Q5_K: 0..15/0..31, Q6_K: 0..63, MXFP4: doubled level + 12), with
 * the block's scales (MXFP4: d holds the exponent byte). The
 * scalar reference kernels read the native rows through this too. */
typedef struct npl_block_ints {
    uint8_t q[256];
    uint16_t d, m;     /* halves: scale; min (Q4_1/Q5_1) or dmin (Q4_K/Q5_K) */
    int16_t sc[16];    /* K-quants: sub-block scales (Q6_K signed, 16 of them) */
    uint8_t mn[8];     /* Q4_K/Q5_K: sub-block mins */
} npl_block_ints;

void npl_block_to_ints(uint32_t type, const uint8_t *block, npl_block_ints *out);

/* Elements per block of a packable type (32 or 256). */
int npl_pack_block_elems(uint32_t type);

#endif
