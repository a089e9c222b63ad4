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

/* Writes group `group` of row `row`: scale and min bits plus 32 codes
 * (0-15) for the columns group*32 .. group*32+31. */
void q4nx_write_group(uint8_t *base, const npl_q4nx_layout *l, uint32_t row, uint32_t group,
                      uint16_t d_bits, uint16_t m_bits, const uint8_t codes[NPL_Q4NX_GROUP_COLS]);

/* Quantizes n (1..32) finite floats as one group (the rest of the group
 * gets code 0); returns the chosen scale/min bits and codes. */
void q4nx_quantize_group(const float *values, uint32_t n, uint16_t *d_bits, uint16_t *m_bits,
                         uint8_t codes[NPL_Q4NX_GROUP_COLS]);

#endif
