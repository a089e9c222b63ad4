/* npl_attention_tiled on AMX-BF16 tiles (built with -mamx-tile
 * -mamx-bf16 and AVX-512; called only where the CPU has them).
 *
 * Per 64-key block, once per job: the keys split into bf16 hi / lo rows,
 * the values split and transposed ([dim][key]). Per tile of 16 query rows:
 *   S^T [key][row] = K_ext x Q_ext^T  (tiles: A = key rows, B = q pairs),
 *   online softmax with vectors over the 16 rows,
 *   acc^T [dim][row] += V_ext^T x P_ext^T (A = value columns, B = weight pairs),
 * so the softmax state and the rescaling are plain vector operations over
 * the rows, and no per-tile transposition is needed. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention_internal.h"
#include "attention_tiled_internal.h"
#include "fast_exp.h"
#include "ggml_types.h"

enum { K = NPL_ATTN_TILED_KEYS, R = NPL_ATTN_TILE_ROWS };

/* Tiles 0-3: accumulators, 4: A operand, 5: B operand; all 16 x 64 bytes. */
static void load_tile_config(void)
{
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 6; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* bf16 bits of the high part of x (x's low 16 bits cleared) and of the rest. */
static inline void split_bf16(__m512 x, __m512i *hi_bits, __m512i *lo_bits)
{
    __m512i h = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0xFFFF0000u));
    *hi_bits = h;
    *lo_bits = _mm512_castps_si512(_mm512_sub_ps(x, _mm512_castsi512_ps(h)));
}

static inline __m256i bf16_of(__m512i bits)
{
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(bits, 16));
}

/* The query rows as VNNI pairs of [qh | qh | ql | ql] (q rounded to a
 * half first), the per-row key ranges, and a fresh softmax state. */
static void prepare_queries(const npl_attn_tiled_job *job, const npl_attn_tiled_layout *L)
{
    size_t hd = job->head_dim, chunks = hd / 8;
    uint16_t ext[4 * 512];
    memset(L->qb, 0, L->n_tiles * chunks * R * 16 * 4);
    for (size_t r = 0; r < L->n_tiles * R; r++) {
        size_t tile = r / R, n = r % R;
        L->run_max[r] = -INFINITY;
        L->run_sum[r] = 0.0f;
        if (r >= L->n_rows) {
            L->lo[r] = 1; /* an empty range: sees nothing */
            L->hi[r] = 0;
            continue;
        }
        size_t i = r / job->group, h = r % job->group;
        L->lo[r] = job->key_lo[i];
        L->hi[r] = job->key_hi[i];
        const float *q = job->q + i * job->q_stride + h * hd;
        for (size_t d = 0; d < hd; d++) {
            float x = npl_fp16_to_fp32(npl_fp32_to_fp16(q[d]));
            uint32_t b, lb;
            memcpy(&b, &x, sizeof b);
            b &= 0xFFFF0000u;
            float hx;
            memcpy(&hx, &b, sizeof hx);
            float lx = x - hx;
            memcpy(&lb, &lx, sizeof lb);
            ext[d] = ext[hd + d] = (uint16_t)(b >> 16);
            ext[2 * hd + d] = ext[3 * hd + d] = (uint16_t)(lb >> 16);
        }
        for (size_t c = 0; c < chunks; c++)
            for (size_t t = 0; t < 16; t++)
                L->qb[((tile * chunks + c) * 16 + t) * R + n] =
                    (uint32_t)ext[32 * c + 2 * t] | (uint32_t)ext[32 * c + 2 * t + 1] << 16;
    }
    memset(L->acc, 0, L->n_tiles * hd * R * sizeof *L->acc);
}

/* Keys and values of positions [b0, b0 + 64) that some row sees, split
 * into bf16 parts; positions no row sees are zeros (never read). */
static void prepare_block(const npl_attn_tiled_job *job, const npl_attn_tiled_layout *L, uint32_t b0,
                          uint32_t kmin, uint32_t kmax)
{
    size_t hd = job->head_dim;
    for (uint32_t j = 0; j < K; j++) {
        uint32_t p = b0 + j;
        if (p < kmin || p > kmax) {
            memset(L->kh + j * hd, 0, hd * 2);
            memset(L->kl + j * hd, 0, hd * 2);
            for (size_t d = 0; d < hd; d++)
                L->vth[d * K + j] = L->vtl[d * K + j] = 0;
            continue;
        }
        size_t row = job->ring ? p % job->ring : p;
        const uint16_t *kr = (const uint16_t *)(const void *)(job->k + row * job->row_bytes);
        const uint16_t *vr = (const uint16_t *)(const void *)(job->v + row * job->row_bytes);
        for (size_t d = 0; d < hd; d += 16) {
            __m512i h, l;
            split_bf16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(kr + d))), &h, &l);
            _mm256_storeu_si256((__m256i *)(void *)(L->kh + j * hd + d), bf16_of(h));
            _mm256_storeu_si256((__m256i *)(void *)(L->kl + j * hd + d), bf16_of(l));
            split_bf16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(vr + d))), &h, &l);
            uint16_t vh[16], vl[16];
            _mm256_storeu_si256((__m256i *)(void *)vh, bf16_of(h));
            _mm256_storeu_si256((__m256i *)(void *)vl, bf16_of(l));
            for (size_t e = 0; e < 16; e++) {
                L->vth[(d + e) * K + j] = vh[e];
                L->vtl[(d + e) * K + j] = vl[e];
            }
        }
    }
}

/* S^T of one tile: 4 groups of 16 keys x 16 rows, over [qh|qh|ql|ql] x
 * [kh|kl|kh|kl]: kh.qh + kl.qh + kh.ql + kl.ql, each product exact. */
static void tile_scores(const npl_attn_tiled_job *job, const npl_attn_tiled_layout *L, size_t tile)
{
    size_t hd = job->head_dim, chunks = hd / 8, per_seg = hd / 32;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (size_t c = 0; c < chunks; c++) {
        const uint16_t *a = ((c / per_seg) % 2 ? L->kl : L->kh) + (c % per_seg) * 32;
        _tile_loadd(5, L->qb + (tile * chunks + c) * 16 * R, 64);
        _tile_loadd(4, a, (long)hd * 2);
        _tile_dpbf16ps(0, 4, 5);
        _tile_loadd(4, a + 16 * hd, (long)hd * 2);
        _tile_dpbf16ps(1, 4, 5);
        _tile_loadd(4, a + 32 * hd, (long)hd * 2);
        _tile_dpbf16ps(2, 4, 5);
        _tile_loadd(4, a + 48 * hd, (long)hd * 2);
        _tile_dpbf16ps(3, 4, 5);
    }
    _tile_stored(0, L->st, 64);
    _tile_stored(1, L->st + 16 * R, 64);
    _tile_stored(2, L->st + 32 * R, 64);
    _tile_stored(3, L->st + 48 * R, 64);
}

/* The online-softmax step of one tile over the block's scores: masked
 * keys weigh exactly 0; the weights, rounded to halves, become VNNI pairs
 * of their bf16 parts. Returns the rescaling factor of each row (1 where
 * its maximum did not grow). */
static __m512 tile_softmax(const npl_attn_tiled_job *job, const npl_attn_tiled_layout *L, size_t tile, uint32_t b0)
{
    __m512i lo = _mm512_loadu_si512(L->lo + tile * R), hi = _mm512_loadu_si512(L->hi + tile * R);
    __m512 scale = _mm512_set1_ps(job->scale), ninf = _mm512_set1_ps(-INFINITY);
    __mmask16 valid[K];
    __m512 mx = ninf;
    /* a block every row sees whole (all but the last of a causal run)
     * needs no mask: the same operations with every lane on */
    bool whole = _mm512_cmp_epu32_mask(lo, _mm512_set1_epi32((int)b0), _MM_CMPINT_LE) == 0xFFFF &&
                 _mm512_cmp_epu32_mask(hi, _mm512_set1_epi32((int)(b0 + K - 1)), _MM_CMPINT_NLT) == 0xFFFF;
    for (uint32_t j = 0; j < K; j++) {
        __m512i p = _mm512_set1_epi32((int)(b0 + j));
        valid[j] = whole ? 0xFFFF
                         : _mm512_cmp_epu32_mask(p, lo, _MM_CMPINT_NLT) & _mm512_cmp_epu32_mask(p, hi, _MM_CMPINT_LE);
        mx = _mm512_mask_max_ps(mx, valid[j], _mm512_mul_ps(_mm512_loadu_ps(L->st + j * R), scale), mx);
    }
    __m512 m_old = _mm512_loadu_ps(L->run_max + tile * R);
    __m512 m = _mm512_max_ps(m_old, mx);
    __mmask16 grew = _mm512_cmp_ps_mask(m, m_old, _CMP_GT_OQ);
    __m512 c = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), grew, npl_exp_neg_avx512(_mm512_sub_ps(m_old, m)));
    __m512 sum = _mm512_mul_ps(_mm512_loadu_ps(L->run_sum + tile * R), c);
    __m512i prev_h = _mm512_setzero_si512(), prev_l = _mm512_setzero_si512();
    for (uint32_t j = 0; j < K; j++) {
        __m512 s = _mm512_mul_ps(_mm512_loadu_ps(L->st + j * R), scale);
        __m512 p = _mm512_maskz_mov_ps(valid[j], npl_exp_neg_avx512(_mm512_sub_ps(s, m)));
        sum = _mm512_add_ps(sum, p);
        __m512 ph = _mm512_cvtph_ps(_mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m512i h, l;
        split_bf16(ph, &h, &l);
        if (j % 2 == 0) {
            prev_h = h;
            prev_l = l;
            continue;
        }
        /* pair (j - 1, j): the even key in the low half */
        __m512i keep = _mm512_set1_epi32((int)0xFFFF0000u);
        _mm512_storeu_si512(L->pbh + (j / 2) * R,
                            _mm512_or_si512(_mm512_srli_epi32(prev_h, 16), _mm512_and_si512(h, keep)));
        _mm512_storeu_si512(L->pbl + (j / 2) * R,
                            _mm512_or_si512(_mm512_srli_epi32(prev_l, 16), _mm512_and_si512(l, keep)));
    }
    _mm512_storeu_ps(L->run_max + tile * R, m);
    _mm512_storeu_ps(L->run_sum + tile * R, sum);
    return c;
}

/* acc^T = acc^T * c + [vh|vl|vh|vl]^T x [ph|ph|pl|pl]: 4 dimension tiles at a time. */
static void tile_values(const npl_attn_tiled_job *job, const npl_attn_tiled_layout *L, size_t tile, __m512 c)
{
    size_t hd = job->head_dim;
    float *acc = L->acc + tile * hd * R;
    if (_mm512_cmp_ps_mask(c, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ))
        for (size_t d = 0; d < hd; d++)
            _mm512_storeu_ps(acc + d * R, _mm512_mul_ps(_mm512_loadu_ps(acc + d * R), c));
    for (size_t d0 = 0; d0 < hd; d0 += 64) {
        float *a0 = acc + d0 * R;
        _tile_loadd(0, a0, 64);
        _tile_loadd(1, a0 + 16 * R, 64);
        _tile_loadd(2, a0 + 32 * R, 64);
        _tile_loadd(3, a0 + 48 * R, 64);
        for (size_t ch = 0; ch < 8; ch++) {
            size_t seg = ch / 2, half = ch % 2;
            const uint16_t *a = (seg % 2 ? L->vtl : L->vth) + d0 * K + half * 32;
            _tile_loadd(5, (seg < 2 ? L->pbh : L->pbl) + half * 16 * R, 64);
            _tile_loadd(4, a, K * 2);
            _tile_dpbf16ps(0, 4, 5);
            _tile_loadd(4, a + 16 * K, K * 2);
            _tile_dpbf16ps(1, 4, 5);
            _tile_loadd(4, a + 32 * K, K * 2);
            _tile_dpbf16ps(2, 4, 5);
            _tile_loadd(4, a + 48 * K, K * 2);
            _tile_dpbf16ps(3, 4, 5);
        }
        _tile_stored(0, a0, 64);
        _tile_stored(1, a0 + 16 * R, 64);
        _tile_stored(2, a0 + 32 * R, 64);
        _tile_stored(3, a0 + 48 * R, 64);
    }
}

void npl_attention_tiled_amx(const npl_attn_tiled_job *job, const npl_attn_tiled_layout *L)
{
    size_t hd = job->head_dim;
    load_tile_config();
    prepare_queries(job, L);

    uint32_t kmin = UINT32_MAX, kmax = 0;
    for (size_t i = 0; i < job->n_pos; i++)
        if (job->key_lo[i] <= job->key_hi[i]) {
            kmin = job->key_lo[i] < kmin ? job->key_lo[i] : kmin;
            kmax = job->key_hi[i] > kmax ? job->key_hi[i] : kmax;
        }
    for (uint32_t b0 = kmin == UINT32_MAX ? 1 : kmin / K * K; kmin != UINT32_MAX && b0 <= kmax; b0 += K) {
        prepare_block(job, L, b0, kmin, kmax);
        for (size_t t = 0; t < L->n_tiles; t++) {
            /* skip a tile none of whose rows sees this block */
            bool any = false;
            for (size_t n = 0; n < R && !any; n++)
                any = L->lo[t * R + n] <= L->hi[t * R + n] && L->lo[t * R + n] < b0 + K && L->hi[t * R + n] >= b0;
            if (!any)
                continue;
            tile_scores(job, L, t);
            tile_values(job, L, t, tile_softmax(job, L, t, b0));
        }
    }
    _tile_release();

    for (size_t r = 0; r < L->n_rows; r++) {
        size_t i = r / job->group, h = r % job->group;
        float inv = npl_attn_inv_sum(L->run_max[r], L->run_sum[r], job->sinks ? job->sinks + h : NULL);
        float *o = job->out + i * job->out_stride + h * hd;
        const float *acc = L->acc + (r / R) * hd * R + r % R;
        for (size_t d = 0; d < hd; d++)
            o[d] = acc[d * R] * inv;
    }
}
