/* A chat prompt with one image for Gemma 3, and prefilling it: text before
 * the image, the image's embedding rows (attending to each other in both
 * directions, as the model was trained), text after.
 *
 * Like the chat templates, control tokens are inserted by id and text runs
 * between them are tokenized without special-token parsing, so nothing a
 * user types can open a turn or an image. */
#include <stdlib.h>
#include <string.h>

#include "chat_prompt.h"
#include "vision_internal.h"

npl_status npl_vision_check_model(const npl_vision *v, const npl_model *m, npl_error *err)
{
    if (!v || !m)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision: missing tower or model");
    const npl_model_info *mi = npl_model_get_info(m);
    if (mi->n_embd != v->info.n_embd_out)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "the vision projector produces embeddings of %u values but the model's are %u wide",
                             v->info.n_embd_out, mi->n_embd);
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    if (npl_tokenizer_find(tok, "<start_of_image>") < 0 || npl_tokenizer_find(tok, "<end_of_image>") < 0)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "the model's vocabulary has no <start_of_image>/<end_of_image>");
    if (mi->chat_format != NPL_CHAT_GEMMA)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "images need a model with the Gemma chat format, not %s",
                             npl_chat_format_name(mi->chat_format));
    return NPL_OK;
}

void npl_image_prompt_free(npl_image_prompt *p)
{
    if (!p)
        return;
    npl_tokens_free(&p->before);
    npl_tokens_free(&p->after);
}

/* ---- building ------------------------------------------------------------- */

typedef struct builder {
    const npl_tokenizer *tok;
    npl_buf text; /* pending text run */
    npl_error *err;
} builder;

static npl_status flush(builder *b, npl_tokens *out)
{
    if (b->text.len == 0)
        return NPL_OK;
    npl_status st = npl_tokenize(b->tok, b->text.data, b->text.len, 0, out, b->err);
    npl_buf_clear(&b->text);
    return st;
}

static npl_status control(builder *b, npl_tokens *out, const char *name)
{
    npl_status st = flush(b, out);
    if (st)
        return st;
    int32_t id = npl_tokenizer_find(b->tok, name);
    if (id < 0)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "the vocabulary has no %s token", name);
    return npl_tokens_push(out, id, b->err);
}

static npl_status text(builder *b, const char *s, size_t n)
{
    return npl_buf_append(&b->text, s, n, b->err);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static npl_status text_trimmed(builder *b, const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && is_space(s[0])) {
        s++;
        n--;
    }
    while (n > 0 && is_space(s[n - 1]))
        n--;
    return text(b, s, n);
}

/* ---- from the model's template ------------------------------------------ */

#define IMAGE_MARK "<start_of_image>"

/* One piece of the rendering, with extra template text around it. */
static npl_status piece(const char *pre, const npl_jinja_output *r, size_t from, size_t to, const char *post,
                        npl_jinja_output *out, npl_error *err)
{
    size_t np = strlen(pre), nq = strlen(post), n = np + (to - from) + nq;
    out->text = malloc(n + 1);
    out->mask = calloc(n + 1, 1);
    out->len = n;
    if (!out->text || !out->mask)
        return npl_error_set(err, NPL_ERR_NOMEM, "vision prompt: out of memory");
    memcpy(out->text, pre, np);
    memcpy(out->text + np, r->text + from, to - from);
    memcpy(out->mask + np, r->mask + from, to - from);
    memcpy(out->text + np + (to - from), post, nq);
    out->text[n] = 0;
    return NPL_OK;
}

/* The template's rendering cut at its image marker, which becomes the
 * image between "\n\n<start_of_image>" and "<end_of_image>\n\n" (what
 * llama.cpp puts there for Gemma 3). NPL_ERR_UNSUPPORTED when the model
 * has no template or it renders no marker; the template's error when it
 * fails. */
static npl_status from_template(const npl_model *m, const char *system, const char *user_text,
                                npl_image_prompt *out, npl_error *err)
{
    char *json = npl_chat_turn_json(system, user_text, true);
    if (!json)
        return npl_error_set(err, NPL_ERR_NOMEM, "vision prompt: out of memory");
    npl_chat_options o = {.add_generation_prompt = true, .enable_thinking = -1, .tools_in_user_message = -1};
    npl_jinja_output r, before = {0}, after = {0};
    npl_status st = npl_chat_render_for_model(m, json, &o, &r, err);
    free(json);
    if (st)
        return st;
    size_t k = strlen(IMAGE_MARK), at = r.len;
    for (size_t i = 0; i + k <= r.len && at == r.len; i++)
        if (memcmp(r.text + i, IMAGE_MARK, k) == 0 && !memchr(r.mask + i, 1, k))
            at = i;
    if (at == r.len)
        st = npl_error_set(err, NPL_ERR_UNSUPPORTED, "the chat template puts no %s in the prompt", IMAGE_MARK);
    if (!st)
        st = piece("", &r, 0, at, "\n\n" IMAGE_MARK, &before, err);
    if (!st)
        st = piece("<end_of_image>\n\n", &r, at + k, r.len, "", &after, err);
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    if (!st)
        st = npl_chat_tokenize_rendering(tok, &before, &out->before, err);
    if (!st)
        st = npl_tokenize_masked(tok, after.text, after.len, after.mask, NPL_TOKENIZE_PARSE_SPECIAL, &out->after, err);
    npl_jinja_output_free(&r);
    npl_jinja_output_free(&before);
    npl_jinja_output_free(&after);
    if (st)
        npl_image_prompt_free(out);
    return st;
}

npl_status npl_vision_chat_prompt(const npl_model *m, const char *system, const char *user_text,
                                  npl_image_prompt *out, npl_error *err)
{
    if (!m || !user_text || !out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision prompt: missing model, text or output");
    memset(out, 0, sizeof *out);
    if (npl_model_get_info(m)->chat_format != NPL_CHAT_GEMMA)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "images need a model with the Gemma chat format");
    npl_error terr = {0};
    npl_status tst = from_template(m, system, user_text, out, &terr);
    if (tst == NPL_OK || tst == NPL_ERR_NOMEM)
        return tst ? npl_error_set(err, tst, "%s", terr.message) : NPL_OK;
    if (tst != NPL_ERR_UNSUPPORTED || strstr(terr.message, IMAGE_MARK))
        npl_chat_warn_fallback(m, &terr);
    /* the built-in Gemma 3 format */
    builder b = {.tok = npl_model_tokenizer(m), .err = err};
    npl_status st;
#define TRY(x) do { if ((st = (x)) != NPL_OK) goto done; } while (0)
    TRY(control(&b, &out->before, "<bos>"));
    TRY(control(&b, &out->before, "<start_of_turn>"));
    TRY(text(&b, "user\n", 5));
    if (system) {
        TRY(text(&b, system, strlen(system)));
        TRY(text(&b, "\n\n", 2));
    }
    TRY(text(&b, "\n\n", 2));
    TRY(control(&b, &out->before, "<start_of_image>"));
    TRY(control(&b, &out->after, "<end_of_image>"));
    TRY(text(&b, "\n\n", 2));
    TRY(text_trimmed(&b, user_text));
    TRY(control(&b, &out->after, "<end_of_turn>"));
    TRY(text(&b, "\n", 1));
    TRY(control(&b, &out->after, "<start_of_turn>"));
    TRY(text(&b, "model\n", 6));
    TRY(flush(&b, &out->after));
#undef TRY
done:
    npl_buf_free(&b.text);
    if (st)
        npl_image_prompt_free(out);
    return st;
}

/* ---- prefilling ------------------------------------------------------------ */

npl_status npl_vision_prefill(npl_model *m, npl_seq *s, const npl_image_prompt *p, const float *image_embd,
                              size_t n_image, npl_error *err)
{
    if (!m || !s || !p || (n_image > 0 && !image_embd))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision prefill: missing model, sequence, prompt or image");
    size_t total = p->before.n + n_image + p->after.n;
    if (total > (size_t)(npl_seq_n_ctx(s) - npl_seq_pos(s)))
        return npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                             "the prompt with its image (%zu positions) does not fit the context of %u", total,
                             npl_seq_n_ctx(s));
    npl_status st = npl_prefill(m, s, p->before.ids, p->before.n, 0, NULL, err);
    if (st == NPL_OK)
        st = npl_prefill_embeddings(m, s, image_embd, n_image, true, err);
    if (st == NPL_OK)
        st = npl_prefill(m, s, p->after.ids, p->after.n, 0, NULL, err);
    return st;
}
