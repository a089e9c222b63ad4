/* The gemma3 architecture in the engine, on generated models (path as the
 * argument after the case name; the sliding-window cases expect the
 * fixture with a window of 8 and six layers):
 *  - what the loader binds: local/global layers, scales, rope tables;
 *  - the ring cache of the local layers gives exactly the logits of a
 *    full cache, and a long context wraps it many times;
 *  - embeddings in place of tokens: the token path through
 *    npl_model_embed_tokens + npl_prefill_embeddings is bit-identical to
 *    npl_prefill, a one-row bidirectional block equals a causal one, bad
 *    calls are refused without touching the sequence;
 *  - both <eos> and <end_of_turn> end generation; the Gemma chat format. */
#include <math.h>
#include <stdint.h>

#include "npl_test_model.h"
#include "model_internal.h"
#include "npullm.h"
#include "tokenizer.h"

static npl_model *load(int threads, uint32_t chunk)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = threads;
    p.prefill_chunk = chunk;
    npl_error err;
    npl_model *m = npl_model_load(nt_arg(0), &p, &err);
    if (!m)
        fprintf(stderr, "cannot load %s: %s\n", nt_arg(0) ? nt_arg(0) : "(no model given)", err.message);
    return m;
}

/* BOS then ids spread over the vocabulary. */
static void make_prompt(int32_t *ids, size_t n, uint32_t seed, uint32_t n_vocab)
{
    nt_make_prompt(ids, n, seed, 2, 3, n_vocab);
}

static void test_layout(void)
{
    npl_model *m = load(1, 0);
    REQUIRE(m);
    const npl_model_info *in = npl_model_get_info(m);
    CHECK(strcmp(in->architecture, "gemma3") == 0);
    CHECK(in->n_vocab == 262144 && in->n_layer == 6);
    CHECK(in->chat_format == NPL_CHAT_GEMMA && !in->chat_format_guessed);
    const npl_hparams *hp = &m->hp;
    CHECK(hp->n_swa == 8);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        CHECKF(m->layers[l].local == (l != 5), "layer %u", l); /* pattern 6: the sixth is global */
        CHECK(m->layers[l].attn_q_norm && m->layers[l].attn_k_norm && m->layers[l].post_attn_norm &&
              m->layers[l].post_ffn_norm);
    }
    CHECK(m->embd_scale == sqrtf((float)hp->n_embd));
    CHECK(m->attn_scale == 1.0f / sqrtf((float)hp->head_dim));
    CHECK(m->rope_neox && m->ffn_gelu);
    CHECK(m->output.data == m->tok_embd.data); /* tied */
    /* Global layers: rope.freq_base (1e6); local ones: 10000. */
    double step = 2.0 / hp->n_rot;
    CHECK(fabs(m->rope_inv_freq[1] - pow(1e6, -step)) < 1e-15);
    REQUIRE(m->rope_inv_freq_swa);
    CHECK(fabs(m->rope_inv_freq_swa[1] - pow(1e4, -step)) < 1e-15);
    npl_model_free(m);
}

/* Chunks of 16 rows and a window of 8: the ring holds 8 + 16 - 1 = 23
 * positions in 45 mirrored rows; a context of at most 45 keeps every
 * position instead. Same model and chunking, so the same arithmetic in
 * the same order: the logits must be bit-identical. */
static void test_ring_equals_full(void)
{
    npl_model *m = load(2, 16);
    REQUIRE(m);
    REQUIRE(m->hp.n_swa == 8);
    uint32_t nv = m->hp.n_vocab;
    npl_error err;
    npl_seq *full = npl_seq_create(m, 45, &err), *ring = npl_seq_create(m, 400, &err);
    REQUIRE(full && ring);
    CHECK(full->kv_ring == 0);
    CHECK(ring->kv_ring == 23 && ring->kv_ring_rows == 45);
    /* Local layers take 45 rows per head, the global one 400. */
    size_t per_row = (size_t)m->hp.n_head_kv * m->hp.head_dim;
    CHECK(ring->kv_layer_off[1] == 45 * per_row && ring->kv_layer_off[5] == 5 * 45 * per_row);

    static int32_t prompt[40];
    make_prompt(prompt, 40, 11, nv);
    CHECK(npl_prefill(m, full, prompt, 40, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(m, ring, prompt, 40, 0, NULL, &err) == NPL_OK);
    CHECK(nt_same_logits(full, ring, nv));
    for (int step = 0; step < 5; step++) {
        int32_t t = nt_argmax(npl_seq_logits(full), nv);
        CHECK(npl_decode(m, &full, &t, 1, &err) == NPL_OK);
        CHECK(npl_decode(m, &ring, &t, 1, &err) == NPL_OK);
        CHECKF(nt_same_logits(full, ring, nv), "step %d", step);
    }
    CHECK(npl_seq_pos(full) == 45);
    npl_seq_free(full);
    npl_seq_free(ring);
    npl_model_free(m);
}

/* A long context through a ring of 23 positions (wrapping 13 times), in
 * 16-row chunks, against a full cache prefilled in 256-row chunks. */
static void test_ring_long_context(void)
{
    npl_model *m16 = load(2, 16), *m256 = load(2, 256);
    REQUIRE(m16 && m256);
    uint32_t nv = m16->hp.n_vocab;
    npl_error err;
    npl_seq *a = npl_seq_create(m16, 400, &err), *b = npl_seq_create(m256, 400, &err);
    REQUIRE(a && b);
    CHECK(a->kv_ring == 23 && b->kv_ring == 0);
    static int32_t prompt[300];
    make_prompt(prompt, 300, 3, nv);
    CHECK(npl_prefill(m16, a, prompt, 300, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(m256, b, prompt, 300, 0, NULL, &err) == NPL_OK);
    for (int step = 0; step < 4; step++) {
        const float *la = npl_seq_logits(a), *lb = npl_seq_logits(b);
        REQUIRE(la && lb);
        double max_diff = 0.0;
        for (uint32_t i = 0; i < nv; i++)
            max_diff = fmax(max_diff, fabs((double)la[i] - lb[i]));
        CHECKF(max_diff <= 1e-5, "step %d: ring vs full differ by %g", step, max_diff);
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

/* Tokens as embeddings (causal): the same logits bit for bit, in several
 * chunks, then the same decode. */
static void test_embd_equals_tokens(void)
{
    npl_model *m = load(2, 16);
    REQUIRE(m);
    uint32_t nv = m->hp.n_vocab, e = m->hp.n_embd;
    npl_error err;
    static int32_t prompt[40];
    make_prompt(prompt, 40, 5, nv);
    float *rows = malloc(40 * (size_t)e * sizeof *rows);
    REQUIRE(rows);
    CHECK(npl_model_embed_tokens(m, prompt, 40, rows, &err) == NPL_OK);
    /* Gemma's scale is applied: row 0 is the embedding times sqrt(n_embd). */
    float raw[1024];
    REQUIRE(e <= 1024 && npl_matrix_get_row(&m->tok_embd, prompt[0], raw));
    CHECK(rows[3] == raw[3] * sqrtf((float)e));

    npl_seq *a = npl_seq_create(m, 128, &err), *b = npl_seq_create(m, 128, &err);
    REQUIRE(a && b);
    CHECK(npl_prefill(m, a, prompt, 40, 0, NULL, &err) == NPL_OK);
    /* Text then embeddings then text, like an image in a prompt. */
    CHECK(npl_prefill(m, b, prompt, 7, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill_embeddings(m, b, rows + 7 * (size_t)e, 30, false, &err) == NPL_OK);
    CHECK(npl_seq_pos(b) == 37 && npl_seq_logits(b) != NULL);
    CHECK(npl_prefill(m, b, prompt + 37, 3, 0, NULL, &err) == NPL_OK);
    CHECK(nt_same_logits(a, b, nv));
    for (int step = 0; step < 3; step++) {
        int32_t t = nt_argmax(npl_seq_logits(a), nv);
        CHECK(npl_decode(m, &a, &t, 1, &err) == NPL_OK);
        CHECK(npl_decode(m, &b, &t, 1, &err) == NPL_OK);
        CHECK(nt_same_logits(a, b, nv));
    }

    /* One row alone: bidirectional or not, the same thing. */
    npl_seq *c = npl_seq_create(m, 128, &err), *d = npl_seq_create(m, 128, &err);
    REQUIRE(c && d);
    CHECK(npl_prefill(m, c, prompt, 5, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill(m, d, prompt, 5, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill_embeddings(m, c, rows + 5 * (size_t)e, 1, false, &err) == NPL_OK);
    CHECK(npl_prefill_embeddings(m, d, rows + 5 * (size_t)e, 1, true, &err) == NPL_OK);
    CHECK(nt_same_logits(c, d, nv));
    /* A bidirectional block changes the logits of what follows. */
    CHECK(npl_prefill_embeddings(m, c, rows + 6 * (size_t)e, 10, false, &err) == NPL_OK);
    CHECK(npl_prefill_embeddings(m, d, rows + 6 * (size_t)e, 10, true, &err) == NPL_OK);
    CHECK(!nt_same_logits(c, d, nv));

    npl_seq_free(a);
    npl_seq_free(b);
    npl_seq_free(c);
    npl_seq_free(d);
    free(rows);
    npl_model_free(m);
}

/* npl_model_params.block_rows: a bidirectional block over the prefill
 * chunk runs in one step (the sliding-window ring holds it) and gives the
 * logits of a model whose chunk holds it; one row more is refused. */
static void test_embd_block_rows(void)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 1;
    p.prefill_chunk = 16;
    p.block_rows = 24;
    npl_error err;
    npl_model *m = npl_model_load(nt_arg(0), &p, &err), *wide = load(1, 24);
    REQUIRE(m && wide);
    uint32_t e = m->hp.n_embd, n_vocab = m->hp.n_vocab;
    float *rows = malloc(25 * (size_t)e * sizeof *rows);
    int32_t ids[20];
    REQUIRE(rows);
    for (size_t i = 0; i < 25 * (size_t)e; i++)
        rows[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    make_prompt(ids, 20, 5, n_vocab);
    npl_seq *a = npl_seq_create(m, 64, &err), *b = npl_seq_create(wide, 64, &err);
    REQUIRE(a && b);
    CHECK(npl_prefill(m, a, ids, 3, 0, NULL, &err) == NPL_OK && npl_prefill(wide, b, ids, 3, 0, NULL, &err) == NPL_OK);
    CHECK(npl_prefill_embeddings(m, a, rows, 24, true, &err) == NPL_OK);
    CHECK(npl_prefill_embeddings(wide, b, rows, 24, true, &err) == NPL_OK);
    CHECK(npl_prefill(m, a, ids + 3, 17, 0, NULL, &err) == NPL_OK && npl_prefill(wide, b, ids + 3, 17, 0, NULL, &err) == NPL_OK);
    CHECK(npl_seq_pos(a) == 44 && memcmp(npl_seq_logits(a), npl_seq_logits(b), n_vocab * sizeof(float)) == 0);
    npl_seq *c = npl_seq_create(m, 64, &err);
    REQUIRE(c);
    CHECK(npl_prefill_embeddings(m, c, rows, 25, true, &err) == NPL_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "block_rows") != NULL);
    p.block_rows = 65537;
    CHECK(npl_model_load(nt_arg(0), &p, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    npl_seq_free(a);
    npl_seq_free(b);
    npl_seq_free(c);
    free(rows);
    npl_model_free(m);
    npl_model_free(wide);
}

static void test_embd_errors(void)
{
    npl_model *m = load(1, 16), *other = load(1, 16);
    REQUIRE(m && other);
    uint32_t e = m->hp.n_embd;
    npl_error err;
    float *rows = calloc(40 * (size_t)e, sizeof *rows);
    npl_seq *s = npl_seq_create(m, 32, &err), *o = npl_seq_create(other, 32, &err);
    REQUIRE(rows && s && o);
    CHECK(npl_prefill_embeddings(m, s, rows, 17, true, &err) == NPL_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "exceeds the model's 16 working rows") != NULL);
    CHECK(npl_prefill_embeddings(m, s, rows, 33, false, &err) == NPL_ERR_CONTEXT_OVERFLOW);
    CHECK(npl_prefill_embeddings(m, s, NULL, 3, false, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_prefill_embeddings(NULL, s, rows, 3, false, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_prefill_embeddings(m, o, rows, 3, false, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_seq_pos(s) == 0 && npl_seq_logits(s) == NULL);
    CHECK(npl_prefill_embeddings(m, s, rows, 0, true, &err) == NPL_OK && npl_seq_pos(s) == 0);
    CHECK(npl_prefill_embeddings(m, s, rows, 16, true, &err) == NPL_OK && npl_seq_pos(s) == 16);
    CHECK(npl_prefill_embeddings(m, s, rows, 16, false, &err) == NPL_OK && npl_seq_pos(s) == 32);
    CHECK(npl_prefill_embeddings(m, s, rows, 1, false, &err) == NPL_ERR_CONTEXT_OVERFLOW);

    int32_t bad[2] = {2, (int32_t)m->hp.n_vocab};
    CHECK(npl_model_embed_tokens(m, bad, 2, rows, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_model_embed_tokens(m, bad, 1, NULL, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_model_embed_tokens(m, bad, 0, NULL, &err) == NPL_OK);
    npl_seq_free(s);
    npl_seq_free(o);
    free(rows);
    npl_model_free(m);
    npl_model_free(other);
}

/* Generation ends on <eos> and on <end_of_turn>; prompts use Gemma's
 * turns with the assistant named "model". */
static void test_end_of_turn(void)
{
    npl_model *m = load(1, 0);
    REQUIRE(m);
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    int32_t eot = npl_tokenizer_find(tok, "<end_of_turn>"), sot = npl_tokenizer_find(tok, "<start_of_turn>");
    REQUIRE(eot >= 0 && sot >= 0);
    CHECK(npl_tokenizer_is_eog(tok, eot) && npl_tokenizer_is_eog(tok, npl_tokenizer_eos(tok)));
    npl_error err;
    npl_buf out = {0};
    npl_stream *st = npl_stream_create(m, NULL, 0, 100, &err);
    REQUIRE(st);
    int32_t hello = npl_tokenizer_find(tok, "Hello");
    REQUIRE(hello >= 0);
    CHECK(npl_stream_push(st, hello, &out, &err) == NPL_FINISH_NONE);
    CHECK(npl_stream_push(st, eot, &out, &err) == NPL_FINISH_STOP);
    CHECK(npl_stream_finish(st, &out, &err) == NPL_OK);
    CHECK(out.len == 5 && memcmp(out.data, "Hello", 5) == 0);
    npl_stream_free(st);

    npl_chat_message msg = {"user", "Hi"};
    npl_tokens ids = {0};
    CHECK(npl_chat_tokenize(m, &msg, 1, true, &ids, &err) == NPL_OK);
    int32_t model = npl_tokenizer_find(tok, "model");
    REQUIRE(ids.n > 6 && model >= 0);
    CHECK(ids.ids[0] == npl_tokenizer_bos(tok) && ids.ids[1] == sot);
    CHECK(ids.ids[ids.n - 3] == sot && ids.ids[ids.n - 2] == model);
    npl_tokens_free(&ids);
    npl_buf_free(&out);
    npl_model_free(m);
}

NT_MAIN({"layout", test_layout}, {"ring_equals_full", test_ring_equals_full},
        {"ring_long_context", test_ring_long_context}, {"embd_equals_tokens", test_embd_equals_tokens},
        {"embd_errors", test_embd_errors}, {"embd_block_rows", test_embd_block_rows}, {"end_of_turn", test_end_of_turn})
