/* AVX-512 VNNI kernels over the packed layout (matmul_packed.h): one row
 * group (16 rows, one register of lanes) against a tile of up to
 * TILE_VECS vectors. The group's weights are loaded and unpacked once per
 * block and used by every vector of the tile; each vector's products go
 * through VPDPBUSD with 4 broadcast activation bytes, so every lane ends a
 * block holding its row's exact integer dot. The float steps per lane
 * follow matmul_ref.h exactly. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>
#include <string.h>

#include "ggml_types.h"

#define AI static inline __attribute__((always_inline))

/* Vectors per tile: every accumulator stays in a register. */
#define TILE_VECS_LEGACY 8
#define TILE_VECS_K 6

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

AI __m512i bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

AI __m512 load_halves(const uint8_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}

AI __mmask64 load_mask(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return _cvtu64_mask64(v);
}

AI __m512i load_unit(const uint8_t *p)
{
    return _mm512_loadu_si512((const void *)p);
}

/* Weights stream from memory once per step: ask for the lines of the
 * block PREFETCH_BYTES ahead, so they arrive while this one is computed
 * (the hardware prefetcher alone falls behind when the core is busy). */
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 4096
#endif
AI void prefetch_ahead(const uint8_t *blk, size_t bytes)
{
    for (size_t off = 0; off < bytes; off += 64)
        _mm_prefetch((const char *)(blk + PREFETCH_BYTES + off), _MM_HINT_T0);
}

/* Unit u of a 4-bit chunk: low nibbles (elements 4u..) and high nibbles
 * (16+4u..), plus the fifth/sixth bits from the masks when present. */
AI void unpack_chunk4(const uint8_t *qs, const uint8_t *masks, int planes, __m512i w[8])
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
        __m512i raw = load_unit(qs + NPL_PACK_UNIT * u);
        __m512i lo = _mm512_and_si512(raw, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        if (planes >= 1) {
            const __m512i b16 = _mm512_set1_epi8(16);
            lo = _mm512_mask_add_epi8(lo, load_mask(masks + 8 * ((u * 2 + 0) * planes + 0)), lo, b16);
            hi = _mm512_mask_add_epi8(hi, load_mask(masks + 8 * ((u * 2 + 1) * planes + 0)), hi, b16);
        }
        if (planes >= 2) {
            const __m512i b32 = _mm512_set1_epi8(32);
            lo = _mm512_mask_add_epi8(lo, load_mask(masks + 8 * ((u * 2 + 0) * planes + 1)), lo, b32);
            hi = _mm512_mask_add_epi8(hi, load_mask(masks + 8 * ((u * 2 + 1) * planes + 1)), hi, b32);
        }
        w[u] = lo;
        w[4 + u] = hi;
    }
}

/* Exact sum over a 32-element chunk of q_w * q_a, starting from init:
 * two chains of four to halve the latency. */
AI __m512i chunk_dot(const __m512i w[8], const int8_t *q, __m512i init)
{
    __m512i s0 = init, s1 = _mm512_setzero_si512();
    s0 = _mm512_dpbusd_epi32(s0, w[0], bcast4(q + 0));
    s1 = _mm512_dpbusd_epi32(s1, w[4], bcast4(q + 16));
    s0 = _mm512_dpbusd_epi32(s0, w[1], bcast4(q + 4));
    s1 = _mm512_dpbusd_epi32(s1, w[5], bcast4(q + 20));
    s0 = _mm512_dpbusd_epi32(s0, w[2], bcast4(q + 8));
    s1 = _mm512_dpbusd_epi32(s1, w[6], bcast4(q + 24));
    s0 = _mm512_dpbusd_epi32(s0, w[3], bcast4(q + 12));
    s1 = _mm512_dpbusd_epi32(s1, w[7], bcast4(q + 28));
    return _mm512_add_epi32(s0, s1);
}

/* ---- legacy 32-element formats -------------------------------------------- */

/* G (1 or 2) row groups against V vectors: each unit of weights is
 * loaded and unpacked once per tile, each 4 activation bytes broadcast
 * once for the G groups. acc[g][v] receives row group g's 16 results
 * for vector v. */
AI void legacy_tile(int kind, int G, const uint8_t *gb, size_t gstride, size_t nb, const npl_act_q8 *a,
                    size_t a_stride, int V, __m512 acc[2][TILE_VECS_LEGACY])
{
    size_t bb;
    int qs_off, mask_off = -1, m_off = -1, zp_shift = -1; /* zero point = 8 << zp_shift */
    switch (kind) {
    case K_Q4_0: bb = NPL_PK_Q4_0_BYTES; qs_off = NPL_PK_Q4_0_QS; zp_shift = 0; break;
    case K_Q4_1: bb = NPL_PK_Q4_1_BYTES; qs_off = NPL_PK_Q4_1_QS; m_off = NPL_PK_Q4_1_M; break;
    case K_Q5_0: bb = NPL_PK_Q5_0_BYTES; qs_off = NPL_PK_Q5_0_QS; mask_off = NPL_PK_Q5_0_MASK; zp_shift = 1; break;
    case K_Q5_1: bb = NPL_PK_Q5_1_BYTES; qs_off = NPL_PK_Q5_1_QS; mask_off = NPL_PK_Q5_1_MASK; m_off = NPL_PK_Q5_1_M; break;
    default: bb = NPL_PK_Q8_0_BYTES; qs_off = NPL_PK_Q8_0_QS; zp_shift = 4; break;
    }
    const __m512i m4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 2
    for (int g = 0; g < G; g++)
#pragma GCC unroll 8
        for (int v = 0; v < V; v++)
            acc[g][v] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk[2];
        __m512 dw[2], mw[2];
        __m512i s[2][TILE_VECS_LEGACY];
#pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            blk[g] = gb + (size_t)g * gstride + b * bb;
            prefetch_ahead(blk[g], bb);
            dw[g] = load_halves(blk[g]);
            mw[g] = m_off >= 0 ? load_halves(blk[g] + m_off) : _mm512_setzero_ps();
        }
        /* the zero point's term starts each sum: -zp * sum(q_a) */
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            const npl_act_q8 *ab = a + (size_t)v * a_stride + b;
            __m512i init = _mm512_setzero_si512();
            if (zp_shift >= 0)
                init = _mm512_slli_epi32(_mm512_set1_epi32(ab->nsum8), (unsigned)zp_shift);
#pragma GCC unroll 2
            for (int g = 0; g < G; g++)
                s[g][v] = init;
        }
        if (kind == K_Q8_0) {
#pragma GCC unroll 8
            for (int u = 0; u < 8; u++) {
                __m512i w[2];
#pragma GCC unroll 2
                for (int g = 0; g < G; g++)
                    w[g] = load_unit(blk[g] + qs_off + NPL_PACK_UNIT * u);
#pragma GCC unroll 8
                for (int v = 0; v < V; v++) {
                    __m512i bc = bcast4(a[(size_t)v * a_stride + b].q + 4 * u);
#pragma GCC unroll 2
                    for (int g = 0; g < G; g++)
                        s[g][v] = _mm512_dpbusd_epi32(s[g][v], w[g], bc);
                }
            }
        } else {
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                __m512i lo[2], hi[2];
#pragma GCC unroll 2
                for (int g = 0; g < G; g++) {
                    __m512i raw = load_unit(blk[g] + qs_off + NPL_PACK_UNIT * u);
                    lo[g] = _mm512_and_si512(raw, m4);
                    hi[g] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
                    if (mask_off >= 0) {
                        const __m512i b16 = _mm512_set1_epi8(16);
                        lo[g] = _mm512_mask_add_epi8(lo[g], load_mask(blk[g] + mask_off + 16 * u), lo[g], b16);
                        hi[g] = _mm512_mask_add_epi8(hi[g], load_mask(blk[g] + mask_off + 16 * u + 8), hi[g], b16);
                    }
                }
#pragma GCC unroll 8
                for (int v = 0; v < V; v++) {
                    const int8_t *q = a[(size_t)v * a_stride + b].q;
                    __m512i bl = bcast4(q + 4 * u), bh = bcast4(q + 16 + 4 * u);
#pragma GCC unroll 2
                    for (int g = 0; g < G; g++) {
                        s[g][v] = _mm512_dpbusd_epi32(s[g][v], lo[g], bl);
                        s[g][v] = _mm512_dpbusd_epi32(s[g][v], hi[g], bh);
                    }
                }
            }
        }
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            const npl_act_q8 *ab = a + (size_t)v * a_stride + b;
            __m512 da = _mm512_set1_ps(ab->d);
#pragma GCC unroll 2
            for (int g = 0; g < G; g++) {
                acc[g][v] = _mm512_fmadd_ps(_mm512_mul_ps(dw[g], da), _mm512_cvtepi32_ps(s[g][v]), acc[g][v]);
                if (m_off >= 0)
                    acc[g][v] = _mm512_fmadd_ps(mw[g], _mm512_set1_ps(ab->s), acc[g][v]);
            }
        }
    }
}

/* ---- Q4_K, Q5_K ------------------------------------------------------------- */

AI void k45_tile(bool five, const uint8_t *gb, size_t nb, const npl_act_q8k *a, size_t a_stride, int V, __m512 *acc)
{
    size_t bb = five ? NPL_PK_Q5_K_BYTES : NPL_PK_Q4_K_BYTES;
    size_t cstride = five ? NPL_PK_Q5_K_CHUNK : NPL_PK_Q4_K_CHUNK;
#pragma GCC unroll 16
    for (int v = 0; v < V; v++)
        acc[v] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = gb + b * bb;
        __m512i S[TILE_VECS_K];
#pragma GCC unroll 16
        for (int v = 0; v < V; v++)
            S[v] = _mm512_setzero_si512();
        prefetch_ahead(blk, NPL_PK_K_CHUNKS);
        for (int c = 0; c < 8; c++) {
            const uint8_t *chunk = blk + NPL_PK_K_CHUNKS + cstride * (size_t)c;
            prefetch_ahead(chunk, cstride);
            __m512i w[8];
            unpack_chunk4(five ? chunk + 64 : chunk, chunk, five ? 1 : 0, w);
            __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(blk + NPL_PK_K_SC + 16 * c)));
#pragma GCC unroll 16
            for (int v = 0; v < V; v++) {
                const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
                __m512i isum = chunk_dot(w, ab->q + 32 * c, _mm512_setzero_si512());
                S[v] = _mm512_add_epi32(S[v], _mm512_mullo_epi32(isum, sc));
            }
        }
        __m512 d = load_halves(blk);
        __m512 dmin = load_halves(blk + NPL_PK_K_DMIN);
        __m512i mn[4];
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++)
            mn[p] = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(blk + NPL_PK_K_MN + 32 * p)));
#pragma GCC unroll 16
        for (int v = 0; v < V; v++) {
            const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
            __m512i M = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mn[0], bcast4(ab->bsum32 + 0));
            M = _mm512_dpwssd_epi32(M, mn[1], bcast4(ab->bsum32 + 2));
            M = _mm512_dpwssd_epi32(M, mn[2], bcast4(ab->bsum32 + 4));
            M = _mm512_dpwssd_epi32(M, mn[3], bcast4(ab->bsum32 + 6));
            __m512 da = _mm512_set1_ps(ab->d);
            acc[v] = _mm512_fmadd_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(S[v]), acc[v]);
            acc[v] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(M), acc[v]);
        }
    }
}

/* ---- Q6_K ------------------------------------------------------------------------ */

AI __m512i q6_scale_pair(const uint8_t *blk, int pair)
{
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(blk + NPL_PK_Q6_K_SC + 32 * pair)));
}

AI __m512i q6_half_dot(const __m512i *w, const int8_t *q)
{
    __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], bcast4(q + 0));
    __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], bcast4(q + 4));
    s0 = _mm512_dpbusd_epi32(s0, w[2], bcast4(q + 8));
    s1 = _mm512_dpbusd_epi32(s1, w[3], bcast4(q + 12));
    return _mm512_add_epi32(s0, s1);
}

AI void q6k_tile(const uint8_t *gb, size_t nb, const npl_act_q8k *a, size_t a_stride, int V, __m512 *acc)
{
#pragma GCC unroll 16
    for (int v = 0; v < V; v++)
        acc[v] = _mm512_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = gb + b * NPL_PK_Q6_K_BYTES;
        __m512i S[TILE_VECS_K];
#pragma GCC unroll 16
        for (int v = 0; v < V; v++)
            S[v] = _mm512_setzero_si512();
        prefetch_ahead(blk, NPL_PK_Q6_K_CHUNKS);
        for (int c = 0; c < 8; c++) {
            const uint8_t *chunk = blk + NPL_PK_Q6_K_CHUNKS + (size_t)NPL_PK_Q6_K_CHUNK * (size_t)c;
            prefetch_ahead(chunk, NPL_PK_Q6_K_CHUNK);
            __m512i w[8];
            unpack_chunk4(chunk + 128, chunk, 2, w);
            __m512i scp = q6_scale_pair(blk, c);
            __m512i sc_even = _mm512_srai_epi32(_mm512_slli_epi32(scp, 16), 16);
            __m512i sc_odd = _mm512_srai_epi32(scp, 16);
#pragma GCC unroll 16
            for (int v = 0; v < V; v++) {
                const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
                __m512i lo = q6_half_dot(w, ab->q + 32 * c);
                __m512i hi = q6_half_dot(w + 4, ab->q + 32 * c + 16);
                S[v] = _mm512_add_epi32(S[v], _mm512_add_epi32(_mm512_mullo_epi32(lo, sc_even),
                                                               _mm512_mullo_epi32(hi, sc_odd)));
            }
        }
        __m512 d = load_halves(blk);
#pragma GCC unroll 16
        for (int v = 0; v < V; v++) {
            const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
            __m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++)
                corr = _mm512_dpwssd_epi32(corr, q6_scale_pair(blk, p), bcast4(ab->bsum16 + 2 * p));
            __m512i s = _mm512_sub_epi32(S[v], _mm512_slli_epi32(corr, 5));
            acc[v] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(ab->d)), _mm512_cvtepi32_ps(s), acc[v]);
        }
    }
}

/* ---- drivers ------------------------------------------------------------------------ */

static inline void store_rows(float *y, int64_t row0, int64_t n_rows, __m512 v)
{
    int64_t left = n_rows - row0;
    if (left >= NPL_PACK_ROWS)
        _mm512_storeu_ps(y + row0, v);
    else
        _mm512_mask_storeu_ps(y + row0, (__mmask16)((1u << left) - 1u), v);
}

#define TILE_CASES(CALL) \
    case 1: CALL(1); break; \
    case 2: CALL(2); break; \
    case 3: CALL(3); break; \
    case 4: CALL(4); break; \
    case 5: CALL(5); break; \
    case 6: CALL(6); break

/* Vectors whose activations stay in L2 while every row group of the
 * slice passes over them (then the next ones): about 256 KiB of
 * quantized activations, in whole tiles. */
static size_t vectors_per_pass(size_t act_bytes_per_vec, size_t tile)
{
    size_t n = ((size_t)256 << 10) / (act_bytes_per_vec ? act_bytes_per_vec : 1);
    n -= n % tile;
    return n < tile ? tile : n;
}

/* Two row groups per tile (four vectors) while two remain, else one
 * (eight vectors). */
#define TILE_VECS_PAIR 4
#define DEFINE_LEGACY_DRIVER(fn, KIND)                                                                     \
    static void fn(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,     \
                   float *const *y)                                                                        \
    {                                                                                                      \
        const int kind = KIND;                                                                             \
        const npl_act_q8 *a = act;                                                                         \
        size_t pass = vectors_per_pass(p->n_blocks * sizeof(npl_act_q8), TILE_VECS_LEGACY);               \
        for (size_t p0 = 0; p0 < n_vec; p0 += pass) {                                                      \
            size_t p1 = n_vec - p0 < pass ? n_vec : p0 + pass;                                             \
            for (int64_t g = g0; g < g1;) {                                                                \
                const uint8_t *gb = p->data + (size_t)g * p->group_bytes;                                  \
                int G = g + 1 < g1 ? 2 : 1;                                                                \
                size_t tile = G == 2 ? TILE_VECS_PAIR : TILE_VECS_LEGACY;                                  \
                for (size_t v0 = p0; v0 < p1; v0 += tile) {                                                \
                    size_t nv = p1 - v0 < tile ? p1 - v0 : tile;                                           \
                    __m512 acc[2][TILE_VECS_LEGACY];                                                       \
                    const npl_act_q8 *av = a + v0 * p->n_blocks;                                           \
                    if (G == 2) {                                                                          \
                        switch (nv) {                                                                      \
                        case 1: LEGACY_CALL(2, 1); break;                                                  \
                        case 2: LEGACY_CALL(2, 2); break;                                                  \
                        case 3: LEGACY_CALL(2, 3); break;                                                  \
                        default: LEGACY_CALL(2, 4); break;                                                 \
                        }                                                                                  \
                    } else {                                                                               \
                        switch (nv) {                                                                      \
                        case 1: LEGACY_CALL(1, 1); break;                                                  \
                        case 2: LEGACY_CALL(1, 2); break;                                                  \
                        case 3: LEGACY_CALL(1, 3); break;                                                  \
                        case 4: LEGACY_CALL(1, 4); break;                                                  \
                        case 5: LEGACY_CALL(1, 5); break;                                                  \
                        case 6: LEGACY_CALL(1, 6); break;                                                  \
                        case 7: LEGACY_CALL(1, 7); break;                                                  \
                        default: LEGACY_CALL(1, 8); break;                                                 \
                        }                                                                                  \
                    }                                                                                      \
                    for (int gi = 0; gi < G; gi++)                                                         \
                        for (size_t v = 0; v < nv; v++)                                                    \
                            store_rows(y[v0 + v], (g + gi) * NPL_PACK_ROWS, p->n_rows, acc[gi][v]);        \
                }                                                                                          \
                g += G;                                                                                    \
            }                                                                                              \
        }                                                                                                  \
    }
#define LEGACY_CALL(G, V) legacy_tile(kind, G, gb, p->group_bytes, p->n_blocks, av, p->n_blocks, V, acc)

DEFINE_LEGACY_DRIVER(matmul_q4_0, K_Q4_0)
DEFINE_LEGACY_DRIVER(matmul_q4_1, K_Q4_1)
DEFINE_LEGACY_DRIVER(matmul_q5_0, K_Q5_0)
DEFINE_LEGACY_DRIVER(matmul_q5_1, K_Q5_1)
DEFINE_LEGACY_DRIVER(matmul_q8_0, K_Q8_0)

#define DEFINE_K_DRIVER(fn, TILE_CALL)                                                                     \
    static void fn(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,     \
                   float *const *y)                                                                        \
    {                                                                                                      \
        const npl_act_q8k *a = act;                                                                        \
        size_t pass = vectors_per_pass(p->n_blocks * sizeof(npl_act_q8k), TILE_VECS_K);                   \
        for (size_t p0 = 0; p0 < n_vec; p0 += pass) {                                                      \
            size_t p1 = n_vec - p0 < pass ? n_vec : p0 + pass;                                             \
            for (int64_t g = g0; g < g1; g++) {                                                            \
                const uint8_t *gb = p->data + (size_t)g * p->group_bytes;                                  \
                for (size_t v0 = p0; v0 < p1; v0 += TILE_VECS_K) {                                         \
                    size_t nv = p1 - v0 < TILE_VECS_K ? p1 - v0 : TILE_VECS_K;                             \
                    __m512 acc[TILE_VECS_K];                                                               \
                    const npl_act_q8k *av = a + v0 * p->n_blocks;                                          \
                    switch (nv) {                                                                          \
                        TILE_CASES(TILE_CALL);                                                             \
                    default: break;                                                                        \
                    }                                                                                      \
                    for (size_t v = 0; v < nv; v++)                                                        \
                        store_rows(y[v0 + v], g * NPL_PACK_ROWS, p->n_rows, acc[v]);                       \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
    }
#define Q4K_CALL(V) k45_tile(false, gb, p->n_blocks, av, p->n_blocks, V, acc)
#define Q5K_CALL(V) k45_tile(true, gb, p->n_blocks, av, p->n_blocks, V, acc)
#define Q6K_CALL(V) q6k_tile(gb, p->n_blocks, av, p->n_blocks, V, acc)
DEFINE_K_DRIVER(matmul_q4_k, Q4K_CALL)
DEFINE_K_DRIVER(matmul_q5_k, Q5K_CALL)
DEFINE_K_DRIVER(matmul_q6_k, Q6K_CALL)

void npl_packed_matmul_avx512(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,
                              float *const *y)
{
    switch (p->type) {
    case NPL_TYPE_Q4_0: matmul_q4_0(p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q4_1: matmul_q4_1(p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q5_0: matmul_q5_0(p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q5_1: matmul_q5_1(p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q8_0: matmul_q8_0(p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q4_K: matmul_q4_k(p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q5_K: matmul_q5_k(p, g0, g1, act, n_vec, y); break;
    case NPL_TYPE_Q6_K: matmul_q6_k(p, g0, g1, act, n_vec, y); break;
    default: break;
    }
}
#endif
