/* The npullm.h entry points of the chat area that take a model: they pick
 * the model's tokenizer and detected chat format and hand over to the
 * tokenizer-level implementations. */
#include "chat_template.h"
#include "npullm.h"
#include "stop_stream.h"

npl_status npl_chat_tokenize(const npl_model *m, const npl_chat_message *msgs, size_t n_msgs,
                             bool add_generation_prompt, npl_tokens *out, npl_error *err)
{
    if (!m)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "chat: no model");
    const npl_model_info *info = npl_model_get_info(m);
    return npl_chat_build_tokens(npl_model_tokenizer(m), info->chat_format, msgs, n_msgs,
                                 add_generation_prompt, out, err);
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
