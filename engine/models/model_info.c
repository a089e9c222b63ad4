/* The summary npl_model_get_info returns: shapes, parameter count, the
 * dominant weight type and the chat format. */
#include "chat_template.h"
#include "model_internal.h"

void npl_model_info_fill(npl_model *m)
{
    const npl_hparams *hp = &m->hp;
    npl_model_info *in = &m->info;
    in->architecture = m->architecture;
    in->name = m->name;
    in->n_vocab = hp->n_vocab;
    in->n_embd = hp->n_embd;
    in->n_layer = hp->n_layer;
    in->n_head = hp->n_head;
    in->n_head_kv = hp->n_head_kv;
    in->head_dim = hp->head_dim;
    in->n_ff = hp->n_ff;
    in->n_ctx_train = hp->n_ctx_train;
    /* the same numbers npl_model_probe gives the service's catalog */
    in->n_params = npl_gguf_param_count(m->gguf);
    in->quantization = npl_gguf_dominant_type(m->gguf);
    in->chat_format_guessed = false;
    in->chat_format = npl_chat_format_detect(m->gguf, &in->chat_format_guessed);
}
