/* npl_attention_tiled (multi-query attention on AMX-BF16 tiles) against
 * the per-query kernel npl_attention_kv: causal, sliding windows over a
 * ring of cache rows, grouped-query heads, non-causal (every row sees
 * every key), partial tiles and key blocks; a row's bits do not depend on
 * the rows it is computed with (decode vs prefill); where it does not run
 * (no AMX, NPULLM_NO_AMX=1, Q8_0 caches, odd head sizes) it says so. On a
 * CPU without AMX-BF16 the comparison cases have nothing to run and pass
 * after checking that. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "attention_tiled.h"
#include "ggml_types.h"
#include "npl_test.h"
#include "vec_ops.h"

enum { MAXPOS = 400, MAXHD = 256, MAXG = 5, MAXNP = 40 };

static uint16_t kc[MAXPOS * MAXHD], vc[MAXPOS * MAXHD];
static uint16_t kref[MAXPOS * MAXHD], vref[MAXPOS * MAXHD];
static float q[MAXNP * MAXG * MAXHD], out0[MAXNP * MAXG * MAXHD], out1[MAXNP * MAXG * MAXHD];

static bool tiled_here(void)
{
    return npl_attention_tiled_available(NPL_SIMD_AVX512, NPL_KV_F16, 64) && npl_simd_detect() >= NPL_SIMD_AVX512;
}

typedef struct shape {
    size_t hd, group, n_pos;
    uint32_t p0;     /* position of the first query */
    uint32_t window; /* 0: causal from position 0 */
    uint32_t ring;   /* 0: row = position */
    bool all_keys;   /* non-causal: every row sees [0, last] */
    float kscale;    /* large: the running maximum moves a lot */
    bool sinks;      /* a sink logit per query head (gpt-oss) */
} shape;

/* Sink logits per query head: below, near and far above the scores. */
static const float sinks[8] = {-3.0f, 0.5f, 40.0f, 2.0f, -40.0f, 1.0f, 12.0f, 0.0f};

static void key_range(const shape *s, size_t i, uint32_t *lo, uint32_t *hi)
{
    uint32_t pos = s->p0 + (uint32_t)i;
    *hi = s->all_keys ? s->p0 + (uint32_t)s->n_pos - 1 : pos;
    *lo = s->window && pos >= s->window ? pos - s->window + 1 : 0;
}

/* Cache rows of positions [0, p0 + n_pos) (the ring keeps the last ring of
 * them); kref/vref hold the same values row = position for the reference. */
static void fill(const shape *s, nt_splitmix *r)
{
    uint32_t n = s->p0 + (uint32_t)s->n_pos;
    for (uint32_t p = 0; p < n; p++) {
        size_t row = s->ring ? p % s->ring : p;
        for (size_t d = 0; d < s->hd; d++) {
            kref[p * s->hd + d] = kc[row * s->hd + d] = npl_fp32_to_fp16(nt_splitmix_float(r) * s->kscale);
            vref[p * s->hd + d] = vc[row * s->hd + d] = npl_fp32_to_fp16(nt_splitmix_float(r));
        }
    }
    for (size_t i = 0; i < s->n_pos * s->group * s->hd; i++)
        q[i] = nt_splitmix_float(r) * 2.0f;
}

static void run_tiled(const shape *s, size_t first, size_t n_pos, void *scratch)
{
    uint32_t lo[MAXNP], hi[MAXNP];
    for (size_t i = 0; i < n_pos; i++)
        key_range(s, first + i, &lo[i], &hi[i]);
    size_t stride = s->group * s->hd;
    npl_attn_tiled_job job = {
        .q = q + first * stride, .q_stride = stride, .out = out1 + first * stride, .out_stride = stride,
        .n_pos = n_pos, .group = s->group, .head_dim = s->hd, .key_lo = lo, .key_hi = hi,
        .k = (const uint8_t *)kc, .v = (const uint8_t *)vc, .row_bytes = s->hd * 2, .ring = s->ring,
        .scale = 1.0f / sqrtf((float)s->hd), .sinks = s->sinks ? sinks : NULL,
    };
    npl_attention_tiled(&job, scratch);
}

/* The tiled kernel rounds q and the softmax weights to halves (exact
 * bf16 products otherwise, f32 sums in another order). A score moves by
 * at most 2^-11 * sum_d |q_d k_d| * scale (q's rounding) and a weight by
 * 2^-11 relative (its rounding); a weight's relative error e moves the
 * output by at most e * max|v| <= e (|v| <= 1) on each side of the
 * normalisation, so twice the largest such e, plus f32 summation noise. */
static float tolerance(const shape *s, size_t i, size_t h)
{
    uint32_t lo, hi;
    key_range(s, i, &lo, &hi);
    const float *qr = q + (i * s->group + h) * s->hd;
    double worst = 0.0;
    for (uint32_t p = lo; p <= hi; p++) {
        double a = 0.0;
        for (size_t d = 0; d < s->hd; d++)
            a += fabs((double)qr[d] * npl_fp16_to_fp32(kref[p * s->hd + d]));
        worst = a > worst ? a : worst;
    }
    double e = ldexp(1.0, -11) * worst / sqrt((double)s->hd) * 2.0 + ldexp(1.0, -11);
    return (float)(2.0 * e + 1e-5);
}

static void check_shape(const shape *s, void *scratch, float *ref_scratch)
{
    nt_splitmix r = {s->hd * 131 + s->group * 17 + s->n_pos + s->p0};
    fill(s, &r);
    size_t stride = s->group * s->hd;
    for (size_t i = 0; i < s->n_pos; i++) {
        uint32_t lo, hi;
        key_range(s, i, &lo, &hi);
        npl_attention_kv_sinks(NPL_SIMD_NONE, NPL_KV_F16, q + i * stride, s->hd, s->group, kref + (size_t)lo * s->hd,
                               vref + (size_t)lo * s->hd, s->hd * 2, hi - lo + 1, s->hd, 1.0f / sqrtf((float)s->hd),
                               s->sinks ? sinks : NULL, out0 + i * stride, s->hd, ref_scratch);
    }
    run_tiled(s, 0, s->n_pos, scratch);
    int bad = 0;
    for (size_t i = 0; i < s->n_pos; i++)
        for (size_t h = 0; h < s->group; h++) {
            float tol = tolerance(s, i, h);
            for (size_t d = 0; d < s->hd; d++) {
                size_t x = (i * s->group + h) * s->hd + d;
                if (!(fabsf(out1[x] - out0[x]) <= tol) && bad++ < 5)
                    CHECKF(false, "hd %zu group %zu n_pos %zu p0 %u window %u ring %u all %d: row %zu head %zu "
                           "dim %zu: %g vs %g (tolerance %g)", s->hd, s->group, s->n_pos, s->p0, s->window,
                           s->ring, s->all_keys, i, h, d, out1[x], out0[x], tol);
            }
        }
    CHECK(bad == 0);

    /* the same rows one position at a time (decode) and in two uneven
     * blocks give the same bits */
    float *whole = malloc(s->n_pos * stride * sizeof *whole);
    REQUIRE(whole);
    memcpy(whole, out1, s->n_pos * stride * sizeof *whole);
    if (!s->all_keys)
        for (size_t i = 0; i < s->n_pos; i++)
            run_tiled(s, i, 1, scratch);
    CHECK(memcmp(whole, out1, s->n_pos * stride * sizeof *whole) == 0);
    size_t cut = s->n_pos / 3;
    if (!s->all_keys && cut > 0) {
        run_tiled(s, 0, cut, scratch);
        run_tiled(s, cut, s->n_pos - cut, scratch);
        CHECK(memcmp(whole, out1, s->n_pos * stride * sizeof *whole) == 0);
    }
    free(whole);
}

static void test_matches_per_query(void)
{
    if (!tiled_here()) {
        CHECK(!npl_attention_tiled_available(NPL_SIMD_AVX512, NPL_KV_F16, 64));
        return;
    }
    static const shape shapes[] = {
        {64, 4, 33, 0, 0, 0, false, 1.0f, false},      /* prefill from the start, GQA 4 */
        {64, 4, 1, 300, 0, 0, false, 8.0f, false},     /* one decode row over 301 keys */
        {64, 1, 17, 200, 0, 0, false, 8.0f, false},    /* one head: a partial tile */
        {128, 5, 7, 61, 0, 0, false, 1.0f, false},     /* odd group: 35 rows, 3 tiles */
        {256, 4, 20, 100, 50, 69, false, 1.0f, false}, /* sliding window over a ring */
        {64, 2, 40, 250, 8, 47, false, 8.0f, false},   /* small window, block boundary crossings */
        {64, 4, 37, 0, 0, 0, true, 1.0f, false},       /* non-causal: every row sees all 37 */
        {192, 3, 30, 70, 0, 0, true, 8.0f, false},     /* non-causal after a prefix */
        {64, 4, 40, 200, 128, 167, false, 1.0f, true}, /* gpt-oss: window 128 over a ring, sinks */
    };
    void *scratch = malloc(npl_attention_tiled_scratch_bytes(MAXNP, MAXG, MAXHD));
    float *ref_scratch = malloc(npl_attention_scratch_floats(MAXG, MAXHD) * sizeof(float));
    REQUIRE(scratch && ref_scratch);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_shape(&shapes[i], scratch, ref_scratch);
    free(scratch);
    free(ref_scratch);
}

/* Where the tiled kernel does not run, the caller keeps the per-query one. */
static void test_availability(void)
{
    CHECK(!npl_attention_tiled_available(NPL_SIMD_AVX512, NPL_KV_Q8_0, 64));
    CHECK(!npl_attention_tiled_available(NPL_SIMD_AVX512, NPL_KV_F16, 72));
    CHECK(!npl_attention_tiled_available(NPL_SIMD_AVX512, NPL_KV_F16, 32));
    CHECK(!npl_attention_tiled_available(NPL_SIMD_AVX2, NPL_KV_F16, 64));
    CHECK(!npl_attention_tiled_available(NPL_SIMD_NONE, NPL_KV_F16, 64));
    const char *no_amx = getenv("NPULLM_NO_AMX");
    if (no_amx && strcmp(no_amx, "1") == 0)
        CHECK(!npl_attention_tiled_available(NPL_SIMD_AVX512, NPL_KV_F16, 64));
}

NT_MAIN({"matches_per_query", test_matches_per_query}, {"availability", test_availability})
