/* The KV cache pool (npl_kv_pool) on a generated model (path as the
 * argument after the case name; meson runs it on llama and on the gemma3
 * fixture whose window of 8 the prompts leave, so its local layers keep a
 * ring):
 *  - bit_identity: a prompt that shares a prefix with a cached sequence
 *    gives exactly the logits and greedy tokens of a prefill from scratch,
 *    for prefixes ending at, before and after chunk boundaries and the
 *    sliding window, for a prompt equal to the cached one, and when the
 *    cached sequence ran far past the shared prefix (a ring then no
 *    longer holds the window: nothing is reused, still identical);
 *  - owners: another owner's sequences are never reused; forget drops an
 *    owner's, and only theirs;
 *  - eviction: the budget holds, least recently used out first;
 *  - refusals: bad arguments.
 * NPULLM_TEST_DEVICE names the device (tests/npu_engine runs it on npu-emu,
 * where the cached sequences keep their device KV buffers). */
#include <stdint.h>
#include <stdlib.h>

#include "npl_test_model.h"

enum { CHUNK = 16, N_CTX = 256, GEN = 6, PROMPT = 100 };

static npl_model *load(void)
{
    return nt_load_model(getenv("NPULLM_TEST_DEVICE"), 2, CHUNK);
}

/* n ids spread over the vocabulary, the same for the same seed. */
static void make_prompt(int32_t *ids, size_t n, uint32_t seed, uint32_t n_vocab)
{
    nt_make_prompt(ids, n, seed, -1, 0, n_vocab);
}

/* What a request produces: the logits after its prompt and its greedy
 * tokens (the last one sampled, not fed, as the service does). */
typedef struct run_out {
    float *logits;
    int32_t tokens[GEN];
} run_out;

/* Prefills what s does not hold yet of prompt[0..n), in pieces of
 * `piece` tokens (the service's interleaving), then decodes greedily. */
static bool run(npl_model *m, npl_seq *s, const int32_t *prompt, size_t n, size_t piece, run_out *out)
{
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_error err;
    if (!nt_prefill_rest(m, s, prompt, n, piece))
        return false;
    const float *lg = npl_seq_logits(s);
    if (!lg)
        return false;
    out->logits = malloc(nv * sizeof *out->logits);
    if (!out->logits)
        return false;
    memcpy(out->logits, lg, nv * sizeof *lg);
    for (int i = 0; i < GEN; i++) {
        out->tokens[i] = nt_argmax(npl_seq_logits(s), nv);
        if (i + 1 < GEN && npl_decode(m, &s, &out->tokens[i], 1, &err) != NPL_OK)
            return false;
    }
    return true;
}

static bool same(const run_out *a, const run_out *b, uint32_t nv)
{
    return memcmp(a->logits, b->logits, nv * sizeof *a->logits) == 0 &&
           memcmp(a->tokens, b->tokens, sizeof a->tokens) == 0;
}

/* A request of owner through the pool: acquire, run, release. */
static bool pooled(npl_model *m, npl_kv_pool *p, uint64_t owner, const int32_t *prompt, size_t n,
                   uint32_t *reused, run_out *out)
{
    npl_error err;
    npl_seq *s = npl_kv_pool_acquire(p, owner, prompt, n, N_CTX, reused, &err);
    if (!s) {
        fprintf(stderr, "acquire: %s\n", err.message);
        return false;
    }
    bool ok = run(m, s, prompt, n, CHUNK + 3, out);
    npl_kv_pool_release(p, owner, s);
    return ok;
}

static void test_bit_identity(void)
{
    npl_model *m = load();
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    int32_t prompt[PROMPT], other[PROMPT + 80];
    make_prompt(prompt, PROMPT, 1, nv);

    npl_error err;
    npl_seq *fresh = npl_seq_create(m, N_CTX, &err);
    REQUIRE(fresh);
    run_out ref = {0};
    REQUIRE(run(m, fresh, prompt, PROMPT, 0, &ref));
    npl_seq_free(fresh);

    npl_kv_pool *p = npl_kv_pool_create(m, UINT64_MAX, &err);
    REQUIRE(p);
    /* cached: prompt[0..shared) then tail tokens of its own */
    const struct {
        uint32_t shared, tail;
    } cases[] = {{CHUNK, 3},     {CHUNK - 1, 3}, {CHUNK + 1, 5}, {2 * CHUNK, 1}, {7, 4},  {8, 4},
                 {9, 4},         {50, 2},        {PROMPT - 1, 0}, {PROMPT - 1, 9}, {30, 80}, {1, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t shared = cases[c].shared, tail = cases[c].tail;
        npl_kv_pool_forget(p, 7);
        memcpy(other, prompt, shared * sizeof *prompt);
        make_prompt(other + shared, tail, 100 + (uint32_t)c, nv);
        for (uint32_t i = shared; i < shared + tail && i < PROMPT; i++)
            if (other[i] == prompt[i])
                other[i] = (prompt[i] + 1) % (int32_t)nv;
        uint32_t reused = 99;
        run_out first = {0}, again = {0};
        CHECK(pooled(m, p, 7, other, shared + tail, &reused, &first) && reused == 0);
        free(first.logits);
        REQUIRE(pooled(m, p, 7, prompt, PROMPT, &reused, &again));
        CHECKF(same(&again, &ref, nv), "shared prefix %u, tail %u: reused %u", shared, tail, reused);
        /* far past the prefix, a ring may have dropped the window */
        if (tail < 60)
            CHECKF(reused == shared, "shared prefix %u, tail %u: reused %u", shared, tail, reused);
        else
            CHECK(reused == shared || reused == 0);
        free(again.logits);
    }
    /* the same prompt again: all but its last position */
    uint32_t reused = 0;
    run_out again = {0};
    REQUIRE(pooled(m, p, 7, prompt, PROMPT, &reused, &again));
    CHECK(reused == PROMPT - 1 && same(&again, &ref, nv));
    free(again.logits);

    /* a follow-up turn: the previous prompt, its answer, more text */
    int32_t turn2[PROMPT + GEN + 20];
    memcpy(turn2, prompt, sizeof prompt);
    memcpy(turn2 + PROMPT, ref.tokens, (GEN - 1) * sizeof *ref.tokens);
    make_prompt(turn2 + PROMPT + GEN - 1, 21, 77, nv);
    size_t n2 = sizeof turn2 / sizeof *turn2;
    fresh = npl_seq_create(m, N_CTX, &err);
    REQUIRE(fresh);
    run_out ref2 = {0}, got2 = {0};
    REQUIRE(run(m, fresh, turn2, n2, 0, &ref2));
    npl_seq_free(fresh);
    size_t count = npl_kv_pool_count(p);
    REQUIRE(pooled(m, p, 7, turn2, n2, &reused, &got2));
    CHECK(reused == PROMPT + GEN - 1 && same(&got2, &ref2, nv));
    CHECK(npl_kv_pool_count(p) == count); /* the turn replaced the sequence it extends */
    free(ref2.logits);
    free(got2.logits);
    free(ref.logits);
    npl_kv_pool_free(p);
    npl_model_free(m);
}

static void test_owners(void)
{
    npl_model *m = load();
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    int32_t prompt[40];
    make_prompt(prompt, 40, 3, nv);
    npl_error err;
    npl_kv_pool *p = npl_kv_pool_create(m, UINT64_MAX, &err);
    REQUIRE(p);
    uint32_t reused = 99;
    run_out a = {0}, b = {0}, c = {0};
    REQUIRE(pooled(m, p, 1000, prompt, 40, &reused, &a));
    CHECK(reused == 0);
    REQUIRE(pooled(m, p, 1001, prompt, 40, &reused, &b)); /* same text, another owner */
    CHECK(reused == 0 && same(&a, &b, nv));
    CHECK(npl_kv_pool_count(p) == 2 && npl_kv_pool_bytes(p) > 0);
    CHECK(npl_kv_pool_forget(p, 1000) == 1 && npl_kv_pool_count(p) == 1);
    CHECK(npl_kv_pool_forget(p, 1000) == 0);
    REQUIRE(pooled(m, p, 1001, prompt, 40, &reused, &c)); /* 1001's survived */
    CHECK(reused == 39 && same(&a, &c, nv));
    free(c.logits);
    REQUIRE(pooled(m, p, 1000, prompt, 40, &reused, &c));
    CHECK(reused == 0);
    free(a.logits);
    free(b.logits);
    free(c.logits);
    npl_kv_pool_free(p);
    npl_model_free(m);
}

static void test_eviction(void)
{
    npl_model *m = load();
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    int32_t x[60], y[60];
    make_prompt(x, 60, 5, nv);
    make_prompt(y, 60, 6, nv);
    y[0] = (x[0] + 1) % (int32_t)nv;
    npl_error err;

    /* measure one conversation's cached size */
    npl_kv_pool *p = npl_kv_pool_create(m, UINT64_MAX, &err);
    REQUIRE(p);
    uint32_t reused = 0;
    run_out o = {0};
    REQUIRE(pooled(m, p, 1, x, 60, &reused, &o));
    free(o.logits);
    uint64_t one = npl_kv_pool_bytes(p);
    CHECK(one > 0);
    npl_kv_pool_free(p);

    /* room for one and a half: the second evicts the first */
    p = npl_kv_pool_create(m, one + one / 2, &err);
    REQUIRE(p);
    REQUIRE(pooled(m, p, 1, x, 60, &reused, &o));
    free(o.logits);
    REQUIRE(pooled(m, p, 1, y, 60, &reused, &o));
    free(o.logits);
    CHECK(npl_kv_pool_count(p) == 1 && npl_kv_pool_bytes(p) <= one + one / 2);
    REQUIRE(pooled(m, p, 1, y, 60, &reused, &o));
    CHECK(reused == 59);
    free(o.logits);
    REQUIRE(pooled(m, p, 1, x, 60, &reused, &o));
    CHECK(reused == 0);
    free(o.logits);
    npl_kv_pool_free(p);

    /* a budget of nothing keeps nothing */
    p = npl_kv_pool_create(m, 0, &err);
    REQUIRE(p);
    REQUIRE(pooled(m, p, 1, x, 60, &reused, &o));
    free(o.logits);
    CHECK(npl_kv_pool_count(p) == 0 && npl_kv_pool_bytes(p) == 0);
    npl_kv_pool_free(p);
    npl_model_free(m);
}

static void test_refusals(void)
{
    npl_error err;
    uint32_t reused = 5;
    CHECK(npl_kv_pool_create(NULL, 1, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    CHECK(npl_kv_pool_acquire(NULL, 1, NULL, 0, 8, &reused, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    CHECK(reused == 0);
    npl_model *m = load();
    REQUIRE(m);
    npl_kv_pool *p = npl_kv_pool_create(m, 1 << 20, &err);
    REQUIRE(p);
    CHECK(npl_kv_pool_acquire(p, 1, NULL, 3, 8, &reused, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    int32_t t[2] = {1, 2};
    CHECK(npl_kv_pool_acquire(p, 1, t, 2, (uint32_t)-1, &reused, &err) == NULL);
    npl_kv_pool_release(p, 1, NULL);
    npl_kv_pool_release(p, 1, npl_seq_create(m, 8, &err)); /* empty: freed, not kept */
    CHECK(npl_kv_pool_count(p) == 0 && npl_kv_pool_forget(NULL, 1) == 0);
    npl_kv_pool_free(p);
    npl_kv_pool_free(NULL);
    npl_model_free(m);
}

NT_MAIN({"bit_identity", test_bit_identity}, {"owners", test_owners}, {"eviction", test_eviction},
        {"refusals", test_refusals})
