/* A Gated DeltaNet layer (qwen35) over a step, as llama.cpp computes it,
 * in place of attention: its input is fw.xn (the normed residual), its
 * output goes to fw.xn like attention's output projection.
 *
 *   mix = W_mix xn (q, k, v channels), z = W_z xn, b = W_beta xn, a = W_alpha xn
 *   causal depthwise convolution of mix over time (width d_conv, the last
 *     d_conv - 1 inputs of each channel kept in the sequence's state), SiLU
 *   q, k L2-normalised per head (value head h reads key head h % n_k)
 *   decay = exp(softplus(a + dt_bias) * A), beta = sigmoid(b)
 *   the delta rule per value head (kernels/cpu/deltanet.h), its state in
 *     the sequence's state
 *   out = RMSNorm(o) * ssm_norm * silu(z) per head, then W_ssm_out
 *
 * A step's rows are runs of one sequence at consecutive positions (a
 * prefill chunk is one run, a batched decode one run per sequence); within a
 * run the tokens go in order, runs and heads in parallel. Every token's
 * arithmetic depends only on its own sequence's state, so results do not
 * depend on batching or on where a prompt was cut into chunks. */
#include "forward_dnet.h"

#include <math.h>
#include <stdlib.h>

#include "causal_conv.h"
#include "deltanet.h"
#include "model_internal.h"
#include "seq_state.h"

struct npl_dnet_ws {
    float *mix;   /* rows * channels: projections, then convolved in place */
    float *z;     /* rows * value_dim */
    float *beta;  /* rows * n_v */
    float *alpha; /* rows * n_v */
    float *out;   /* rows * value_dim */
    size_t *run;  /* rows + 1 run starts */
};

typedef struct dnet_ctx {
    npl_model *m;
    uint32_t layer;
    size_t n_runs;
} dnet_ctx;

static size_t channels(const npl_hparams *hp)
{
    return (size_t)hp->ssm_d_state * (2 * hp->ssm_n_k + hp->ssm_n_v);
}

static size_t value_dim(const npl_hparams *hp)
{
    return (size_t)hp->ssm_d_state * hp->ssm_n_v;
}

npl_status npl_dnet_ws_init(npl_model *m, size_t rows, npl_error *err)
{
    const npl_hparams *hp = &m->hp;
    if (!m->state_floats)
        return NPL_OK;
    npl_dnet_ws *w = m->dnet = calloc(1, sizeof *w);
    if (!w)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the DeltaNet buffers");
    w->mix = malloc(rows * channels(hp) * sizeof(float));
    w->z = malloc(rows * value_dim(hp) * sizeof(float));
    w->beta = malloc(rows * hp->ssm_n_v * sizeof(float));
    w->alpha = malloc(rows * hp->ssm_n_v * sizeof(float));
    w->out = malloc(rows * value_dim(hp) * sizeof(float));
    w->run = malloc((rows + 1) * sizeof *w->run);
    if (!w->mix || !w->z || !w->beta || !w->alpha || !w->out || !w->run)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the DeltaNet buffers");
    return NPL_OK;
}

void npl_dnet_ws_free(npl_model *m)
{
    npl_dnet_ws *w = m->dnet;
    if (!w)
        return;
    free(w->mix);
    free(w->z);
    free(w->beta);
    free(w->alpha);
    free(w->out);
    free(w->run);
    free(w);
    m->dnet = NULL;
}

static float silu(float x)
{
    return x / (1.0f + expf(-x));
}

/* x scaled to unit L2 norm (at most 1 / eps); the sum in double as
 * llama.cpp's l2_norm takes it. */
static void l2_normalize(float *x, size_t n, float eps)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++)
        ss += (double)x[i] * (double)x[i];
    float scale = 1.0f / fmaxf(sqrtf((float)ss), eps);
    for (size_t i = 0; i < n; i++)
        x[i] *= scale;
}

/* Task = (run, segment of d_state channels: a q, k or v head): the
 * causal convolution and SiLU of the run's rows in order, sliding the
 * segment's tail in the sequence's state; q and k heads then normalised. */
static void conv_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    dnet_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_hparams *hp = &m->hp;
    const npl_layer *L = &m->layers[c->layer];
    npl_dnet_ws *w = m->dnet;
    size_t ch = channels(hp), dk = hp->ssm_d_state, dc = hp->ssm_d_conv, n_seg = ch / dk;
    for (size_t t = begin; t < end; t++) {
        size_t r = t / n_seg, seg = t % n_seg;
        npl_seq *s = m->fw.row_seq[w->run[r]];
        float *tail = npl_seq_state_layer(s, c->layer) + seg * dk * (dc - 1);
        for (size_t i = w->run[r]; i < w->run[r + 1]; i++) {
            float *x = w->mix + i * ch + seg * dk;
            for (size_t j = 0; j < dk; j++) {
                x[j] = silu(npl_causal_conv_step(tail + j * (dc - 1), L->ssm_conv + (seg * dk + j) * dc, dc, x[j]));
            }
            if (seg < 2 * hp->ssm_n_k)
                l2_normalize(x, dk, hp->rms_eps);
        }
    }
}

static float softplus(float x)
{
    return x > 20.0f ? x : logf(1.0f + expf(x));
}

/* Task = (run, value head): the delta rule over the run's rows in order,
 * then the gated RMS norm of each output. */
static void recurrence_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    dnet_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_hparams *hp = &m->hp;
    const npl_layer *L = &m->layers[c->layer];
    npl_dnet_ws *w = m->dnet;
    size_t ch = channels(hp), dk = hp->ssm_d_state, nv = hp->ssm_n_v, nk = hp->ssm_n_k, vd = value_dim(hp);
    float scale = 1.0f / sqrtf((float)dk);
    for (size_t t = begin; t < end; t++) {
        size_t r = t / nv, h = t % nv, kh = h % nk;
        npl_seq *s = m->fw.row_seq[w->run[r]];
        float *S = npl_seq_state_layer(s, c->layer) + L->state_conv + h * dk * dk;
        for (size_t i = w->run[r]; i < w->run[r + 1]; i++) {
            const float *x = w->mix + i * ch;
            float g = softplus(w->alpha[i * nv + h] + L->ssm_dt_bias[h]) * L->ssm_a[h];
            float beta = 1.0f / (1.0f + expf(-w->beta[i * nv + h]));
            float *o = w->out + i * vd + h * dk;
            npl_deltanet_step(m->simd, S, x + kh * dk, x + (nk + kh) * dk, x + 2 * nk * dk + h * dk, expf(g), beta, scale,
                              dk, dk, o);
            double ss = 0.0;
            for (size_t j = 0; j < dk; j++)
                ss += (double)o[j] * (double)o[j];
            float rs = 1.0f / sqrtf((float)(ss / (double)dk) + hp->rms_eps);
            const float *z = w->z + i * vd + h * dk;
            for (size_t j = 0; j < dk; j++)
                o[j] = (o[j] * rs) * L->ssm_norm[j] * silu(z[j]);
        }
    }
}

/* The step's rows as runs of one sequence; returns their count. */
static size_t find_runs(npl_model *m, size_t n)
{
    size_t *run = m->dnet->run, nr = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || m->fw.row_seq[i] != m->fw.row_seq[i - 1])
            run[nr++] = i;
    run[nr] = n;
    return nr;
}

void npl_dnet_layer(npl_model *m, uint32_t layer, size_t n)
{
    const npl_hparams *hp = &m->hp;
    const npl_layer *L = &m->layers[layer];
    npl_dnet_ws *w = m->dnet;
    npl_forward_ws *fw = &m->fw;
    {
        const npl_matrix *mats[4] = {&L->w_mix, &L->w_z, &L->w_beta, &L->w_alpha};
        float *out[4] = {w->mix, w->z, w->beta, w->alpha};
        size_t stride[4] = {channels(hp), value_dim(hp), hp->ssm_n_v, hp->ssm_n_v};
        npl_matmul_multi(m->pool, m->mm_ws, 4, mats, fw->xn, hp->n_embd, n, out, stride);
    }
    dnet_ctx c = {.m = m, .layer = layer, .n_runs = find_runs(m, n)};
    npl_threadpool_run(m->pool, c.n_runs * (channels(hp) / hp->ssm_d_state), conv_task, &c);
    npl_threadpool_run(m->pool, c.n_runs * hp->ssm_n_v, recurrence_task, &c);
    npl_matmul_contig(m->pool, m->mm_ws, &L->w_ssm_out, w->out, value_dim(hp), n, fw->xn, hp->n_embd);
}
