/* The mistral3 family's hook of the architecture table (engine/models/model_arch.c):
 * Ministral 3's text model, Llama's graph plus two position terms, as
 * llama.cpp computes them:
 *  - YaRN rope scaling (rope.scaling.type "yarn", .factor, .original_context_length,
 *    .yarn_beta_fast 32 / .yarn_beta_slow 1, .yarn_log_multiplier): each pair's
 *    angle blends the interpolated one (divided by the factor) and the
 *    original, by a ramp over the pairs between the two "correction"
 *    dimensions; cos and sin are multiplied by a magnitude that comes out
 *    at 1 + 0.1 ln(factor) without a log multiplier, and at
 *    (1 + 0.1 ln f) / (1 + 0.1 L ln f) with one (1 for Ministral's L = 1);
 *  - attention temperature (attention.temperature_scale beta): Q is
 *    multiplied after RoPE by 1 + beta * ln(1 + floor(pos / original length)),
 *    1 within the original context. */
#include <math.h>
#include <stdio.h>

#include "model_arch.h"

#define YARN_BETA_FAST 32.0f
#define YARN_BETA_SLOW 1.0f

/* llama.cpp's magnitude of a YaRN factor for a given mscale. */
static double yarn_mscale(double factor, double mscale)
{
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

/* The pair index below which a rotation completes more than beta turns
 * over the original context, as ggml's correction dimension. */
static double corr_dim(uint32_t n_rot, uint32_t orig_ctx, float base, float beta)
{
    return n_rot * log((double)orig_ctx / (beta * 2.0 * M_PI)) / (2.0 * log((double)base));
}

npl_status npl_read_yarn(npl_binder *b, uint32_t orig_ctx)
{
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    npl_status st;
    float factor = 0.0f, fast = YARN_BETA_FAST, slow = YARN_BETA_SLOW, log_mul = 0.0f;
    if ((st = npl_bind_f32(b, "rope.scaling.factor", true, 0.0f, &factor)) ||
        (st = npl_bind_f32(b, "rope.scaling.yarn_beta_fast", false, YARN_BETA_FAST, &fast)) ||
        (st = npl_bind_f32(b, "rope.scaling.yarn_beta_slow", false, YARN_BETA_SLOW, &slow)) ||
        (st = npl_bind_f32(b, "rope.scaling.yarn_log_multiplier", false, 0.0f, &log_mul)))
        return st;
    if (!(factor >= 1.0f && factor < 1e6f) || !(fast > 0.0f && fast < 1e6f) || !(slow > 0.0f && slow < 1e6f) ||
        !(log_mul >= 0.0f && log_mul < 1e3f))
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: YaRN parameters out of range (factor %g, beta_fast %g, beta_slow %g, log multiplier %g)",
                             b->path, (double)factor, (double)fast, (double)slow, (double)log_mul);
    hp->rope_scale = 1.0f / factor;
    double lo = floor(corr_dim(hp->n_rot, orig_ctx, hp->rope_base, fast));
    double hi = ceil(corr_dim(hp->n_rot, orig_ctx, hp->rope_base, slow));
    m->yarn_lo = (float)(lo > 0.0 ? lo : 0.0);
    m->yarn_hi = (float)(hi < hp->n_rot - 1.0 ? hi : hp->n_rot - 1.0);
    m->yarn = true;
    m->rope_mscale = (float)(log_mul != 0.0f ? yarn_mscale(factor, 1.0) / yarn_mscale(factor, log_mul)
                                             : yarn_mscale(factor, 1.0));
    return NPL_OK;
}

npl_status npl_mistral3_read_extra(npl_binder *b)
{
    npl_model *m = b->m;
    npl_status st;
    uint32_t n_expert = 0, orig_ctx = 0;
    float temp = 0.0f;
    npl_str scaling = {"none", 4};
    bool found;
    if ((st = npl_bind_u32(b, "expert_count", false, 0, 0, UINT32_MAX, &n_expert)) ||
        (st = npl_bind_str(b, "rope.scaling.type", &scaling, &found)) ||
        (st = npl_bind_u32(b, "rope.scaling.original_context_length", false, m->hp.n_ctx_train, 1, NPL_MAX_CTX,
                           &orig_ctx)) ||
        (st = npl_bind_f32(b, "attention.temperature_scale", false, 0.0f, &temp)))
        return st;
    if (n_expert > 0)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: mixture-of-experts mistral3 models are not supported",
                             b->path);
    if (!(temp >= 0.0f && temp < 100.0f))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: mistral3.attention.temperature_scale = %g is out of range",
                             b->path, (double)temp);
    m->attn_temp_scale = temp;
    m->attn_temp_length = orig_ctx;
    if (npl_str_eq(scaling, "yarn"))
        return npl_read_yarn(b, orig_ctx);
    if (!npl_str_eq(scaling, "none"))
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: rope scaling type '%.*s' is not supported", b->path,
                             (int)(scaling.len > 64 ? 64 : scaling.len), scaling.ptr);
    return NPL_OK;
}
