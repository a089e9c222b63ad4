/* The scratch layout of npl_attention_tiled (internal to kernels/cpu),
 * shared by the size query and the AMX kernel. Every array starts on a
 * 64-byte line (tile loads and stores). */
#ifndef NPL_ATTENTION_TILED_INTERNAL_H
#define NPL_ATTENTION_TILED_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "attention_tiled.h"

#define NPL_ATTN_TILE_ROWS 16 /* query rows (position x head) per tile */

typedef struct npl_attn_tiled_layout {
    size_t n_rows, n_tiles;
    uint32_t *qb;     /* [tile][head_dim / 8 chunks][16][16] q pairs (VNNI): [qh|qh|ql|ql] */
    uint16_t *kh, *kl; /* [64 keys][head_dim] bf16 parts of the block's keys */
    uint16_t *vth, *vtl; /* [head_dim][64 keys] bf16 parts of the block's values, transposed */
    float *st;        /* [64 keys][16 rows] scores of one tile */
    uint32_t *pbh, *pbl; /* [32 key pairs][16 rows] weight pairs (VNNI), hi and lo parts */
    float *acc;       /* [tile][head_dim][16 rows] */
    float *run_max, *run_sum; /* [tile][16] */
    uint32_t *lo, *hi; /* [tile][16] visible key positions per row */
} npl_attn_tiled_layout;

static inline size_t npl_attn_tiled_take(uint8_t *base, size_t *off, size_t bytes, void **out)
{
    if (base)
        *out = base + *off;
    *off += (bytes + 63) & ~(size_t)63;
    return *off;
}

/* Fills L from base (64-byte aligned; NULL: sizes only); returns the bytes. */
static inline size_t npl_attn_tiled_layout_of(size_t n_pos, size_t group, size_t hd, uint8_t *base,
                                              npl_attn_tiled_layout *L)
{
    enum { K = NPL_ATTN_TILED_KEYS, R = NPL_ATTN_TILE_ROWS };
    size_t off = 0;
    L->n_rows = n_pos * group;
    L->n_tiles = (L->n_rows + R - 1) / R;
    size_t t = L->n_tiles;
    npl_attn_tiled_take(base, &off, t * (hd / 8) * R * 16 * 4, (void **)&L->qb);
    npl_attn_tiled_take(base, &off, K * hd * 2, (void **)&L->kh);
    npl_attn_tiled_take(base, &off, K * hd * 2, (void **)&L->kl);
    npl_attn_tiled_take(base, &off, hd * K * 2, (void **)&L->vth);
    npl_attn_tiled_take(base, &off, hd * K * 2, (void **)&L->vtl);
    npl_attn_tiled_take(base, &off, K * R * 4, (void **)&L->st);
    npl_attn_tiled_take(base, &off, K / 2 * R * 4, (void **)&L->pbh);
    npl_attn_tiled_take(base, &off, K / 2 * R * 4, (void **)&L->pbl);
    npl_attn_tiled_take(base, &off, t * hd * R * 4, (void **)&L->acc);
    npl_attn_tiled_take(base, &off, t * R * 4, (void **)&L->run_max);
    npl_attn_tiled_take(base, &off, t * R * 4, (void **)&L->run_sum);
    npl_attn_tiled_take(base, &off, t * R * 4, (void **)&L->lo);
    return npl_attn_tiled_take(base, &off, t * R * 4, (void **)&L->hi);
}

#if defined(NPL_HAVE_X86_KERNELS)
void npl_attention_tiled_amx(const npl_attn_tiled_job *job, const npl_attn_tiled_layout *L);
#endif

#endif
