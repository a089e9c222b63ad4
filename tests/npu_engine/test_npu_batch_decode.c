/* Batched decode on the emulated NPU (`test-npu-batch-decode CASE MODEL`):
 * a step of several sequences is one submission, and every sequence gets
 * bit for bit the logits it gets decoding alone (a twin sequence with the
 * same prompt decodes each token alone next to it).
 *   one_submission  3 sequences (different prompts and context sizes):
 *                   per step 1 submission, (runs per layer * layers + 1)
 *                   dispatches per sequence, each sequence's embedding row
 *                   in and logits out.
 *   recompose       the batch changes between steps (order, subsets, a
 *                   sequence freed and a new one created): still one
 *                   submission per step, same logits.
 *   over_cap        more sequences than a submission holds (prefill chunk
 *                   2): ceil(5 / 2) submissions per step, same logits.
 *   unfused         a kernel build without attn_o_ffn_mv: 3 runs per layer,
 *                   still one submission for 3 sequences, same logits. */
#include <stdint.h>

#include "backend.h"
#include "backend_npu.h"
#include "model_internal.h"
#include "npu_emu.h"
#include "npu_engine_emu.h"
#include "npu_engine_test.h"
#include "npullm.h"


/* A sequence in the batch and its twin that decodes alone. */
typedef struct pair {
    npl_seq *batched, *alone;
} pair;

static bool pair_init(npl_model *m, pair *p, uint32_t n_ctx, size_t prompt_len, uint32_t seed)
{
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    int32_t ids[32];
    if (prompt_len > 32)
        return false;
    ne_make_prompt(ids, prompt_len, seed, nv);
    npl_error err;
    p->batched = npl_seq_create(m, n_ctx, &err);
    p->alone = npl_seq_create(m, n_ctx, &err);
    return p->batched && p->alone &&
           npl_prefill(m, p->batched, ids, prompt_len, 0, NULL, &err) == NPL_OK &&
           npl_prefill(m, p->alone, ids, prompt_len, 0, NULL, &err) == NPL_OK;
}

static void pair_free(pair *p)
{
    npl_seq_free(p->batched);
    npl_seq_free(p->alone);
    p->batched = p->alone = NULL;
}

/* Runs per sequence in a decode step. */
static uint64_t runs_per_seq(const npl_model *m)
{
    npl_device_stats s;
    npl_model_device_stats(m, &s);
    return (uint64_t)s.groups_per_layer_decode * npl_model_get_info(m)->n_layer + 1;
}

/* Instruction words the host rewrites per decoded token (docs/npu.md):
 * fused 7 + 5 per layer, unfused 7 + 5 + 3, and 3 for the LM head. */
static uint64_t patched_bytes_per_seq(const npl_model *m)
{
    npl_device_stats s;
    npl_model_device_stats(m, &s);
    uint64_t per_layer = s.groups_per_layer_decode == 2 ? 12 : 15;
    return 4 * (per_layer * npl_model_get_info(m)->n_layer + 3);
}

/* One step of the pairs ps[which[0..n)]: each twin alone, then the batch
 * in one npl_decode; the logits must match. Returns the batched call's
 * traffic in *t. */
static bool step(npl_model *m, pair *ps, const size_t *which, size_t n, npl_device_traffic *t)
{
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_seq *batch[8];
    int32_t toks[8];
    npl_error err;
    if (n > 8)
        return false;
    for (size_t i = 0; i < n; i++) {
        pair *p = &ps[which[i]];
        batch[i] = p->batched;
        toks[i] = nt_argmax(npl_seq_logits(p->alone), nv);
        if (npl_decode(m, &p->alone, &toks[i], 1, &err) != NPL_OK) {
            fprintf(stderr, "decode alone: %s\n", err.message);
            return false;
        }
    }
    npl_device_stats before, after;
    npl_model_device_stats(m, &before);
    if (npl_decode(m, batch, toks, n, &err) != NPL_OK) {
        fprintf(stderr, "batched decode: %s\n", err.message);
        return false;
    }
    npl_model_device_stats(m, &after);
    t->dispatches = after.decode.dispatches - before.decode.dispatches;
    t->submissions = after.decode.submissions - before.decode.submissions;
    t->h2d_activation_bytes = after.decode.h2d_activation_bytes - before.decode.h2d_activation_bytes;
    t->d2h_activation_bytes = after.decode.d2h_activation_bytes - before.decode.d2h_activation_bytes;
    t->h2d_weight_bytes = after.decode.h2d_weight_bytes - before.decode.h2d_weight_bytes;
    bool same = after.decode_tokens - before.decode_tokens == n;
    for (size_t i = 0; i < n; i++) {
        pair *p = &ps[which[i]];
        const float *a = npl_seq_logits(p->alone), *b = npl_seq_logits(p->batched);
        if (!a || !b || memcmp(a, b, nv * sizeof(float)) != 0 ||
            npl_seq_pos(p->alone) != npl_seq_pos(p->batched)) {
            fprintf(stderr, "sequence %zu of the batch differs from its twin\n", i);
            same = false;
        }
    }
    return same;
}

/* The traffic of a step of n sequences in `submissions` submissions. */
static void check_traffic(const npl_model *m, const npl_device_traffic *t, uint64_t n,
                          uint64_t submissions)
{
    const npl_model_info *in = npl_model_get_info(m);
    uint64_t runs = runs_per_seq(m);
    CHECKF(t->submissions == submissions, "%llu submissions for %llu sequences",
           (unsigned long long)t->submissions, (unsigned long long)n);
    CHECKF(t->dispatches == n * runs, "%llu dispatches for %llu sequences",
           (unsigned long long)t->dispatches, (unsigned long long)n);
    CHECK(t->h2d_activation_bytes == n * (in->n_embd * 2ull + patched_bytes_per_seq(m)));
    CHECK(t->d2h_activation_bytes == n * in->n_vocab * 4ull);
    CHECK(t->h2d_weight_bytes == 0);
}

static void test_one_submission(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, 16);
    REQUIRE(m);
    pair ps[3];
    const uint32_t n_ctx[3] = {64, 128, 96};
    const size_t plen[3] = {3, 20, 9};
    for (int i = 0; i < 3; i++)
        REQUIRE(pair_init(m, &ps[i], n_ctx[i], plen[i], 11u + (uint32_t)i));
    const size_t all[3] = {0, 1, 2};
    for (int k = 0; k < 4; k++) {
        npl_device_traffic t;
        CHECKF(step(m, ps, all, 3, &t), "step %d", k);
        check_traffic(m, &t, 3, 1);
        if (k == 0)
            printf("a step of 3 sequences: %llu submission, %llu dispatches, %llu bytes in, "
                   "%llu bytes out\n",
                   (unsigned long long)t.submissions, (unsigned long long)t.dispatches,
                   (unsigned long long)t.h2d_activation_bytes,
                   (unsigned long long)t.d2h_activation_bytes);
    }
    for (int i = 0; i < 3; i++)
        pair_free(&ps[i]);
    npl_model_free(m);
}

static void test_recompose(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, 16);
    REQUIRE(m);
    pair ps[5];
    for (int i = 0; i < 4; i++)
        REQUIRE(pair_init(m, &ps[i], 64, 4 + (size_t)i, 20u + (uint32_t)i));
    const size_t abc[3] = {0, 1, 2}, cba[3] = {2, 1, 0}, bd[2] = {1, 3}, abcd[4] = {0, 1, 2, 3};
    const struct {
        const size_t *which;
        size_t n;
    } plan[] = {{abc, 3}, {abc, 3}, {cba, 3}, {bd, 2}, {abcd, 4}, {abc, 3}};
    npl_device_traffic t;
    for (size_t k = 0; k < sizeof plan / sizeof plan[0]; k++) {
        CHECKF(step(m, ps, plan[k].which, plan[k].n, &t), "step %zu", k);
        check_traffic(m, &t, plan[k].n, 1);
    }
    /* c leaves; e comes (its cache may take c's place in memory). */
    pair_free(&ps[2]);
    REQUIRE(pair_init(m, &ps[4], 80, 7, 99));
    const size_t ead[3] = {4, 0, 3};
    for (int k = 0; k < 2; k++) {
        CHECKF(step(m, ps, ead, 3, &t), "step with the new sequence %d", k);
        check_traffic(m, &t, 3, 1);
    }
    for (int i = 0; i < 5; i++)
        pair_free(&ps[i]);
    npl_model_free(m);
}

static void test_over_cap(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, 2); /* rows of the activations: 2 sequences per submission */
    REQUIRE(m);
    pair ps[5];
    for (int i = 0; i < 5; i++)
        REQUIRE(pair_init(m, &ps[i], 64, 3 + (size_t)i, 40u + (uint32_t)i));
    const size_t all[5] = {0, 1, 2, 3, 4};
    for (int k = 0; k < 3; k++) {
        npl_device_traffic t;
        CHECKF(step(m, ps, all, 5, &t), "step %d", k);
        check_traffic(m, &t, 5, 3); /* 2 + 2 + 1 */
    }
    for (int i = 0; i < 5; i++)
        pair_free(&ps[i]);
    npl_model_free(m);
}

/* The built-in manifest without the fused group. */
static char *manifest_without_fused(void)
{
    const char *text = npl_npu_emu_builtin_manifest();
    const char *start = strstr(text, "[group attn_o_ffn_mv]");
    const char *end = start ? strstr(start + 1, "[group ") : NULL;
    if (!start || !end)
        return NULL;
    size_t n = strlen(text), head = (size_t)(start - text);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    memcpy(out, text, head);
    memcpy(out + head, end, n - (size_t)(end - text) + 1);
    return out;
}

static void test_unfused(void)
{
    npl_model *m = nt_load_model("cpu", 1, 16);
    char *text = manifest_without_fused();
    REQUIRE(m && text);
    npl_error err;
    npl_npu_manifest *man = NULL;
    npl_backend_npu *b = NULL;
    REQUIRE(ne_emu_runtime(m, text, &man, &b, &err) == NPL_OK);
    npl_backend_attach_npu(m, b);
    CHECK(runs_per_seq(m) == 3ull * npl_model_get_info(m)->n_layer + 1);

    pair ps[3];
    for (int i = 0; i < 3; i++)
        REQUIRE(pair_init(m, &ps[i], 64, 5 + (size_t)i, 60u + (uint32_t)i));
    const size_t all[3] = {0, 1, 2};
    for (int k = 0; k < 3; k++) {
        npl_device_traffic t;
        CHECKF(step(m, ps, all, 3, &t), "step %d", k);
        check_traffic(m, &t, 3, 1);
    }
    for (int i = 0; i < 3; i++)
        pair_free(&ps[i]);
    npl_model_free(m); /* frees the runtime and the device */
    npl_npu_manifest_free(man);
    free(text);
}

NT_MAIN({"one_submission", test_one_submission}, {"recompose", test_recompose},
        {"over_cap", test_over_cap}, {"unfused", test_unfused})
