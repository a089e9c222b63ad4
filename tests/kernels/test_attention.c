/* npl_attention: every SIMD level gives the portable version's bits (odd
 * head sizes, block boundaries, GQA groups), and the portable version
 * matches a naive double-precision softmax; the exp it uses is accurate
 * over the range the softmax feeds it. */
#include <math.h>

#include "attention.h"
#include "attention_internal.h"
#include "ggml_types.h"
#include "npl_test.h"
#include "vec_ops.h"

enum { MAXKV = 300, MAXHD = 128, MAXQ = 8 };

static uint16_t kc[MAXKV * MAXHD], vc[MAXKV * MAXHD];
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
                /* the cache rows of the same values in Q8_0 */
                float row[MAXHD];
                for (size_t j = 0; j < MAXKV; j++) {
                    for (size_t d = 0; d < hd; d++)
                        row[d] = npl_fp16_to_fp32(kc[j * hd + d]);
                    npl_kv_store_row(NPL_KV_Q8_0, row, kq + j * rb, hd);
                    for (size_t d = 0; d < hd; d++)
                        row[d] = npl_fp16_to_fp32(vc[j * hd + d]);
                    npl_kv_store_row(NPL_KV_Q8_0, row, vq + j * rb, hd);
                }
                kr = kq;
                vr = vq;
            }
            for (size_t b = 0; b < sizeof nqs / sizeof nqs[0]; b++)
                for (size_t c = 0; c < sizeof kvs / sizeof kvs[0]; c++) {
                    size_t nq = nqs[b], nkv = kvs[c];
                    float scale = 1.0f / sqrtf((float)hd);
                    npl_attention_ref((npl_kv_format)fmt, q, hd, nq, kr, vr, rb, nkv, hd, scale, out0, hd, s0);
                    for (int lv = 1; lv <= (int)npl_simd_detect(); lv++) {
                        memset(out1, 0, sizeof out1);
                        npl_attention_kv((npl_simd_level)lv, (npl_kv_format)fmt, q, hd, nq, kr, vr, rb, nkv, hd,
                                         scale, out1, hd, s1);
                        CHECKF(memcmp(out0, out1, nq * hd * sizeof(float)) == 0,
                               "format %d level %d head_dim %zu heads %zu positions %zu differs", fmt, lv, hd, nq,
                               nkv);
                    }
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
    float row[HD];
    for (size_t j = 0; j < NKV; j++) {
        for (size_t d = 0; d < HD; d++)
            row[d] = npl_fp16_to_fp32(kc[j * HD + d]);
        npl_kv_store_row(NPL_KV_Q8_0, row, kq + j * rb, HD);
        for (size_t d = 0; d < HD; d++)
            row[d] = npl_fp16_to_fp32(vc[j * HD + d]);
        npl_kv_store_row(NPL_KV_Q8_0, row, vq + j * rb, HD);
    }
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
    for (size_t t = 0; t < sizeof kvs / sizeof kvs[0]; t++) {
        size_t n_kv = kvs[t];
        float scale = 1.0f / sqrtf((float)HD);
        /* keys read at a stride wider than a row, as from a cache of
         * several heads */
        npl_attention(npl_simd_detect(), q, HD, NQ, kc, vc, HD, n_kv, HD, scale, out0, HD, scratch);
        for (int h = 0; h < NQ; h++) {
            double s[MAXKV], max = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < n_kv; j++) {
                double dot = 0.0;
                for (int d = 0; d < HD; d++)
                    dot += (double)q[h * HD + d] * npl_fp16_to_fp32(kc[j * HD + d]);
                s[j] = dot * scale;
                max = fmax(max, s[j]);
            }
            for (size_t j = 0; j < n_kv; j++) {
                s[j] = exp(s[j] - max);
                sum += s[j];
            }
            for (int d = 0; d < HD; d++) {
                double o = 0.0;
                for (size_t j = 0; j < n_kv; j++)
                    o += s[j] / sum * npl_fp16_to_fp32(vc[j * HD + d]);
                CHECKF(fabs(out0[h * HD + d] - o) <= 2e-5, "n_kv %zu head %d dim %d: %.8g vs %.8g", n_kv, h, d,
                       (double)out0[h * HD + d], o);
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

NT_MAIN({"levels_exact", test_levels_exact}, {"matches_softmax", test_matches_softmax}, {"exp", test_exp},
        {"q8_cache_close", test_q8_cache_close})
