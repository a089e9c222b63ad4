/* Gemma 4's expert layers (26B-A4B), as llama.cpp's gemma4 graph computes
 * them: beside the dense FFN of the layer (its input ffn_norm(x), x the
 * residual stream after attention), the experts of moe.c take
 *
 *   router input  RMSNorm(x) / sqrt(n_embd) * ffn_gate_inp.scale
 *   expert input  RMSNorm(x) * pre_ffw_norm_2
 *
 * softmax over all experts, top-k, the k weights divided by their sum,
 * GeGLU experts whose outputs are times ffn_down_exps.scale[expert]; the
 * FFN output is then
 *
 *   RMSNorm(dense) * post_ffw_norm_1 + RMSNorm(experts) * post_ffw_norm_2
 *
 * which the layer's end takes through post_ffw_norm as in the dense
 * layers (forward_ple.c). */
#include <math.h>
#include <stdio.h>

#include "forward_ple.h"
#include "moe.h"

npl_status npl_moe_bind_beside_dense(const npl_binder *b, uint32_t l)
{
    npl_moe_layer *ML = &b->m->moe->layers[l];
    uint32_t e = b->m->hp.n_embd, n_expert = b->m->moe->cfg.n_expert;
    char n[4][96];
    const char *suffix[4] = {"ffn_gate_inp.scale", "pre_ffw_norm_2.weight", "post_ffw_norm_1.weight",
                             "post_ffw_norm_2.weight"};
    const float **out[4] = {&ML->router_in_scale, &ML->pre_norm, &ML->dense_post_norm, &ML->post_norm};
    npl_status st;
    for (int i = 0; i < 4; i++) {
        snprintf(n[i], sizeof n[i], "blk.%u.%s", l, suffix[i]);
        if ((st = npl_bind_vector(b, n[i], e, "n_embd", out[i])))
            return st;
    }
    snprintf(n[0], sizeof n[0], "blk.%u.ffn_down_exps.scale", l);
    if (npl_gguf_find_tensor(b->m->gguf, n[0]) &&
        (st = npl_bind_vector(b, n[0], n_expert, "expert_count", &ML->down_s)))
        return st;
    return NPL_OK;
}

typedef struct dense_ctx {
    npl_model *m;
    const npl_moe_layer *L;
} dense_ctx;

/* Per row of the residual stream: the router's and the experts' inputs. */
static void inputs_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    dense_ctx *c = ctx;
    npl_moe *mo = c->m->moe;
    size_t e = c->m->hp.n_embd;
    float root = 1.0f / sqrtf((float)e);
    for (size_t i = begin; i < end; i++) {
        const float *x = c->m->fw.x + i * e;
        float *xr = mo->xr + i * e, *xe = mo->xe + i * e;
        float s = npl_inv_rms(x, e, c->m->hp.rms_eps);
        for (size_t j = 0; j < e; j++) {
            float v = x[j] * s;
            xr[j] = (v * root) * c->L->router_in_scale[j];
            xe[j] = v * c->L->pre_norm[j];
        }
    }
}

/* Per row: xn = RMSNorm(xn) * dense_post_norm + RMSNorm(experts) * post_norm. */
static void combine_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    dense_ctx *c = ctx;
    size_t e = c->m->hp.n_embd;
    float eps = c->m->hp.rms_eps;
    for (size_t i = begin; i < end; i++) {
        float *d = c->m->fw.xn + i * e;
        const float *y = c->m->moe->xe + i * e;
        float sd = npl_inv_rms(d, e, eps), sy = npl_inv_rms(y, e, eps);
        for (size_t j = 0; j < e; j++)
            d[j] = (d[j] * sd) * c->L->dense_post_norm[j] + (y[j] * sy) * c->L->post_norm[j];
    }
}

void npl_moe_beside_dense(npl_model *m, uint32_t l, size_t n)
{
    npl_moe *mo = m->moe;
    dense_ctx c = {.m = m, .L = m->layers[l].moe};
    npl_threadpool_run(m->pool, n, inputs_task, &c);
    npl_moe_ffn_rows(m, l, n, mo->xe, mo->xr, mo->xe);
    npl_threadpool_run(m->pool, n, combine_task, &c);
}
