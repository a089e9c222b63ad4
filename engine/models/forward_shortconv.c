/* A gated short-convolution layer (lfm2) over a step, as llama.cpp
 * computes it, in place of attention:
 *
 *   b, c, x = in_proj xn (three blocks of n_embd rows)
 *   y = c * conv(b * x)     causal depthwise convolution over time, width
 *                           l_cache, the last l_cache - 1 inputs (b * x) of
 *                           each channel kept in the sequence's state
 *   out = out_proj y
 *
 * Rows of one sequence go in order, sequences and channel blocks in
 * parallel; each token depends only on its own sequence's state, so
 * batching and chunking change no bits. */
#include "forward_shortconv.h"

#include <stdlib.h>

#include "causal_conv.h"
#include "model_internal.h"
#include "seq_state.h"

/* Channels per task. */
#define SHORTCONV_BLOCK 64u

npl_status npl_shortconv_ws_init(npl_model *m, size_t rows, npl_error *err)
{
    bool any = false;
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        any |= m->layers[l].shortconv;
    if (!any)
        return NPL_OK;
    m->shortconv_ws = malloc(rows * 3 * m->hp.n_embd * sizeof(float));
    if (!m->shortconv_ws)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the short-convolution buffers");
    return NPL_OK;
}

typedef struct conv_ctx {
    npl_model *m;
    uint32_t layer;
    size_t n, n_blocks;
} conv_ctx;

/* Task = (sequence's run of rows, block of channels); y goes where b was. */
static void conv_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    conv_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_layer *L = &m->layers[c->layer];
    size_t e = m->hp.n_embd, w = m->hp.ssm_d_conv;
    npl_seq *const *row_seq = m->fw.row_seq;
    for (size_t t = begin; t < end; t++) {
        size_t run = t / c->n_blocks, c0 = (t % c->n_blocks) * SHORTCONV_BLOCK;
        size_t c1 = c0 + SHORTCONV_BLOCK < e ? c0 + SHORTCONV_BLOCK : e;
        /* the run-th run: rows [i0, i1) of one sequence */
        size_t i0 = 0;
        for (size_t r = 0; r < run; r++)
            do
                i0++;
            while (i0 < c->n && row_seq[i0] == row_seq[i0 - 1]);
        float *tail = npl_seq_state_layer(row_seq[i0], c->layer);
        for (size_t i = i0; i < c->n && row_seq[i] == row_seq[i0]; i++) {
            float *bcx = m->shortconv_ws + i * 3 * e;
            for (size_t ch = c0; ch < c1; ch++)
                bcx[ch] = bcx[e + ch] * npl_causal_conv_step(tail + ch * (w - 1), L->ssm_conv + ch * w, w,
                                                             bcx[ch] * bcx[2 * e + ch]);
        }
    }
}

void npl_shortconv_layer(npl_model *m, uint32_t layer, size_t n)
{
    const npl_layer *L = &m->layers[layer];
    size_t e = m->hp.n_embd, runs = 0;
    for (size_t i = 0; i < n; i++)
        runs += i == 0 || m->fw.row_seq[i] != m->fw.row_seq[i - 1];
    npl_matmul_contig(m->pool, m->mm_ws, &L->w_mix, m->fw.xn, e, n, m->shortconv_ws, 3 * e);
    conv_ctx c = {.m = m, .layer = layer, .n = n, .n_blocks = (e + SHORTCONV_BLOCK - 1) / SHORTCONV_BLOCK};
    npl_threadpool_run(m->pool, runs * c.n_blocks, conv_task, &c);
    npl_matmul_contig(m->pool, m->mm_ws, &L->w_ssm_out, m->shortconv_ws, 3 * e, n, m->fw.xn, e);
}
