/* Prompts from the model's own chat template (tokenizer.chat_template),
 * rendered by the Jinja engine with the variables transformers passes,
 * then tokenized the way llama.cpp does (special tokens parsed, one BOS)
 * except that text from the caller never becomes a control token. */
#ifndef NPL_CHAT_PROMPT_H
#define NPL_CHAT_PROMPT_H

#include <stdbool.h>
#include <time.h>

#include "jinja.h"
#include "npullm.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_chat_render_in {
    const char *template_src; /* NUL-terminated */
    const char *bos_text, *eos_text; /* NULL = "" */
    const char *messages_json; /* JSON array of messages */
    const npl_chat_options *opts; /* NULL = generation prompt, nothing else */
    const struct tm *now; /* NULL = npl_chat_now() */
} npl_chat_render_in;

/* Renders the template: messages, tools (only when given), date_string
 * ("26 Jul 2024" form, as llama.cpp passes it), bos_token,
 * eos_token, add_generation_prompt, enable_thinking and
 * tools_in_user_message (only when set), strftime_now(). */
npl_status npl_chat_render(const npl_chat_render_in *in, npl_jinja_output *out, npl_error *err);

/* [{system,} user] as JSON (malloc'd, NULL when out of memory); with
 * image_first the user content is [{"type": "image"}, {"type": "text", ...}]. */
char *npl_chat_turn_json(const char *system, const char *user_text, bool image_first);

/* The date templates see: NPULLM_CHAT_DATE=YYYY-MM-DD when set (tests),
 * else the local time now. */
void npl_chat_now(struct tm *out);

/* Tokenizes a rendering: BOS added when the model adds one and the text
 * does not already start with it; control tokens only from template text. */
npl_status npl_chat_tokenize_rendering(const npl_tokenizer *tok, const npl_jinja_output *r, npl_tokens *out,
                                       npl_error *err);

/* The text of the model's BOS / EOS token ("" when none). */
void npl_chat_special_text(const npl_tokenizer *tok, int32_t id, char *buf, size_t cap);

/* A conversation in JSON checked and flattened to role + text (content
 * parts: their "text" joined), for the built-in formats. Also checks that
 * tools_json (may be NULL) is an array. NPL_ERR_INVALID_ARG naming what is
 * wrong. */
typedef struct npl_chat_messages {
    npl_chat_message *v;
    size_t n;
} npl_chat_messages;

npl_status npl_chat_messages_from_json(const char *messages_json, const char *tools_json, npl_chat_messages *cm,
                                       npl_error *err);
void npl_chat_messages_free(npl_chat_messages *cm);

/* Renders the model's own template (chat_model.c): NPL_ERR_UNSUPPORTED
 * when it has none, the template's error when it fails. */
npl_status npl_chat_render_for_model(const npl_model *m, const char *messages_json, const npl_chat_options *o,
                                     npl_jinja_output *out, npl_error *err);

/* Says once per model on stderr that its template failed and the built-in
 * format is used instead. */
void npl_chat_warn_fallback(const npl_model *m, const npl_error *why);

/* True the first time it is called for m (model.c). */
bool npl_model_claim_chat_warning(const npl_model *m);

/* Appends a JSON string literal of s to b. */
npl_status npl_json_append_str(npl_buf *b, const char *s, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
