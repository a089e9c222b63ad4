/* Integer kernels over the packed layout (matmul_packed.h), written once
 * over simd_vec.h: one row group (16 rows, one vi of lanes) against a
 * tile of vectors. A group's weights are loaded and unpacked once per
 * block and used by every vector of the tile; each unit is dotted with 4
 * broadcast activation bytes (VPDPBUSD, or VPMADDUBSW runs without VNNI),
 * so every lane ends a block holding its row's exact integer dot, and the
 * float steps per lane follow matmul_ref.h: the same bits at every level. */
#include "ggml_types.h"
#include "kernels_isa.h"

/* Vectors per tile, so that the accumulators stay in registers; with
 * enough registers two row groups share each activation broadcast. */
#if NPL_V_TILE >= 16
#define TILE_VECS_LEGACY 8
#define TILE_VECS_PAIR 4
#define TILE_VECS_K 6
#define GROUPS_MAX 2
#else
#define TILE_VECS_LEGACY 2
#define TILE_VECS_PAIR 2
#define TILE_VECS_K 2
#define GROUPS_MAX 1
#endif

/* How far ahead of each weight stream the kernels prefetch: 2 KiB (a
 * G = 2 tile has two streams). Measured on the 1B decode shapes (1 vector,
 * huge pages): 2048-2560 bytes beat 1024 and 4096 by 4-7% for Q4_0 and
 * Q8_0 and by 20% for Q4_K. */
#define PREFETCH_BYTES 2048

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0, K_MXFP4 };

/* MXFP4 codes -> doubled E2M1 levels + 12 (NPL_MXFP4_LEVELS_X2). */
static const int8_t mxfp4_biased[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

/* 16 rows' 2^(e - 128) from their exponent bytes, exact for every e:
 * 2^(floor(e/2) - 64) * 2^(ceil(e/2) - 64), both factors normal floats. */
NPL_V_AI vf e8m0_half_rows(const uint8_t *e)
{
    vi x = vi_load_u8(e), bias = vi_set1(63);
    vi lo = vi_slli(vi_add(vi_srli(x, 1), bias), 23);
    vi hi = vi_slli(vi_add(vi_srli(vi_add(x, vi_set1(1)), 1), bias), 23);
    return vf_mul(vf_from_bits(lo), vf_from_bits(hi));
}

/* Unit u of a 4-bit chunk: w[u] low nibbles (elements 4u..), w[4 + u]
 * high nibbles (16 + 4u..), plus the fifth/sixth bits from the masks. */
NPL_V_AI void unpack_chunk4(const uint8_t *qs, const uint8_t *masks, int planes, vu w[8])
{
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
        vu raw = vu_load(qs + NPL_PACK_UNIT * u);
        vu lo = vu_lo_nibbles(raw), hi = vu_hi_nibbles(raw);
        for (int p = 0; p < planes; p++) {
            lo = vu_add_bit(lo, masks + 8 * ((u * 2 + 0) * planes + p), 16 << p);
            hi = vu_add_bit(hi, masks + 8 * ((u * 2 + 1) * planes + p), 16 << p);
        }
        w[u] = lo;
        w[4 + u] = hi;
    }
}

/* s + the exact dot of n units w[0..n) (weights below 2^bits) with
 * q[0..4n), in runs the accumulator can hold. */
NPL_V_AI vi dot_units(vi s, const vu *w, const int8_t *const *q, int n, int bits)
{
    const int run = NPL_V_DOT_RUN(bits) < n ? NPL_V_DOT_RUN(bits) : n;
#pragma GCC unroll 8
    for (int u0 = 0; u0 < n; u0 += run) {
        vp p = vp_start(s);
#pragma GCC unroll 8
        for (int u = u0; u < u0 + run; u++)
            p = vp_dot(p, w[u], q[u]);
        s = vp_finish(s, p);
    }
    return s;
}

/* A 32-element chunk: units in the order low 0, high 0, low 1, ... */
NPL_V_AI vi chunk_dot(vi s, const vu w[8], const int8_t *q, int bits)
{
    const vu wo[8] = {w[0], w[4], w[1], w[5], w[2], w[6], w[3], w[7]};
    const int8_t *qo[8] = {q, q + 16, q + 4, q + 20, q + 8, q + 24, q + 12, q + 28};
    return dot_units(s, wo, qo, 8, bits);
}

/* ---- legacy 32-element formats -------------------------------------------- */

/* G row groups against V vectors: each unit of weights is loaded and
 * unpacked once per tile, each 4 activation bytes broadcast once for the
 * G groups. acc[g][v] receives row group g's 16 results for vector v. */
NPL_V_AI void legacy_tile(int kind, int G, const uint8_t *gb, size_t gstride, size_t nb, const npl_act_q8 *a,
                          size_t a_stride, int V, vf acc[GROUPS_MAX][TILE_VECS_LEGACY])
{
    size_t bb;
    int qs_off, mask_off = -1, m_off = -1, zp_shift = -1, bits = 4; /* zero point = 8 << zp_shift */
    switch (kind) {
    case K_Q4_0: bb = NPL_PK_Q4_0_BYTES; qs_off = NPL_PK_Q4_0_QS; zp_shift = 0; break;
    case K_Q4_1: bb = NPL_PK_Q4_1_BYTES; qs_off = NPL_PK_Q4_1_QS; m_off = NPL_PK_Q4_1_M; break;
    case K_Q5_0:
        bb = NPL_PK_Q5_0_BYTES; qs_off = NPL_PK_Q5_0_QS; mask_off = NPL_PK_Q5_0_MASK; zp_shift = 1; bits = 5;
        break;
    case K_Q5_1:
        bb = NPL_PK_Q5_1_BYTES; qs_off = NPL_PK_Q5_1_QS; mask_off = NPL_PK_Q5_1_MASK; m_off = NPL_PK_Q5_1_M; bits = 5;
        break;
    case K_MXFP4: bb = NPL_PK_MXFP4_BYTES; qs_off = NPL_PK_MXFP4_QS; bits = 5; break;
    default: bb = NPL_PK_Q8_0_BYTES; qs_off = NPL_PK_Q8_0_QS; bits = 8; break;
    }
#pragma GCC unroll 2
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int v = 0; v < V; v++)
            acc[g][v] = vf_zero();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk[GROUPS_MAX];
        vf dw[GROUPS_MAX], mw[GROUPS_MAX];
        vi s[GROUPS_MAX][TILE_VECS_LEGACY];
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            blk[g] = gb + (size_t)g * gstride + b * bb;
            npl_v_prefetch(blk[g], PREFETCH_BYTES, bb);
            dw[g] = kind == K_MXFP4 ? e8m0_half_rows(blk[g]) : vf_load_f16(blk[g]);
            mw[g] = m_off >= 0 ? vf_load_f16(blk[g] + m_off) : vf_zero();
        }
        /* the zero point's term starts each sum: -zp * sum(q_a) */
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            const npl_act_q8 *ab = a + (size_t)v * a_stride + b;
            vi init = kind == K_Q8_0    ? vi_q8_init(ab->nsum8)
                      : kind == K_MXFP4 ? vi_set1(-12 * ab->sum)
                      : zp_shift >= 0   ? vi_set1(ab->nsum8 * (1 << zp_shift))
                                        : vi_set1(0);
#pragma GCC unroll 2
            for (int g = 0; g < G; g++)
                s[g][v] = init;
        }
        /* Q8_0: 8 units of one dot each; else 4 units of two (low and
         * high nibbles); in runs the accumulators can hold */
        const bool q8 = kind == K_Q8_0;
        const int units = q8 ? 8 : 4;
        const int run = q8 ? NPL_V_Q8_RUN : NPL_V_DOT_RUN(bits) / 2 < 4 ? NPL_V_DOT_RUN(bits) / 2 : 4;
        for (int u0 = 0; u0 < units; u0 += run) {
            vp p[GROUPS_MAX][TILE_VECS_LEGACY];
#pragma GCC unroll 2
            for (int g = 0; g < G; g++)
#pragma GCC unroll 8
                for (int v = 0; v < V; v++)
                    p[g][v] = vp_start(s[g][v]);
#pragma GCC unroll 8
            for (int u = u0; u < u0 + run; u++) {
                vu lo[GROUPS_MAX], hi[GROUPS_MAX];
#pragma GCC unroll 2
                for (int g = 0; g < G; g++) {
                    vu raw = vu_load(blk[g] + qs_off + NPL_PACK_UNIT * u);
                    if (q8) {
                        lo[g] = raw;
                        continue;
                    }
                    lo[g] = vu_lo_nibbles(raw);
                    hi[g] = vu_hi_nibbles(raw);
                    if (kind == K_MXFP4) {
                        lo[g] = vu_lookup16(lo[g], mxfp4_biased);
                        hi[g] = vu_lookup16(hi[g], mxfp4_biased);
                    }
                    if (mask_off >= 0) {
                        lo[g] = vu_add_bit(lo[g], blk[g] + mask_off + 16 * u, 16);
                        hi[g] = vu_add_bit(hi[g], blk[g] + mask_off + 16 * u + 8, 16);
                    }
                }
#pragma GCC unroll 8
                for (int v = 0; v < V; v++) {
                    const int8_t *q = a[(size_t)v * a_stride + b].q + 4 * u;
#pragma GCC unroll 2
                    for (int g = 0; g < G; g++) {
                        if (q8) {
                            p[g][v] = vp_dot_q8(p[g][v], lo[g], q);
                        } else {
                            p[g][v] = vp_dot(p[g][v], lo[g], q);
                            p[g][v] = vp_dot(p[g][v], hi[g], q + 16);
                        }
                    }
                }
            }
#pragma GCC unroll 2
            for (int g = 0; g < G; g++)
#pragma GCC unroll 8
                for (int v = 0; v < V; v++)
                    s[g][v] = vp_finish(s[g][v], p[g][v]);
        }
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            const npl_act_q8 *ab = a + (size_t)v * a_stride + b;
            vf da = vf_set1(ab->d);
#pragma GCC unroll 2
            for (int g = 0; g < G; g++) {
                acc[g][v] = vf_fmadd(vf_mul(dw[g], da), vf_from_vi(s[g][v]), acc[g][v]);
                if (m_off >= 0)
                    acc[g][v] = vf_fmadd(mw[g], vf_set1(ab->s), acc[g][v]);
            }
        }
    }
}

/* ---- K-quants: Q4_K, Q5_K, Q6_K --------------------------------------------- */

/* 16 elements of 6-bit weights: units w[0..4) against q[0..16). */
NPL_V_AI vi q6_half_dot(const vu *w, const int8_t *q)
{
    const int8_t *qo[4] = {q, q + 4, q + 8, q + 12};
    return dot_units(vi_set1(0), w, qo, 4, 6);
}

/* One row group against V vectors, per super-block: the 8 chunks'
 * integer sums S weighted by their sub-block scales, then Q4_K/Q5_K's
 * mins M (acc -= dmin * d_a * M) or Q6_K's offset of 32. */
NPL_V_AI void k_tile(uint32_t type, const uint8_t *gb, size_t nb, const npl_act_q8k *a, size_t a_stride, int V,
                     vf *acc)
{
    const bool q6 = type == NPL_TYPE_Q6_K, five = type == NPL_TYPE_Q5_K;
    size_t bb = q6 ? NPL_PK_Q6_K_BYTES : five ? NPL_PK_Q5_K_BYTES : NPL_PK_Q4_K_BYTES;
    size_t chunks = q6 ? NPL_PK_Q6_K_CHUNKS : NPL_PK_K_CHUNKS;
    size_t cstride = q6 ? NPL_PK_Q6_K_CHUNK : five ? NPL_PK_Q5_K_CHUNK : NPL_PK_Q4_K_CHUNK;
#pragma GCC unroll 8
    for (int v = 0; v < V; v++)
        acc[v] = vf_zero();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = gb + b * bb;
        vi S[TILE_VECS_K];
#pragma GCC unroll 8
        for (int v = 0; v < V; v++)
            S[v] = vi_set1(0);
        npl_v_prefetch(blk, PREFETCH_BYTES, chunks);
        for (int c = 0; c < 8; c++) {
            const uint8_t *chunk = blk + chunks + cstride * (size_t)c;
            npl_v_prefetch(chunk, PREFETCH_BYTES, cstride);
            vu w[8];
            if (q6) {
                unpack_chunk4(chunk + 128, chunk, 2, w);
                vi scp = vi_load_i8pairs(blk + NPL_PK_Q6_K_SC + 32 * c);
                vi sc_even = vi_srai(vi_slli(scp, 16), 16), sc_odd = vi_srai(scp, 16);
#pragma GCC unroll 8
                for (int v = 0; v < V; v++) {
                    const int8_t *q = a[(size_t)v * a_stride + b].q + 32 * c;
                    vi lo = q6_half_dot(w, q), hi = q6_half_dot(w + 4, q + 16);
                    S[v] = vi_add(S[v], vi_add(vi_mullo(lo, sc_even), vi_mullo(hi, sc_odd)));
                }
            } else {
                unpack_chunk4(five ? chunk + 64 : chunk, chunk, five ? 1 : 0, w);
                vi sc = vi_load_u8(blk + NPL_PK_K_SC + 16 * c);
#pragma GCC unroll 8
                for (int v = 0; v < V; v++) {
                    const int8_t *q = a[(size_t)v * a_stride + b].q + 32 * c;
                    S[v] = vi_add(S[v], vi_mullo(chunk_dot(vi_set1(0), w, q, five ? 5 : 4), sc));
                }
            }
        }
        vf d = vf_load_f16(blk);
        if (q6) {
#pragma GCC unroll 8
            for (int v = 0; v < V; v++) {
                const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
                vi corr = vi_set1(0);
#pragma GCC unroll 8
                for (int p = 0; p < 8; p++)
                    corr = vi_dot_pairs(corr, vi_load_i8pairs(blk + NPL_PK_Q6_K_SC + 32 * p), ab->bsum16 + 2 * p);
                vi s = vi_sub(S[v], vi_slli(corr, 5));
                acc[v] = vf_fmadd(vf_mul(d, vf_set1(ab->d)), vf_from_vi(s), acc[v]);
            }
            continue;
        }
        vf dmin = vf_load_f16(blk + NPL_PK_K_DMIN);
        vi mn[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++)
            mn[p] = vi_load_u8pairs(blk + NPL_PK_K_MN + 32 * p);
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
            vi M = vi_set1(0);
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++)
                M = vi_dot_pairs(M, mn[p], ab->bsum32 + 2 * p);
            vf da = vf_set1(ab->d);
            acc[v] = vf_fmadd(vf_mul(d, da), vf_from_vi(S[v]), acc[v]);
            acc[v] = vf_fnmadd(vf_mul(dmin, da), vf_from_vi(M), acc[v]);
        }
    }
}

/* ---- drivers ------------------------------------------------------------------------ */

static inline void store_rows(float *y, int64_t row0, int64_t n_rows, vf v)
{
    int64_t left = n_rows - row0;
    if (left >= NPL_PACK_ROWS)
        vf_storeu(y + row0, v);
    else
        vf_storeu_n(y + row0, v, (size_t)left);
}

/* Vectors whose activations stay in L2 while every row group of the
 * slice passes over them (then the next ones): about 256 KiB of
 * quantized activations, in whole tiles. */
static size_t vectors_per_pass(size_t act_bytes_per_vec, size_t tile)
{
    size_t n = ((size_t)256 << 10) / (act_bytes_per_vec ? act_bytes_per_vec : 1);
    n -= n % tile;
    return n < tile ? tile : n;
}

/* One tile of nv vectors, V a constant per case: calls CALL(V), one
 * instance per V up to MAX (larger nv never occur). */
#define TILE_CASE(k, CALL, MAX)                                                                            \
    case k:                                                                                                \
        if ((k) < (MAX)) {                                                                                 \
            CALL((k) < (MAX) ? (k) : (MAX));                                                               \
            break;                                                                                         \
        }                                                                                                  \
        __attribute__((fallthrough));
#define TILE_SWITCH(nv, CALL, MAX)                                                                         \
    switch (nv) {                                                                                          \
        TILE_CASE(1, CALL, MAX)                                                                            \
        TILE_CASE(2, CALL, MAX)                                                                            \
        TILE_CASE(3, CALL, MAX)                                                                            \
        TILE_CASE(4, CALL, MAX)                                                                            \
        TILE_CASE(5, CALL, MAX)                                                                            \
        TILE_CASE(6, CALL, MAX)                                                                            \
        TILE_CASE(7, CALL, MAX)                                                                            \
    default: CALL(MAX); break;                                                                             \
    }

/* Two row groups per tile (TILE_VECS_PAIR vectors) while two remain and
 * the registers allow, else one (TILE_VECS_LEGACY vectors). Inlined per
 * format, so each gets its own unrolled tiles. */
NPL_V_AI void legacy_matmul(int kind, const npl_packed_matrix *p, int64_t g0, int64_t g1, const npl_act_q8 *a,
                          size_t n_vec, float *const *y)
{
    size_t pass = vectors_per_pass(p->n_blocks * sizeof(npl_act_q8), TILE_VECS_LEGACY);
    for (size_t p0 = 0; p0 < n_vec; p0 += pass) {
        size_t p1 = n_vec - p0 < pass ? n_vec : p0 + pass;
        for (int64_t g = g0; g < g1;) {
            const uint8_t *gb = p->data + (size_t)g * p->group_bytes;
            int G = GROUPS_MAX > 1 && g + 1 < g1 ? 2 : 1;
            size_t tile = G == 2 ? TILE_VECS_PAIR : TILE_VECS_LEGACY;
            for (size_t v0 = p0; v0 < p1; v0 += tile) {
                size_t nv = p1 - v0 < tile ? p1 - v0 : tile;
                vf acc[GROUPS_MAX][TILE_VECS_LEGACY];
                const npl_act_q8 *av = a + v0 * p->n_blocks;
#define PAIR_CALL(V) legacy_tile(kind, 2, gb, p->group_bytes, p->n_blocks, av, p->n_blocks, V, acc)
#define ONE_CALL(V) legacy_tile(kind, 1, gb, p->group_bytes, p->n_blocks, av, p->n_blocks, V, acc)
                if (G == 2) {
                    TILE_SWITCH(nv, PAIR_CALL, TILE_VECS_PAIR)
                } else {
                    TILE_SWITCH(nv, ONE_CALL, TILE_VECS_LEGACY)
                }
                for (int gi = 0; gi < G; gi++)
                    for (size_t v = 0; v < nv; v++)
                        store_rows(y[v0 + v], (g + gi) * NPL_PACK_ROWS, p->n_rows, acc[gi][v]);
            }
            g += G;
        }
    }
}

/* The K-quants: one row group per tile of TILE_VECS_K vectors. */
NPL_V_AI void k_matmul(uint32_t type, const npl_packed_matrix *p, int64_t g0, int64_t g1, const npl_act_q8k *a,
                     size_t n_vec, float *const *y)
{
    size_t pass = vectors_per_pass(p->n_blocks * sizeof(npl_act_q8k), TILE_VECS_K);
    for (size_t p0 = 0; p0 < n_vec; p0 += pass) {
        size_t p1 = n_vec - p0 < pass ? n_vec : p0 + pass;
        for (int64_t g = g0; g < g1; g++) {
            const uint8_t *gb = p->data + (size_t)g * p->group_bytes;
            for (size_t v0 = p0; v0 < p1; v0 += TILE_VECS_K) {
                size_t nv = p1 - v0 < TILE_VECS_K ? p1 - v0 : TILE_VECS_K;
                vf acc[TILE_VECS_K];
                const npl_act_q8k *av = a + v0 * p->n_blocks;
#define K_CALL(V) k_tile(type, gb, p->n_blocks, av, p->n_blocks, V, acc)
                TILE_SWITCH(nv, K_CALL, TILE_VECS_K)
                for (size_t v = 0; v < nv; v++)
                    store_rows(y[v0 + v], g * NPL_PACK_ROWS, p->n_rows, acc[v]);
            }
        }
    }
}

void NPL_ISA_FN(npl_packed_matmul)(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,
                                   float *const *y)
{
    switch (p->type) {
    case NPL_TYPE_Q4_0: legacy_matmul(K_Q4_0, p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q4_1: legacy_matmul(K_Q4_1, p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q5_0: legacy_matmul(K_Q5_0, p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q5_1: legacy_matmul(K_Q5_1, p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q8_0: legacy_matmul(K_Q8_0, p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_MXFP4: legacy_matmul(K_MXFP4, p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q4_K: k_matmul(NPL_TYPE_Q4_K, p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q5_K: k_matmul(NPL_TYPE_Q5_K, p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q6_K: k_matmul(NPL_TYPE_Q6_K, p, g0, g1, act, n_vec, y); break;
    default: break;
    }
}
