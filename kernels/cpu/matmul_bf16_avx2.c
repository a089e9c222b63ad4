/* AVX2 BF16 rows (matmul_bf16.h): VDPBF16PS's arithmetic emulated with
 * FMA on 2 x 8 lanes, and the activations' rounding to BF16. Also the
 * path of AVX-512 CPUs without the BF16 instructions. */
#include "kernels_x86.h"

#ifdef NPL_KERNELS_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "lane_sum.h"
#include "matmul_bf16.h"

#define AI static inline __attribute__((always_inline))

#define TILE_ROWS 2
#define TILE_VECS 2

void npl_act_to_bf16_avx2(const float *x, size_t n, uint16_t *out)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int h = 0; h < 2; h++) {
            __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + i + 8 * (size_t)h));
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
            __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
            __m256i v = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
            __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
            v = _mm256_blendv_epi8(v, q, nan);
            __m256i sub = _mm256_cmpeq_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x7f80)), _mm256_setzero_si256());
            r[h] = _mm256_blendv_epi8(v, _mm256_and_si256(v, _mm256_set1_epi32(0x8000)), sub);
        }
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8);
        _mm256_storeu_si256((__m256i *)(void *)(out + i), p);
    }
    for (; i < n; i++)
        out[i] = npl_bf16_act_bits(x[i]);
}

AI __m256 odd8(__m256i pairs)
{
    return _mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32((int)0xffff0000u)));
}

AI __m256 even8(__m256i pairs)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16));
}

/* VDPBF16PS treats subnormal inputs as zero and flushes subnormal results
 * to zero: FMA under MXCSR's DAZ and FTZ bits does exactly that (measured
 * equal on every lane of 9.6 million random cases). The bits are set only
 * around the chunk loop and restored before anything else is computed. */
#define MXCSR_FTZ_DAZ 0x8040u

AI void bf16_tile(const uint8_t *const rows[NPL_BF16_TILE_MAX], const uint16_t *xb, size_t xs, int V, size_t n,
                  float out[NPL_BF16_TILE_MAX][NPL_BF16_TILE_MAX])
{
    __m256 acc[TILE_ROWS][TILE_VECS][2];
    for (int r = 0; r < TILE_ROWS; r++)
        for (int v = 0; v < V; v++)
            acc[r][v][0] = acc[r][v][1] = _mm256_setzero_ps();
    size_t n32 = n & ~(size_t)31;
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | MXCSR_FTZ_DAZ);
    for (size_t c = 0; c < n32; c += 32) {
        for (int h = 0; h < 2; h++) {
            __m256 xo[TILE_VECS], xe[TILE_VECS];
            for (int v = 0; v < V; v++) {
                __m256i xp = _mm256_loadu_si256((const __m256i *)(const void *)(xb + (size_t)v * xs + c + 16 * (size_t)h));
                xo[v] = odd8(xp);
                xe[v] = even8(xp);
            }
            for (int r = 0; r < TILE_ROWS; r++) {
                __m256i wp = _mm256_loadu_si256((const __m256i *)(const void *)(rows[r] + 2 * c + 32 * (size_t)h));
                __m256 wo = odd8(wp), we = even8(wp);
                for (int v = 0; v < V; v++)
                    acc[r][v][h] = _mm256_fmadd_ps(we, xe[v], _mm256_fmadd_ps(wo, xo[v], acc[r][v][h]));
            }
        }
    }
    _mm_setcsr(csr);
    for (int r = 0; r < TILE_ROWS; r++)
        for (int v = 0; v < V; v++) {
            float s = npl_lane_sum16_avx2(acc[r][v][0], acc[r][v][1]);
            out[r][v] = npl_bf16_tail(rows[r], xb + (size_t)v * xs, n32, n, s);
        }
}

static void tile(const uint8_t *const rows[NPL_BF16_TILE_MAX], const uint16_t *xb, size_t xs, size_t nv, size_t n,
                 float out[NPL_BF16_TILE_MAX][NPL_BF16_TILE_MAX])
{
    if (nv == 1)
        bf16_tile(rows, xb, xs, 1, n, out);
    else
        bf16_tile(rows, xb, xs, 2, n, out);
}

void npl_bf16_matmul_avx2(const npl_matrix *w, int64_t r0, int64_t r1, const uint16_t *xb, size_t xb_stride,
                          size_t n_vec, float *const *y)
{
    npl_bf16_tiles(w, r0, r1, xb, xb_stride, n_vec, y, TILE_ROWS, TILE_VECS, tile);
}
#endif
