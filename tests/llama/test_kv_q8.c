/* The Q8_0 KV cache (npl_model_params.kv_type = "q8_0") against the F16
 * one, on a generated model (path as the argument after the case name; a
 * llama model with a head size of 32 and the gemma3 fixture whose window
 * of 8 short prompts leave, so its ring cache wraps):
 *  - a Q8_0-cache run stays close to the F16-cache run, logits and greedy
 *    choices, over a prompt and 64 decode steps;
 *  - with a Q8_0 cache, prefill in 16-token chunks equals 256-token
 *    chunks, bit for bit (batched decode against each sequence alone is
 *    test_forward.c's case, run by meson with a Q8_0 cache too);
 *  - the cache's size per token, and F16 still the default;
 *  - an unknown kv_type and a head size Q8_0 cannot hold are refused at
 *    load with their error codes (a llama_tiny model, head size 16). */
#include <math.h>
#include <stdint.h>

#include "npl_test_model.h"
#include "model_internal.h"
#include "npullm.h"

static npl_model *load_kv(const char *kv_type, int threads, uint32_t chunk, npl_error *err)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = threads;
    p.prefill_chunk = chunk;
    p.kv_type = kv_type;
    return npl_model_load(nt_arg(0), &p, err);
}

static npl_model *load(const char *kv_type, uint32_t chunk)
{
    npl_error err;
    npl_model *m = load_kv(kv_type, 2, chunk, &err);
    if (!m)
        fprintf(stderr, "cannot load %s (kv %s): %s\n", nt_arg(0) ? nt_arg(0) : "(no model given)",
                kv_type ? kv_type : "default", err.message);
    return m;
}

/* The architecture's BOS, then ids spread over the vocabulary. */
static void make_prompt(const npl_model *m, int32_t *ids, size_t n, uint32_t seed)
{
    const npl_model_info *info = npl_model_get_info(m);
    uint32_t range = info->n_vocab < 120000 ? info->n_vocab : 120000;
    nt_make_prompt(ids, n, seed, strcmp(info->architecture, "gemma3") == 0 ? 2 : 128000, 3, range);
}

/* Largest logit difference relative to the spread (max - min) of the
 * reference logits: scale-free, so one bound fits both models. */
static double relative_diff(const float *ref, const float *got, uint32_t nv)
{
    float lo = ref[0], hi = ref[0];
    double d = 0.0;
    for (uint32_t i = 0; i < nv; i++) {
        lo = fminf(lo, ref[i]);
        hi = fmaxf(hi, ref[i]);
        d = fmax(d, fabs((double)ref[i] - got[i]));
    }
    return hi > lo ? d / (double)(hi - lo) : d;
}

enum { PROMPT = 40, GEN_STEPS = 64 };

/* Q8_0 rounds each cached K and V value to a 1/127 step of its 32-value
 * block's largest magnitude (at most 1/254 of it off, against 1/2048 of
 * the value for F16). That error moves every attention score and output
 * by a fraction of a percent, and the layers after carry it to the
 * logits: they may move by up to MAX_REL of their spread (measured: at
 * most 0.01 on both models), not more. The sequences are teacher-forced
 * with the F16 run's greedy choices, so both see the same tokens and each
 * step is compared on its own; a step whose two best F16 logits are
 * closer than the error can flip (random weights give many near ties),
 * so MIN_AGREE of the 65 choices must agree (measured: 64 llama, 61
 * gemma3). */
#define MAX_REL 0.02
#define MIN_AGREE 0.85

static void test_close_to_f16(void)
{
    npl_model *mf = load("f16", 16), *mq = load("q8_0", 16);
    REQUIRE(mf && mq);
    uint32_t nv = npl_model_get_info(mf)->n_vocab;
    int32_t prompt[PROMPT];
    make_prompt(mf, prompt, PROMPT, 7);
    npl_error err;
    npl_seq *f = npl_seq_create(mf, 256, &err), *q = npl_seq_create(mq, 256, &err);
    REQUIRE(f && q);
    CHECK(npl_prefill(mf, f, prompt, PROMPT, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(mq, q, prompt, PROMPT, 0, NULL, &err) == NPL_OK);

    int agree = 0, steps = 0;
    double worst = 0.0, sum = 0.0;
    bool identical = true;
    for (int step = 0; step <= GEN_STEPS; step++) {
        const float *lf = npl_seq_logits(f), *lq = npl_seq_logits(q);
        REQUIRE(lf && lq);
        double rel = relative_diff(lf, lq, nv);
        CHECKF(rel <= MAX_REL, "step %d: logits differ by %.4f of their spread", step, rel);
        worst = fmax(worst, rel);
        sum += rel;
        identical = identical && rel == 0.0;
        int32_t t = nt_argmax(lf, nv);
        agree += t == nt_argmax(lq, nv);
        steps++;
        if (step == GEN_STEPS)
            break;
        CHECK(npl_decode(mf, &f, &t, 1, &err) == NPL_OK);
        CHECK(npl_decode(mq, &q, &t, 1, &err) == NPL_OK);
    }
    fprintf(stderr, "q8_0 vs f16 cache: greedy top-1 agrees on %d of %d steps; logit difference / spread: "
                    "max %.5f, mean %.5f\n",
            agree, steps, worst, sum / steps);
    CHECKF(agree >= MIN_AGREE * steps, "top-1 agrees on %d of %d steps only", agree, steps);
    /* A cache that is not used, or not quantized, would agree exactly. */
    CHECK(!identical);
    npl_seq_free(f);
    npl_seq_free(q);
    npl_model_free(mf);
    npl_model_free(mq);
}

/* 16-token chunks against 256: for the gemma3 fixture that is also its
 * ring cache (23 positions in 45 mirrored rows) against a full one. */
static void test_chunked_prefill(void)
{
    npl_model *m16 = load("q8_0", 16), *m256 = load("q8_0", 256);
    REQUIRE(m16 && m256);
    uint32_t nv = npl_model_get_info(m16)->n_vocab;
    static int32_t prompt[300];
    make_prompt(m16, prompt, 300, 9);
    npl_error err;
    npl_seq *a = npl_seq_create(m16, 400, &err), *b = npl_seq_create(m256, 400, &err);
    REQUIRE(a && b);
    if (m16->hp.n_swa)
        CHECK(a->kv_ring == 23 && b->kv_ring == 0);
    CHECK(npl_prefill(m16, a, prompt, 300, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(m256, b, prompt, 300, 0, NULL, &err) == NPL_OK);
    for (int step = 0; step < 4; step++) {
        CHECKF(nt_same_logits(a, b, nv), "step %d: chunk 16 vs 256 differ", step);
        REQUIRE(npl_seq_logits(a));
        int32_t t = nt_argmax(npl_seq_logits(a), nv);
        CHECK(npl_decode(m16, &a, &t, 1, &err) == NPL_OK);
        CHECK(npl_decode(m256, &b, &t, 1, &err) == NPL_OK);
    }
    npl_seq_free(a);
    npl_seq_free(b);
    npl_model_free(m16);
    npl_model_free(m256);
}

/* Row sizes, and F16 as the default: no kv_type and "f16" are the same
 * cache, bit for bit. */
static void test_layout_and_default(void)
{
    npl_model *md = load(NULL, 0), *mf = load("f16", 0), *mq = load("q8_0", 0);
    REQUIRE(md && mf && mq);
    size_t hd = mq->hp.head_dim;
    CHECK(md->kv_format == NPL_KV_F16 && md->kv_row_bytes == 2 * hd);
    CHECK(mf->kv_format == NPL_KV_F16 && mf->kv_row_bytes == 2 * hd);
    CHECK(mq->kv_format == NPL_KV_Q8_0 && mq->kv_row_bytes == hd / 32 * 34);
    size_t per_token_f16 = 2 * (size_t)mq->hp.n_layer * mq->hp.n_head_kv * mf->kv_row_bytes;
    size_t per_token_q8 = 2 * (size_t)mq->hp.n_layer * mq->hp.n_head_kv * mq->kv_row_bytes;
    fprintf(stderr, "KV cache per token: %zu bytes f16, %zu bytes q8_0\n", per_token_f16, per_token_q8);
    CHECK(per_token_q8 * 64 == per_token_f16 * 34);

    uint32_t nv = npl_model_get_info(md)->n_vocab;
    int32_t prompt[30];
    make_prompt(md, prompt, 30, 3);
    npl_error err;
    npl_seq *a = npl_seq_create(md, 64, &err), *b = npl_seq_create(mf, 64, &err);
    REQUIRE(a && b);
    CHECK(npl_prefill(md, a, prompt, 30, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(mf, b, prompt, 30, 0, NULL, &err) == NPL_OK);
    CHECK(nt_same_logits(a, b, nv));
    npl_seq_free(a);
    npl_seq_free(b);
    npl_model_free(md);
    npl_model_free(mf);
    npl_model_free(mq);
}

static void test_bad_kv_type(void)
{
    const char *bad[] = {"q4_0", "F16", "", "q8_0 ", "bf16"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        npl_error err;
        npl_error_clear(&err);
        npl_model *m = load_kv(bad[i], 1, 0, &err);
        CHECKF(!m, "kv_type '%s' accepted", bad[i]);
        npl_model_free(m);
        CHECKF(err.code == NPL_ERR_INVALID_ARG, "kv_type '%s': %s", bad[i], npl_status_name(err.code));
        CHECKF(strstr(err.message, "f16") && strstr(err.message, "q8_0"), "message: %s", err.message);
    }
}

/* llama_tiny: head size 16, not a whole Q8_0 block; F16 still loads. */
static void test_head_dim_not_multiple(void)
{
    npl_error err;
    npl_error_clear(&err);
    npl_model *m = load_kv("q8_0", 1, 0, &err);
    CHECK(!m);
    npl_model_free(m);
    CHECKF(err.code == NPL_ERR_UNSUPPORTED, "%s: %s", npl_status_name(err.code), err.message);
    CHECKF(strstr(err.message, "multiple of 32") && strstr(err.message, "16"), "message: %s", err.message);
    m = load("f16", 0);
    CHECK(m && m->hp.head_dim == 16);
    npl_model_free(m);
}

NT_MAIN({"close_to_f16", test_close_to_f16},
        {"chunked_prefill", test_chunked_prefill}, {"layout_and_default", test_layout_and_default},
        {"bad_kv_type", test_bad_kv_type}, {"head_dim_not_multiple", test_head_dim_not_multiple})
