/* Shared between the Q4NX format code and the repackers: where a group's
 * fields live and how one group is written. */
#ifndef NPL_Q4NX_INTERNAL_H
#define NPL_Q4NX_INTERNAL_H

#include "q4nx.h"

/* Start of the block holding (row, col). */
static inline uint8_t *q4nx_block_at(uint8_t *base, const npl_q4nx_layout *l,
                                     uint32_t row, uint32_t col)
{
    size_t index = (size_t)(row / NPL_Q4NX_BLOCK_ROWS) * l->col_blocks + col / NPL_Q4NX_BLOCK_COLS;
    return base + index * NPL_Q4NX_BLOCK_BYTES;
}

/* Index of the scale (and of the min) of row r (0-31) and 32-column group
 * g (0-7) inside a block: [group][row]. */
static inline uint32_t q4nx_param_index(uint32_t r, uint32_t g)
{
    return g * NPL_Q4NX_BLOCK_ROWS + r;
}

/* Byte of a block holding the code of row r (0-31), column c (0-255): the
 * block's rows come in two bands of 16; within a band each column owns 8
 * bytes, and byte k holds rows 2k (low nibble) and 2k+1 (high nibble). */
static inline uint32_t q4nx_code_byte(uint32_t r, uint32_t c)
{
    return NPL_Q4NX_QS_OFFSET + (r / NPL_Q4NX_BAND_ROWS) * NPL_Q4NX_BAND_BYTES
         + c * (NPL_Q4NX_BAND_ROWS / 2) + (r % NPL_Q4NX_BAND_ROWS) / 2;
}

/* Shift of row r's nibble in its byte. */
static inline unsigned q4nx_code_shift(uint32_t r)
{
    return (r & 1u) * 4u;
}

/* Writes group `group` of row `row`: scale and min bits plus 32 codes
 * (0-15) for the columns group*32 .. group*32+31. */
void q4nx_write_group(uint8_t *base, const npl_q4nx_layout *l, uint32_t row, uint32_t group,
                      uint16_t d_bits, uint16_t m_bits, const uint8_t codes[NPL_Q4NX_GROUP_COLS]);

/* Quantizes n (1..32) finite floats as one group (the rest of the group
 * gets code 0); returns the chosen scale/min bits and codes. */
void q4nx_quantize_group(const float *values, uint32_t n, uint16_t *d_bits, uint16_t *m_bits,
                         uint8_t codes[NPL_Q4NX_GROUP_COLS]);

#endif
