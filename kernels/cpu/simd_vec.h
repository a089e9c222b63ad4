/* The per-ISA vector layer of the one-source SIMD kernels (internal to
 * kernels/cpu). A kernel source (*_simd.c) is written once over these
 * types and operations and compiled once per instruction set (meson.build
 * builds it with the AVX2 flags and again with the AVX-512 flags); its
 * entry points get the ISA's suffix through NPL_ISA_FN and reach the
 * portable code only through the dispatch table (kernel_table.h).
 *
 *   vf   16 float lanes: one ZMM register, or two YMM registers holding
 *        lanes 0-7 and 8-15. Every kernel's arithmetic is defined on 16
 *        lanes (matmul_ref.h, attention_internal.h), so the same source
 *        gives the same bits at every level.
 *   vi   16 int32 lanes, laid out the same way.
 *   vbh  32 BF16 values as 16 (even, odd) pairs, one pair per lane.
 *   vmask  a set of the 16 lanes (vmask_first(n): lanes 0 to n-1, any n):
 *        masked loads read 0 in the other lanes without touching their
 *        memory, masked stores leave it alone.
 * vf_exp_neg is fast_exp.h's exp for x <= 0 on every lane; vf_transpose16
 * transposes 16 vectors as a 16 x 16 matrix.
 *
 * NPL_V_TILE is how many accumulators a kernel may keep in registers
 * (half the register file); NPL_V_TILE_ROWS x NPL_V_TILE_VECS is the tile
 * of the float-accumulator matrix kernels (rows x vectors sharing their
 * loads). */
#ifndef NPL_SIMD_VEC_H
#define NPL_SIMD_VEC_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fast_exp.h"
#include "lane_sum.h"

#define NPL_V_AI static inline __attribute__((always_inline))

#define NPL_ISA_CAT2(a, b) a##_##b
#define NPL_ISA_CAT(a, b) NPL_ISA_CAT2(a, b)
/* name_avx2, name_avx512 or name_avx512bf16 */
#define NPL_ISA_FN(name) NPL_ISA_CAT(name, NPL_ISA)

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#ifdef __AVX512BF16__
#define NPL_ISA avx512bf16
#else
#define NPL_ISA avx512
#endif
#define NPL_V_AVX512 1
#define NPL_V_TILE 16
#define NPL_V_TILE_ROWS 4
#define NPL_V_TILE_VECS 4

typedef __m512 vf;
typedef __m512i vi;
typedef __m512i vbh;

NPL_V_AI vf vf_zero(void) { return _mm512_setzero_ps(); }
NPL_V_AI vf vf_set1(float f) { return _mm512_set1_ps(f); }
NPL_V_AI vf vf_loadu(const float *p) { return _mm512_loadu_ps(p); }
NPL_V_AI void vf_storeu(float *p, vf v) { _mm512_storeu_ps(p, v); }
NPL_V_AI __mmask16 npl_v_live(size_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u); }
/* The first n (< 16) lanes; the others read as 0 and are not touched. */
NPL_V_AI vf vf_loadu_n(const float *p, size_t n) { return _mm512_maskz_loadu_ps(npl_v_live(n), p); }
NPL_V_AI void vf_storeu_n(float *p, vf v, size_t n) { _mm512_mask_storeu_ps(p, npl_v_live(n), v); }
typedef __mmask16 vmask;
NPL_V_AI vmask vmask_first(size_t n) { return npl_v_live(n); }
NPL_V_AI vf vf_loadu_mask(const float *p, vmask m) { return _mm512_maskz_loadu_ps(m, p); }
NPL_V_AI void vf_storeu_mask(float *p, vf v, vmask m) { _mm512_mask_storeu_ps(p, m, v); }
/* t in the lanes of m, else e */
NPL_V_AI vf vf_blend_mask(vmask m, vf t, vf e) { return _mm512_mask_blend_ps(m, e, t); }
NPL_V_AI vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
NPL_V_AI vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
NPL_V_AI vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
/* a * b + c, one rounding */
NPL_V_AI vf vf_fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
/* c - a * b, one rounding */
NPL_V_AI vf vf_fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
/* MAXPS: b where either lane is NaN */
NPL_V_AI vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
NPL_V_AI vf vf_abs(vf a)
{
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
}
NPL_V_AI float vf_hsum(vf v) { return npl_lane_sum16_avx512(v); }
NPL_V_AI float vf_hmax(vf v) { return _mm512_reduce_max_ps(v); }
/* 16 halves / 16 BF16 values widened (exact) */
NPL_V_AI vf vf_load_f16(const void *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
NPL_V_AI vf vf_load_bf16(const void *p)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
/* 16 int8 widened to float (exact) */
NPL_V_AI vf vf_load_i8(const void *p)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

NPL_V_AI vf vf_exp_neg(vf x) { return npl_exp_neg_avx512(x); }
NPL_V_AI vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
/* -|a| */
NPL_V_AI vf vf_neg_abs(vf a)
{
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)0x80000000u)));
}
/* t where c >= 0 (ordered), else e */
NPL_V_AI vf vf_select_ge0(vf c, vf t, vf e)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, _mm512_setzero_ps(), _CMP_GE_OQ), e, t);
}

/* Horizontal sums of NPL_V_HSUM_BATCH vectors at once, each in
 * vf_hsum's order: the pairs (l, l+8), (l, l+4), (l, l+2), (l, l+1) of all
 * sixteen are added together (lane 4k + m ends up holding a[k + 4m]). */
#define NPL_V_HSUM_BATCH 16
NPL_V_AI void vf_hsum_batch(const vf a[16], float out[16])
{
    __m512 b[8], c[4], d[2];
    for (int p = 0; p < 8; p++)
        b[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], 0xee));
    for (int p = 0; p < 4; p++)
        c[p] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * p], b[2 * p + 1], 0x88),
                             _mm512_shuffle_f32x4(b[2 * p], b[2 * p + 1], 0xdd));
    for (int p = 0; p < 2; p++)
        d[p] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * p], c[2 * p + 1], 0x44),
                             _mm512_shuffle_ps(c[2 * p], c[2 * p + 1], 0xee));
    __m512 s = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], 0x88), _mm512_shuffle_ps(d[0], d[1], 0xdd));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_ps(out, _mm512_permutexvar_ps(order, s));
}

/* One step of vf_transpose16: rows i and i + b (i & b == 0) swap their
 * off-diagonal b x b blocks (lo, hi: the lanes each result takes). */
NPL_V_AI void npl_v_swap_blocks(vf r[16], int b, __m512i lo, __m512i hi)
{
    for (int i = 0; i < 16; i++)
        if (!(i & b)) {
            __m512 x = r[i], y = r[i + b];
            r[i] = _mm512_permutex2var_ps(x, lo, y);
            r[i + b] = _mm512_permutex2var_ps(x, hi, y);
        }
}
/* r[i] lane j <-> r[j] lane i (exact moves), b x b blocks swapped for
 * b = 8, 4, 2, 1. */
NPL_V_AI void vf_transpose16(vf r[16])
{
    npl_v_swap_blocks(r, 8, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                      _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
    npl_v_swap_blocks(r, 4, _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                      _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31));
    npl_v_swap_blocks(r, 2, _mm512_setr_epi32(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                      _mm512_setr_epi32(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31));
    npl_v_swap_blocks(r, 1, _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                      _mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
}

NPL_V_AI vi vi_set1(int32_t x) { return _mm512_set1_epi32(x); }
NPL_V_AI vi vi_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
NPL_V_AI vi vi_min(vi a, vi b) { return _mm512_min_epi32(a, b); }
NPL_V_AI vi vi_max(vi a, vi b) { return _mm512_max_epi32(a, b); }
/* CVTPS2DQ: nearest even; NaN and out of range give INT32_MIN */
NPL_V_AI vi vi_round(vf a) { return _mm512_cvtps_epi32(a); }
NPL_V_AI int32_t vi_hsum(vi v) { return _mm512_reduce_add_epi32(v); }
/* Lanes in [-128, 127] stored as 16 bytes. */
NPL_V_AI void vi_store_i8(int8_t *p, vi v) { _mm_storeu_si128((__m128i *)(void *)p, _mm512_cvtepi32_epi8(v)); }
/* Lanes in [0, 65535] stored as 16 uint16. */
NPL_V_AI void vi_store_u16(uint16_t *p, vi v) { _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(v)); }
/* 16 lanes rounded to halves, nearest even (VCVTPS2PH), stored. */
NPL_V_AI void vf_store_f16(void *p, vf v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
NPL_V_AI vi vi_loadu(const void *p) { return _mm512_loadu_si512(p); }
NPL_V_AI vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
NPL_V_AI vi vi_or(vi a, vi b) { return _mm512_or_si512(a, b); }
#define vi_srli(a, n) _mm512_srli_epi32((a), (n))
/* Lane masks: all ones where true. */
NPL_V_AI vi vi_cmpgt(vi a, vi b) { return _mm512_maskz_set1_epi32(_mm512_cmpgt_epi32_mask(a, b), -1); }
NPL_V_AI vi vi_cmpeq(vi a, vi b) { return _mm512_maskz_set1_epi32(_mm512_cmpeq_epi32_mask(a, b), -1); }
/* b where mask, else a */
NPL_V_AI vi vi_blend(vi a, vi b, vi mask) { return _mm512_mask_blend_epi32(_mm512_test_epi32_mask(mask, mask), a, b); }

NPL_V_AI vi vi_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
NPL_V_AI vi vi_mullo(vi a, vi b) { return _mm512_mullo_epi32(a, b); }
#define vi_slli(a, n) _mm512_slli_epi32((a), (n))
#define vi_srai(a, n) _mm512_srai_epi32((a), (n))
NPL_V_AI vf vf_from_vi(vi a) { return _mm512_cvtepi32_ps(a); }
/* 16 bytes to 16 lanes (zero-extended) */
NPL_V_AI vi vi_load_u8(const void *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
/* 32 bytes to 16 lanes of two int16 (zero- or sign-extended) */
NPL_V_AI vi vi_load_u8pairs(const void *p) { return _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p)); }
NPL_V_AI vi vi_load_i8pairs(const void *p) { return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p)); }
NPL_V_AI __m512i npl_v_bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}
/* acc + pairs.lo * b[0] + pairs.hi * b[1] per lane (int16 pairs, exact) */
NPL_V_AI vi vi_dot_pairs(vi acc, vi pairs, const int16_t *b) { return _mm512_dpwssd_epi32(acc, pairs, npl_v_bcast4(b)); }

/* vu: one 64-byte unit of the packed layout (matmul_packed.h), 4 bytes
 * for each of 16 rows, lane r = row r. */
typedef __m512i vu;
NPL_V_AI vu vu_load(const void *p) { return _mm512_loadu_si512(p); }
NPL_V_AI vu vu_lo_nibbles(vu raw) { return _mm512_and_si512(raw, _mm512_set1_epi8(0x0f)); }
NPL_V_AI vu vu_hi_nibbles(vu raw) { return _mm512_and_si512(_mm512_srli_epi16(raw, 4), _mm512_set1_epi8(0x0f)); }
/* Each byte (0..15) replaced by tbl[byte] (VPSHUFB on 16 entries). */
NPL_V_AI vu vu_lookup16(vu idx, const int8_t tbl[16])
{
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)tbl)), idx);
}
NPL_V_AI vf vf_from_bits(vi a) { return _mm512_castsi512_ps(a); }
/* bit added to the bytes whose bit is set in the 64-bit mask at m */
NPL_V_AI vu vu_add_bit(vu w, const uint8_t *m, int bit)
{
    uint64_t k;
    memcpy(&k, m, sizeof k);
    return _mm512_mask_add_epi8(w, _cvtu64_mask64(k), w, _mm512_set1_epi8((char)bit));
}

/* Exact u8 x s8 dots: sum over a lane's 4 bytes of w * q[0..3] (q
 * broadcast to every row). vp holds running sums that stay exact for
 * NPL_V_DOT_RUN(bits) vp_dot calls with weights below 2^bits: a run
 * starts from vi s (vp_start) and ends folded into it (vp_finish). With
 * VNNI the running sum is s itself. */
typedef __m512i vp;
#define NPL_V_DOT_RUN(bits) (0 * (bits) + 8)
NPL_V_AI vp vp_start(vi s) { return s; }
NPL_V_AI vi vp_finish(vi s, vp p) { (void)s; return p; }
NPL_V_AI vp vp_dot(vp p, vu w, const int8_t *q) { return _mm512_dpbusd_epi32(p, w, npl_v_bcast4(q)); }
/* Q8_0 units (quants + 128): the run's start carries the zero point,
 * -128 * sum(q) (from nsum8 = -8 * sum), and one run covers the block. */
#define NPL_V_Q8_RUN 8
NPL_V_AI vi vi_q8_init(int32_t nsum8) { return _mm512_set1_epi32(nsum8 * 16); }
NPL_V_AI vp vp_dot_q8(vp p, vu w, const int8_t *q) { return _mm512_dpbusd_epi32(p, w, npl_v_bcast4(q)); }

/* BF16 pairs: acc + w_odd * x_odd + w_even * x_even per lane, with
 * VDPBF16PS's rounding (matmul_bf16.h): the instruction itself, or two
 * FMAs between npl_v_bf16_begin() and npl_v_bf16_end() (MXCSR FTZ and
 * DAZ, which make the FMAs flush as the instruction does). */
NPL_V_AI vbh vbh_loadu(const void *p) { return _mm512_loadu_si512(p); }
#ifdef __AVX512BF16__
NPL_V_AI vf vf_dot_bf16(vf acc, vbh w, vbh x) { return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x); }
#else
NPL_V_AI vf vf_dot_bf16(vf acc, vbh w, vbh x)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    vf wo = _mm512_castsi512_ps(_mm512_and_si512(w, hi)), we = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    vf xo = _mm512_castsi512_ps(_mm512_and_si512(x, hi)), xe = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    return _mm512_fmadd_ps(we, xe, _mm512_fmadd_ps(wo, xo, acc));
}
#endif

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define NPL_ISA avx2
#define NPL_V_AVX2 1
#define NPL_V_TILE 4
#define NPL_V_TILE_ROWS 2
#define NPL_V_TILE_VECS 2

typedef struct vf {
    __m256 lo, hi;
} vf;
typedef struct vi {
    __m256i lo, hi;
} vi;
typedef struct vbh {
    __m256i lo, hi;
} vbh;

#define NPL_V_F2(expr_lo, expr_hi) ((vf){expr_lo, expr_hi})
#define NPL_V_I2(expr_lo, expr_hi) ((vi){expr_lo, expr_hi})

NPL_V_AI vf vf_zero(void) { return NPL_V_F2(_mm256_setzero_ps(), _mm256_setzero_ps()); }
NPL_V_AI vf vf_set1(float f) { return NPL_V_F2(_mm256_set1_ps(f), _mm256_set1_ps(f)); }
NPL_V_AI vf vf_loadu(const float *p) { return NPL_V_F2(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)); }
NPL_V_AI void vf_storeu(float *p, vf v)
{
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
}
NPL_V_AI vf vf_loadu_n(const float *p, size_t n)
{
    float t[16] = {0};
    memcpy(t, p, n * sizeof *t);
    return vf_loadu(t);
}
NPL_V_AI void vf_storeu_n(float *p, vf v, size_t n)
{
    float t[16];
    vf_storeu(t, v);
    memcpy(p, t, n * sizeof *t);
}
/* Lanes 0-7 in lo, 8-15 in hi: all ones where in the set. */
typedef struct vmask {
    __m256i lo, hi;
} vmask;
NPL_V_AI vmask vmask_first(size_t n)
{
    __m256i k = _mm256_set1_epi32((int)(n < 16 ? n : 16));
    return (vmask){_mm256_cmpgt_epi32(k, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                   _mm256_cmpgt_epi32(k, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15))};
}
/* VMASKMOVPS: masked-out lanes are not read (no fault) and not written */
NPL_V_AI vf vf_loadu_mask(const float *p, vmask m)
{
    return NPL_V_F2(_mm256_maskload_ps(p, m.lo), _mm256_maskload_ps(p + 8, m.hi));
}
NPL_V_AI void vf_storeu_mask(float *p, vf v, vmask m)
{
    _mm256_maskstore_ps(p, m.lo, v.lo);
    _mm256_maskstore_ps(p + 8, m.hi, v.hi);
}
NPL_V_AI vf vf_blend_mask(vmask m, vf t, vf e)
{
    return NPL_V_F2(_mm256_blendv_ps(e.lo, t.lo, _mm256_castsi256_ps(m.lo)),
                    _mm256_blendv_ps(e.hi, t.hi, _mm256_castsi256_ps(m.hi)));
}
NPL_V_AI vf vf_add(vf a, vf b) { return NPL_V_F2(_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)); }
NPL_V_AI vf vf_sub(vf a, vf b) { return NPL_V_F2(_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)); }
NPL_V_AI vf vf_mul(vf a, vf b) { return NPL_V_F2(_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)); }
NPL_V_AI vf vf_fmadd(vf a, vf b, vf c)
{
    return NPL_V_F2(_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi));
}
NPL_V_AI vf vf_fnmadd(vf a, vf b, vf c)
{
    return NPL_V_F2(_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi));
}
NPL_V_AI vf vf_max(vf a, vf b) { return NPL_V_F2(_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)); }
NPL_V_AI vf vf_abs(vf a)
{
    const __m256 m = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    return NPL_V_F2(_mm256_and_ps(a.lo, m), _mm256_and_ps(a.hi, m));
}
NPL_V_AI float vf_hsum(vf v) { return npl_lane_sum16_avx2(v.lo, v.hi); }
NPL_V_AI float vf_hmax(vf v)
{
    __m256 m8 = _mm256_max_ps(v.lo, v.hi);
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
NPL_V_AI vf vf_load_f16(const void *p)
{
    const __m128i *q = (const __m128i *)p;
    return NPL_V_F2(_mm256_cvtph_ps(_mm_loadu_si128(q)), _mm256_cvtph_ps(_mm_loadu_si128(q + 1)));
}
NPL_V_AI vf vf_load_bf16(const void *p)
{
    const __m128i *q = (const __m128i *)p;
    return NPL_V_F2(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(q)), 16)),
                    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(q + 1)), 16)));
}
NPL_V_AI vf vf_load_i8(const void *p)
{
    const uint8_t *b = p;
    return NPL_V_F2(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)b))),
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(b + 8)))));
}

NPL_V_AI vf vf_exp_neg(vf x) { return NPL_V_F2(npl_exp_neg_avx2(x.lo), npl_exp_neg_avx2(x.hi)); }
NPL_V_AI vf vf_div(vf a, vf b) { return NPL_V_F2(_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)); }
NPL_V_AI vf vf_neg_abs(vf a)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return NPL_V_F2(_mm256_or_ps(a.lo, sign), _mm256_or_ps(a.hi, sign));
}
NPL_V_AI vf vf_select_ge0(vf c, vf t, vf e)
{
    __m256 lo = _mm256_cmp_ps(c.lo, _mm256_setzero_ps(), _CMP_GE_OQ);
    __m256 hi = _mm256_cmp_ps(c.hi, _mm256_setzero_ps(), _CMP_GE_OQ);
    return NPL_V_F2(_mm256_blendv_ps(e.lo, t.lo, lo), _mm256_blendv_ps(e.hi, t.hi, hi));
}

#define NPL_V_HSUM_BATCH 4
NPL_V_AI void vf_hsum_batch(const vf a[4], float out[4])
{
    for (int i = 0; i < 4; i++)
        out[i] = vf_hsum(a[i]);
}

/* The half h (0: lanes 0-7, 1: lanes 8-15) of v. */
NPL_V_AI __m256 *npl_v_half(vf *v, int h) { return h ? &v->hi : &v->lo; }
/* r[i] lane j <-> r[j] lane i (exact moves): rows i and i + b swap their
 * b x b off-diagonal blocks, for b = 8 (halves), 4, 2, 1. */
NPL_V_AI void vf_transpose16(vf r[16])
{
    for (int i = 0; i < 8; i++) {
        __m256 t = r[i].hi;
        r[i].hi = r[i + 8].lo;
        r[i + 8].lo = t;
    }
    for (int i = 0; i < 16; i++)
        for (int h = 0; !(i & 4) && h < 2; h++) {
            __m256 *x = npl_v_half(&r[i], h), *y = npl_v_half(&r[i + 4], h);
            __m256 a = _mm256_permute2f128_ps(*x, *y, 0x20), c = _mm256_permute2f128_ps(*x, *y, 0x31);
            *x = a;
            *y = c;
        }
    for (int i = 0; i < 16; i++)
        for (int h = 0; !(i & 2) && h < 2; h++) {
            __m256 *x = npl_v_half(&r[i], h), *y = npl_v_half(&r[i + 2], h);
            __m256d xd = _mm256_castps_pd(*x), yd = _mm256_castps_pd(*y);
            __m256 a = _mm256_castpd_ps(_mm256_unpacklo_pd(xd, yd)), c = _mm256_castpd_ps(_mm256_unpackhi_pd(xd, yd));
            *x = a;
            *y = c;
        }
    for (int i = 0; i < 16; i += 2)
        for (int h = 0; h < 2; h++) {
            __m256 *x = npl_v_half(&r[i], h), *y = npl_v_half(&r[i + 1], h);
            __m256 a = _mm256_blend_ps(*x, _mm256_moveldup_ps(*y), 0xaa), c = _mm256_blend_ps(_mm256_movehdup_ps(*x), *y, 0xaa);
            *x = a;
            *y = c;
        }
}

NPL_V_AI vi vi_set1(int32_t x) { return NPL_V_I2(_mm256_set1_epi32(x), _mm256_set1_epi32(x)); }
NPL_V_AI vi vi_add(vi a, vi b) { return NPL_V_I2(_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)); }
NPL_V_AI vi vi_min(vi a, vi b) { return NPL_V_I2(_mm256_min_epi32(a.lo, b.lo), _mm256_min_epi32(a.hi, b.hi)); }
NPL_V_AI vi vi_max(vi a, vi b) { return NPL_V_I2(_mm256_max_epi32(a.lo, b.lo), _mm256_max_epi32(a.hi, b.hi)); }
NPL_V_AI vi vi_round(vf a) { return NPL_V_I2(_mm256_cvtps_epi32(a.lo), _mm256_cvtps_epi32(a.hi)); }
NPL_V_AI int32_t vi_hsum(vi v)
{
    __m256i t = _mm256_add_epi32(v.lo, v.hi);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
NPL_V_AI void vi_store_i8(int8_t *p, vi v)
{
    __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(v.lo, v.hi), 0xd8); /* lanes 0-7 | 8-15 as int16 */
    _mm_storeu_si128((__m128i *)(void *)p, _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
}

NPL_V_AI void vf_store_f16(void *p, vf v)
{
    __m128i *q = (__m128i *)p;
    _mm_storeu_si128(q, _mm256_cvtps_ph(v.lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm_storeu_si128(q + 1, _mm256_cvtps_ph(v.hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
NPL_V_AI void vi_store_u16(uint16_t *p, vi v)
{
    __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(v.lo, v.hi), 0xd8);
    _mm256_storeu_si256((__m256i *)(void *)p, w);
}
NPL_V_AI vi vi_loadu(const void *p)
{
    const __m256i *q = (const __m256i *)p;
    return NPL_V_I2(_mm256_loadu_si256(q), _mm256_loadu_si256(q + 1));
}
NPL_V_AI vi vi_and(vi a, vi b) { return NPL_V_I2(_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)); }
NPL_V_AI vi vi_or(vi a, vi b) { return NPL_V_I2(_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)); }
#define vi_srli(a, n) NPL_V_I2(_mm256_srli_epi32((a).lo, (n)), _mm256_srli_epi32((a).hi, (n)))
NPL_V_AI vi vi_cmpgt(vi a, vi b) { return NPL_V_I2(_mm256_cmpgt_epi32(a.lo, b.lo), _mm256_cmpgt_epi32(a.hi, b.hi)); }
NPL_V_AI vi vi_cmpeq(vi a, vi b) { return NPL_V_I2(_mm256_cmpeq_epi32(a.lo, b.lo), _mm256_cmpeq_epi32(a.hi, b.hi)); }
NPL_V_AI vi vi_blend(vi a, vi b, vi mask)
{
    return NPL_V_I2(_mm256_blendv_epi8(a.lo, b.lo, mask.lo), _mm256_blendv_epi8(a.hi, b.hi, mask.hi));
}

NPL_V_AI vi vi_sub(vi a, vi b) { return NPL_V_I2(_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)); }
NPL_V_AI vi vi_mullo(vi a, vi b) { return NPL_V_I2(_mm256_mullo_epi32(a.lo, b.lo), _mm256_mullo_epi32(a.hi, b.hi)); }
#define vi_slli(a, n) NPL_V_I2(_mm256_slli_epi32((a).lo, (n)), _mm256_slli_epi32((a).hi, (n)))
#define vi_srai(a, n) NPL_V_I2(_mm256_srai_epi32((a).lo, (n)), _mm256_srai_epi32((a).hi, (n)))
NPL_V_AI vf vf_from_vi(vi a) { return NPL_V_F2(_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)); }
NPL_V_AI vi vi_load_u8(const void *p)
{
    const uint8_t *b = p;
    return NPL_V_I2(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)b)),
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(b + 8))));
}
NPL_V_AI vi vi_load_u8pairs(const void *p)
{
    const __m128i *q = (const __m128i *)p;
    return NPL_V_I2(_mm256_cvtepu8_epi16(_mm_loadu_si128(q)), _mm256_cvtepu8_epi16(_mm_loadu_si128(q + 1)));
}
NPL_V_AI vi vi_load_i8pairs(const void *p)
{
    const __m128i *q = (const __m128i *)p;
    return NPL_V_I2(_mm256_cvtepi8_epi16(_mm_loadu_si128(q)), _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1)));
}
NPL_V_AI __m256i npl_v_bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}
NPL_V_AI vi vi_dot_pairs(vi acc, vi pairs, const int16_t *b)
{
    __m256i bb = npl_v_bcast4(b);
    return NPL_V_I2(_mm256_add_epi32(acc.lo, _mm256_madd_epi16(pairs.lo, bb)),
                    _mm256_add_epi32(acc.hi, _mm256_madd_epi16(pairs.hi, bb)));
}

/* Rows 0-7 in lo (bytes 0-31 of the unit), 8-15 in hi. */
typedef struct vu {
    __m256i lo, hi;
} vu;
NPL_V_AI vu vu_load(const void *p)
{
    const __m256i *q = (const __m256i *)p;
    return (vu){_mm256_loadu_si256(q), _mm256_loadu_si256(q + 1)};
}
NPL_V_AI vu vu_lo_nibbles(vu raw)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    return (vu){_mm256_and_si256(raw.lo, m4), _mm256_and_si256(raw.hi, m4)};
}
NPL_V_AI vu vu_hi_nibbles(vu raw)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    return (vu){_mm256_and_si256(_mm256_srli_epi16(raw.lo, 4), m4), _mm256_and_si256(_mm256_srli_epi16(raw.hi, 4), m4)};
}
NPL_V_AI vu vu_lookup16(vu idx, const int8_t tbl[16])
{
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)tbl));
    return (vu){_mm256_shuffle_epi8(t, idx.lo), _mm256_shuffle_epi8(t, idx.hi)};
}
NPL_V_AI vf vf_from_bits(vi a) { return NPL_V_F2(_mm256_castsi256_ps(a.lo), _mm256_castsi256_ps(a.hi)); }
/* The 32 mask bits at m as 0xff / 0x00 bytes. */
NPL_V_AI __m256i npl_v_mask_bytes(const uint8_t *m)
{
    uint32_t k;
    memcpy(&k, m, sizeof k);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)k), pick);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
}
/* the bit is clear in w (below it): OR adds it */
NPL_V_AI vu vu_add_bit(vu w, const uint8_t *m, int bit)
{
    const __m256i b = _mm256_set1_epi8((char)bit);
    return (vu){_mm256_or_si256(w.lo, _mm256_and_si256(npl_v_mask_bytes(m), b)),
                _mm256_or_si256(w.hi, _mm256_and_si256(npl_v_mask_bytes(m + 4), b))};
}

/* Without VNNI: VPMADDUBSW gives int16 pairs, summed in int16 as long as
 * they cannot overflow (pairs of at most 2 * (2^bits - 1) * 127), then
 * widened with VPMADDWD. */
typedef struct vp {
    __m256i lo, hi;
} vp;
#define NPL_V_DOT_RUN(bits) (32767 / (2 * ((1 << (bits)) - 1) * 127))
NPL_V_AI vp vp_start(vi s)
{
    (void)s;
    return (vp){_mm256_setzero_si256(), _mm256_setzero_si256()};
}
NPL_V_AI vi vp_finish(vi s, vp p)
{
    const __m256i one = _mm256_set1_epi16(1);
    return NPL_V_I2(_mm256_add_epi32(s.lo, _mm256_madd_epi16(p.lo, one)),
                    _mm256_add_epi32(s.hi, _mm256_madd_epi16(p.hi, one)));
}
NPL_V_AI vp vp_dot(vp p, vu w, const int8_t *q)
{
    __m256i a = npl_v_bcast4(q);
    return (vp){_mm256_add_epi16(p.lo, _mm256_maddubs_epi16(w.lo, a)),
                _mm256_add_epi16(p.hi, _mm256_maddubs_epi16(w.hi, a))};
}
/* Q8_0 units (quants + 128) back to signed: |w| times q carrying w's
 * sign keeps each pair below 2 * 128 * 127, one unit per run, and no
 * zero point. */
#define NPL_V_Q8_RUN 1
NPL_V_AI vi vi_q8_init(int32_t nsum8)
{
    (void)nsum8;
    return vi_set1(0);
}
NPL_V_AI vp vp_dot_q8(vp p, vu w, const int8_t *q)
{
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    __m256i a = npl_v_bcast4(q);
    __m256i lo = _mm256_xor_si256(w.lo, bias), hi = _mm256_xor_si256(w.hi, bias);
    return (vp){_mm256_add_epi16(p.lo, _mm256_maddubs_epi16(_mm256_abs_epi8(lo), _mm256_sign_epi8(a, lo))),
                _mm256_add_epi16(p.hi, _mm256_maddubs_epi16(_mm256_abs_epi8(hi), _mm256_sign_epi8(a, hi)))};
}

NPL_V_AI vbh vbh_loadu(const void *p)
{
    const __m256i *q = (const __m256i *)p;
    return (vbh){_mm256_loadu_si256(q), _mm256_loadu_si256(q + 1)};
}
NPL_V_AI __m256 npl_v_bf16_odd(__m256i pairs)
{
    return _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32((int)0xffff0000u)));
}
NPL_V_AI __m256 npl_v_bf16_even(__m256i pairs) { return _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16)); }
NPL_V_AI vf vf_dot_bf16(vf acc, vbh w, vbh x)
{
    return NPL_V_F2(_mm256_fmadd_ps(npl_v_bf16_even(w.lo), npl_v_bf16_even(x.lo),
                                    _mm256_fmadd_ps(npl_v_bf16_odd(w.lo), npl_v_bf16_odd(x.lo), acc.lo)),
                    _mm256_fmadd_ps(npl_v_bf16_even(w.hi), npl_v_bf16_even(x.hi),
                                    _mm256_fmadd_ps(npl_v_bf16_odd(w.hi), npl_v_bf16_odd(x.hi), acc.hi)));
}

#else
#error "simd_vec.h: compile with the AVX2 (-mavx2 -mfma -mf16c) or AVX-512 flags"
#endif

#if !defined(__AVX512BF16__)
/* MXCSR FTZ + DAZ around emulated BF16 dot products (see vf_dot_bf16). */
#define NPL_V_MXCSR_FTZ_DAZ 0x8040u
NPL_V_AI unsigned npl_v_bf16_begin(void)
{
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | NPL_V_MXCSR_FTZ_DAZ);
    return csr;
}
NPL_V_AI void npl_v_bf16_end(unsigned csr) { _mm_setcsr(csr); }
#else
NPL_V_AI unsigned npl_v_bf16_begin(void) { return 0; }
NPL_V_AI void npl_v_bf16_end(unsigned csr) { (void)csr; }
#endif

/* A float rounded to half precision and back (VCVTPS2PH, nearest even). */
NPL_V_AI float npl_v_round_f16(float f) { return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }

/* The lines of [p + ahead, p + ahead + bytes) on their way to L1: weights
 * stream from memory once per step, and the hardware prefetcher alone
 * falls behind when the core is busy. */
NPL_V_AI void npl_v_prefetch(const void *p, size_t ahead, size_t bytes)
{
    for (size_t off = 0; off < bytes; off += 64)
        _mm_prefetch((const char *)p + ahead + off, _MM_HINT_T0);
}

#endif
