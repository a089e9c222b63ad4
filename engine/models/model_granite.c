/* The granite family's hook of the architecture table (engine/models/model_arch.c):
 * IBM Granite 3.x and Granite 4.0 dense models.
 *
 * A llama graph with four multipliers, as llama.cpp's granite graph
 * computes them:
 *  - token embeddings times granite.embedding_scale (absent or 0: none);
 *  - q.k times granite.attention.scale instead of 1/sqrt(head_dim)
 *    (absent or 0: the usual);
 *  - each attention and FFN output times granite.residual_scale before
 *    the residual add (absent or 0: none);
 *  - logits divided by granite.logit_scale (required).
 * granite.rope.scaling.finetuned = false means no RoPE in any layer. */
#include <math.h>
#include <stdio.h>

#include "model_arch.h"

/* A multiplier key: absent or 0 leaves *out as it is. */
static npl_status bind_multiplier(const npl_binder *b, const char *key, bool required, float *out)
{
    float v = 0.0f;
    npl_status st = npl_bind_f32(b, key, required, 0.0f, &v);
    if (st)
        return st;
    if (v == 0.0f && !required)
        return NPL_OK;
    if (!(fabsf(v) > 1e-12f && fabsf(v) < 1e12f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s.%s = %g is out of range", b->path, b->arch, key,
                             (double)v);
    *out = v;
    return NPL_OK;
}

npl_status npl_granite_read_extra(npl_binder *b)
{
    npl_model *m = b->m;
    npl_status st;
    float logit_scale = 1.0f;
    if ((st = npl_llama_read_extra(b)) || (st = bind_multiplier(b, "logit_scale", true, &logit_scale)) ||
        (st = bind_multiplier(b, "residual_scale", false, &m->residual_scale)) ||
        (st = bind_multiplier(b, "embedding_scale", false, &m->embd_scale)) ||
        (st = bind_multiplier(b, "attention.scale", false, &m->attn_scale)))
        return st;
    m->logit_scale = 1.0f / logit_scale;
    m->npu_refusal = "granite's residual and logit multipliers";
    return NPL_OK;
}

npl_status npl_granite_finish(npl_binder *b)
{
    char k[128];
    bool rope = true;
    snprintf(k, sizeof k, "%s.rope.scaling.finetuned", b->arch);
    npl_gguf_get_bool(b->m->gguf, k, &rope);
    for (uint32_t l = 0; l < b->m->hp.n_layer; l++)
        b->m->layers[l].no_rope = !rope;
    return NPL_OK;
}
