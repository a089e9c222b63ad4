/* On-disk block layouts of the ggml quantized types, shared by the
 * reference kernels and the fast kernels. Every field is little-endian;
 * fp16 scales are kept as raw IEEE half bits (convert with
 * npl_fp16_to_fp32). The sizes are GGUF file-format facts, so each struct
 * carries a static assert: a padding surprise here would corrupt every
 * tensor read through it.
 *
 * Blocks inside a GGUF row are packed back to back, so a block may sit at
 * an address that is only 1- or 2-byte aligned (q4_0 is 18 bytes long).
 * Code that cannot prove alignment should memcpy a block into a local
 * struct rather than dereference a cast pointer. */
#ifndef NPL_GGML_BLOCKS_H
#define NPL_GGML_BLOCKS_H

#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ggml block layouts are little-endian; a big-endian host needs byte swapping"
#endif

/* Elements per block. */
#define NPL_QK4_0 32
#define NPL_QK4_1 32
#define NPL_QK5_0 32
#define NPL_QK5_1 32
#define NPL_QK8_0 32
#define NPL_QK8_1 32
#define NPL_QK4_NL 32
#define NPL_QK_MXFP4 32
#define NPL_QK_K 256           /* super-block of every k-quant and iq type */
#define NPL_K_SCALE_SIZE 12    /* 8 six-bit scales + 8 six-bit mins, packed */

/* q4_0: x = (q - 8) * d. Element j (j < 16) is the low nibble of qs[j],
 * element j + 16 the high nibble of qs[j]. */
typedef struct npl_block_q4_0 {
    uint16_t d;
    uint8_t qs[NPL_QK4_0 / 2];
} npl_block_q4_0;

/* q4_1: x = q * d + m, same nibble order as q4_0. */
typedef struct npl_block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[NPL_QK4_1 / 2];
} npl_block_q4_1;

/* q5_0: x = (q - 16) * d; the low 4 bits as in q4_0, bit 4 of element j
 * is bit j of the little-endian 32-bit qh. */
typedef struct npl_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[NPL_QK5_0 / 2];
} npl_block_q5_0;

/* q5_1: x = q * d + m, bits as in q5_0. */
typedef struct npl_block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[NPL_QK5_1 / 2];
} npl_block_q5_1;

/* q8_0: x = qs[j] * d. */
typedef struct npl_block_q8_0 {
    uint16_t d;
    int8_t qs[NPL_QK8_0];
} npl_block_q8_0;

/* q8_1: x = qs[j] * d; s caches d * sum(qs) for dot products. */
typedef struct npl_block_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[NPL_QK8_1];
} npl_block_q8_1;

/* q2_K: 16 groups of 16; scales[g] low nibble scales, high nibble mins;
 * x = d * (scales & 15) * q - dmin * (scales >> 4), q 2 bits. */
typedef struct npl_block_q2_K {
    uint8_t scales[NPL_QK_K / 16];
    uint8_t qs[NPL_QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} npl_block_q2_K;

/* q3_K: 16 groups of 16 with signed 6-bit scales packed in 12 bytes;
 * q = 2 low bits from qs, minus 4 unless the hmask bit is set. */
typedef struct npl_block_q3_K {
    uint8_t hmask[NPL_QK_K / 8];
    uint8_t qs[NPL_QK_K / 4];
    uint8_t scales[NPL_K_SCALE_SIZE];
    uint16_t d;
} npl_block_q3_K;

/* q4_K: 8 groups of 32, each with a 6-bit scale and 6-bit min;
 * x = d * sc * q - dmin * m. */
typedef struct npl_block_q4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[NPL_K_SCALE_SIZE];
    uint8_t qs[NPL_QK_K / 2];
} npl_block_q4_K;

/* q5_K: q4_K plus a fifth bit per element in qh. */
typedef struct npl_block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[NPL_K_SCALE_SIZE];
    uint8_t qh[NPL_QK_K / 8];
    uint8_t qs[NPL_QK_K / 2];
} npl_block_q5_K;

/* q6_K: 16 groups of 16 with int8 scales; x = d * sc * (q - 32), q 6
 * bits split as 4 low bits in ql and 2 high bits in qh. */
typedef struct npl_block_q6_K {
    uint8_t ql[NPL_QK_K / 2];
    uint8_t qh[NPL_QK_K / 4];
    int8_t scales[NPL_QK_K / 16];
    uint16_t d;
} npl_block_q6_K;

/* q8_K: the k-quant activation type; d is a full float, bsums holds the
 * sum of each group of 16 quants. */
typedef struct npl_block_q8_K {
    float d;
    int8_t qs[NPL_QK_K];
    int16_t bsums[NPL_QK_K / 16];
} npl_block_q8_K;

/* iq4_nl: x = d * kvalues[nibble], q4_0 nibble order. */
typedef struct npl_block_iq4_nl {
    uint16_t d;
    uint8_t qs[NPL_QK4_NL / 2];
} npl_block_iq4_nl;

/* iq4_xs: 8 groups of 32, 6-bit scales (low 4 bits in scales_l, high 2
 * in scales_h), x = d * (ls - 32) * kvalues[nibble]. */
typedef struct npl_block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[NPL_QK_K / 64];
    uint8_t qs[NPL_QK_K / 2];
} npl_block_iq4_xs;

/* mxfp4: e is an E8M0 shared exponent, nibbles are E2M1 codes in q4_0
 * order. */
typedef struct npl_block_mxfp4 {
    uint8_t e;
    uint8_t qs[NPL_QK_MXFP4 / 2];
} npl_block_mxfp4;

_Static_assert(sizeof(npl_block_q4_0) == 18, "q4_0 block is 18 bytes");
_Static_assert(sizeof(npl_block_q4_1) == 20, "q4_1 block is 20 bytes");
_Static_assert(sizeof(npl_block_q5_0) == 22, "q5_0 block is 22 bytes");
_Static_assert(sizeof(npl_block_q5_1) == 24, "q5_1 block is 24 bytes");
_Static_assert(sizeof(npl_block_q8_0) == 34, "q8_0 block is 34 bytes");
_Static_assert(sizeof(npl_block_q8_1) == 36, "q8_1 block is 36 bytes");
_Static_assert(sizeof(npl_block_q2_K) == 84, "q2_K block is 84 bytes");
_Static_assert(sizeof(npl_block_q3_K) == 110, "q3_K block is 110 bytes");
_Static_assert(sizeof(npl_block_q4_K) == 144, "q4_K block is 144 bytes");
_Static_assert(sizeof(npl_block_q5_K) == 176, "q5_K block is 176 bytes");
_Static_assert(sizeof(npl_block_q6_K) == 210, "q6_K block is 210 bytes");
_Static_assert(sizeof(npl_block_q8_K) == 292, "q8_K block is 292 bytes");
_Static_assert(sizeof(npl_block_iq4_nl) == 18, "iq4_nl block is 18 bytes");
_Static_assert(sizeof(npl_block_iq4_xs) == 136, "iq4_xs block is 136 bytes");
_Static_assert(sizeof(npl_block_mxfp4) == 17, "mxfp4 block is 17 bytes");

/* The 16 non-linear levels of iq4_nl and iq4_xs (a format fact). */
#define NPL_IQ4NL_LEVELS \
    { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 }

/* E2M1 codes of mxfp4 times two (so they are integers); pair them with a
 * scale of 2^(e - 128) instead of 2^(e - 127). */
#define NPL_MXFP4_LEVELS_X2 \
    { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 }

#endif
