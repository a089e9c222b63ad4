/* AVX2 kernels over the packed layout (matmul_packed.h), for CPUs without
 * AVX-512: a 16-row group is done as two halves of 8 rows (one register
 * of lanes each). Without VNNI the 4-byte products come from VPMADDUBSW
 * (u8 x s8 -> pairs of int16) summed in int16 only as far as they cannot
 * overflow, then VPMADDWD to int32; Q8_0 uses the |w| x sign(a, w) form.
 * Each lane's integer sums are exact, so results equal matmul_ref.h's. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>
#include <string.h>

#include "ggml_types.h"

#define AI static inline __attribute__((always_inline))

#define TILE_VECS_LEGACY 4
#define TILE_VECS_K 2

enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };

AI __m256i bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

AI __m256 load_halves8(const uint8_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

AI __m256i load32(const uint8_t *p)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* Weights stream from memory once per step: ask for the lines
 * PREFETCH_BYTES ahead so they arrive while the current block is
 * computed. */
#define PREFETCH_BYTES 4096
AI void prefetch_ahead(const uint8_t *p, size_t bytes)
{
    for (size_t off = 0; off < bytes; off += 64)
        _mm_prefetch((const char *)(p + PREFETCH_BYTES + off), _MM_HINT_T0);
}

/* The 32 bits of half h of a 64-bit unit mask, as 0xff / 0x00 bytes. */
AI __m256i mask_bytes(const uint8_t *p, int h)
{
    uint32_t m;
    memcpy(&m, p + 4 * h, sizeof m);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)m), pick);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
}

/* Half h of a 4-bit chunk: w[u] low nibbles (elements 4u..), w[4+u] high
 * nibbles (16+4u..), plus the bit planes. */
AI void unpack_chunk4(const uint8_t *qs, const uint8_t *masks, int planes, int h, __m256i w[8])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int u = 0; u < 4; u++) {
        __m256i raw = load32(qs + NPL_PACK_UNIT * u + 32 * h);
        __m256i lo = _mm256_and_si256(raw, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        for (int p = 0; p < planes; p++) {
            const __m256i bit = _mm256_set1_epi8((char)(16 << p));
            lo = _mm256_or_si256(lo, _mm256_and_si256(mask_bytes(masks + 8 * ((u * 2 + 0) * planes + p), h), bit));
            hi = _mm256_or_si256(hi, _mm256_and_si256(mask_bytes(masks + 8 * ((u * 2 + 1) * planes + p), h), bit));
        }
        w[u] = lo;
        w[4 + u] = hi;
    }
}

AI __m256i ubs(__m256i w, const int8_t *q)
{
    return _mm256_maddubs_epi16(w, bcast4(q));
}

AI __m256i widen(__m256i p16)
{
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Exact sum over a chunk of q_w * q_a for weights below 2^bits: int16
 * partial sums of at most 32767 / (2 * (2^bits - 1) * 127) products. */
AI __m256i chunk_dot(const __m256i w[8], const int8_t *q, int bits)
{
    __m256i a0 = ubs(w[0], q + 0), a1 = ubs(w[4], q + 16);
    __m256i b0 = ubs(w[1], q + 4), b1 = ubs(w[5], q + 20);
    __m256i c0 = ubs(w[2], q + 8), c1 = ubs(w[6], q + 24);
    __m256i d0 = ubs(w[3], q + 12), d1 = ubs(w[7], q + 28);
    if (bits <= 4) /* 8 x 3810 */
        return widen(_mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(a0, a1), _mm256_add_epi16(b0, b1)),
                                      _mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(d0, d1))));
    /* 5 bits: 4 x 7874 */
    return _mm256_add_epi32(widen(_mm256_add_epi16(_mm256_add_epi16(a0, a1), _mm256_add_epi16(b0, b1))),
                            widen(_mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(d0, d1))));
}

/* ---- legacy 32-element formats ------------------------------------------------ */

AI void legacy_tile(int kind, int h, const uint8_t *gb, size_t nb, const npl_act_q8 *a, size_t a_stride, int V,
                    __m256 *acc)
{
    size_t bb;
    int qs_off, mask_off = -1, m_off = -1, zp, bits = 4;
    switch (kind) {
    case K_Q4_0: bb = NPL_PK_Q4_0_BYTES; qs_off = NPL_PK_Q4_0_QS; zp = 8; break;
    case K_Q4_1: bb = NPL_PK_Q4_1_BYTES; qs_off = NPL_PK_Q4_1_QS; m_off = NPL_PK_Q4_1_M; zp = 0; break;
    case K_Q5_0: bb = NPL_PK_Q5_0_BYTES; qs_off = NPL_PK_Q5_0_QS; mask_off = NPL_PK_Q5_0_MASK; zp = 16; bits = 5; break;
    case K_Q5_1:
        bb = NPL_PK_Q5_1_BYTES; qs_off = NPL_PK_Q5_1_QS; mask_off = NPL_PK_Q5_1_MASK; m_off = NPL_PK_Q5_1_M; zp = 0;
        bits = 5;
        break;
    default: bb = NPL_PK_Q8_0_BYTES; qs_off = NPL_PK_Q8_0_QS; zp = 0; bits = 8; break;
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; v++)
        acc[v] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = gb + b * bb;
        if (h == 0)
            prefetch_ahead(blk, bb);
        __m256 dw = load_halves8(blk + 16 * h);
        __m256 mw = m_off >= 0 ? load_halves8(blk + m_off + 16 * h) : _mm256_setzero_ps();
        __m256i w[8];
        if (kind == K_Q8_0) {
            /* back to signed: |w| times a carrying w's sign keeps each
             * int16 pair sum below 2 * 128 * 127 */
#pragma GCC unroll 8
            for (int u = 0; u < 8; u++)
                w[u] = _mm256_xor_si256(load32(blk + qs_off + NPL_PACK_UNIT * u + 32 * h), _mm256_set1_epi8((char)0x80));
        } else {
            unpack_chunk4(blk + qs_off, mask_off >= 0 ? blk + mask_off : NULL, mask_off >= 0 ? 1 : 0, h, w);
        }
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            const npl_act_q8 *ab = a + (size_t)v * a_stride + b;
            __m256i isum;
            if (kind == K_Q8_0) {
                isum = _mm256_setzero_si256();
#pragma GCC unroll 8
                for (int u = 0; u < 8; u++)
                    isum = _mm256_add_epi32(isum, widen(_mm256_maddubs_epi16(_mm256_abs_epi8(w[u]),
                                                                              _mm256_sign_epi8(bcast4(ab->q + 4 * u), w[u]))));
            } else {
                isum = chunk_dot(w, ab->q, bits);
                if (zp)
                    isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(zp * ab->sum));
            }
            acc[v] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(ab->d)), _mm256_cvtepi32_ps(isum), acc[v]);
            if (m_off >= 0)
                acc[v] = _mm256_fmadd_ps(mw, _mm256_set1_ps(ab->s), acc[v]);
        }
    }
}

/* ---- Q4_K, Q5_K ------------------------------------------------------------------ */

AI void k45_tile(bool five, int h, const uint8_t *gb, size_t nb, const npl_act_q8k *a, size_t a_stride, int V,
                 __m256 *acc)
{
    size_t bb = five ? NPL_PK_Q5_K_BYTES : NPL_PK_Q4_K_BYTES;
    size_t cstride = five ? NPL_PK_Q5_K_CHUNK : NPL_PK_Q4_K_CHUNK;
#pragma GCC unroll 8
    for (int v = 0; v < V; v++)
        acc[v] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = gb + b * bb;
        if (h == 0)
            prefetch_ahead(blk, bb);
        __m256i S[TILE_VECS_K];
#pragma GCC unroll 8
        for (int v = 0; v < V; v++)
            S[v] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            const uint8_t *chunk = blk + NPL_PK_K_CHUNKS + cstride * (size_t)c;
            __m256i w[8];
            unpack_chunk4(five ? chunk + 64 : chunk, chunk, five ? 1 : 0, h, w);
            __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(blk + NPL_PK_K_SC + 16 * c + 8 * h)));
#pragma GCC unroll 8
            for (int v = 0; v < V; v++) {
                const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
                __m256i isum = chunk_dot(w, ab->q + 32 * c, five ? 5 : 4);
                S[v] = _mm256_add_epi32(S[v], _mm256_mullo_epi32(isum, sc));
            }
        }
        __m256 d = load_halves8(blk + 16 * h);
        __m256 dmin = load_halves8(blk + NPL_PK_K_DMIN + 16 * h);
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
            __m256i M = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m256i mn = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(blk + NPL_PK_K_MN + 32 * p + 16 * h)));
                M = _mm256_add_epi32(M, _mm256_madd_epi16(mn, bcast4(ab->bsum32 + 2 * p)));
            }
            __m256 da = _mm256_set1_ps(ab->d);
            acc[v] = _mm256_fmadd_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(S[v]), acc[v]);
            acc[v] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, da), _mm256_cvtepi32_ps(M), acc[v]);
        }
    }
}

/* ---- Q6_K ------------------------------------------------------------------------- */

AI __m256i q6_scale_pair(const uint8_t *blk, int pair, int h)
{
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(blk + NPL_PK_Q6_K_SC + 32 * pair + 16 * h)));
}

/* 16 elements of 6-bit weights: int16 pairs of at most 2 x 16002. */
AI __m256i q6_half_dot(const __m256i *w, const int8_t *q)
{
    return _mm256_add_epi32(widen(_mm256_add_epi16(ubs(w[0], q + 0), ubs(w[1], q + 4))),
                            widen(_mm256_add_epi16(ubs(w[2], q + 8), ubs(w[3], q + 12))));
}

AI void q6k_tile(int h, const uint8_t *gb, size_t nb, const npl_act_q8k *a, size_t a_stride, int V, __m256 *acc)
{
#pragma GCC unroll 8
    for (int v = 0; v < V; v++)
        acc[v] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = gb + b * NPL_PK_Q6_K_BYTES;
        if (h == 0)
            prefetch_ahead(blk, NPL_PK_Q6_K_BYTES);
        __m256i S[TILE_VECS_K];
#pragma GCC unroll 8
        for (int v = 0; v < V; v++)
            S[v] = _mm256_setzero_si256();
        for (int c = 0; c < 8; c++) {
            const uint8_t *chunk = blk + NPL_PK_Q6_K_CHUNKS + (size_t)NPL_PK_Q6_K_CHUNK * (size_t)c;
            __m256i w[8];
            unpack_chunk4(chunk + 128, chunk, 2, h, w);
            __m256i scp = q6_scale_pair(blk, c, h);
            __m256i sc_even = _mm256_srai_epi32(_mm256_slli_epi32(scp, 16), 16);
            __m256i sc_odd = _mm256_srai_epi32(scp, 16);
#pragma GCC unroll 8
            for (int v = 0; v < V; v++) {
                const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
                __m256i lo = q6_half_dot(w, ab->q + 32 * c);
                __m256i hi = q6_half_dot(w + 4, ab->q + 32 * c + 16);
                S[v] = _mm256_add_epi32(S[v], _mm256_add_epi32(_mm256_mullo_epi32(lo, sc_even),
                                                               _mm256_mullo_epi32(hi, sc_odd)));
            }
        }
        __m256 d = load_halves8(blk + 16 * h);
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            const npl_act_q8k *ab = a + (size_t)v * a_stride + b;
            __m256i corr = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++)
                corr = _mm256_add_epi32(corr, _mm256_madd_epi16(q6_scale_pair(blk, p, h), bcast4(ab->bsum16 + 2 * p)));
            __m256i s = _mm256_sub_epi32(S[v], _mm256_slli_epi32(corr, 5));
            acc[v] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(ab->d)), _mm256_cvtepi32_ps(s), acc[v]);
        }
    }
}

/* ---- drivers ---------------------------------------------------------------------- */

static inline void store_rows(float *y, int64_t row0, int64_t n_rows, __m256 v)
{
    int64_t left = n_rows - row0;
    if (left >= 8) {
        _mm256_storeu_ps(y + row0, v);
    } else if (left > 0) {
        float t[8];
        _mm256_storeu_ps(t, v);
        memcpy(y + row0, t, (size_t)left * sizeof(float));
    }
}

#define DEFINE_DRIVER(fn, ACT, VMAX, CALL)                                                                 \
    static void fn(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,     \
                   float *const *y)                                                                        \
    {                                                                                                      \
        const ACT *a = act;                                                                                \
        for (int64_t g = g0; g < g1; g++) {                                                                \
            const uint8_t *gb = p->data + (size_t)g * p->group_bytes;                                      \
            for (int h = 0; h < 2; h++) {                                                                  \
                if (g * NPL_PACK_ROWS + 8 * h >= p->n_rows)                                                \
                    break;                                                                                 \
                for (size_t v0 = 0; v0 < n_vec; v0 += VMAX) {                                              \
                    size_t nv = n_vec - v0 < VMAX ? n_vec - v0 : VMAX;                                     \
                    __m256 acc[VMAX];                                                                      \
                    const ACT *av = a + v0 * p->n_blocks;                                                  \
                    switch (nv) {                                                                          \
                    case 1: CALL(1); break;                                                                \
                    case 2: CALL(2); break;                                                                \
                    case 3: CALL(3); break;                                                                \
                    default: CALL(4); break;                                                               \
                    }                                                                                      \
                    for (size_t v = 0; v < nv; v++)                                                        \
                        store_rows(y[v0 + v], g * NPL_PACK_ROWS + 8 * h, p->n_rows, acc[v]);               \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
    }

#define Q4_0_CALL(V) legacy_tile(K_Q4_0, h, gb, p->n_blocks, av, p->n_blocks, V, acc)
#define Q4_1_CALL(V) legacy_tile(K_Q4_1, h, gb, p->n_blocks, av, p->n_blocks, V, acc)
#define Q5_0_CALL(V) legacy_tile(K_Q5_0, h, gb, p->n_blocks, av, p->n_blocks, V, acc)
#define Q5_1_CALL(V) legacy_tile(K_Q5_1, h, gb, p->n_blocks, av, p->n_blocks, V, acc)
#define Q8_0_CALL(V) legacy_tile(K_Q8_0, h, gb, p->n_blocks, av, p->n_blocks, V, acc)
/* K tiles hold at most TILE_VECS_K vectors: larger cases never occur. */
#define Q4K_CALL(V) k45_tile(false, h, gb, p->n_blocks, av, p->n_blocks, (V) < TILE_VECS_K ? (V) : TILE_VECS_K, acc)
#define Q5K_CALL(V) k45_tile(true, h, gb, p->n_blocks, av, p->n_blocks, (V) < TILE_VECS_K ? (V) : TILE_VECS_K, acc)
#define Q6K_CALL(V) q6k_tile(h, gb, p->n_blocks, av, p->n_blocks, (V) < TILE_VECS_K ? (V) : TILE_VECS_K, acc)

DEFINE_DRIVER(matmul_q4_0, npl_act_q8, TILE_VECS_LEGACY, Q4_0_CALL)
DEFINE_DRIVER(matmul_q4_1, npl_act_q8, TILE_VECS_LEGACY, Q4_1_CALL)
DEFINE_DRIVER(matmul_q5_0, npl_act_q8, TILE_VECS_LEGACY, Q5_0_CALL)
DEFINE_DRIVER(matmul_q5_1, npl_act_q8, TILE_VECS_LEGACY, Q5_1_CALL)
DEFINE_DRIVER(matmul_q8_0, npl_act_q8, TILE_VECS_LEGACY, Q8_0_CALL)
DEFINE_DRIVER(matmul_q4_k, npl_act_q8k, TILE_VECS_K, Q4K_CALL)
DEFINE_DRIVER(matmul_q5_k, npl_act_q8k, TILE_VECS_K, Q5K_CALL)
DEFINE_DRIVER(matmul_q6_k, npl_act_q8k, TILE_VECS_K, Q6K_CALL)

void npl_packed_matmul_avx2(const npl_packed_matrix *p, int64_t g0, int64_t g1, const void *act, size_t n_vec,
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
