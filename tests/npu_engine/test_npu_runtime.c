/* The engine's NPU runtime on the emulated device (`test-npu-runtime CASE
 * MODEL`), through the public API:
 *   budget              decode: 2 dispatches per layer + 1 (LM head), one
 *                       submission and exactly the embedding row in and the
 *                       logits out per token; prefill: 3 per layer per
 *                       chunk + 1; no weight byte moves after load. Prints
 *                       the counters per token.
 *   prefill_equals_decode  the logits of a prompt prefilled in chunks (and
 *                       paused between them) equal, bit for bit, those of
 *                       the same tokens decoded one at a time: the prefill
 *                       groups compute each row as the decode groups do.
 *   batch_equals_alone  a batched decode gives each sequence the logits it
 *                       gets alone.
 *   embeddings          npl_prefill_embeddings of the token embeddings
 *                       equals npl_prefill; a bidirectional block runs and
 *                       changes the result; one larger than a chunk is
 *                       refused.
 *   unfused_decode      a kernel build without attn_o_ffn_mv decodes with
 *                       attention_decode + o_ffn_mv (3 per layer), same
 *                       logits.
 *   errors              the CPU engine's contracts: bad tokens, full
 *                       context, foreign or repeated sequences, and a model
 *                       freed before its sequences.
 *   pack_refusals       packs the runtime cannot fill exactly are refused;
 *                       a kernel build without the Q/K/V bias parts still
 *                       runs a model without biases.
 *   bias_refusals       (a model with Q/K/V biases, qwen2) a kernel build
 *                       without the bias parts, or with bf16 ones, and
 *                       layers that differ in having biases are refused. */
#include <math.h>
#include <stdint.h>

#include "backend.h"
#include "backend_npu.h"
#include "model_internal.h"
#include "npu_emu.h"
#include "npu_engine_emu.h"
#include "npu_engine_test.h"
#include "npullm.h"

enum { CHUNK = 16, N_CTX = 128 };

static bool decode1(npl_model *m, npl_seq *s, int32_t tok)
{
    npl_error err;
    npl_status st = npl_decode(m, &s, &tok, 1, &err);
    if (st)
        fprintf(stderr, "decode: %s\n", err.message);
    return st == NPL_OK;
}

static void test_budget(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, CHUNK);
    REQUIRE(m);
    const npl_model_info *in = npl_model_get_info(m);
    uint64_t L = in->n_layer, E = in->n_embd, V = in->n_vocab;
    /* Instruction words the host rewrites per submission (docs/npu.md):
     * decode 7 + 5 per layer and 3 for the LM head, prefill 9 + 7 + 6 per
     * layer and chunk. */
    const uint64_t decode_words = 12 * L + 3, prefill_words = 22 * L;
    npl_error err;
    npl_device_stats s0, s1, s2;
    CHECK(npl_model_device_stats(m, &s0));
    /* Load: every weight byte uploaded once, nothing dispatched yet. */
    CHECK(s0.weight_bytes > 0 && s0.load.h2d_weight_bytes == s0.weight_bytes);
    CHECK(s0.load.dispatches == 0 && s0.load.d2h_activation_bytes == 0);
    CHECK(s0.prefill_chunk == CHUNK && s0.groups_per_layer_decode == 2);

    npl_seq *s = npl_seq_create(m, N_CTX, &err);
    REQUIRE(s);
    enum { PROMPT = CHUNK + 4, STEPS = 8 };
    int32_t ids[PROMPT];
    ne_make_prompt(ids, PROMPT, 7, in->n_vocab);
    CHECK(npl_prefill(m, s, ids, PROMPT, 0, NULL, &err) == NPL_OK);
    CHECK(npl_model_device_stats(m, &s1));
    CHECK(s1.kv_bytes > 0);
    /* Prefill: two chunks (16 + 4 rows), 3 groups per layer each, the LM
     * head of the last row once; the rows' embeddings in, the logits out. */
    CHECK(s1.prefill_chunks == 2 && s1.prefill_tokens == PROMPT && s1.prefill_prompts == 1);
    CHECKF(s1.prefill.dispatches == 2 * 3 * L + 1, "%llu prefill dispatches",
           (unsigned long long)s1.prefill.dispatches);
    CHECK(s1.prefill.submissions == 2);
    CHECK(s1.prefill.h2d_activation_bytes == PROMPT * E * 2 + (2 * prefill_words + 3) * 4);
    CHECK(s1.prefill.d2h_activation_bytes == V * 4);

    for (int i = 0; i < STEPS; i++)
        CHECK(decode1(m, s, nt_argmax(npl_seq_logits(s), in->n_vocab)));
    CHECK(npl_model_device_stats(m, &s2));
    const npl_device_traffic *d = &s2.decode;
    CHECK(s2.decode_tokens == STEPS);
    CHECKF(d->dispatches == STEPS * (2 * L + 1), "%llu decode dispatches for %d tokens",
           (unsigned long long)d->dispatches, STEPS);
    CHECK(d->submissions == STEPS);
    CHECK(d->h2d_activation_bytes == STEPS * (E * 2 + decode_words * 4));
    CHECK(d->d2h_activation_bytes == STEPS * V * 4);
    /* No weight byte after load. */
    CHECK(s2.prefill.h2d_weight_bytes == 0 && d->h2d_weight_bytes == 0);
    CHECK(s2.load.h2d_weight_bytes == s0.load.h2d_weight_bytes);
    printf("per decoded token: %.1f dispatches (%llu layers), %.1f submissions, "
           "%.0f bytes in, %.0f bytes out, 0 weight bytes; weights resident %llu bytes, "
           "KV %llu bytes\n",
           (double)d->dispatches / STEPS, (unsigned long long)L, (double)d->submissions / STEPS,
           (double)d->h2d_activation_bytes / STEPS, (double)d->d2h_activation_bytes / STEPS,
           (unsigned long long)s2.weight_bytes, (unsigned long long)s2.kv_bytes);
    npl_seq_free(s);
    CHECK(npl_model_device_stats(m, &s2) && s2.kv_bytes == 0);
    npl_model_free(m);
}

static void test_prefill_equals_decode(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, CHUNK);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    enum { N = 2 * CHUNK + 5 };
    int32_t ids[N];
    ne_make_prompt(ids, N, 3, nv);
    npl_error err;
    npl_seq *a = npl_seq_create(m, N_CTX, &err), *b = npl_seq_create(m, N_CTX, &err);
    REQUIRE(a && b);
    /* a: prefilled in chunks, paused every 7 tokens. */
    size_t done = 0, consumed = 0;
    while (done < N) {
        CHECK(npl_prefill(m, a, ids + done, N - done, 7, &consumed, &err) == NPL_OK);
        REQUIRE(consumed > 0);
        done += consumed;
        CHECK((npl_seq_logits(a) != NULL) == (done == N));
        /* A paused prompt resumes with the tokens not consumed yet. */
        if (done < N)
            CHECK(npl_seq_pos(a) == done);
    }
    /* b: one token at a time. */
    CHECK(npl_prefill(m, b, ids, 1, 0, NULL, &err) == NPL_OK);
    for (size_t i = 1; i < N; i++)
        CHECK(decode1(m, b, ids[i]));
    const float *la = npl_seq_logits(a), *lb = npl_seq_logits(b);
    REQUIRE(la && lb);
    CHECK(memcmp(la, lb, nv * sizeof(float)) == 0);
    /* And the next step from either agrees as well. */
    int32_t next = nt_argmax(la, nv);
    CHECK(decode1(m, a, next) && decode1(m, b, next));
    CHECK(memcmp(npl_seq_logits(a), npl_seq_logits(b), nv * sizeof(float)) == 0);
    npl_seq_free(a);
    npl_seq_free(b);
    npl_model_free(m);
}

static void test_batch_equals_alone(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, CHUNK);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    enum { NS = 3, STEPS = 3 };
    const size_t plen[NS] = {3, 20, 9};
    int32_t prompts[NS][20];
    npl_error err;
    npl_seq *alone[NS], *batch[NS];
    for (int i = 0; i < NS; i++) {
        ne_make_prompt(prompts[i], plen[i], 11u + (uint32_t)i, nv);
        alone[i] = npl_seq_create(m, N_CTX, &err);
        batch[i] = npl_seq_create(m, N_CTX, &err);
        REQUIRE(alone[i] && batch[i]);
        CHECK(npl_prefill(m, alone[i], prompts[i], plen[i], 0, NULL, &err) == NPL_OK);
        CHECK(npl_prefill(m, batch[i], prompts[i], plen[i], 0, NULL, &err) == NPL_OK);
    }
    for (int step = 0; step < STEPS; step++) {
        int32_t toks[NS];
        for (int i = 0; i < NS; i++) {
            toks[i] = nt_argmax(npl_seq_logits(alone[i]), nv);
            CHECK(decode1(m, alone[i], toks[i]));
        }
        CHECK(npl_decode(m, batch, toks, NS, &err) == NPL_OK);
        for (int i = 0; i < NS; i++)
            CHECK(memcmp(npl_seq_logits(alone[i]), npl_seq_logits(batch[i]),
                         nv * sizeof(float)) == 0);
    }
    for (int i = 0; i < NS; i++) {
        npl_seq_free(alone[i]);
        npl_seq_free(batch[i]);
    }
    npl_model_free(m);
}

static void test_embeddings(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, CHUNK);
    REQUIRE(m);
    const npl_model_info *in = npl_model_get_info(m);
    enum { N = CHUNK + 3 };
    int32_t ids[N];
    ne_make_prompt(ids, N, 5, in->n_vocab);
    float *embd = malloc((size_t)N * in->n_embd * sizeof *embd);
    REQUIRE(embd);
    npl_error err;
    CHECK(npl_model_embed_tokens(m, ids, N, embd, &err) == NPL_OK);
    npl_seq *a = npl_seq_create(m, N_CTX, &err), *b = npl_seq_create(m, N_CTX, &err),
            *c = npl_seq_create(m, N_CTX, &err);
    REQUIRE(a && b && c);
    CHECK(npl_prefill(m, a, ids, N, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill_embeddings(m, b, embd, N, false, &err) == NPL_OK);
    CHECK(npl_seq_pos(b) == N);
    REQUIRE(npl_seq_logits(a) && npl_seq_logits(b));
    CHECK(memcmp(npl_seq_logits(a), npl_seq_logits(b), in->n_vocab * sizeof(float)) == 0);
    /* Bidirectional: at most one chunk, and the first rows now see the
     * later ones, so the result differs. */
    CHECK(npl_prefill_embeddings(m, c, embd, N, true, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_seq_pos(c) == 0);
    CHECK(npl_prefill_embeddings(m, c, embd, CHUNK, true, &err) == NPL_OK);
    CHECK(npl_seq_pos(c) == CHUNK);
    npl_seq_free(b);
    b = npl_seq_create(m, N_CTX, &err);
    REQUIRE(b);
    CHECK(npl_prefill_embeddings(m, b, embd, CHUNK, false, &err) == NPL_OK);
    REQUIRE(npl_seq_logits(b) && npl_seq_logits(c));
    CHECK(memcmp(npl_seq_logits(b), npl_seq_logits(c), in->n_vocab * sizeof(float)) != 0);
    free(embd);
    npl_seq_free(a);
    npl_seq_free(b);
    npl_seq_free(c);
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
    size_t n = strlen(text);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t head = (size_t)(start - text);
    memcpy(out, text, head);
    memcpy(out + head, end, n - (size_t)(end - text) + 1);
    return out;
}

static void test_unfused_decode(void)
{
    npl_model *fused = nt_load_model("npu-emu", 1, CHUNK);
    /* A CPU model given an emulated device with the reduced manifest: the
     * runtime as npl_model_load would build it. */
    npl_model *split = nt_load_model("cpu", 1, CHUNK);
    char *text = manifest_without_fused();
    REQUIRE(fused && split && text);
    npl_error err;
    npl_npu_manifest *man = NULL;
    npl_backend_npu *b = NULL;
    REQUIRE(ne_emu_runtime(split, text, &man, &b, &err) == NPL_OK);
    npl_backend_attach_npu(split, b);

    uint32_t nv = npl_model_get_info(fused)->n_vocab;
    uint64_t L = npl_model_get_info(fused)->n_layer;
    npl_seq *sf = npl_seq_create(fused, N_CTX, &err), *ss = npl_seq_create(split, N_CTX, &err);
    REQUIRE(sf && ss);
    int32_t ids[6];
    ne_make_prompt(ids, 6, 9, nv);
    CHECK(npl_prefill(fused, sf, ids, 6, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(split, ss, ids, 6, 0, NULL, &err) == NPL_OK);
    int32_t next = nt_argmax(npl_seq_logits(sf), nv);
    CHECK(decode1(fused, sf, next) && decode1(split, ss, next));
    CHECK(memcmp(npl_seq_logits(sf), npl_seq_logits(ss), nv * sizeof(float)) == 0);
    npl_device_stats st;
    CHECK(npl_model_device_stats(split, &st));
    CHECK(st.groups_per_layer_decode == 3 && st.decode.dispatches == 3 * L + 1);
    npl_seq_free(sf);
    npl_seq_free(ss);
    npl_model_free(fused);
    npl_model_free(split); /* frees the runtime and the device */
    npl_npu_manifest_free(man);
    free(text);
}

static void test_errors(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, CHUNK);
    npl_model *other = nt_load_model("npu-emu", 1, CHUNK);
    REQUIRE(m && other);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_error err;
    npl_seq *s = npl_seq_create(m, 8, &err), *t = npl_seq_create(other, 8, &err);
    REQUIRE(s && t);
    int32_t ids[9];
    ne_make_prompt(ids, 9, 1, nv);
    int32_t bad = (int32_t)nv;
    size_t consumed = 99;
    CHECK(npl_prefill(m, s, &bad, 1, 0, &consumed, &err) == NPL_ERR_INVALID_ARG);
    CHECK(consumed == 0 && strstr(err.message, "outside the vocabulary"));
    CHECK(npl_prefill(m, s, ids, 9, 0, NULL, &err) == NPL_ERR_CONTEXT_OVERFLOW);
    CHECK(npl_prefill(m, t, ids, 2, 0, NULL, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_seq_pos(s) == 0 && npl_seq_logits(s) == NULL);
    CHECK(npl_prefill(m, s, ids, 8, 0, NULL, &err) == NPL_OK);
    CHECK(decode1(m, s, ids[0]) == false); /* full */
    npl_seq *u = npl_seq_create(m, 8, &err);
    REQUIRE(u);
    npl_seq *twice[2] = {u, u};
    int32_t two[2] = {1, 2};
    CHECK(npl_decode(m, twice, two, 2, &err) == NPL_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "twice") != NULL);
    npl_seq *foreign[1] = {t};
    CHECK(npl_decode(m, foreign, two, 1, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_seq_pos(t) == 0 && npl_seq_pos(u) == 0 && !u->in_batch);
    npl_seq_free(u);
    /* A model freed before its sequence takes the device cache along;
     * freeing the sequence afterwards is still fine. */
    npl_model_free(other);
    npl_seq_free(t);
    npl_seq_free(s);
    npl_model_free(m);
}

/* text with every `from` (not empty) replaced by `to`. */
static char *text_replacing(const char *text, const char *from, const char *to)
{
    size_t n = 0, fl = strlen(from), tl = strlen(to);
    for (const char *p = strstr(text, from); p; p = strstr(p + fl, from))
        n++;
    char *out = malloc(strlen(text) + n * tl + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const char *p = text, *q; *p; p = q + fl) {
        q = strstr(p, from);
        if (!q) {
            strcpy(o, p);
            return out;
        }
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, tl);
        o += tl;
    }
    *o = '\0';
    return out;
}

/* The built-in manifest with every `from` replaced by `to`. */
static char *manifest_replacing(const char *from, const char *to)
{
    return text_replacing(npl_npu_emu_builtin_manifest(), from, to);
}

/* The built-in manifest without the Q/K/V bias parts: a kernel build
 * made before them. */
static char *manifest_without_biases(void)
{
    static const char *const parts[] = {
        "part = w_attn q_bias        f32  [qkv_bias*n_head*head_dim]\n",
        "part = w_attn k_bias        f32  [qkv_bias*n_head_kv*head_dim]\n",
        "part = w_attn v_bias        f32  [qkv_bias*n_head_kv*head_dim]\n",
    };
    char *text = NULL;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char *next = text_replacing(text ? text : npl_npu_emu_builtin_manifest(), parts[i], "");
        free(text);
        text = next;
        if (!text)
            return NULL;
    }
    return text;
}

/* The case's model, loaded on the CPU, given a runtime on an emulated
 * device with the manifest text: refused with want in the message. */
static void check_refused(const char *text, const char *want)
{
    npl_model *m = nt_load_model("cpu", 1, CHUNK);
    REQUIRE(m && text && strcmp(text, npl_npu_emu_builtin_manifest()) != 0);
    npl_error err;
    npl_npu_manifest *man = NULL;
    npl_backend_npu *b = NULL;
    CHECKF(ne_emu_runtime(m, text, &man, &b, &err) == NPL_ERR_UNSUPPORTED && !b &&
               strstr(err.message, want),
           "want '%s', got: %s", want, err.message);
    npl_model_free(m);
    npl_npu_manifest_free(man);
}

/* The runtime fills the packed weight arguments from the kernels'
 * contract and refuses one it cannot fill exactly: an unknown part, a
 * part of another size than the weight, no pack, prefill and decode
 * groups that lay a pack out differently. */
static void test_pack_refusals(void)
{
    const struct {
        const char *from, *to, *want;
    } cases[] = {
        {"part = w_attn rope_freqs", "part = w_attn rope_freqz",
         "part 'rope_freqz' of 'w_attn' is no weight this runtime knows"},
        {"part = w_head out_norm bf16 [n_embd]", "part = w_head out_norm bf16 [n_embd*2]",
         "has 256 bytes for output_norm.weight, which needs 128"},
        {"w_head", "w_hd", "has no packed static argument 'w_head'"},
        /* the prefill o_ffn's copy of the FFN pack only (its last line) */
        {"part = w_ffn post_ffn_norm  bf16 [post_norms*n_embd]\n"
         "dma = in  attn           0 n_tokens",
         "part = w_ffn post_ffn_norm  bf16 [n_embd]\ndma = in  attn           0 n_tokens",
         "kernel groups attn_o_ffn_mv and o_ffn lay out 'w_ffn' differently"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = manifest_replacing(cases[i].from, cases[i].to);
        check_refused(text, cases[i].want);
        free(text);
    }
    /* The bias parts are empty for a model without biases: a kernel build
     * that lacks them runs it. */
    npl_model *m = nt_load_model("cpu", 1, CHUNK);
    char *text = manifest_without_biases();
    REQUIRE(m && text);
    npl_error err;
    npl_npu_manifest *man = NULL;
    npl_backend_npu *b = NULL;
    CHECK_OK(ne_emu_runtime(m, text, &man, &b, &err), &err);
    npl_backend_attach_npu(m, b);
    npl_model_free(m); /* frees the runtime and the device */
    npl_npu_manifest_free(man);
    free(text);
}

/* A model with Q/K/V biases (qwen2) on kernels that cannot take them, or
 * whose layers differ in having them, is refused rather than run without
 * them. */
static void test_bias_refusals(void)
{
    char *text = manifest_without_biases();
    check_refused(text, "kernel group rms_qkv_rope_mv has no part 'q_bias' in 'w_attn' for the "
                        "model's blk.0.attn_q.bias, and would run without it");
    free(text);
    /* bf16 biases are refused too: the contract's biases are f32. */
    text = manifest_replacing("part = w_attn q_bias        f32 ", "part = w_attn q_bias        bf16");
    check_refused(text, "bytes for blk.0.attn_q.bias, which needs");
    free(text);
    npl_model *m = nt_load_model("cpu", 1, CHUNK);
    REQUIRE(m && m->hp.n_layer > 1 && m->layers[1].bk);
    const float *bk = m->layers[1].bk;
    m->layers[1].bk = NULL;
    npl_error err;
    npl_npu_manifest *man = NULL;
    npl_backend_npu *b = NULL;
    const char *builtin = npl_npu_emu_builtin_manifest();
    CHECKF(ne_emu_runtime(m, builtin, &man, &b, &err) == NPL_ERR_UNSUPPORTED && !b &&
               strstr(err.message, "layer 1 has a different set of norms and biases"),
           "%s", err.message);
    m->layers[1].bk = bk;
    npl_npu_manifest_free(man);
    npl_model_free(m);
}

NT_MAIN({"budget", test_budget}, {"pack_refusals", test_pack_refusals}, {"bias_refusals", test_bias_refusals},
        {"prefill_equals_decode", test_prefill_equals_decode}, {"batch_equals_alone", test_batch_equals_alone},
        {"embeddings", test_embeddings}, {"unfused_decode", test_unfused_decode}, {"errors", test_errors})
