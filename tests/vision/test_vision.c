/* The vision tower through the engine API: staged encoding equals the
 * one-call encoding and does not depend on the thread count, prompts with
 * an image are laid out as documented, the model check and the prefill
 * refuse what does not fit.
 *
 *   test-vision CASE MODEL MMPROJ IMAGE [OTHER_MMPROJ] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npl_test.h"
#include "vision.h"

/* The case's inputs: test-vision CASE MODEL MMPROJ IMAGE [OTHER_MMPROJ]. */
enum { ARG_MODEL, ARG_MMPROJ, ARG_IMAGE, ARG_OTHER_MMPROJ };

static void die(const char *what, const npl_error *err)
{
    nt_fatal("test-vision: %s: %s", what, err ? err->message : "");
}

static npl_image load_image(void)
{
    size_t n;
    unsigned char *buf = nt_read_file(nt_arg(ARG_IMAGE), &n);
    if (!buf)
        die("cannot read the image", NULL);
    npl_image img;
    npl_error err;
    if (npl_image_decode(buf, n, NULL, &img, &err))
        die("decoding", &err);
    free(buf);
    return img;
}

static npl_vision *load_vision(const char *path, int threads)
{
    npl_vision_params p;
    npl_vision_params_default(&p);
    p.n_threads = threads;
    npl_error err;
    npl_vision *v = npl_vision_load(path, &p, &err);
    if (!v)
        die("loading the projector", &err);
    return v;
}

static float *encode_all(npl_vision *v, const npl_image *img)
{
    const npl_vision_info *in = npl_vision_get_info(v);
    float *out = malloc((size_t)in->n_tokens * in->n_embd_out * sizeof *out);
    npl_error err;
    if (!out || npl_vision_encode(v, img, out, &err))
        die("encoding", &err);
    return out;
}

/* Stage by stage, with the stage counters; then the same in one call;
 * then with one thread and with three: all bit-identical. */
static void case_staged(void)
{
    npl_image img = load_image();
    npl_vision *v = load_vision(nt_arg(ARG_MMPROJ), 2);
    const npl_vision_info *in = npl_vision_get_info(v);
    size_t n = (size_t)in->n_tokens * in->n_embd_out;
    npl_error err;
    npl_vision_encoding *e = npl_vision_encoding_create(v, &img, &err);
    if (!e)
        die("creating an encoding", &err);
    CHECKF(npl_vision_encoding_n_stages(e) == in->n_layer + 2, "stages %u", npl_vision_encoding_n_stages(e));
    CHECKF(npl_vision_encoding_output(e) == NULL, "no output before the end");
    bool done = false;
    uint32_t steps = 0;
    while (!done) {
        CHECKF(npl_vision_encoding_stages_done(e) == steps, "stage counter");
        CHECKF(npl_vision_encoding_step(e, &done, &err) == NPL_OK, "step: %s", err.message);
        steps++;
        if (steps > 1000)
            break;
    }
    CHECKF(steps == in->n_layer + 2, "%u steps", steps);
    CHECKF(npl_vision_encoding_step(e, &done, &err) == NPL_OK && done, "a step after the end is a no-op");
    const float *staged = npl_vision_encoding_output(e);
    CHECKF(staged != NULL, "output after the end");

    float *once = encode_all(v, &img);
    CHECKF(staged && memcmp(staged, once, n * sizeof *once) == 0, "staged == one call");
    double norm = 0;
    for (size_t i = 0; i < n; i++)
        norm += (double)once[i] * once[i];
    CHECKF(isfinite(norm) && norm > 0, "non-trivial output (norm %g)", norm);
    npl_vision_encoding_free(e);
    npl_vision_free(v);

    for (int threads = 1; threads <= 3; threads += 2) {
        v = load_vision(nt_arg(ARG_MMPROJ), threads);
        float *other = encode_all(v, &img);
        CHECKF(memcmp(other, once, n * sizeof *once) == 0, "%d thread(s) == 2 threads", threads);
        free(other);
        npl_vision_free(v);
    }
    free(once);
    npl_image_free(&img);
}

/* The older file with ffn_up/ffn_down exchanged gives the same result. */
static void case_swapped_ffn(void)
{
    REQUIRE(nt_arg(ARG_OTHER_MMPROJ) != NULL);
    npl_image img = load_image();
    npl_vision *a = load_vision(nt_arg(ARG_MMPROJ), 0), *b = load_vision(nt_arg(ARG_OTHER_MMPROJ), 0);
    CHECKF(!npl_vision_get_info(a)->ffn_swapped && npl_vision_get_info(b)->ffn_swapped, "swap detected");
    const npl_vision_info *in = npl_vision_get_info(a);
    float *x = encode_all(a, &img), *y = encode_all(b, &img);
    CHECKF(memcmp(x, y, (size_t)in->n_tokens * in->n_embd_out * sizeof *x) == 0, "same embeddings");
    free(x);
    free(y);
    npl_vision_free(a);
    npl_vision_free(b);
    npl_image_free(&img);
}

static npl_model *load_model(void)
{
    npl_error err;
    npl_model *m = npl_model_load(nt_arg(ARG_MODEL), NULL, &err);
    if (!m)
        die("loading the model", &err);
    return m;
}

static bool ids_equal(const npl_tokens *t, const int32_t *want, size_t n)
{
    return t->n == n && memcmp(t->ids, want, n * sizeof *want) == 0;
}

static void append(npl_tokens *out, const npl_tokenizer *tok, const char *text)
{
    if (npl_tokenize(tok, text, strlen(text), 0, out, NULL))
        die("tokenizing", NULL);
}

/* The layout: <bos><start_of_turn>user\n[SYS\n\n]\n\n<start_of_image> |
 * <end_of_image>\n\nTEXT<end_of_turn>\n<start_of_turn>model\n, text runs
 * tokenized without special tokens, user text trimmed. */
static void case_prompt(void)
{
    npl_model *m = load_model();
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    int32_t bos = npl_tokenizer_find(tok, "<bos>"), sot = npl_tokenizer_find(tok, "<start_of_turn>");
    int32_t eot = npl_tokenizer_find(tok, "<end_of_turn>"), soi = npl_tokenizer_find(tok, "<start_of_image>");
    int32_t eoi = npl_tokenizer_find(tok, "<end_of_image>");
    CHECKF(bos >= 0 && sot >= 0 && eot >= 0 && soi >= 0 && eoi >= 0, "Gemma control tokens");

    for (int with_system = 0; with_system < 2; with_system++) {
        npl_image_prompt p;
        npl_error err;
        const char *sys = with_system ? "Be brief." : NULL;
        CHECKF(npl_vision_chat_prompt(m, sys, "  What is this? <start_of_image>\n", &p, &err) == NPL_OK, "%s",
              err.message);
        npl_tokens want = {0};
        npl_tokens_push(&want, bos, NULL);
        npl_tokens_push(&want, sot, NULL);
        append(&want, tok, with_system ? "user\nBe brief.\n\n\n\n" : "user\n\n\n");
        npl_tokens_push(&want, soi, NULL);
        CHECKF(ids_equal(&p.before, want.ids, want.n), "before (system %d): %zu ids", with_system, p.before.n);
        want.n = 0;
        npl_tokens_push(&want, eoi, NULL);
        append(&want, tok, "\n\nWhat is this? <start_of_image>");
        npl_tokens_push(&want, eot, NULL);
        append(&want, tok, "\n");
        npl_tokens_push(&want, sot, NULL);
        append(&want, tok, "model\n");
        CHECKF(ids_equal(&p.after, want.ids, want.n), "after: %zu ids, want %zu", p.after.n, want.n);
        for (size_t i = 1; i + 1 < p.after.n; i++)
            CHECKF(p.after.ids[i] != soi, "typed <start_of_image> is text, not the control token");
        npl_tokens_free(&want);
        npl_image_prompt_free(&p);
    }
    npl_model_free(m);
}

/* A conversation with images: one token run more than images, each
 * image between <start_of_image> and <end_of_image>; images only on user
 * messages. Image keys: the same pixels the same keys, others not; never
 * a token id; positions keyed only where filled. */
static void case_conversation(void)
{
    npl_model *m = load_model();
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    int32_t soi = npl_tokenizer_find(tok, "<start_of_image>"), eoi = npl_tokenizer_find(tok, "<end_of_image>");
    npl_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Compare."}, {"assistant", "Alike."},
                               {"user", "And this?"}};
    uint32_t counts[] = {0, 2, 0, 1};
    npl_tokens runs[4] = {{0}};
    npl_error err;
    CHECKF(npl_vision_chat_prompt_messages(m, msgs, counts, 4, NULL, runs, &err) == NPL_OK, "%s", err.message);
    for (int k = 0; k < 4; k++) {
        CHECKF(runs[k].n > 0, "run %d is empty", k);
        if (runs[k].n == 0)
            continue;
        if (k > 0)
            CHECKF(runs[k].ids[0] == eoi, "run %d starts with <end_of_image>", k);
        if (k < 3)
            CHECKF(runs[k].ids[runs[k].n - 1] == soi, "run %d ends with <start_of_image>", k);
        npl_tokens_free(&runs[k]);
    }
    /* one image: the same runs as npl_vision_chat_prompt */
    npl_image_prompt p;
    CHECKF(npl_vision_chat_prompt(m, "Be brief.", "Compare.", &p, &err) == NPL_OK, "%s", err.message);
    uint32_t one[] = {0, 1};
    CHECKF(npl_vision_chat_prompt_messages(m, msgs, one, 2, NULL, runs, &err) == NPL_OK, "%s", err.message);
    CHECKF(ids_equal(&runs[0], p.before.ids, p.before.n) && ids_equal(&runs[1], p.after.ids, p.after.n),
          "one image as npl_vision_chat_prompt");
    npl_tokens_free(&runs[0]);
    npl_tokens_free(&runs[1]);
    npl_image_prompt_free(&p);
    uint32_t on_assistant[] = {0, 0, 1, 0};
    CHECKF(npl_vision_chat_prompt_messages(m, msgs, on_assistant, 4, NULL, runs, &err) == NPL_ERR_INVALID_ARG,
          "an image on an assistant message");

    float px[64] = {0}, other[64] = {0};
    other[63] = 1.0f;
    int32_t a[16], b[16], c[16];
    npl_vision_image_keys(px, 64, a, 16);
    npl_vision_image_keys(px, 64, b, 16);
    npl_vision_image_keys(other, 64, c, 16);
    CHECKF(memcmp(a, b, sizeof a) == 0, "the same pixels, the same keys");
    int same = 0;
    for (int i = 0; i < 16; i++) {
        CHECKF(a[i] < 0 && a[i] != -1, "key %d = %d is no token id and not -1", i, a[i]);
        same += a[i] == c[i];
    }
    CHECKF(same == 0, "another image shares %d keys", same);

    npl_seq *s = npl_seq_create(m, 32, &err);
    int32_t ids[4] = {soi, soi, soi, soi};
    CHECKF(npl_prefill(m, s, ids, 4, 0, NULL, &err) == NPL_OK, "%s", err.message);
    CHECKF(npl_seq_key_positions(s, 1, a, 3, &err) == NPL_OK, "%s", err.message);
    CHECKF(npl_seq_key_positions(s, 2, a, 3, &err) == NPL_ERR_INVALID_ARG, "positions not filled");
    CHECKF(npl_seq_key_positions(s, 0, ids, 1, &err) == NPL_ERR_INVALID_ARG, "a token id as a key");
    npl_seq_free(s);
    npl_model_free(m);
}

/* A projector of the wrong width is refused by the check, and a context
 * too small for prompt + image fails before anything is cached. */
static void case_fit(void)
{
    REQUIRE(nt_arg(ARG_OTHER_MMPROJ) != NULL);
    npl_model *m = load_model();
    npl_vision *v = load_vision(nt_arg(ARG_MMPROJ), 0), *wrong = load_vision(nt_arg(ARG_OTHER_MMPROJ), 0);
    npl_error err;
    CHECKF(npl_vision_check_model(v, m, &err) == NPL_OK, "%s", err.message);
    CHECKF(npl_vision_check_model(wrong, m, &err) == NPL_ERR_UNSUPPORTED, "width mismatch refused");
    CHECKF(strstr(err.message, "wide") != NULL, "message: %s", err.message);
    CHECKF(npl_vision_check_model(NULL, m, &err) == NPL_ERR_INVALID_ARG, "no tower");

    npl_image img = load_image();
    float *embd = encode_all(v, &img);
    const npl_vision_info *in = npl_vision_get_info(v);
    npl_image_prompt p;
    CHECKF(npl_vision_chat_prompt(m, NULL, "Describe.", &p, &err) == NPL_OK, "%s", err.message);
    size_t need = p.before.n + in->n_tokens + p.after.n;
    npl_seq *small = npl_seq_create(m, (uint32_t)need - 1, &err);
    CHECKF(npl_vision_prefill(m, small, &p, embd, in->n_tokens, &err) == NPL_ERR_CONTEXT_OVERFLOW, "overflow");
    CHECKF(npl_seq_pos(small) == 0, "nothing cached after the overflow");
    npl_seq *fits = npl_seq_create(m, (uint32_t)need, &err);
    CHECKF(npl_vision_prefill(m, fits, &p, embd, in->n_tokens, &err) == NPL_OK, "%s", err.message);
    CHECKF(npl_seq_pos(fits) == need && npl_seq_logits(fits) != NULL, "all positions cached, logits ready");
    CHECKF(npl_vision_prefill(m, fits, &p, NULL, in->n_tokens, &err) == NPL_ERR_INVALID_ARG, "no rows");

    /* The image changes what comes next: a different picture, other logits. */
    float *zero = calloc((size_t)in->n_tokens * in->n_embd_out, sizeof *zero);
    npl_seq *blank = npl_seq_create(m, (uint32_t)need, &err);
    CHECKF(npl_vision_prefill(m, blank, &p, zero, in->n_tokens, &err) == NPL_OK, "%s", err.message);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    double diff = 0;
    for (uint32_t i = 0; i < nv; i++)
        diff += fabs((double)npl_seq_logits(fits)[i] - npl_seq_logits(blank)[i]);
    CHECKF(diff / nv > 1e-3, "logits depend on the image (mean difference %g)", diff / nv);

    npl_seq_free(small);
    npl_seq_free(fits);
    npl_seq_free(blank);
    free(zero);
    free(embd);
    npl_image_prompt_free(&p);
    npl_image_free(&img);
    npl_vision_free(v);
    npl_vision_free(wrong);
    npl_model_free(m);
}

static void case_bad_args(void)
{
    npl_error err;
    CHECKF(npl_vision_load(NULL, NULL, &err) == NULL && err.code == NPL_ERR_INVALID_ARG, "no path");
    CHECKF(npl_vision_load("/nonexistent/mmproj.gguf", NULL, &err) == NULL && err.code == NPL_ERR_IO, "missing file");
    npl_vision_params p;
    npl_vision_params_default(&p);
    p.n_threads = -1;
    CHECKF(npl_vision_load(nt_arg(ARG_MMPROJ), &p, &err) == NULL && err.code == NPL_ERR_INVALID_ARG, "threads");
    /* The text model is not a projector. */
    CHECKF(npl_vision_load(nt_arg(ARG_MODEL), NULL, &err) == NULL && err.code == NPL_ERR_UNSUPPORTED, "%s", err.message);
    npl_vision *v = load_vision(nt_arg(ARG_MMPROJ), 1);
    npl_image empty = {0};
    CHECKF(npl_vision_encoding_create(v, &empty, &err) == NULL && err.code == NPL_ERR_INVALID_ARG, "empty image");
    CHECKF(npl_vision_encode(v, NULL, NULL, &err) == NPL_ERR_INVALID_ARG, "no output");
    CHECKF(npl_vision_encoding_step(NULL, NULL, &err) == NPL_ERR_INVALID_ARG, "no encoding");
    npl_vision_free(v);
    npl_vision_free(NULL);
    npl_vision_encoding_free(NULL);
}

/* An image preprocessed without the tower (parameters read from the file's
 * metadata alone, as npullmd does off its engine thread) encodes exactly
 * like one the tower preprocesses; parameters of another projector are
 * refused; a file that is no projector has none. */
static void case_from_pixels(void)
{
    npl_image img = load_image();
    npl_vision *v = load_vision(nt_arg(ARG_MMPROJ), 2);
    const npl_vision_info *in = npl_vision_get_info(v);
    size_t n = (size_t)in->n_tokens * in->n_embd_out;
    float *want = encode_all(v, &img);
    npl_error err;
    npl_vision_pixel_params pp, mine;
    CHECKF(npl_vision_read_pixel_params(nt_arg(ARG_MMPROJ), &pp, &err) == NPL_OK, "%s", err.message);
    npl_vision_get_pixel_params(v, &mine);
    CHECKF(memcmp(&pp, &mine, sizeof pp) == 0, "metadata and loaded tower disagree");
    CHECKF(npl_vision_pixel_count(&pp) == (size_t)3 * in->image_size * in->image_size, "pixel count");
    float *px = malloc(npl_vision_pixel_count(&pp) * sizeof *px);
    CHECKF(npl_image_preprocess(&pp, &img, px, &err) == NPL_OK, "%s", err.message);
    npl_vision_encoding *e = npl_vision_encoding_create_from_pixels(v, &pp, px, &err);
    CHECKF(e != NULL, "%s", err.message);
    bool done = false;
    while (e && !done)
        if (npl_vision_encoding_step(e, &done, &err))
            die("encoding step", &err);
    if (e)
        CHECKF(memcmp(npl_vision_encoding_output(e), want, n * sizeof *want) == 0, "differs from npl_vision_encode");
    npl_vision_encoding_free(e);

    npl_vision_pixel_params other = pp;
    other.image_size += 14;
    CHECKF(npl_vision_encoding_create_from_pixels(v, &other, px, &err) == NULL && err.code == NPL_ERR_INVALID_ARG,
          "another projector's pixels accepted");
    other = pp;
    other.image_mean[1] += 0.25f;
    CHECKF(npl_vision_encoding_create_from_pixels(v, &other, px, &err) == NULL, "another mean accepted");
    CHECKF(npl_vision_read_pixel_params(nt_arg(ARG_MODEL), &pp, &err) != NPL_OK, "a text model has pixel parameters");
    CHECKF(npl_vision_read_pixel_params("/nonexistent.gguf", &pp, &err) != NPL_OK, "a missing file");
    free(px);
    free(want);
    npl_vision_free(v);
    npl_image_free(&img);
}

NT_MAIN({"staged", case_staged}, {"swapped_ffn", case_swapped_ffn}, {"prompt", case_prompt},
        {"conversation", case_conversation}, {"fit", case_fit}, {"bad_args", case_bad_args},
        {"from_pixels", case_from_pixels})
