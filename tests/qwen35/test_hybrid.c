/* Hybrid models (qwen35's Gated DeltaNet, lfm2's short convolutions) beyond
 * the llama.cpp gate:
 *  - chunked: the chunked parallel form of a DeltaNet head against the
 *    token-by-token recurrence (no model): outputs and final state within
 *    1e-4 of the largest value, over chunks of 64 and a partial one;
 *  - step_levels: the recurrent step at every SIMD level this CPU has gives
 *    the portable reference's bits (head sizes 128 and 40: a partial vector);
 *  - reuse: the pool (a generated model, path after the case name) reuses a
 *    hybrid sequence only up to a checkpoint or its end, and the result is
 *    bit-identical to a prefill from scratch: a follow-up turn (the whole
 *    previous sequence), a turn whose answer was re-rendered differently (the
 *    previous prompt's end), a prompt sharing a prefix that ends on no
 *    checkpoint (nothing), a third turn resuming from the second's prompt;
 *  - batch: two sequences decoded in one step give the bits of each alone,
 *    and a prompt prefilled in pieces the bits of one piece;
 *  - refused: a file whose rope sections give a pair the fourth position
 *    component (path after the case name) is refused, naming it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "deltanet.h"
#include "npl_test_model.h"

enum { CHUNK = 16, N_CTX = 512, GEN = 5, P1 = 70 };

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static void unit(float *x, size_t n)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    for (size_t i = 0; i < n; i++)
        x[i] /= (float)sqrt(ss);
}

static float max_abs(const float *x, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        m = fmaxf(m, fabsf(x[i]));
    return m;
}

static float max_diff(const float *a, const float *b, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        m = fmaxf(m, fabsf(a[i] - b[i]));
    return m;
}

static void test_chunked(void)
{
    enum { N = 150, DK = 32, DV = 32 };
    static float q[N][DK], k[N][DK], v[N][DV], g[N], beta[N], o_rec[N][DV], o_chk[N][DV];
    static float S_rec[DV * DK], S_chk[DV * DK];
    uint64_t s = 42;
    for (size_t t = 0; t < N; t++) {
        for (size_t i = 0; i < DK; i++) {
            q[t][i] = frand(&s);
            k[t][i] = frand(&s);
        }
        unit(q[t], DK);
        unit(k[t], DK);
        for (size_t i = 0; i < DV; i++)
            v[t][i] = frand(&s);
        g[t] = -0.5f * (frand(&s) + 1.0f); /* decays from 1 to exp(-1) */
        beta[t] = 0.5f * (frand(&s) + 1.0f);
    }
    for (size_t i = 0; i < DV * DK; i++)
        S_rec[i] = S_chk[i] = 0.1f * frand(&s); /* a state from earlier tokens */
    float scale = 1.0f / sqrtf((float)DK);
    for (size_t t = 0; t < N; t++)
        npl_deltanet_step_ref(S_rec, q[t], k[t], v[t], expf(g[t]), beta[t], scale, DK, DV, o_rec[t]);
    float *scratch = malloc(npl_deltanet_chunk_scratch(DK, DV) * sizeof *scratch);
    REQUIRE(scratch);
    npl_deltanet_chunked(S_chk, &q[0][0], &k[0][0], DK, &v[0][0], DV, g, beta, 1, N, scale, DK, DV, &o_chk[0][0], DV,
                         scratch);
    float dout = max_diff(&o_rec[0][0], &o_chk[0][0], N * DV), dstate = max_diff(S_rec, S_chk, DV * DK);
    CHECKF(dout <= 1e-4f * max_abs(&o_rec[0][0], N * DV), "outputs differ by %g", (double)dout);
    CHECKF(dstate <= 1e-4f * max_abs(S_rec, DV * DK), "states differ by %g", (double)dstate);
    free(scratch);
}

static void test_step_levels(void)
{
    enum { D = 128 };
    static float S0[D * D], S1[D * D], q[D], k[D], v[D], o0[D], o1[D];
    uint64_t s = 7;
    const size_t dims[2] = {128, 40};
    for (int lv = NPL_SIMD_AVX2; lv <= (int)npl_simd_detect(); lv++)
        for (int di = 0; di < 2; di++) {
            size_t d = dims[di];
            for (size_t i = 0; i < d; i++) {
                q[i] = frand(&s);
                k[i] = frand(&s);
                v[i] = frand(&s);
            }
            unit(q, d);
            unit(k, d);
            for (size_t i = 0; i < d * d; i++)
                S0[i] = S1[i] = frand(&s);
            for (int t = 0; t < 3; t++) {
                npl_deltanet_step_ref(S0, q, k, v, 0.9f, 0.7f, 0.125f, d, d, o0);
                npl_deltanet_step((npl_simd_level)lv, S1, q, k, v, 0.9f, 0.7f, 0.125f, d, d, o1);
            }
            CHECKF(memcmp(S0, S1, d * d * sizeof *S0) == 0 && memcmp(o0, o1, d * sizeof *o0) == 0,
                   "level %d, head size %zu", lv, d);
        }
}

/* Prefills prompt[pos..n) in pieces of `piece` (0: all), then GEN - 1
 * greedy decode steps; *out gets the logits after the prompt (nv floats) and
 * the greedy tokens. */
static bool run(npl_model *m, npl_seq *s, const int32_t *prompt, size_t n, size_t piece, float *logits,
                int32_t *tokens)
{
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_error err;
    if (!nt_prefill_rest(m, s, prompt, n, piece))
        return false;
    memcpy(logits, npl_seq_logits(s), nv * sizeof *logits);
    for (int i = 0; i < GEN; i++) {
        tokens[i] = nt_argmax(npl_seq_logits(s), nv);
        if (i + 1 < GEN && npl_decode(m, &s, &tokens[i], 1, &err) != NPL_OK)
            return false;
    }
    return true;
}

/* One request through the pool against the same prompt from scratch:
 * bit-identical, and the prefix reused. */
static void check_turn(npl_model *m, npl_kv_pool *p, const int32_t *prompt, size_t n, uint32_t want_reused,
                       int32_t *tokens)
{
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    float *ref = malloc(nv * sizeof *ref), *got = malloc(nv * sizeof *got);
    int32_t ref_tok[GEN];
    npl_error err;
    npl_seq *fresh = npl_seq_create(m, N_CTX, &err);
    uint32_t reused = 12345;
    npl_seq *s = npl_kv_pool_acquire(p, 7, prompt, n, N_CTX, &reused, &err);
    if (!ref || !got || !fresh || !s) {
        CHECK(!"setup");
    } else {
        CHECK(run(m, fresh, prompt, n, 0, ref, ref_tok));
        CHECK(run(m, s, prompt, n, CHUNK + 3, got, tokens));
        CHECKF(memcmp(ref, got, nv * sizeof *ref) == 0 && memcmp(ref_tok, tokens, sizeof ref_tok) == 0,
               "a %zu-token prompt reusing %u positions differs from scratch", n, reused);
        CHECKF(reused == want_reused, "reused %u positions, expected %u", reused, want_reused);
    }
    npl_seq_free(fresh);
    npl_kv_pool_release(p, 7, s);
    free(ref);
    free(got);
}

static void test_reuse(void)
{
    npl_model *m = nt_load_model(NULL, 2, CHUNK);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_error err;
    npl_kv_pool *p = npl_kv_pool_create(m, UINT64_MAX, &err);
    REQUIRE(p);
    int32_t t1[P1], t2[P1 + GEN + 30], t2b[P1 + 30], t3[P1 + GEN + 30 + 20], tok[GEN];
    nt_make_prompt(t1, P1, 1, -1, 0, nv);
    check_turn(m, p, t1, P1, 0, tok);
    /* turn 2: turn 1, its answer (the last token sampled, not fed), more */
    memcpy(t2, t1, sizeof t1);
    memcpy(t2 + P1, tok, (GEN - 1) * sizeof *tok);
    nt_make_prompt(t2 + P1 + GEN - 1, 31, 2, -1, 0, nv);
    check_turn(m, p, t2, sizeof t2 / sizeof *t2, P1 + GEN - 1, tok);
    /* turn 2 again with the answer re-rendered: back to turn 1's prompt end */
    memcpy(t2b, t1, sizeof t1);
    nt_make_prompt(t2b + P1, 30, 3, -1, 0, nv);
    check_turn(m, p, t2b, sizeof t2b / sizeof *t2b, P1, tok);
    /* a prefix that ends on no checkpoint: nothing */
    int32_t part[40];
    memcpy(part, t1, 30 * sizeof *t1);
    nt_make_prompt(part + 30, 10, 4, -1, 0, nv);
    check_turn(m, p, part, 40, 0, tok);
    /* turn 3 from turn 2b's prompt end (its cached sequence ran on) */
    memcpy(t3, t2b, sizeof t2b);
    nt_make_prompt(t3 + sizeof t2b / sizeof *t2b, GEN + 20, 5, -1, 0, nv);
    check_turn(m, p, t3, sizeof t3 / sizeof *t3, sizeof t2b / sizeof *t2b, tok);
    CHECK(npl_kv_pool_bytes(p) > 0);
    npl_kv_pool_free(p);
    npl_model_free(m);
}

static void test_batch(void)
{
    npl_model *m = nt_load_model(NULL, 2, CHUNK);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    int32_t a[P1], b[P1 / 2];
    nt_make_prompt(a, P1, 8, -1, 0, nv);
    nt_make_prompt(b, P1 / 2, 9, -1, 0, nv);
    npl_error err;
    npl_seq *s[4];
    for (int i = 0; i < 4; i++)
        s[i] = npl_seq_create(m, N_CTX, &err);
    REQUIRE(s[0] && s[1] && s[2] && s[3]);
    /* s0, s1 alone (a in one piece, b in pieces of 5); s2, s3 together */
    size_t used;
    CHECK(npl_prefill(m, s[0], a, P1, 0, &used, &err) == NPL_OK);
    CHECK(nt_prefill_rest(m, s[1], b, P1 / 2, 5));
    CHECK(npl_prefill(m, s[2], a, P1, 0, &used, &err) == NPL_OK);
    CHECK(npl_prefill(m, s[3], b, P1 / 2, 0, &used, &err) == NPL_OK);
    CHECK(nt_same_logits(s[0], s[2], nv) && nt_same_logits(s[1], s[3], nv));
    for (int step = 0; step < 4; step++) {
        int32_t t[2] = {nt_argmax(npl_seq_logits(s[0]), nv), nt_argmax(npl_seq_logits(s[1]), nv)};
        CHECK(npl_decode(m, &s[0], &t[0], 1, &err) == NPL_OK && npl_decode(m, &s[1], &t[1], 1, &err) == NPL_OK);
        CHECK(npl_decode(m, &s[2], t, 2, &err) == NPL_OK);
        CHECKF(nt_same_logits(s[0], s[2], nv) && nt_same_logits(s[1], s[3], nv), "step %d", step);
    }
    for (int i = 0; i < 4; i++)
        npl_seq_free(s[i]);
    npl_model_free(m);
}

static void test_refused(void)
{
    npl_model_params mp;
    npl_model_params_default(&mp);
    npl_error err;
    npl_model *m = npl_model_load(nt_arg(0), &mp, &err);
    CHECK(!m && err.code == NPL_ERR_UNSUPPORTED && strstr(err.message, "extra position component"));
    npl_model_free(m);
}

NT_MAIN({"chunked", test_chunked}, {"step_levels", test_step_levels}, {"reuse", test_reuse}, {"batch", test_batch}, {"refused", test_refused})
