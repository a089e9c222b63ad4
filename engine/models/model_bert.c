/* The hooks of `bert` (BERT encoders: all-MiniLM, bge, mxbai-embed-large):
 * no rope and no RMS norm, a LayerNorm epsilon, a pooling rule, learned
 * position and token-type embeddings, a LayerNorm of the embeddings; and
 * of `nomic-bert` (nomic-embed-text): the same without learned positions,
 * with NEOX RoPE, a fused QKV matrix and a SwiGLU FFN. */
#include <stdio.h>

#include "model_arch.h"

npl_status npl_bert_prepare(npl_binder *b)
{
    b->rms_eps_optional = true; /* unused: the encoder's norms are LayerNorms */
    b->rms_eps_default = 1e-6f;
    b->own_rope_base = true; /* no rope */
    return NPL_OK;
}

npl_status npl_read_pooling_rank(npl_binder *b, npl_encoder *enc, bool rank_ok)
{
    uint32_t pooling;
    npl_status st = npl_bind_u32(b, "pooling_type", false, NPL_POOLING_MEAN, 0, UINT32_MAX, &pooling);
    if (st)
        return st;
    switch (pooling) {
    case NPL_POOLING_MEAN:
    case NPL_POOLING_CLS:
    case NPL_POOLING_LAST:
        enc->pooling = (npl_pooling)pooling;
        return NPL_OK;
    case 0:
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: %s.pooling_type is none (per-token vectors), which is not supported", b->path,
                             b->arch);
    case NPL_POOLING_RANK:
        if (rank_ok) {
            enc->pooling = NPL_POOLING_RANK;
            return NPL_OK;
        }
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: %s.pooling_type is rank (a reranker), which is not supported", b->path, b->arch);
    default:
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.pooling_type = %u is not known", b->path, b->arch,
                             pooling);
    }
}

/* A reranker's classification head (llama.cpp's names): cls.weight and
 * cls.bias (dense + tanh, optional), then cls.output.weight and its bias
 * to the scores, of which the first is the relevance. */
npl_status npl_read_rank_head(npl_binder *b, npl_encoder *enc)
{
    uint64_t e = b->m->hp.n_embd;
    npl_status st;
    const npl_gguf_tensor *out = npl_gguf_find_tensor(b->m->gguf, "cls.output.weight");
    if (!out || out->n_dims != 2 || out->ne[1] < 1 || out->ne[1] > 16)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: a rank-pooling %s has no classification output 'cls.output.weight' of 1 to 16 rows",
                             b->path, b->arch);
    if (npl_gguf_find_tensor(b->m->gguf, "cls.weight") &&
        ((st = npl_bind_matrix(b, "cls.weight", e, e, "n_embd, n_embd", &enc->cls)) ||
         (st = npl_bind_vector(b, "cls.bias", e, "n_embd", &enc->cls_b))))
        return st;
    if ((st = npl_bind_matrix(b, "cls.output.weight", e, out->ne[1], "n_embd, classes", &enc->cls_out)))
        return st;
    if (npl_gguf_find_tensor(b->m->gguf, "cls.output.bias"))
        return npl_bind_vector(b, "cls.output.bias", out->ne[1], "classes", &enc->cls_out_b);
    return NPL_OK;
}

/* What bert and nomic-bert share: no causal mask, plain heads, the
 * LayerNorm epsilon, the pooling, the token and token-type embeddings and
 * their LayerNorm. */
static npl_status read_encoder(npl_binder *b)
{
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    npl_encoder *enc = &m->enc;
    npl_status st;
    bool causal = false;
    char key[64];
    snprintf(key, sizeof key, "%s.attention.causal", b->arch);
    npl_gguf_get_bool(m->gguf, key, &causal);
    if (causal)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: %s is true, which is not supported", b->path, key);
    if (hp->n_head_kv != hp->n_head || hp->head_dim * hp->n_head != hp->n_embd)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: a %s encoder has n_head * head_dim = n_embd and no grouped heads", b->path, b->arch);
    if ((st = npl_bind_f32(b, "attention.layer_norm_epsilon", true, 0.0f, &enc->norm_eps)))
        return st;
    if (!(enc->norm_eps > 0.0f && enc->norm_eps < 1.0f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.attention.layer_norm_epsilon = %g is out of range",
                             b->path, b->arch, (double)enc->norm_eps);
    if ((st = npl_read_pooling_rank(b, enc, true)))
        return st;

    const npl_gguf_tensor *types = npl_gguf_find_tensor(m->gguf, "token_types.weight");
    uint64_t n_types = types && types->n_dims == 2 && types->ne[1] >= 1 && types->ne[1] <= 16 ? types->ne[1] : 1;
    if ((st = npl_bind_token_embd(b)) ||
        (types && (st = npl_bind_matrix(b, "token_types.weight", hp->n_embd, n_types, "n_embd, token types",
                                        &enc->type_embd))) ||
        (st = npl_bind_vector(b, "token_embd_norm.weight", hp->n_embd, "n_embd", &enc->embd_norm)) ||
        (st = npl_bind_vector(b, "token_embd_norm.bias", hp->n_embd, "n_embd", &enc->embd_norm_b)))
        return st;
    return enc->pooling == NPL_POOLING_RANK ? npl_read_rank_head(b, enc) : NPL_OK;
}

npl_status npl_bert_read_extra(npl_binder *b)
{
    npl_status st;
    if ((st = read_encoder(b)))
        return st;
    if (!b->m->enc.type_embd.data)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor 'token_types.weight' is missing", b->path);
    return npl_bind_matrix(b, "position_embd.weight", b->m->hp.n_embd, b->m->hp.n_ctx_train,
                           "n_embd, context_length", &b->m->enc.pos_embd);
}

/* nomic-bert: the rope base is read by the common keys (prepare sets
 * nothing of bert's own), positions come from RoPE. */
npl_status npl_nomic_bert_prepare(npl_binder *b)
{
    b->rms_eps_optional = true; /* unused: the encoder's norms are LayerNorms */
    b->rms_eps_default = 1e-6f;
    return NPL_OK;
}

npl_status npl_nomic_bert_read_extra(npl_binder *b)
{
    npl_status st;
    uint32_t moe_every = 0;
    if ((st = npl_bind_u32(b, "moe_every_n_layers", false, 0, 0, UINT32_MAX, &moe_every)))
        return st;
    if (moe_every)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: mixture-of-experts nomic-bert (moe_every_n_layers = %u) is not supported", b->path,
                             moe_every);
    if ((st = read_encoder(b)))
        return st;
    b->m->enc.rope = true;
    return NPL_OK;
}

/* Q, K and V from the fused attn_qkv (nomic-embed-text) or apart. */
npl_status npl_nomic_bert_finish(npl_binder *b)
{
    npl_status st;
    for (uint32_t l = 0; l < b->m->hp.n_layer; l++)
        if ((st = npl_bind_attention_qkv(b, l, &b->m->layers[l])))
            return st;
    return NPL_OK;
}
