/* The npullm.h entry points of the chat area that take a model: they pick
 * the model's tokenizer and detected chat format and hand over to the
 * tokenizer-level implementations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_prompt.h"
#include "chat_template.h"
#include "npullm.h"
#include "stop_stream.h"

npl_status npl_chat_render_for_model(const npl_model *m, const char *messages_json, const npl_chat_options *o,
                                 npl_jinja_output *out, npl_error *err)
{
    memset(out, 0, sizeof *out);
    npl_str tmpl = {0};
    const npl_gguf *g = npl_model_gguf(m);
    if (!g || !npl_gguf_get_str(g, "tokenizer.chat_template", &tmpl) || tmpl.len == 0)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "the model has no chat template");
    char *src = npl_str_dup(tmpl);
    if (!src)
        return npl_error_set(err, NPL_ERR_NOMEM, "chat template: out of memory");
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    char bos[128], eos[128];
    npl_chat_special_text(tok, npl_tokenizer_bos(tok), bos, sizeof bos);
    npl_chat_special_text(tok, npl_tokenizer_eos(tok), eos, sizeof eos);
    npl_chat_render_in in = {.template_src = src, .bos_text = bos, .eos_text = eos,
                             .messages_json = messages_json, .opts = o};
    npl_status st = npl_chat_render(&in, out, err);
    free(src);
    return st;
}

void npl_chat_warn_fallback(const npl_model *m, const npl_error *why)
{
    if (!npl_model_claim_chat_warning(m))
        return;
    const npl_model_info *info = npl_model_get_info(m);
    fprintf(stderr, "npullm: the chat template of model '%s' cannot be used (%s); prompts use the built-in %s format\n",
            info->name, why && why->message[0] ? why->message : "unknown error",
            npl_chat_format_name(info->chat_format));
}

npl_status npl_chat_tokenize(const npl_model *m, const npl_chat_message *msgs, size_t n_msgs,
                             bool add_generation_prompt, npl_tokens *out, npl_error *err)
{
    npl_chat_options o = {.add_generation_prompt = add_generation_prompt, .enable_thinking = -1, .tools_in_user_message = -1};
    return npl_chat_tokenize_messages(m, msgs, n_msgs, &o, out, NULL, err);
}

npl_status npl_chat_tokenize_messages(const npl_model *m, const npl_chat_message *msgs, size_t n_msgs,
                                      const npl_chat_options *opts, npl_tokens *out, char **prompt, npl_error *err)
{
    if (!m)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: no model");
    if (n_msgs > 0 && !msgs)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: no messages");
    npl_buf json = {0};
    npl_status st = npl_buf_append(&json, "[", 1, err);
    for (size_t i = 0; st == NPL_OK && i < n_msgs; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: message %zu has no role or content", i);
            break;
        }
        const char *r = msgs[i].role;
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) {
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: message %zu has role '%.40s' (system, user or assistant expected)", i, r);
            break;
        }
        st = npl_buf_appendf(&json, err, "%s{\"role\": ", i ? ", " : "");
        if (!st)
            st = npl_json_append_str(&json, msgs[i].role, err);
        if (!st)
            st = npl_buf_append(&json, ", \"content\": ", 13, err);
        if (!st)
            st = npl_json_append_str(&json, msgs[i].content, err);
        if (!st)
            st = npl_buf_append(&json, "}", 1, err);
    }
    if (!st)
        st = npl_buf_append(&json, "]", 1, err);
    if (!st)
        st = npl_chat_tokenize_json(m, json.data, opts, out, prompt, err);
    npl_buf_free(&json);
    return st;
}

/* The built-in format's text of ids (for --print-prompt). */
static char *ids_text(const npl_tokenizer *tok, const npl_tokens *t, size_t from)
{
    npl_buf b = {0};
    for (size_t i = from; i < t->n; i++) {
        char piece[256];
        size_t k = npl_token_to_bytes(tok, t->ids[i], true, piece, sizeof piece);
        if (npl_buf_append(&b, piece, k < sizeof piece ? k : sizeof piece, NULL) != NPL_OK) {
            npl_buf_free(&b);
            return NULL;
        }
    }
    if (!b.data)
        return calloc(1, 1);
    return b.data;
}

npl_status npl_chat_tokenize_json(const npl_model *m, const char *messages_json, const npl_chat_options *opts,
                                  npl_tokens *out, char **prompt, npl_error *err)
{
    if (!m || !messages_json || !out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: missing model, messages or output");
    if (prompt)
        *prompt = NULL;
    npl_chat_options def = {.add_generation_prompt = true, .enable_thinking = -1, .tools_in_user_message = -1};
    const npl_chat_options *o = opts ? opts : &def;
    npl_chat_messages cm;
    npl_status st = npl_chat_messages_from_json(messages_json, o->tools_json, &cm, err);
    if (st)
        return st;
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    npl_jinja_output r;
    npl_error terr = {0};
    st = npl_chat_render_for_model(m, messages_json, o, &r, &terr);
    if (st == NPL_OK) {
        st = npl_chat_tokenize_rendering(tok, &r, out, err);
        if (st == NPL_OK && prompt) {
            *prompt = r.text;
            r.text = NULL;
        }
        npl_jinja_output_free(&r);
        npl_chat_messages_free(&cm);
        return st;
    }
    if (st == NPL_ERR_NOMEM) {
        npl_chat_messages_free(&cm);
        return npl_error_set(err, st, "%s", terr.message);
    }
    if (st != NPL_ERR_UNSUPPORTED) /* a template that exists but fails */
        npl_chat_warn_fallback(m, &terr);
    size_t n0 = out->n;
    st = npl_chat_build_tokens(tok, npl_model_get_info(m)->chat_format, cm.v, cm.n, o->add_generation_prompt, out,
                               err);
    npl_chat_messages_free(&cm);
    if (st == NPL_OK && prompt && !(*prompt = ids_text(tok, out, n0))) {
        out->n = n0;
        st = npl_error_set(err, NPL_ERR_NOMEM, "chat: out of memory");
    }
    return st;
}

npl_stream *npl_stream_create(const npl_model *m, const char *const *stop_strings, size_t n_stop,
                              uint32_t max_tokens, npl_error *err)
{
    if (!m) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: no model");
        return NULL;
    }
    return npl_stream_create_for_tokenizer(npl_model_tokenizer(m), stop_strings, n_stop, max_tokens,
                                           err);
}
