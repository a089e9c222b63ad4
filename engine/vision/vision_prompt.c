/* A chat prompt with one image for Gemma 3 and Gemma 4, and prefilling it: text before
 * the image, the image's embedding rows (attending to each other in both
 * directions, as the model was trained), text after.
 *
 * Like the chat templates, control tokens are inserted by id and text runs
 * between them are tokenized without special-token parsing, so nothing a
 * user types can open a turn or an image. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_prompt.h"
#include "vision_internal.h"

/* The image's tokens in a vocabulary: Gemma 4's (<|image> and <image|>
 * around the rows, <|image|> where its template puts an image) when it
 * has them, else Gemma 3's (<start_of_image>, <end_of_image>, and the
 * template writes <start_of_image>). */
typedef struct image_marks {
    const char *begin, *end, *mark;
} image_marks;

static image_marks marks_of(const npl_tokenizer *tok)
{
    if (npl_tokenizer_find(tok, "<|image>") >= 0 && npl_tokenizer_find(tok, "<image|>") >= 0)
        return (image_marks){"<|image>", "<image|>", "<|image|>"};
    return (image_marks){"<start_of_image>", "<end_of_image>", "<start_of_image>"};
}

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
    image_marks mk = marks_of(tok);
    if (npl_tokenizer_find(tok, mk.begin) < 0 || npl_tokenizer_find(tok, mk.end) < 0)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "the model's vocabulary has no <start_of_image>/<end_of_image>");
    /* Gemma 4's tower feeds Gemma 4 models only (and Gemma 3's does not) */
    bool g4 = strcmp(v->info.projector, "gemma4v") == 0, g4_model = mi->architecture && strcmp(mi->architecture, "gemma4") == 0;
    if (g4 != g4_model)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "a %s vision projector does not fit a %s model",
                             v->info.projector, mi->architecture);
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

/* Literal JSON text (its length counted, never written by hand: a wrong
 * count once put a NUL in the JSON and every image prompt fell back to the
 * built-in layout). */
static npl_status append_text(npl_buf *b, const char *text, npl_error *err)
{
    return npl_buf_append(b, text, strlen(text), err);
}

/* The conversation as JSON for the template: a message with images has
 * the content parts [{"type": "image"}..., {"type": "text", "text": ...}]
 * (what transformers passes), the others a plain string. */
static char *messages_json(const npl_chat_message *msgs, const uint32_t *n_images, size_t n, npl_error *err)
{
    npl_buf b = {0};
    npl_status st = npl_buf_append(&b, "[", 1, err);
    for (size_t i = 0; i < n && !st; i++) {
        st = npl_buf_appendf(&b, err, "%s{\"role\": ", i ? ", " : "");
        if (!st)
            st = npl_json_append_str(&b, msgs[i].role, err);
        if (!st)
            st = append_text(&b, ", \"content\": ", err);
        if (!st && n_images[i] > 0) {
            st = append_text(&b, "[", err);
            for (uint32_t k = 0; k < n_images[i] && !st; k++)
                st = append_text(&b, "{\"type\": \"image\"}, ", err);
            if (!st)
                st = append_text(&b, "{\"type\": \"text\", \"text\": ", err);
        }
        if (!st)
            st = npl_json_append_str(&b, msgs[i].content, err);
        if (!st)
            st = append_text(&b, n_images[i] > 0 ? "}]}" : "}", err);
    }
    if (!st)
        st = npl_buf_append(&b, "]", 1, err);
    if (st) {
        npl_buf_free(&b);
        return NULL;
    }
    return b.data;
}

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

/* Run k of the rendering r cut at its image markers at[0..n_at): each
 * marker becomes the image between "\n\n<start_of_image>" and
 * "<end_of_image>\n\n" (what llama.cpp puts there for Gemma 3; Gemma 4's
 * tokens the same way). */
static npl_status tokenize_run(const npl_model *m, const npl_jinja_output *r, const size_t *at, size_t n_at, size_t k,
                               npl_tokens *out, npl_error *err)
{
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    image_marks mk = marks_of(tok);
    char pre[32], post[32];
    snprintf(pre, sizeof pre, "%s\n\n", mk.end);
    snprintf(post, sizeof post, "\n\n%s", mk.begin);
    size_t from = k == 0 ? 0 : at[k - 1] + strlen(mk.mark), to = k == n_at ? r->len : at[k];
    npl_jinja_output pc = {0};
    npl_status st = piece(k == 0 ? "" : pre, r, from, to, k == n_at ? "" : post, &pc, err);
    if (!st && k == 0)
        st = npl_chat_tokenize_rendering(tok, &pc, out, err);
    else if (!st)
        st = npl_tokenize_masked(tok, pc.text, pc.len, pc.mask, NPL_TOKENIZE_PARSE_SPECIAL, out, err);
    npl_jinja_output_free(&pc);
    return st;
}

/* The template's rendering cut at its image markers. NPL_ERR_UNSUPPORTED
 * when the model has no template or it renders another number of markers
 * than there are images; the template's error when it fails. */
static npl_status from_template(const npl_model *m, const npl_chat_message *msgs, const uint32_t *n_images,
                                size_t n_msgs, size_t total, const npl_chat_options *opts, npl_tokens *runs,
                                npl_error *err)
{
    char *json = messages_json(msgs, n_images, n_msgs, err);
    if (!json)
        return npl_error_set(err, NPL_ERR_NOMEM, "vision prompt: out of memory");
    npl_chat_options o = {.add_generation_prompt = true, .enable_thinking = -1, .tools_in_user_message = -1};
    npl_jinja_output r;
    npl_status st = npl_chat_render_for_model(m, json, opts ? opts : &o, &r, err);
    free(json);
    if (st)
        return st;
    const char *mark = marks_of(npl_model_tokenizer(m)).mark;
    size_t k = strlen(mark), found = 0;
    size_t *at = malloc((total + 1) * sizeof *at);
    if (!at)
        st = npl_error_set(err, NPL_ERR_NOMEM, "vision prompt: out of memory");
    for (size_t i = 0; !st && i + k <= r.len; i++)
        if (memcmp(r.text + i, mark, k) == 0 && !memchr(r.mask + i, 1, k)) {
            if (found == total) {
                found++;
                break;
            }
            at[found++] = i;
        }
    if (!st && found != total)
        st = npl_error_set(err, NPL_ERR_UNSUPPORTED, "the chat template puts %s%zu %s in the prompt for %zu images",
                           found > total ? "more than " : "", found > total ? total : found, mark, total);
    for (size_t i = 0; !st && i <= total; i++)
        st = tokenize_run(m, &r, at, total, i, &runs[i], err);
    free(at);
    npl_jinja_output_free(&r);
    return st;
}

/* ---- the built-in Gemma 3 format ------------------------------------------ */

static bool is_role(const npl_chat_message *m, const char *role)
{
    return m->role && strcmp(m->role, role) == 0;
}

/* Like the built-in text format: system messages open the next turn, each
 * image between blank lines before its message's text. */
static npl_status builtin(const npl_model *m, const npl_chat_message *msgs, const uint32_t *n_images, size_t n_msgs,
                          npl_tokens *runs, npl_error *err)
{
    builder b = {.tok = npl_model_tokenizer(m), .err = err};
    image_marks mk = marks_of(b.tok);
    npl_tokens *cur = runs;
    npl_status st;
#define TRY(x) do { if ((st = (x)) != NPL_OK) goto done; } while (0)
    TRY(control(&b, cur, "<bos>"));
    bool open = false; /* a turn holding system text waits for its message */
    for (size_t i = 0; i < n_msgs; i++) {
        bool system = is_role(&msgs[i], "system");
        if (!open) {
            TRY(control(&b, cur, "<start_of_turn>"));
            TRY(text(&b, is_role(&msgs[i], "assistant") ? "model\n" : "user\n", is_role(&msgs[i], "assistant") ? 6 : 5));
            open = true;
        }
        if (system) {
            TRY(text(&b, msgs[i].content, strlen(msgs[i].content)));
            TRY(text(&b, "\n\n", 2));
            continue;
        }
        for (uint32_t k = 0; k < n_images[i]; k++) {
            TRY(text(&b, "\n\n", 2));
            TRY(control(&b, cur, mk.begin));
            cur++;
            TRY(control(&b, cur, mk.end));
            TRY(text(&b, "\n\n", 2));
        }
        TRY(text_trimmed(&b, msgs[i].content));
        TRY(control(&b, cur, "<end_of_turn>"));
        TRY(text(&b, "\n", 1));
        open = false;
    }
    if (open) { /* system text last: a turn of its own */
        TRY(control(&b, cur, "<end_of_turn>"));
        TRY(text(&b, "\n", 1));
    }
    TRY(control(&b, cur, "<start_of_turn>"));
    TRY(text(&b, "model\n", 6));
    TRY(flush(&b, cur));
#undef TRY
done:
    npl_buf_free(&b.text);
    return st;
}

static void free_runs(npl_tokens *runs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        npl_tokens_free(&runs[i]);
}

npl_status npl_vision_chat_prompt_messages(const npl_model *m, const npl_chat_message *msgs, const uint32_t *n_images,
                                           size_t n_msgs, const npl_chat_options *opts, npl_tokens *runs,
                                           npl_error *err)
{
    if (!m || !msgs || !n_images || !runs || n_msgs == 0)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision prompt: missing model, messages or output");
    size_t total = 0;
    for (size_t i = 0; i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision prompt: message %zu has no role or content", i);
        if (n_images[i] > 0 && !is_role(&msgs[i], "user"))
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision prompt: only user messages carry images");
        total += n_images[i];
    }
    if (npl_model_get_info(m)->chat_format != NPL_CHAT_GEMMA)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "images need a model with the Gemma chat format");
    npl_error terr = {0};
    npl_status tst = from_template(m, msgs, n_images, n_msgs, total, opts, runs, &terr);
    if (tst == NPL_OK)
        return NPL_OK;
    free_runs(runs, total + 1);
    if (tst == NPL_ERR_NOMEM)
        return npl_error_set(err, tst, "%s", terr.message);
    if (tst != NPL_ERR_UNSUPPORTED || strstr(terr.message, marks_of(npl_model_tokenizer(m)).mark))
        npl_chat_warn_fallback(m, &terr);
    npl_status st = builtin(m, msgs, n_images, n_msgs, runs, err);
    if (st)
        free_runs(runs, total + 1);
    return st;
}

npl_status npl_vision_chat_prompt(const npl_model *m, const char *system, const char *user_text,
                                  npl_image_prompt *out, npl_error *err)
{
    if (!m || !user_text || !out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "vision prompt: missing model, text or output");
    memset(out, 0, sizeof *out);
    npl_chat_message msgs[2] = {{"system", system}, {"user", user_text}};
    uint32_t n_images[2] = {0, 1};
    npl_tokens runs[2] = {{0}};
    size_t first = system ? 0 : 1;
    npl_status st = npl_vision_chat_prompt_messages(m, msgs + first, n_images + first, 2 - first, NULL, runs, err);
    if (st == NPL_OK) {
        out->before = runs[0];
        out->after = runs[1];
    }
    return st;
}

/* ---- keys for a KV pool ---------------------------------------------------- */

/* splitmix64's finaliser: every input bit reaches every output bit. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void npl_vision_image_keys(const float *pixels, size_t n_values, int32_t *keys, size_t n_rows)
{
    uint64_t h = mix64(n_values);
    const unsigned char *p = (const unsigned char *)pixels;
    size_t n_bytes = n_values * sizeof *pixels, i = 0;
    for (; i + 8 <= n_bytes; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = mix64(h ^ w) + i;
    }
    for (; i < n_bytes; i++)
        h = mix64(h ^ p[i]);
    /* each row's key from the whole hash: rows of two images never agree
     * for long */
    for (size_t r = 0; r < n_rows; r++) {
        uint32_t k = (uint32_t)(mix64(h + r) >> 33) | 0x80000000u;
        keys[r] = k == 0xffffffffu ? INT32_MIN : (int32_t)k;
    }
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
