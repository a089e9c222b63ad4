/* Chat formats rendered straight to token ids (see chat_template.h). */
#include "chat_template.h"

#include <string.h>

#include "unicode_utf8.h"

/* ---- format detection -------------------------------------------------- */

static bool str_contains(npl_str s, const char *needle)
{
    size_t n = strlen(needle);
    return s.ptr && s.len >= n && memmem(s.ptr, (size_t)s.len, needle, n) != NULL;
}

npl_chat_format npl_chat_format_detect(const npl_gguf *g, bool *guessed)
{
    npl_str tmpl = {0};
    if (g && npl_gguf_get_str(g, "tokenizer.chat_template", &tmpl)) {
        npl_chat_format f = 0;
        if (str_contains(tmpl, "<|start_header_id|>"))
            f = NPL_CHAT_LLAMA3;
        else if (str_contains(tmpl, "<start_of_turn>"))
            f = NPL_CHAT_GEMMA;
        else if (str_contains(tmpl, "<|im_start|>"))
            f = NPL_CHAT_CHATML;
        if (f) {
            if (guessed)
                *guessed = false;
            return f;
        }
    }
    if (guessed)
        *guessed = true;
    npl_str arch = {0};
    if (g && npl_gguf_get_str(g, "general.architecture", &arch)) {
        if (npl_str_eq(arch, "llama"))
            return NPL_CHAT_LLAMA3;
        if (arch.len >= 5 && memcmp(arch.ptr, "gemma", 5) == 0)
            return NPL_CHAT_GEMMA;
    }
    return NPL_CHAT_CHATML; /* what qwen2 and most other families use */
}

const char *npl_chat_format_name(npl_chat_format f)
{
    switch (f) {
    case NPL_CHAT_LLAMA3: return "llama3";
    case NPL_CHAT_GEMMA: return "gemma";
    case NPL_CHAT_CHATML: return "chatml";
    }
    return "unknown";
}

/* ---- Jinja's trim ------------------------------------------------------ */

/* Jinja's `trim` is Python's str.strip(): it removes the characters for
 * which str.isspace() is true, not only ASCII whitespace. */
static bool is_python_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

/* Narrows [*begin, *end) of s to its text without surrounding whitespace. */
static void trim_span(const char *str, size_t *begin, size_t *end)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t b = *begin, e = *end;
    uint32_t cp;
    while (b < e) {
        int len = npl_utf8_decode_strict(s + b, e - b, &cp);
        if (len <= 0 || !is_python_space(cp))
            break;
        b += len;
    }
    while (e > b) {
        size_t start = e - 1;
        while (start > b && e - start < 4 && (s[start] & 0xc0) == 0x80)
            start--;
        int len = npl_utf8_decode_strict(s + start, e - start, &cp);
        if (len <= 0 || (size_t)len != e - start || !is_python_space(cp))
            break;
        e = start;
    }
    *begin = b;
    *end = e;
}

/* ---- token writer ------------------------------------------------------ */

/* Text between two control tokens is collected and tokenized as one piece,
 * exactly as a rendered template is split at its special tokens. */
typedef struct chat_writer {
    const npl_tokenizer *tok;
    npl_chat_format format;
    npl_tokens *out;
    npl_buf text;
    npl_error *err;
    /* Control ids already looked up: a format uses at most four, and
     * long histories repeat them often. */
    const char *cached_text[4];
    int32_t cached_id[4];
    size_t n_cached;
} chat_writer;

static npl_status put_text(chat_writer *w, const char *s, size_t n)
{
    if (n == 0)
        return NPL_OK;
    return npl_buf_append(&w->text, s, n, w->err);
}

static npl_status put_str(chat_writer *w, const char *s)
{
    return put_text(w, s, strlen(s));
}

static npl_status put_trimmed(chat_writer *w, const char *s)
{
    size_t b = 0, e = strlen(s);
    trim_span(s, &b, &e);
    return put_text(w, s + b, e - b);
}

static npl_status flush_text(chat_writer *w)
{
    if (w->text.len == 0)
        return NPL_OK;
    npl_status st = npl_tokenize(w->tok, w->text.data, w->text.len, 0, w->out, w->err);
    npl_buf_clear(&w->text);
    return st;
}

static npl_status push_id(chat_writer *w, int32_t id)
{
    npl_status st = flush_text(w);
    if (st != NPL_OK)
        return st;
    return npl_tokens_push(w->out, id, w->err);
}

static int32_t control_id(chat_writer *w, const char *token_text)
{
    for (size_t i = 0; i < w->n_cached; i++)
        if (strcmp(w->cached_text[i], token_text) == 0)
            return w->cached_id[i];
    int32_t id = npl_tokenizer_find(w->tok, token_text);
    if (id >= 0 && w->n_cached < sizeof(w->cached_id) / sizeof(w->cached_id[0])) {
        w->cached_text[w->n_cached] = token_text;
        w->cached_id[w->n_cached++] = id;
    }
    return id;
}

static npl_status put_control(chat_writer *w, const char *token_text)
{
    int32_t id = control_id(w, token_text);
    if (id < 0)
        return npl_error_set(w->err, NPL_ERR_UNSUPPORTED,
                             "chat format %s needs the control token '%s', which the model's "
                             "vocabulary does not have",
                             npl_chat_format_name(w->format), token_text);
    return push_id(w, id);
}

/* The Llama 3 and Gemma templates start with bos_token themselves. */
static npl_status put_bos(chat_writer *w, const char *bos_text)
{
    int32_t id = npl_tokenizer_bos(w->tok);
    if (id < 0)
        id = npl_tokenizer_find(w->tok, bos_text);
    if (id < 0)
        return npl_error_set(w->err, NPL_ERR_UNSUPPORTED,
                             "chat format %s starts with a BOS token ('%s'), which the model's "
                             "vocabulary does not have",
                             npl_chat_format_name(w->format), bos_text);
    return push_id(w, id);
}

/* ---- roles ------------------------------------------------------------- */

typedef enum chat_role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT } chat_role;

static chat_role role_of(const npl_chat_message *m)
{
    if (strcmp(m->role, "system") == 0)
        return ROLE_SYSTEM;
    return strcmp(m->role, "user") == 0 ? ROLE_USER : ROLE_ASSISTANT;
}

static npl_status check_messages(const npl_chat_message *msgs, size_t n, npl_error *err)
{
    if (n > 0 && !msgs)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: %zu messages but no message array", n);
    for (size_t i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (!role)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: message %zu has no role", i);
        if (strcmp(role, "system") != 0 && strcmp(role, "user") != 0 &&
            strcmp(role, "assistant") != 0)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "chat: message %zu has unknown role '%.64s' (expected system, "
                                 "user or assistant)",
                                 i, role);
        if (!msgs[i].content)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: message %zu ('%s') has no content",
                                 i, role);
    }
    return NPL_OK;
}

/* ---- formats ----------------------------------------------------------- */

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        npl_status try_status_ = (expr);                                                           \
        if (try_status_ != NPL_OK)                                                                 \
            return try_status_;                                                                    \
    } while (0)

/* <|begin_of_text|> then per message
 * <|start_header_id|>ROLE<|end_header_id|>\n\nTRIMMED CONTENT<|eot_id|> */
static npl_status build_llama3(chat_writer *w, const npl_chat_message *msgs, size_t n, bool gen)
{
    TRY(put_bos(w, "<|begin_of_text|>"));
    for (size_t i = 0; i < n; i++) {
        TRY(put_control(w, "<|start_header_id|>"));
        TRY(put_str(w, msgs[i].role));
        TRY(put_control(w, "<|end_header_id|>"));
        TRY(put_str(w, "\n\n"));
        TRY(put_trimmed(w, msgs[i].content));
        TRY(put_control(w, "<|eot_id|>"));
    }
    if (gen) {
        TRY(put_control(w, "<|start_header_id|>"));
        TRY(put_str(w, "assistant"));
        TRY(put_control(w, "<|end_header_id|>"));
        TRY(put_str(w, "\n\n"));
    }
    return flush_text(w);
}

/* A run of system messages msgs[first..end) with no user turn to join:
 * it becomes a user turn of its own. */
static npl_status gemma_system_turn(chat_writer *w, const npl_chat_message *msgs, size_t first,
                                    size_t end)
{
    TRY(put_control(w, "<start_of_turn>"));
    TRY(put_str(w, "user\n"));
    for (size_t i = first; i < end; i++) {
        if (i > first)
            TRY(put_str(w, "\n\n"));
        TRY(put_str(w, msgs[i].content));
    }
    TRY(put_control(w, "<end_of_turn>"));
    return put_str(w, "\n");
}

/* <bos> then per turn <start_of_turn>ROLE\nTRIMMED CONTENT<end_of_turn>\n
 * with assistant named "model". Gemma has no system role: system text
 * (untrimmed) + "\n\n" is prepended to the next user turn. */
static npl_status build_gemma(chat_writer *w, const npl_chat_message *msgs, size_t n, bool gen)
{
    TRY(put_bos(w, "<bos>"));
    size_t sys_first = 0, sys_end = 0; /* pending run of system messages */
    for (size_t i = 0; i < n; i++) {
        chat_role role = role_of(&msgs[i]);
        if (role == ROLE_SYSTEM) {
            if (sys_end == sys_first)
                sys_first = i;
            sys_end = i + 1;
            continue;
        }
        if (role == ROLE_ASSISTANT && sys_end > sys_first) {
            TRY(gemma_system_turn(w, msgs, sys_first, sys_end));
            sys_first = sys_end = 0;
        }
        TRY(put_control(w, "<start_of_turn>"));
        TRY(put_str(w, role == ROLE_USER ? "user\n" : "model\n"));
        for (size_t k = sys_first; k < sys_end; k++) {
            TRY(put_str(w, msgs[k].content));
            TRY(put_str(w, "\n\n"));
        }
        sys_first = sys_end = 0;
        TRY(put_trimmed(w, msgs[i].content));
        TRY(put_control(w, "<end_of_turn>"));
        TRY(put_str(w, "\n"));
    }
    if (sys_end > sys_first)
        TRY(gemma_system_turn(w, msgs, sys_first, sys_end));
    if (gen) {
        TRY(put_control(w, "<start_of_turn>"));
        TRY(put_str(w, "model\n"));
    }
    return flush_text(w);
}

/* [BOS when the model adds one] then per message
 * <|im_start|>ROLE\nCONTENT<|im_end|>\n (content as is). */
static npl_status build_chatml(chat_writer *w, const npl_chat_message *msgs, size_t n, bool gen)
{
    if (npl_tokenizer_adds_bos(w->tok) && npl_tokenizer_bos(w->tok) >= 0)
        TRY(push_id(w, npl_tokenizer_bos(w->tok)));
    for (size_t i = 0; i < n; i++) {
        TRY(put_control(w, "<|im_start|>"));
        TRY(put_str(w, msgs[i].role));
        TRY(put_str(w, "\n"));
        TRY(put_str(w, msgs[i].content));
        TRY(put_control(w, "<|im_end|>"));
        TRY(put_str(w, "\n"));
    }
    if (gen) {
        TRY(put_control(w, "<|im_start|>"));
        TRY(put_str(w, "assistant\n"));
    }
    return flush_text(w);
}

npl_status npl_chat_build_tokens(const npl_tokenizer *tok, npl_chat_format f,
                                 const npl_chat_message *msgs, size_t n_msgs,
                                 bool add_generation_prompt, npl_tokens *out, npl_error *err)
{
    if (!tok || !out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: tokenizer and output are required");
    if (f != NPL_CHAT_LLAMA3 && f != NPL_CHAT_GEMMA && f != NPL_CHAT_CHATML)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: unknown chat format %d", (int)f);
    TRY(check_messages(msgs, n_msgs, err));

    chat_writer w = {.tok = tok, .format = f, .out = out, .err = err};
    size_t n_before = out->n;
    npl_status st;
    switch (f) {
    case NPL_CHAT_LLAMA3: st = build_llama3(&w, msgs, n_msgs, add_generation_prompt); break;
    case NPL_CHAT_GEMMA: st = build_gemma(&w, msgs, n_msgs, add_generation_prompt); break;
    default: st = build_chatml(&w, msgs, n_msgs, add_generation_prompt); break;
    }
    npl_buf_free(&w.text);
    if (st != NPL_OK)
        out->n = n_before;
    return st;
}
