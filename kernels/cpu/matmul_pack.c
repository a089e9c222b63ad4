/* Native GGUF blocks -> the interleaved 16-row layout of matmul_packed.h.
 * Plain C: done once per matrix at load time (or on first use). */
#include "matmul_packed.h"

#include <string.h>

#include "ggml_blocks.h"
#include "ggml_types.h"

bool npl_pack_type_supported(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_Q4_0:
    case NPL_TYPE_Q4_1:
    case NPL_TYPE_Q5_0:
    case NPL_TYPE_Q5_1:
    case NPL_TYPE_Q8_0:
    case NPL_TYPE_Q4_K:
    case NPL_TYPE_Q5_K:
    case NPL_TYPE_Q6_K:
    case NPL_TYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

int npl_pack_block_elems(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_Q4_K:
    case NPL_TYPE_Q5_K:
    case NPL_TYPE_Q6_K:
        return 256;
    default:
        return 32;
    }
}

static size_t pack_block_bytes(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_Q4_0: return NPL_PK_Q4_0_BYTES;
    case NPL_TYPE_Q4_1: return NPL_PK_Q4_1_BYTES;
    case NPL_TYPE_Q5_0: return NPL_PK_Q5_0_BYTES;
    case NPL_TYPE_Q5_1: return NPL_PK_Q5_1_BYTES;
    case NPL_TYPE_Q8_0: return NPL_PK_Q8_0_BYTES;
    case NPL_TYPE_Q4_K: return NPL_PK_Q4_K_BYTES;
    case NPL_TYPE_Q5_K: return NPL_PK_Q5_K_BYTES;
    case NPL_TYPE_Q6_K: return NPL_PK_Q6_K_BYTES;
    case NPL_TYPE_MXFP4: return NPL_PK_MXFP4_BYTES;
    default: return 0;
    }
}

bool npl_packed_geometry(const npl_matrix *w, npl_packed_matrix *p)
{
    memset(p, 0, sizeof *p);
    if (!npl_pack_type_supported(w->type))
        return false;
    int be = npl_pack_block_elems(w->type);
    if (w->n_cols <= 0 || w->n_cols % be != 0 || w->n_rows <= 0)
        return false;
    p->type = w->type;
    p->n_rows = w->n_rows;
    p->n_cols = w->n_cols;
    p->n_groups = (w->n_rows + NPL_PACK_ROWS - 1) / NPL_PACK_ROWS;
    p->n_blocks = (size_t)(w->n_cols / be);
    p->block_bytes = pack_block_bytes(w->type);
    p->group_bytes = p->n_blocks * p->block_bytes;
    return true;
}

/* ---- native blocks as integers ------------------------------------------ */

static uint16_t rd16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Scale and min of q4_K/q5_K sub-block j from the 12 packed bytes. */
static void k4_scale_min(const uint8_t *packed, int j, int *scale, int *min)
{
    if (j < 4) {
        *scale = packed[j] & 63;
        *min = packed[j + 4] & 63;
    } else {
        *scale = (packed[j + 4] & 0x0f) | (packed[j - 4] >> 6) << 4;
        *min = (packed[j + 4] >> 4) | (packed[j] >> 6) << 4;
    }
}

void npl_block_to_ints(uint32_t type, const uint8_t *blk, npl_block_ints *o)
{
    switch (type) {
    case NPL_TYPE_Q4_0:
    case NPL_TYPE_Q4_1: {
        size_t qs = type == NPL_TYPE_Q4_0 ? offsetof(npl_block_q4_0, qs) : offsetof(npl_block_q4_1, qs);
        o->d = rd16(blk);
        o->m = type == NPL_TYPE_Q4_1 ? rd16(blk + offsetof(npl_block_q4_1, m)) : 0;
        for (int j = 0; j < 16; j++) {
            o->q[j] = blk[qs + j] & 0x0f;
            o->q[j + 16] = blk[qs + j] >> 4;
        }
        break;
    }
    case NPL_TYPE_Q5_0:
    case NPL_TYPE_Q5_1: {
        bool one = type == NPL_TYPE_Q5_1;
        size_t qs = one ? offsetof(npl_block_q5_1, qs) : offsetof(npl_block_q5_0, qs);
        uint32_t qh = rd32(blk + (one ? offsetof(npl_block_q5_1, qh) : offsetof(npl_block_q5_0, qh)));
        o->d = rd16(blk);
        o->m = one ? rd16(blk + offsetof(npl_block_q5_1, m)) : 0;
        for (int j = 0; j < 16; j++) {
            o->q[j] = (uint8_t)((blk[qs + j] & 0x0f) | ((qh >> j) & 1u) << 4);
            o->q[j + 16] = (uint8_t)((blk[qs + j] >> 4) | ((qh >> (j + 16)) & 1u) << 4);
        }
        break;
    }
    case NPL_TYPE_Q8_0:
        o->d = rd16(blk);
        o->m = 0;
        for (int j = 0; j < 32; j++)
            o->q[j] = (uint8_t)(blk[offsetof(npl_block_q8_0, qs) + j] ^ 0x80u);
        break;
    case NPL_TYPE_MXFP4: {
        static const int8_t lv[16] = NPL_MXFP4_LEVELS_X2;
        const uint8_t *qs = blk + offsetof(npl_block_mxfp4, qs);
        o->d = blk[offsetof(npl_block_mxfp4, e)];
        o->m = 0;
        for (int j = 0; j < 16; j++) {
            o->q[j] = (uint8_t)(lv[qs[j] & 0x0f] + 12);
            o->q[j + 16] = (uint8_t)(lv[qs[j] >> 4] + 12);
        }
        break;
    }
    case NPL_TYPE_Q4_K:
    case NPL_TYPE_Q5_K: {
        bool five = type == NPL_TYPE_Q5_K;
        const uint8_t *scales = blk + (five ? offsetof(npl_block_q5_K, scales) : offsetof(npl_block_q4_K, scales));
        const uint8_t *qs = blk + (five ? offsetof(npl_block_q5_K, qs) : offsetof(npl_block_q4_K, qs));
        const uint8_t *qh = five ? blk + offsetof(npl_block_q5_K, qh) : NULL;
        o->d = rd16(blk);
        o->m = rd16(blk + 2);
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            k4_scale_min(scales, j, &sc, &mn);
            o->sc[j] = (int16_t)sc;
            o->mn[j] = (uint8_t)mn;
        }
        /* 32 qs bytes per 64 elements: low nibbles sub-block 2i, high 2i+1. */
        for (int e = 0; e < 256; e++) {
            int pair = e / 64, l = e % 32;
            uint8_t byte = qs[32 * pair + l];
            int v = (e % 64) < 32 ? byte & 0x0f : byte >> 4;
            if (qh)
                v |= ((qh[l] >> (e / 32)) & 1) << 4;
            o->q[e] = (uint8_t)v;
        }
        break;
    }
    case NPL_TYPE_Q6_K: {
        const uint8_t *ql = blk + offsetof(npl_block_q6_K, ql);
        const uint8_t *qh = blk + offsetof(npl_block_q6_K, qh);
        const int8_t *sc = (const int8_t *)(blk + offsetof(npl_block_q6_K, scales));
        o->d = rd16(blk + offsetof(npl_block_q6_K, d));
        o->m = 0;
        for (int g = 0; g < 16; g++)
            o->sc[g] = sc[g];
        for (int half = 0; half < 2; half++)
            for (int k = 0; k < 4; k++)
                for (int l = 0; l < 32; l++) {
                    uint8_t lbyte = ql[64 * half + 32 * (k & 1) + l];
                    int low = k < 2 ? lbyte & 0x0f : lbyte >> 4;
                    int high = (qh[32 * half + l] >> (2 * k)) & 3;
                    o->q[128 * half + 32 * k + l] = (uint8_t)(low | high << 4);
                }
        break;
    }
    default:
        memset(o, 0, sizeof *o);
        break;
    }
}

/* ---- writing the interleaved layout -------------------------------------- */

/* One row's block split into what the packed layout stores: per 32-element
 * chunk, 16 nibble-pair bytes (element j low, j + 16 high) and up to two
 * bit planes (bit 4, bit 5 of each element: lo = elements 0..15, hi =
 * 16..31, bit j for element j); Q8_0 keeps its 32 biased bytes. Built
 * with byte operations straight from the native block: packing a whole
 * model is a pass over it, not a per-element decode. */
typedef struct row_parts {
    uint16_t d, m;
    uint8_t sc[16]; /* Q4_K/Q5_K: 8 unsigned scales; Q6_K: 16 int8 */
    uint8_t mn[8];
    uint8_t nib[8][16];
    uint16_t lo[8][2], hi[8][2]; /* [chunk][plane] */
    uint8_t q8[32];
} row_parts;

static void wr16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

static void nibble_pairs(const uint8_t *qs16, uint8_t out[16])
{
    memcpy(out, qs16, 16);
}

static void split_q5_bits(uint32_t qh, row_parts *o)
{
    o->lo[0][0] = (uint16_t)(qh & 0xffffu);
    o->hi[0][0] = (uint16_t)(qh >> 16);
}

static void row_parts_of(uint32_t type, const uint8_t *blk, row_parts *o)
{
    switch (type) {
    case NPL_TYPE_Q4_0:
        o->d = rd16(blk);
        nibble_pairs(blk + offsetof(npl_block_q4_0, qs), o->nib[0]);
        break;
    case NPL_TYPE_Q4_1:
        o->d = rd16(blk);
        o->m = rd16(blk + offsetof(npl_block_q4_1, m));
        nibble_pairs(blk + offsetof(npl_block_q4_1, qs), o->nib[0]);
        break;
    case NPL_TYPE_Q5_0:
        o->d = rd16(blk);
        nibble_pairs(blk + offsetof(npl_block_q5_0, qs), o->nib[0]);
        split_q5_bits(rd32(blk + offsetof(npl_block_q5_0, qh)), o);
        break;
    case NPL_TYPE_Q5_1:
        o->d = rd16(blk);
        o->m = rd16(blk + offsetof(npl_block_q5_1, m));
        nibble_pairs(blk + offsetof(npl_block_q5_1, qs), o->nib[0]);
        split_q5_bits(rd32(blk + offsetof(npl_block_q5_1, qh)), o);
        break;
    case NPL_TYPE_Q8_0:
        o->d = rd16(blk);
        for (int j = 0; j < 32; j++)
            o->q8[j] = (uint8_t)(blk[offsetof(npl_block_q8_0, qs) + j] ^ 0x80u);
        break;
    case NPL_TYPE_MXFP4: /* d: the exponent byte; the codes stay codes */
        o->d = blk[offsetof(npl_block_mxfp4, e)];
        nibble_pairs(blk + offsetof(npl_block_mxfp4, qs), o->nib[0]);
        break;
    case NPL_TYPE_Q4_K:
    case NPL_TYPE_Q5_K: {
        bool five = type == NPL_TYPE_Q5_K;
        const uint8_t *scales = blk + (five ? offsetof(npl_block_q5_K, scales) : offsetof(npl_block_q4_K, scales));
        const uint8_t *qs = blk + (five ? offsetof(npl_block_q5_K, qs) : offsetof(npl_block_q4_K, qs));
        o->d = rd16(blk);
        o->m = rd16(blk + 2);
        for (int j = 0; j < 8; j++) {
            int sc, mn;
            k4_scale_min(scales, j, &sc, &mn);
            o->sc[j] = (uint8_t)sc;
            o->mn[j] = (uint8_t)mn;
        }
        /* native: byte 32p + l holds element 64p + l (low) and 64p + 32 + l
         * (high); chunk 2p takes the low nibbles, 2p + 1 the high ones */
        for (int p = 0; p < 4; p++)
            for (int j = 0; j < 16; j++) {
                uint8_t a = qs[32 * p + j], b = qs[32 * p + 16 + j];
                o->nib[2 * p][j] = (uint8_t)((a & 0x0f) | (b & 0x0f) << 4);
                o->nib[2 * p + 1][j] = (uint8_t)((a >> 4) | (b & 0xf0));
            }
        if (five) {
            const uint8_t *qh = blk + offsetof(npl_block_q5_K, qh);
            for (int c = 0; c < 8; c++) {
                uint16_t lo = 0, hi = 0;
                for (int j = 0; j < 16; j++) {
                    lo |= (uint16_t)(((qh[j] >> c) & 1u) << j);
                    hi |= (uint16_t)(((qh[16 + j] >> c) & 1u) << j);
                }
                o->lo[c][0] = lo;
                o->hi[c][0] = hi;
            }
        }
        break;
    }
    case NPL_TYPE_Q6_K: {
        npl_block_ints bi;
        npl_block_to_ints(type, blk, &bi);
        o->d = bi.d;
        for (int g = 0; g < 16; g++)
            o->sc[g] = (uint8_t)(int8_t)bi.sc[g];
        for (int c = 0; c < 8; c++) {
            const uint8_t *q = bi.q + 32 * c;
            uint16_t lo4 = 0, hi4 = 0, lo5 = 0, hi5 = 0;
            for (int j = 0; j < 16; j++) {
                o->nib[c][j] = (uint8_t)((q[j] & 0x0f) | (q[16 + j] & 0x0f) << 4);
                lo4 |= (uint16_t)(((q[j] >> 4) & 1u) << j);
                lo5 |= (uint16_t)(((q[j] >> 5) & 1u) << j);
                hi4 |= (uint16_t)(((q[16 + j] >> 4) & 1u) << j);
                hi5 |= (uint16_t)(((q[16 + j] >> 5) & 1u) << j);
            }
            o->lo[c][0] = lo4;
            o->lo[c][1] = lo5;
            o->hi[c][0] = hi4;
            o->hi[c][1] = hi5;
        }
        break;
    }
    default:
        break;
    }
}

/* Chunk c of 16 rows: nibble units at qs, masks [unit][lo, hi][plane]. */
static void put_chunk(const row_parts *rows, int c, uint8_t *qs, uint8_t *masks, int planes)
{
    for (int r = 0; r < NPL_PACK_ROWS; r++)
        for (int u = 0; u < 4; u++)
            memcpy(qs + NPL_PACK_UNIT * u + 4 * r, rows[r].nib[c] + 4 * u, 4);
    for (int u = 0; u < 4; u++)
        for (int p = 0; p < planes; p++) {
            uint64_t lo = 0, hi = 0;
            for (int r = 0; r < NPL_PACK_ROWS; r++) {
                lo |= (uint64_t)((rows[r].lo[c][p] >> (4 * u)) & 0xfu) << (4 * r);
                hi |= (uint64_t)((rows[r].hi[c][p] >> (4 * u)) & 0xfu) << (4 * r);
            }
            memcpy(masks + 8 * ((u * 2 + 0) * planes + p), &lo, 8);
            memcpy(masks + 8 * ((u * 2 + 1) * planes + p), &hi, 8);
        }
}

static void pack_block(uint32_t type, const row_parts *rows, uint8_t *out)
{
    for (int r = 0; r < NPL_PACK_ROWS; r++) {
        if (type == NPL_TYPE_MXFP4)
            out[r] = (uint8_t)rows[r].d;
        else
            wr16(out + 2 * r, rows[r].d);
    }
    switch (type) {
    case NPL_TYPE_Q4_0:
        put_chunk(rows, 0, out + NPL_PK_Q4_0_QS, NULL, 0);
        break;
    case NPL_TYPE_MXFP4:
        put_chunk(rows, 0, out + NPL_PK_MXFP4_QS, NULL, 0);
        break;
    case NPL_TYPE_Q4_1:
        for (int r = 0; r < NPL_PACK_ROWS; r++)
            wr16(out + NPL_PK_Q4_1_M + 2 * r, rows[r].m);
        put_chunk(rows, 0, out + NPL_PK_Q4_1_QS, NULL, 0);
        break;
    case NPL_TYPE_Q5_0:
        put_chunk(rows, 0, out + NPL_PK_Q5_0_QS, out + NPL_PK_Q5_0_MASK, 1);
        break;
    case NPL_TYPE_Q5_1:
        for (int r = 0; r < NPL_PACK_ROWS; r++)
            wr16(out + NPL_PK_Q5_1_M + 2 * r, rows[r].m);
        put_chunk(rows, 0, out + NPL_PK_Q5_1_QS, out + NPL_PK_Q5_1_MASK, 1);
        break;
    case NPL_TYPE_Q8_0:
        for (int r = 0; r < NPL_PACK_ROWS; r++)
            for (int u = 0; u < 8; u++)
                memcpy(out + NPL_PK_Q8_0_QS + NPL_PACK_UNIT * u + 4 * r, rows[r].q8 + 4 * u, 4);
        break;
    case NPL_TYPE_Q4_K:
    case NPL_TYPE_Q5_K: {
        bool five = type == NPL_TYPE_Q5_K;
        for (int r = 0; r < NPL_PACK_ROWS; r++) {
            wr16(out + NPL_PK_K_DMIN + 2 * r, rows[r].m);
            for (int c = 0; c < 8; c++) {
                out[NPL_PK_K_SC + 16 * c + r] = rows[r].sc[c];
                out[NPL_PK_K_MN + 32 * (c / 2) + 2 * r + c % 2] = rows[r].mn[c];
            }
        }
        size_t stride = five ? NPL_PK_Q5_K_CHUNK : NPL_PK_Q4_K_CHUNK;
        for (int c = 0; c < 8; c++) {
            uint8_t *chunk = out + NPL_PK_K_CHUNKS + stride * (size_t)c;
            if (five)
                put_chunk(rows, c, chunk + 64, chunk, 1);
            else
                put_chunk(rows, c, chunk, NULL, 0);
        }
        break;
    }
    case NPL_TYPE_Q6_K:
        for (int r = 0; r < NPL_PACK_ROWS; r++)
            for (int g = 0; g < 16; g++)
                out[NPL_PK_Q6_K_SC + 32 * (g / 2) + 2 * r + g % 2] = rows[r].sc[g];
        for (int c = 0; c < 8; c++) {
            uint8_t *chunk = out + NPL_PK_Q6_K_CHUNKS + (size_t)NPL_PK_Q6_K_CHUNK * (size_t)c;
            put_chunk(rows, c, chunk + 128, chunk, 2);
        }
        break;
    default:
        break;
    }
}

void npl_pack_groups(const npl_matrix *w, const npl_packed_matrix *p, int64_t g0, int64_t g1)
{
    const npl_type_traits *tr = npl_type_traits_get(w->type);
    row_parts rows[NPL_PACK_ROWS];
    for (int64_t g = g0; g < g1; g++) {
        int64_t r0 = g * NPL_PACK_ROWS;
        int n_valid = (int)(w->n_rows - r0 < NPL_PACK_ROWS ? w->n_rows - r0 : NPL_PACK_ROWS);
        /* rows past the matrix (the last group's padding) are zero:
         * zero scales, and for Q8_0 the biased zero */
        memset(rows, 0, sizeof rows);
        for (int r = n_valid; r < NPL_PACK_ROWS; r++)
            memset(rows[r].q8, 0x80, sizeof rows[r].q8);
        uint8_t *dst = p->data + (size_t)g * p->group_bytes;
        for (size_t b = 0; b < p->n_blocks; b++) {
            for (int r = 0; r < n_valid; r++) {
                const uint8_t *src = (const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes + b * tr->type_size;
                row_parts_of(w->type, src, &rows[r]);
            }
            pack_block(w->type, rows, dst + b * p->block_bytes);
        }
    }
}
