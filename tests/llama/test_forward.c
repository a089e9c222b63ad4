/* The engine API around the forward pass, on a generated model (path as
 * the argument after the case name):
 *  - batched decode gives exactly the tokens and logits of each sequence
 *    run alone, whatever the batch order;
 *  - chunked prefill (16-token chunks vs 256) and paused prefill give the
 *    same logits as one pass;
 *  - the thread count does not change results;
 *  - context overflow, bad token ids, bad batches are refused cleanly;
 *  - npl_top_logprobs and npl_model_get_info.
 * NPULLM_TEST_KV_TYPE, when set, is the models' kv_type (meson runs the
 * batch and chunking cases with a Q8_0 cache too). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "npl_test_model.h"

/* A prompt of n ids spread over the vocabulary (BOS first). */
static void make_prompt(int32_t *ids, size_t n, uint32_t seed, uint32_t n_vocab)
{
    nt_make_prompt(ids, n, seed, 128000, 0, n_vocab < 120000 ? n_vocab : 120000);
}

enum { N_SEQ = 5, STEPS = 6 }; /* 5: a group of four vectors plus one */

static void test_batch_equals_alone(void)
{
    npl_model *m = nt_load_model(NULL, 2, 0);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    const size_t plen[N_SEQ] = {5, 37, 300, 1, 64};
    static int32_t prompts[N_SEQ][300];
    int32_t alone_tok[N_SEQ][STEPS];
    float *full_alone = malloc((size_t)N_SEQ * STEPS * nv * sizeof(float));
    REQUIRE(full_alone);
    npl_error err;

    for (int s = 0; s < N_SEQ; s++) {
        make_prompt(prompts[s], plen[s], (uint32_t)s + 1, nv);
        npl_seq *q = npl_seq_create(m, 512, &err);
        REQUIRE(q);
        CHECK(npl_prefill(m, q, prompts[s], plen[s], 0, NULL, &err) == NPL_OK);
        for (int t = 0; t < STEPS; t++) {
            const float *lg = npl_seq_logits(q);
            REQUIRE(lg);
            memcpy(full_alone + ((size_t)s * STEPS + t) * nv, lg, nv * sizeof(float));
            alone_tok[s][t] = nt_argmax(lg, nv);
            CHECK(npl_decode(m, &q, &alone_tok[s][t], 1, &err) == NPL_OK);
        }
        npl_seq_free(q);
    }

    npl_seq *seqs[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        seqs[s] = npl_seq_create(m, 512, &err);
        REQUIRE(seqs[s]);
        CHECK(npl_prefill(m, seqs[s], prompts[s], plen[s], 0, NULL, &err) == NPL_OK);
    }
    for (int t = 0; t < STEPS; t++) {
        npl_seq *batch[N_SEQ];
        int32_t toks[N_SEQ];
        for (int j = 0; j < N_SEQ; j++) {
            int s = t % 2 ? N_SEQ - 1 - j : j; /* the order changes every step */
            const float *lg = npl_seq_logits(seqs[s]);
            REQUIRE(lg);
            CHECKF(memcmp(lg, full_alone + ((size_t)s * STEPS + t) * nv, nv * sizeof(float)) == 0,
                   "sequence %d step %d: batched logits differ from alone", s, t);
            toks[j] = nt_argmax(lg, nv);
            CHECK(toks[j] == alone_tok[s][t]);
            batch[j] = seqs[s];
        }
        CHECK(npl_decode(m, batch, toks, N_SEQ, &err) == NPL_OK);
    }
    for (int s = 0; s < N_SEQ; s++) {
        CHECK(npl_seq_pos(seqs[s]) == plen[s] + STEPS);
        npl_seq_free(seqs[s]);
    }
    free(full_alone);
    npl_model_free(m);
}

/* Prefill in 16-token chunks (one model) vs 256 (another), then decode. */
static void test_chunked_prefill(void)
{
    npl_model *m16 = nt_load_model(NULL, 2, 16), *m256 = nt_load_model(NULL, 2, 256);
    REQUIRE(m16 && m256);
    uint32_t nv = npl_model_get_info(m16)->n_vocab;
    static int32_t prompt[300];
    make_prompt(prompt, 300, 9, nv);
    npl_error err;
    npl_seq *a = npl_seq_create(m16, 400, &err), *b = npl_seq_create(m256, 400, &err);
    REQUIRE(a && b);
    CHECK(npl_prefill(m16, a, prompt, 300, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(m256, b, prompt, 300, 0, NULL, &err) == NPL_OK);
    for (int step = 0; step < 4; step++) {
        const float *la = npl_seq_logits(a), *lb = npl_seq_logits(b);
        REQUIRE(la && lb);
        double max_diff = 0.0;
        for (uint32_t i = 0; i < nv; i++)
            max_diff = fmax(max_diff, fabs((double)la[i] - lb[i]));
        CHECKF(max_diff <= 1e-5, "step %d: chunk 16 vs 256 differ by %g", step, max_diff);
        int32_t t = nt_argmax(la, nv);
        CHECK(t == nt_argmax(lb, nv));
        CHECK(npl_decode(m16, &a, &t, 1, &err) == NPL_OK);
        CHECK(npl_decode(m256, &b, &t, 1, &err) == NPL_OK);
    }
    npl_seq_free(a);
    npl_seq_free(b);
    npl_model_free(m16);
    npl_model_free(m256);
}

/* max_tokens_this_call pauses between chunks; the result is the same. */
static void test_paused_prefill(void)
{
    npl_model *m = nt_load_model(NULL, 2, 32);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    static int32_t prompt[200];
    make_prompt(prompt, 200, 4, nv);
    npl_error err;
    npl_seq *a = npl_seq_create(m, 256, &err), *b = npl_seq_create(m, 256, &err);
    REQUIRE(a && b);
    CHECK(npl_seq_logits(a) == NULL);
    size_t consumed = 0, done = 0;
    CHECK(npl_prefill(m, a, prompt, 200, 0, &consumed, &err) == NPL_OK && consumed == 200);
    int calls = 0;
    while (done < 200) {
        CHECK(npl_prefill(m, b, prompt + done, 200 - done, 45, &consumed, &err) == NPL_OK);
        CHECK(consumed == (200 - done < 45 ? 200 - done : 45));
        done += consumed;
        calls++;
        CHECK((npl_seq_logits(b) != NULL) == (done == 200));
        CHECK(npl_seq_pos(b) == done);
    }
    CHECK(calls == 5);
    REQUIRE(npl_seq_logits(a) && npl_seq_logits(b));
    CHECK(memcmp(npl_seq_logits(a), npl_seq_logits(b), nv * sizeof(float)) == 0);
    CHECK(npl_prefill(m, a, prompt, 0, 0, &consumed, &err) == NPL_OK && consumed == 0);
    npl_seq_free(a);
    npl_seq_free(b);
    npl_model_free(m);
}

static void test_threads_do_not_change_results(void)
{
    npl_model *m1 = nt_load_model(NULL, 1, 0), *m3 = nt_load_model(NULL, 3, 0);
    REQUIRE(m1 && m3);
    uint32_t nv = npl_model_get_info(m1)->n_vocab;
    static int32_t prompt[70];
    make_prompt(prompt, 70, 5, nv);
    npl_error err;
    npl_seq *a = npl_seq_create(m1, 128, &err), *b = npl_seq_create(m3, 128, &err);
    REQUIRE(a && b);
    CHECK(npl_prefill(m1, a, prompt, 70, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(m3, b, prompt, 70, 0, NULL, &err) == NPL_OK);
    for (int step = 0; step < 3; step++) {
        REQUIRE(npl_seq_logits(a) && npl_seq_logits(b));
        CHECK(memcmp(npl_seq_logits(a), npl_seq_logits(b), nv * sizeof(float)) == 0);
        int32_t t = nt_argmax(npl_seq_logits(a), nv);
        CHECK(npl_decode(m1, &a, &t, 1, &err) == NPL_OK);
        CHECK(npl_decode(m3, &b, &t, 1, &err) == NPL_OK);
    }
    npl_seq_free(a);
    npl_seq_free(b);
    npl_model_free(m1);
    npl_model_free(m3);
}

static void test_context_overflow(void)
{
    npl_model *m = nt_load_model(NULL, 2, 0);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    int32_t prompt[40];
    make_prompt(prompt, 40, 3, nv);
    npl_error err;
    npl_seq *s = npl_seq_create(m, 32, &err);
    REQUIRE(s);
    CHECK(npl_seq_n_ctx(s) == 32);
    size_t consumed = 99;
    CHECK(npl_prefill(m, s, prompt, 40, 0, &consumed, &err) == NPL_ERR_CONTEXT_OVERFLOW);
    CHECK(consumed == 0 && npl_seq_pos(s) == 0);
    CHECK(strstr(err.message, "context of 32 tokens") != NULL);
    CHECK(npl_prefill(m, s, prompt, 31, 0, NULL, &err) == NPL_OK);
    int32_t t = 1;
    CHECK(npl_decode(m, &s, &t, 1, &err) == NPL_OK);
    CHECK(npl_seq_pos(s) == 32);
    CHECK(npl_decode(m, &s, &t, 1, &err) == NPL_ERR_CONTEXT_OVERFLOW);
    CHECK(npl_prefill(m, s, prompt, 1, 0, NULL, &err) == NPL_ERR_CONTEXT_OVERFLOW);
    CHECK(npl_seq_pos(s) == 32);
    npl_seq_free(s);

    npl_seq *dflt = npl_seq_create(m, 0, &err);
    REQUIRE(dflt);
    uint32_t train = npl_model_get_info(m)->n_ctx_train;
    CHECK(npl_seq_n_ctx(dflt) == (train < NPL_DEFAULT_CTX_MAX ? train : NPL_DEFAULT_CTX_MAX));
    npl_seq_free(dflt);
    npl_model_free(m);
}

static void test_bad_inputs(void)
{
    npl_model *m = nt_load_model(NULL, 2, 0), *other = nt_load_model(NULL, 1, 0);
    REQUIRE(m && other);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_error err;
    npl_seq *a = npl_seq_create(m, 64, &err), *b = npl_seq_create(m, 64, &err), *o = npl_seq_create(other, 64, &err);
    REQUIRE(a && b && o);
    int32_t bad[2] = {5, (int32_t)nv};
    CHECK(npl_prefill(m, a, bad, 2, 0, NULL, &err) == NPL_ERR_INVALID_ARG);
    bad[1] = -1;
    CHECK(npl_prefill(m, a, bad, 2, 0, NULL, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_seq_pos(a) == 0 && npl_seq_logits(a) == NULL);
    CHECK(npl_prefill(m, o, bad, 1, 0, NULL, &err) == NPL_ERR_INVALID_ARG); /* other model's sequence */

    int32_t one = 100;
    CHECK(npl_prefill(m, a, &one, 1, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(m, b, &one, 1, 0, NULL, &err) == NPL_OK);
    npl_seq *dup[3] = {a, b, a};
    int32_t toks[3] = {1, 2, 3};
    CHECK(npl_decode(m, dup, toks, 3, &err) == NPL_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "twice") != NULL);
    CHECK(npl_seq_pos(a) == 1 && npl_seq_pos(b) == 1);
    npl_seq *mixed[2] = {a, o};
    CHECK(npl_decode(m, mixed, toks, 2, &err) == NPL_ERR_INVALID_ARG);
    npl_seq *ok[2] = {a, b};
    toks[1] = (int32_t)nv + 5;
    CHECK(npl_decode(m, ok, toks, 2, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_seq_pos(a) == 1 && npl_seq_pos(b) == 1);
    /* After the refusals the batch still works (no stale marks). */
    toks[1] = 2;
    CHECK(npl_decode(m, ok, toks, 2, &err) == NPL_OK);
    CHECK(npl_decode(m, ok, toks, 0, &err) == NPL_OK);
    CHECK(npl_seq_pos(a) == 2 && npl_seq_pos(b) == 2);

    npl_seq_free(a);
    npl_seq_free(b);
    npl_seq_free(o);
    npl_model_free(m);
    npl_model_free(other);

    npl_model_params p;
    npl_model_params_default(&p);
    CHECK(p.n_threads == 0 && p.prefill_chunk == 256);
    CHECK(npl_model_load("/nonexistent/model.gguf", &p, &err) == NULL && err.code == NPL_ERR_IO);
    p.n_threads = -1;
    CHECK(npl_model_load(nt_arg(0), &p, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
}

static void test_top_logprobs(void)
{
    float logits[6] = {1.0f, 3.0f, 2.0f, 3.0f, NAN, -INFINITY};
    int32_t ids[6];
    float lp[6];
    CHECK(npl_top_logprobs(logits, 6, 3, ids, lp) == 3);
    CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 2); /* ties: lower id first */
    double z = log(exp(1.0) + 2 * exp(3.0) + exp(2.0));
    CHECK(fabs(lp[0] - (3.0 - z)) < 1e-6 && fabs(lp[2] - (2.0 - z)) < 1e-6);
    CHECK(npl_top_logprobs(logits, 6, 10, ids, lp) == 5); /* NaN never enters */
    CHECK(ids[3] == 0 && ids[4] == 5 && isinf(lp[4]));
    CHECK(npl_top_logprobs(logits, 6, 0, ids, lp) == 0);
}

static void test_model_info(void)
{
    npl_model *m = nt_load_model(NULL, 1, 0);
    REQUIRE(m);
    const npl_model_info *in = npl_model_get_info(m);
    CHECK(strcmp(in->architecture, "llama") == 0);
    CHECK(in->n_vocab == 128256 && in->n_layer >= 1 && in->n_head % in->n_head_kv == 0);
    CHECK(in->n_params > (uint64_t)in->n_vocab * in->n_embd);
    CHECK(in->quantization && in->quantization[0]);
    CHECK(in->chat_format == NPL_CHAT_LLAMA3 && !in->chat_format_guessed);
    CHECK(npl_model_tokenizer(m) != NULL && npl_model_gguf(m) != NULL);
    npl_model_free(m);
}

NT_MAIN({"batch_equals_alone", test_batch_equals_alone}, {"chunked_prefill", test_chunked_prefill},
        {"paused_prefill", test_paused_prefill}, {"threads", test_threads_do_not_change_results},
        {"context_overflow", test_context_overflow}, {"bad_inputs", test_bad_inputs},
        {"top_logprobs", test_top_logprobs}, {"model_info", test_model_info})
