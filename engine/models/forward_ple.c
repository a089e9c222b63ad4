/* gemma4's per-layer token inputs, as llama.cpp's gemma4 graph computes
 * them. Before the layers, for each row and layer l (pl = n_embd_per_layer):
 *
 *   in[l] = (RMSNorm(P x / sqrt(n_embd))[l] * proj_norm + E[token][l] * sqrt(pl)) / sqrt(2)
 *
 * where x is the first layer's input (scaled token embeddings, or image
 * rows as given), P per_layer_model_proj, E per_layer_token_embd (token 0's
 * row for image rows). At the end of layer l, once its FFN output is in the
 * residual stream x:
 *
 *   x += RMSNorm(proj (GELU(inp_gate x) * in[l])) * post_norm;  x *= out_scale
 *
 * Every row's arithmetic is its own: batching changes no bits. */
#include "forward_ple.h"

#include <math.h>
#include <stdlib.h>

#include "act_gelu.h"
#include "model_internal.h"

/* Floats of each region of fw.ple: the inputs [layer][row][pl]; the
 * projection (then the gates) per row; one token row per thread. */
static size_t inputs_floats(const npl_model *m)
{
    return m->fw.rows * m->hp.n_layer * m->hp.n_embd_per_layer;
}

npl_status npl_ple_ws_init(npl_model *m, size_t rows, npl_error *err)
{
    const npl_hparams *hp = &m->hp;
    if (!m->fold_layer_end || !hp->n_embd_per_layer)
        return NPL_OK;
    size_t all = (size_t)hp->n_layer * hp->n_embd_per_layer;
    size_t n_threads = (size_t)npl_threadpool_size(m->pool);
    m->fw.ple = malloc((2 * rows + n_threads) * all * sizeof(float));
    if (!m->fw.ple)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the per-layer inputs");
    return NPL_OK;
}

float npl_inv_rms(const float *x, size_t n, float eps)
{
    double ss = 0.0;
    for (size_t j = 0; j < n; j++)
        ss += (double)x[j] * (double)x[j];
    return 1.0f / sqrtf((float)(ss / (double)n) + eps);
}

typedef struct ple_ctx {
    npl_model *m;
    const int32_t *tokens;
    uint32_t layer;
    const float *norm_w;
    const float *delta; /* rows of n_embd added to x through norm_w */
} ple_ctx;

static void inputs_task(void *ctx, size_t begin, size_t end, int thread)
{
    ple_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_hparams *hp = &m->hp;
    size_t pl = hp->n_embd_per_layer, all = (size_t)hp->n_layer * pl;
    float *proj = m->fw.ple + inputs_floats(m);
    float *tok = proj + m->fw.rows * all + (size_t)thread * all;
    float proj_scale = 1.0f / sqrtf((float)hp->n_embd), tok_scale = sqrtf((float)pl);
    float in_scale = 1.0f / sqrtf(2.0f);
    for (size_t i = begin; i < end; i++) {
        npl_matrix_get_row(&m->ple_tok_embd, c->tokens ? c->tokens[i] : 0, tok);
        for (uint32_t l = 0; l < hp->n_layer; l++) {
            float *p = proj + i * all + l * pl;
            for (size_t j = 0; j < pl; j++)
                p[j] *= proj_scale;
            float s = npl_inv_rms(p, pl, hp->rms_eps);
            float *out = m->fw.ple + ((size_t)l * m->fw.rows + i) * pl;
            for (size_t j = 0; j < pl; j++)
                out[j] = ((p[j] * s) * m->ple_proj_norm[j] + tok[l * pl + j] * tok_scale) * in_scale;
        }
    }
}

void npl_ple_inputs(npl_model *m, const int32_t *tokens, size_t n)
{
    const npl_hparams *hp = &m->hp;
    if (!m->fw.ple)
        return;
    size_t all = (size_t)hp->n_layer * hp->n_embd_per_layer;
    npl_matmul_contig(m->pool, m->mm_ws, &m->ple_model_proj, m->fw.x, hp->n_embd, n, m->fw.ple + inputs_floats(m),
                      all);
    ple_ctx c = {.m = m, .tokens = tokens};
    npl_threadpool_run(m->pool, n, inputs_task, &c);
}

/* x += RMSNorm(delta) * norm_w, then (norm_w being the layer's last) x
 * times the layer's output scale when scale is set. */
static void add_normed_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    ple_ctx *c = ctx;
    size_t e = c->m->hp.n_embd;
    for (size_t i = begin; i < end; i++) {
        float *x = c->m->fw.x + i * e;
        const float *d = c->delta + i * e;
        float s = npl_inv_rms(d, e, c->m->hp.rms_eps);
        for (size_t j = 0; j < e; j++)
            x[j] += (d[j] * s) * c->norm_w[j];
    }
}

static void scale_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    ple_ctx *c = ctx;
    size_t e = c->m->hp.n_embd;
    float s = c->m->layers[c->layer].out_scale;
    for (size_t j = begin * e; j < end * e; j++)
        c->m->fw.x[j] *= s;
}

void npl_ple_layer_end(npl_model *m, uint32_t l, size_t n)
{
    const npl_hparams *hp = &m->hp;
    const npl_layer *L = &m->layers[l];
    npl_forward_ws *fw = &m->fw;
    ple_ctx c = {.m = m, .layer = l, .norm_w = L->post_ffn_norm, .delta = fw->xn};
    npl_threadpool_run(m->pool, n, add_normed_task, &c);
    if (fw->ple) {
        size_t pl = hp->n_embd_per_layer;
        float *g = fw->ple + inputs_floats(m);
        npl_matmul_contig(m->pool, m->mm_ws, &L->ple_gate, fw->x, hp->n_embd, n, g, pl);
        npl_act_gated_f32(m->simd, NPL_ACT_GELU_TANH, g, fw->ple + (size_t)l * fw->rows * pl, n * pl);
        npl_matmul_contig(m->pool, m->mm_ws, &L->ple_proj, g, pl, n, fw->xn, hp->n_embd);
        c.norm_w = L->ple_post_norm;
        npl_threadpool_run(m->pool, n, add_normed_task, &c);
    }
    if (L->out_scale != 1.0f)
        npl_threadpool_run(m->pool, n, scale_task, &c);
}
