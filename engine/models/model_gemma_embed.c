/* The hooks of `gemma-embedding` (EmbeddingGemma) in the architecture
 * table: Gemma 3's keys and blocks (model_gemma3.c) run as an embedding
 * model, as llama.cpp's gemma-embedding graph computes it:
 *  - attention is bidirectional: every row sees its whole text, and a
 *    local layer (the gemma3 pattern, default 6) the keys within
 *    sliding_window / 2 positions on either side (a symmetric window);
 *  - Q is scaled by 1 / sqrt(head_dim) (no 27B rule);
 *  - the final norm's output is pooled (pooling_type, mean when absent),
 *    then goes through dense_2.weight (n_embd -> dense_2_feat_out) and
 *    dense_3.weight (back to n_embd), no bias and no activation between,
 *    when the file has them (embed_decoder.c), then is L2-normalised.
 * A text must run in one forward step (every row needs all the others'
 * keys), so the step is as long as the context. */
#include <math.h>
#include <stdio.h>

#include "model_arch.h"

/* Longest context taken in one step: 2048 for EmbeddingGemma. */
#define MAX_STEP_ROWS 32768u

/* dense_2 (optional) then dense_3 (optional): the second takes what the
 * first gives and returns n_embd values, as llama.cpp's keys require. */
static npl_status bind_dense(npl_binder *b, npl_encoder *enc)
{
    const npl_gguf *g = b->m->gguf;
    uint64_t e = b->m->hp.n_embd, mid = e;
    npl_status st;
    static const char *const biases[] = {"dense_2.bias", "dense_3.bias"};
    for (size_t i = 0; i < 2; i++)
        if (npl_gguf_find_tensor(g, biases[i]))
            return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' is not supported (llama.cpp's gemma-embedding has no dense biases)",
                                 b->path, biases[i]);
    const npl_gguf_tensor *d2 = npl_gguf_find_tensor(g, "dense_2.weight");
    if (d2) {
        mid = d2->n_dims == 2 && d2->ne[1] >= 1 && d2->ne[1] <= (1u << 20) ? d2->ne[1] : 0;
        if (!mid)
            return npl_error_set(b->err, NPL_ERR_FORMAT,
                                 "%s: tensor 'dense_2.weight' is not a matrix of n_embd columns", b->path);
        if ((st = npl_bind_matrix(b, "dense_2.weight", e, mid, "n_embd, dense_2_feat_out", &enc->dense2)))
            return st;
    }
    if (npl_gguf_find_tensor(g, "dense_3.weight"))
        return npl_bind_matrix(b, "dense_3.weight", mid, e,
                               d2 ? "dense_2_feat_out, n_embd" : "n_embd, n_embd (no dense_2)", &enc->dense3);
    if (mid != e)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: 'dense_2.weight' makes %llu values and no 'dense_3.weight' brings them back "
                             "to n_embd %llu",
                             b->path, (unsigned long long)mid, (unsigned long long)e);
    return NPL_OK;
}

npl_status npl_gemma_embed_read_extra(npl_binder *b)
{
    npl_encoder *enc = &b->m->enc;
    npl_status st;
    if ((st = npl_gemma3_read_extra(b)))
        return st;
    bool causal = false;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.causal", b->arch);
    npl_gguf_get_bool(b->m->gguf, key, &causal);
    if (causal)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: %s is true, which is not supported", b->path, key);
    if ((st = npl_read_pooling_rank(b, enc, false)))
        return st;
    return bind_dense(b, enc);
}

npl_status npl_gemma_embed_finish(npl_binder *b)
{
    npl_model *m = b->m;
    npl_status st = npl_gemma3_finish(b);
    if (st)
        return st;
    m->attn_scale = 1.0f / sqrtf((float)m->hp.head_dim);
    m->enc.bidirectional = true;
    if (m->hp.n_ctx_train > MAX_STEP_ROWS)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: a bidirectional embedder's context of %u tokens is more than one step of %u",
                             b->path, m->hp.n_ctx_train, MAX_STEP_ROWS);
    if (m->prefill_chunk < m->hp.n_ctx_train)
        m->prefill_chunk = m->hp.n_ctx_train;
    return NPL_OK;
}
