/* npl_attention: every SIMD level gives the portable version's bits (odd
 * head sizes, block boundaries, GQA groups, with and without attention
 * sinks), npl_attention_rows gives its bits row by row, and the portable
 * version matches a naive double-precision softmax (with a sink logit in
 * its maximum and denominator, as ggml's soft_max with sinks); the exp it
 * uses is accurate over the range the softmax feeds it. */
#include <math.h>

#include "attention.h"
#include "attention_internal.h"
#include "ggml_types.h"
#include "npl_test.h"
#include "vec_ops.h"

enum { MAXKV = 300, MAXHD = 128, MAXQ = 8 };

static uint16_t kc[MAXKV * MAXHD], vc[MAXKV * MAXHD];
/* Sink logits per query head: below, near and far above the scores (the
 * last case rescales the accumulators at the end). */
static const float sinks[MAXQ] = {-3.0f, 0.5f, 40.0f, 2.0f, -40.0f, 1.0f, 12.0f, 0.0f};
static float q[MAXQ * MAXHD], out0[MAXQ * MAXHD], out1[MAXQ * MAXHD];

static void fill(nt_splitmix *r, size_t hd, float kscale)
{
    for (size_t i = 0; i < (size_t)MAXKV * hd; i++) {
        kc[i] = npl_fp32_to_fp16(nt_splitmix_float(r) * kscale);
        vc[i] = npl_fp32_to_fp16(nt_splitmix_float(r));
    }
    for (size_t i = 0; i < (size_t)MAXQ * hd; i++)
        q[i] = nt_splitmix_float(r) * 2.0f;
}

static uint8_t kq[MAXKV * MAXHD * 2], vq[MAXKV * MAXHD * 2];

/* The cache rows [0, n) of the halves kh, vh again in Q8_0 (head_dim
 * at most 256, a multiple of 32). */
static void to_q8_rows(const uint16_t *kh, const uint16_t *vh, size_t n, size_t hd, uint8_t *kq8, uint8_t *vq8)
{
    size_t rb = npl_kv_row_bytes(NPL_KV_Q8_0, hd);
    float row[256];
    for (size_t j = 0; j < n; j++) {
        for (size_t d = 0; d < hd; d++)
            row[d] = npl_fp16_to_fp32(kh[j * hd + d]);
        npl_kv_store_row(NPL_KV_Q8_0, row, kq8 + j * rb, hd);
        for (size_t d = 0; d < hd; d++)
            row[d] = npl_fp16_to_fp32(vh[j * hd + d]);
        npl_kv_store_row(NPL_KV_Q8_0, row, vq8 + j * rb, hd);
    }
}

static void test_levels_exact(void)
{
    nt_splitmix r = {11};
    static const size_t hds[] = {64, 24, 80, 7, 65, 32, 96};
    static const size_t nqs[] = {1, 3, 4, 8};
    static const size_t kvs[] = {1, 2, 15, 16, 17, 63, 64, 65, 128, 129, 300};
    float *s0 = malloc(npl_attention_scratch_floats(MAXQ, MAXHD) * sizeof(float));
    float *s1 = malloc(npl_attention_scratch_floats(MAXQ, MAXHD) * sizeof(float));
    REQUIRE(s0 && s1);
    for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++) {
        size_t hd = hds[a];
        fill(&r, hd, a % 2 ? 8.0f : 1.0f); /* large scores: the running max moves a lot */
        for (int fmt = 0; fmt < 2; fmt++) {
            size_t rb = npl_kv_row_bytes((npl_kv_format)fmt, hd);
            if (rb == 0) {
                CHECK(fmt == NPL_KV_Q8_0 && hd % 32 != 0);
                continue;
            }
            const void *kr = kc, *vr = vc;
            if (fmt == NPL_KV_Q8_0) {
                to_q8_rows(kc, vc, MAXKV, hd, kq, vq);
                kr = kq;
                vr = vq;
            }
            for (size_t b = 0; b < sizeof nqs / sizeof nqs[0]; b++)
                for (size_t c = 0; c < sizeof kvs / sizeof kvs[0]; c++) {
                    size_t nq = nqs[b], nkv = kvs[c];
                    float scale = 1.0f / sqrtf((float)hd);
                    for (int z = 0; z < 2; z++) {
                        const float *zs = z ? sinks : NULL;
                        npl_attention_ref((npl_kv_format)fmt, q, hd, nq, kr, vr, rb, nkv, hd, scale, zs, out0, hd,
                                          s0);
                        for (int lv = 1; lv <= (int)npl_simd_detect(); lv++) {
                            memset(out1, 0, sizeof out1);
                            npl_attention_kv_sinks((npl_simd_level)lv, (npl_kv_format)fmt, q, hd, nq, kr, vr, rb,
                                                   nkv, hd, scale, zs, out1, hd, s1);
                            CHECKF(memcmp(out0, out1, nq * hd * sizeof(float)) == 0,
                                   "format %d level %d head_dim %zu heads %zu positions %zu sinks %d differs", fmt,
                                   lv, hd, nq, nkv, z);
                        }
                    }
                    npl_attention_ref((npl_kv_format)fmt, q, hd, nq, kr, vr, rb, nkv, hd, scale, NULL, out0, hd,
                                      s0);
                    if (fmt == NPL_KV_F16) {
                        /* npl_attention is the F16 case */
                        npl_attention(npl_simd_detect(), q, hd, nq, kc, vc, hd, nkv, hd, scale, out1, hd, s1);
                        CHECK(memcmp(out0, out1, nq * hd * sizeof(float)) == 0);
                    }
                }
        }
    }
    free(s0);
    free(s1);
}

/* A Q8_0 cache stays close to the F16 one (8-bit rows, per-32 scales). */
static void test_q8_cache_close(void)
{
    nt_splitmix r = {14};
    enum { HD = 64, NQ = 4, NKV = 200 };
    fill(&r, HD, 2.0f);
    size_t rb = npl_kv_row_bytes(NPL_KV_Q8_0, HD);
    CHECK(rb == 2 * 34);
    to_q8_rows(kc, vc, NKV, HD, kq, vq);
    float *s = malloc(npl_attention_scratch_floats(NQ, HD) * sizeof(float));
    REQUIRE(s);
    npl_attention(npl_simd_detect(), q, HD, NQ, kc, vc, HD, NKV, HD, 0.125f, out0, HD, s);
    npl_attention_kv(npl_simd_detect(), NPL_KV_Q8_0, q, HD, NQ, kq, vq, rb, NKV, HD, 0.125f, out1, HD, s);
    double worst = 0.0;
    for (size_t i = 0; i < NQ * HD; i++)
        worst = fmax(worst, fabs((double)out0[i] - out1[i]));
    fprintf(stderr, "q8_0 cache: largest difference from f16 %.3g\n", worst);
    CHECK(worst < 0.02);
    free(s);
}

static void test_matches_softmax(void)
{
    nt_splitmix r = {12};
    enum { HD = 24, NQ = 3 };
    fill(&r, HD, 2.0f);
    float *scratch = malloc(npl_attention_scratch_floats(NQ, HD) * sizeof(float));
    REQUIRE(scratch);
    const size_t kvs[] = {1, 2, 63, 64, 65, 128, 129, 300};
    for (size_t t = 0; t < 2 * sizeof kvs / sizeof kvs[0]; t++) {
        size_t n_kv = kvs[t / 2];
        const float *zs = t % 2 ? sinks : NULL;
        float scale = 1.0f / sqrtf((float)HD);
        npl_attention_kv_sinks(npl_simd_detect(), NPL_KV_F16, q, HD, NQ, kc, vc, HD * sizeof(uint16_t), n_kv, HD,
                               scale, zs, out0, HD, scratch);
        for (int h = 0; h < NQ; h++) {
            double s[MAXKV], max = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < n_kv; j++) {
                double dot = 0.0;
                for (int d = 0; d < HD; d++)
                    dot += (double)q[h * HD + d] * npl_fp16_to_fp32(kc[j * HD + d]);
                s[j] = dot * scale;
                max = fmax(max, s[j]);
            }
            if (zs) /* the sink: in the maximum and the denominator, no value */
                max = fmax(max, zs[h]);
            for (size_t j = 0; j < n_kv; j++) {
                s[j] = exp(s[j] - max);
                sum += s[j];
            }
            if (zs)
                sum += exp(zs[h] - max);
            for (int d = 0; d < HD; d++) {
                double o = 0.0;
                for (size_t j = 0; j < n_kv; j++)
                    o += s[j] / sum * npl_fp16_to_fp32(vc[j * HD + d]);
                CHECKF(fabs(out0[h * HD + d] - o) <= 2e-5, "n_kv %zu sinks %d head %d dim %d: %.8g vs %.8g", n_kv,
                       zs != NULL, h, d, (double)out0[h * HD + d], o);
            }
        }
    }
    free(scratch);
}

static void test_exp(void)
{
    double worst = 0.0;
    nt_splitmix r = {13};
    for (int i = 0; i < 1000000; i++) {
        /* uniform over [-87, 0], and over [-1e-3, 0] where 1 - x matters */
        float x = i % 2 ? -87.0f * (nt_splitmix_float(&r) * 0.5f + 0.5f) : -1e-3f * (nt_splitmix_float(&r) * 0.5f + 0.5f);
        double want = exp((double)x);
        double rel = fabs(npl_attn_exp(x) - want) / want;
        if (rel > worst)
            worst = rel;
    }
    fprintf(stderr, "exp: worst relative error %.3g\n", worst);
    CHECK(worst < 4e-7);
    CHECK(npl_attn_exp(-INFINITY) == 0.0f);
    CHECK(npl_attn_exp(-100.0f) == 0.0f);
    CHECK(npl_attn_exp(0.0f) == 1.0f);
}

/* npl_attention_rows: each position's rows are npl_attention_kv's bits at
 * every level (memcmp), for head sizes with and without a 16-dimension
 * tail, grouped heads, both cache formats, chunks of 1 to 300 positions
 * after 0 to 500 cached ones (key ranges ending mid-block and on block
 * boundaries), every position seeing the same keys (an image block) or
 * ranges in no order; scores far apart, so the running maximum jumps and
 * rescales accumulators by 0; a value of infinity that only the later
 * positions see. */
enum { RMAXPOS = 800, RMAXHD = 256, RMAXG = 8, RMAXP = 300 };

typedef struct rows_case {
    size_t hd, group, n_pos;
    uint32_t p0;  /* positions cached before the chunk */
    int ranges;   /* 0: causal, 1: all see [0, last], 2: random ends */
    float kscale;
    bool inf_value;
    bool sinks;   /* a sink logit per query head */
} rows_case;

static void rows_check(const rows_case *rc, nt_splitmix *r, uint16_t *kh, uint16_t *vh, uint8_t *kq8, uint8_t *vq8,
                       float *qr, float *want, float *got, float *scratch)
{
    size_t hd = rc->hd, g = rc->group, np = rc->n_pos, n_all = rc->p0 + np;
    for (size_t i = 0; i < n_all * hd; i++) {
        kh[i] = npl_fp32_to_fp16(nt_splitmix_float(r) * rc->kscale);
        vh[i] = npl_fp32_to_fp16(nt_splitmix_float(r));
    }
    if (rc->inf_value)
        vh[(rc->p0 + np / 2) * hd + hd / 3] = 0x7c00;
    for (size_t i = 0; i < np * g * hd; i++)
        qr[i] = nt_splitmix_float(r) * 2.0f;
    uint32_t hi[RMAXP];
    for (size_t i = 0; i < np; i++) {
        uint32_t pos = rc->p0 + (uint32_t)i;
        hi[i] = rc->ranges == 0 ? pos : rc->ranges == 1 ? (uint32_t)n_all - 1
                                                        : (uint32_t)(nt_splitmix_next(r) % n_all);
    }
    for (int fmt = 0; fmt < 2; fmt++) {
        size_t rb = npl_kv_row_bytes((npl_kv_format)fmt, hd);
        if (rb == 0)
            continue;
        const void *kr = kh, *vr = vh;
        if (fmt == NPL_KV_Q8_0) {
            to_q8_rows(kh, vh, n_all, hd, kq8, vq8);
            kr = kq8;
            vr = vq8;
        }
        float scale = 1.0f / sqrtf((float)hd);
        const float *zs = rc->sinks ? sinks : NULL;
        for (size_t i = 0; i < np; i++)
            npl_attention_kv_sinks(npl_simd_detect(), (npl_kv_format)fmt, qr + i * g * hd, hd, g, kr, vr, rb,
                                   (size_t)hi[i] + 1, hd, scale, zs, want + i * g * hd, hd, scratch);
        npl_attn_rows_job job = {
            .fmt = (npl_kv_format)fmt, .q = qr, .q_stride = g * hd, .out = got, .out_stride = g * hd,
            .n_pos = np, .group = g, .head_dim = hd, .key_hi = hi, .k = kr, .v = vr, .row_bytes = rb,
            .scale = scale, .sinks = zs,
        };
        /* the portable level is the reference row by row: only small cases */
        int lv0 = np * g * n_all * hd < 40000000 ? 0 : 1;
        for (int lv = lv0; lv <= (int)npl_simd_detect(); lv++) {
            memset(got, 0xff, np * g * hd * sizeof *got);
            npl_attention_rows((npl_simd_level)lv, &job, scratch);
            size_t bad = np;
            for (size_t i = 0; i < np && bad == np; i++)
                if (memcmp(want + i * g * hd, got + i * g * hd, g * hd * sizeof *got) != 0)
                    bad = i;
            CHECKF(bad == np,
                   "format %d level %d head_dim %zu group %zu positions %zu after %u (ranges %d): position %zu "
                   "(keys [0, %u]) differs",
                   fmt, lv, hd, g, np, rc->p0, rc->ranges, bad, bad < np ? hi[bad] : 0);
        }
    }
}

static void test_rows_exact(void)
{
    uint16_t *kh = malloc(RMAXPOS * RMAXHD * sizeof *kh), *vh = malloc(RMAXPOS * RMAXHD * sizeof *vh);
    uint8_t *kq8 = malloc(RMAXPOS * RMAXHD * 2), *vq8 = malloc(RMAXPOS * RMAXHD * 2);
    float *qr = malloc(RMAXP * RMAXG * RMAXHD * sizeof *qr);
    float *want = malloc(RMAXP * RMAXG * RMAXHD * sizeof *want), *got = malloc(RMAXP * RMAXG * RMAXHD * sizeof *got);
    float *scratch = malloc(npl_attention_rows_scratch_floats(RMAXP, RMAXG, RMAXHD) * sizeof *scratch);
    REQUIRE(kh && vh && kq8 && vq8 && qr && want && got && scratch);
    nt_splitmix r = {21};
    static const rows_case fixed[] = {
        {64, 4, 247, 117, 0, 1.0f, false, false}, /* the turn-10 shape, fewer cached */
        {64, 4, 64, 0, 0, 1.0f, false, false},   /* one block exactly */
        {64, 4, 1, 63, 0, 1.0f, false, false},   /* keys [0, 63] */
        {64, 4, 1, 64, 0, 1.0f, false, false},   /* keys [0, 64] */
        {128, 8, 65, 127, 0, 8.0f, false, false},
        {256, 2, 300, 0, 0, 8.0f, false, false},
        {80, 4, 100, 50, 0, 8.0f, false, false}, /* a 16-dimension tail */
        {7, 3, 70, 10, 0, 1.0f, false, false},   /* no full 16 dimensions */
        {65, 1, 129, 64, 0, 1.0f, false, false},
        {64, 8, 130, 192, 1, 1.0f, false, false}, /* every position sees everything */
        {128, 4, 90, 300, 2, 8.0f, false, false}, /* random ends */
        {64, 4, 200, 100, 0, 100.0f, false, false}, /* rescales by 0: -0 in the accumulators */
        {64, 2, 120, 40, 0, 1.0f, true, false},
        {96, 5, 33, 31, 0, 8.0f, false, false},
        {64, 8, 150, 100, 0, 1.0f, false, true}, /* gpt-oss's group of 8 with sinks */
        {64, 2, 70, 200, 0, 8.0f, false, true},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        rows_check(&fixed[i], &r, kh, vh, kq8, vq8, qr, want, got, scratch);
    static const size_t hds[] = {64, 128, 256, 80, 24, 32, 65};
    static const size_t groups[] = {1, 2, 4, 8};
    static const float kscales[] = {1.0f, 8.0f, 100.0f};
    for (int t = 0; t < 40; t++) {
        rows_case rc = {
            .hd = hds[nt_splitmix_next(&r) % 7], .group = groups[nt_splitmix_next(&r) % 4],
            .n_pos = 1 + nt_splitmix_next(&r) % RMAXP, .p0 = (uint32_t)(nt_splitmix_next(&r) % 501),
            .ranges = (int)(nt_splitmix_next(&r) % 5) / 3 * (1 + t % 2), .kscale = kscales[t % 3],
            .inf_value = t % 7 == 3, .sinks = t % 4 == 1,
        };
        if (rc.hd >= 128 && rc.n_pos * rc.p0 > 30000) /* keep the run short */
            rc.p0 /= 4;
        rows_check(&rc, &r, kh, vh, kq8, vq8, qr, want, got, scratch);
    }
    free(kh);
    free(vh);
    free(kq8);
    free(vq8);
    free(qr);
    free(want);
    free(got);
    free(scratch);
}

NT_MAIN({"levels_exact", test_levels_exact}, {"rows_exact", test_rows_exact}, {"matches_softmax", test_matches_softmax}, {"exp", test_exp},
        {"q8_cache_close", test_q8_cache_close})
