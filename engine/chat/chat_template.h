/* Chat prompt formats (Llama 3, Gemma, ChatML) built directly as token
 * ids: control tokens are inserted by id, every piece of text between them
 * (role names, message content) is tokenized without special-token
 * parsing, so text a user types can never open or close a turn.
 *
 * The output matches what the models' own Jinja templates render, once
 * that rendering is tokenized with special-token parsing (tested against
 * llama.cpp); docs/chat-and-sampling.md lists the deliberate differences. */
#ifndef NPL_CHAT_TEMPLATE_H
#define NPL_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "gguf.h"
#include "npullm.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Picks the format from tokenizer.chat_template (by its control-token
 * markers) or, when the template is missing or unrecognised, from
 * general.architecture: llama -> Llama 3, gemma* -> Gemma, anything else
 * -> ChatML. *guessed (may be NULL) is set to true in that fallback case
 * so the caller can warn. */
npl_chat_format npl_chat_format_detect(const npl_gguf *g, bool *guessed);

/* Appends the conversation's token ids to out (BOS included as the format
 * requires, generation prompt when asked). Roles must be "system", "user"
 * or "assistant" (else NPL_ERR_INVALID_ARG naming the role); a control
 * token the vocabulary lacks gives NPL_ERR_UNSUPPORTED naming it. On
 * failure out is left as it was. */
npl_status npl_chat_build_tokens(const npl_tokenizer *tok, npl_chat_format f,
                                 const npl_chat_message *msgs, size_t n_msgs,
                                 bool add_generation_prompt, npl_tokens *out, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
