/* The summary npl_model_get_info returns: shapes, parameter count, the
 * dominant weight type and the chat format. */
#include "chat_template.h"
#include "ggml_types.h"
#include "model_internal.h"

/* The type holding the most elements among the matrices (2-D tensors):
 * what a person calls the model's quantization. */
static const char *dominant_type(const npl_gguf *g)
{
    uint64_t elems[NPL_TYPE_COUNT_MAX] = {0};
    for (size_t i = 0; i < npl_gguf_n_tensors(g); i++) {
        const npl_gguf_tensor *t = npl_gguf_tensor_at(g, i);
        if (t->n_dims >= 2 && t->type < NPL_TYPE_COUNT_MAX)
            elems[t->type] += npl_gguf_tensor_nelements(t);
    }
    uint32_t best = NPL_TYPE_F32;
    for (uint32_t ty = 0; ty < NPL_TYPE_COUNT_MAX; ty++)
        if (elems[ty] > elems[best])
            best = ty;
    const npl_type_traits *tr = npl_type_traits_get(best);
    return tr ? tr->name : "unknown";
}

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
    in->n_params = 0;
    for (size_t i = 0; i < npl_gguf_n_tensors(m->gguf); i++)
        in->n_params += npl_gguf_tensor_nelements(npl_gguf_tensor_at(m->gguf, i));
    in->quantization = dominant_type(m->gguf);
    in->chat_format_guessed = false;
    in->chat_format = npl_chat_format_detect(m->gguf, &in->chat_format_guessed);
}
