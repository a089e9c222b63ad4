/* Attention sinks (attn_sinks.h). */
#include "attn_sinks.h"

#include <math.h>

#include "attention_internal.h"

typedef struct sink_ctx {
    npl_model *m;
    uint32_t layer;
} sink_ctx;

/* log(sum exp(scale * q.k)) over the keys of positions [lo, hi] of one
 * KV head, online (running maximum), one key row converted at a time. */
static double key_logsumexp(const npl_model *m, const npl_seq *s, uint32_t layer, uint32_t g, const float *q,
                            uint32_t lo, uint32_t hi, float *krow)
{
    size_t hd = m->hp.head_dim;
    const uint8_t *k = s->k_cache + npl_kv_head_offset(s, layer, g);
    size_t first = npl_kv_row(s, layer, lo); /* a ring's window is contiguous from here */
    double mx = -INFINITY, sum = 0.0;
    for (uint32_t j = 0; j <= hi - lo; j++) {
        npl_kv_block_to_f32(m->kv_format, k, m->kv_row_bytes, first + j, 1, hd, krow);
        float dot = 0.0f;
        for (size_t d = 0; d < hd; d++)
            dot += q[d] * krow[d];
        double sc = (double)dot * m->attn_scale;
        if (sc > mx) {
            sum = sum * exp(mx - sc) + 1.0;
            mx = sc;
        } else {
            sum += exp(sc - mx);
        }
    }
    return mx + log(sum);
}

/* Task = (row, query head). */
static void sink_task(void *ctx, size_t begin, size_t end, int thread)
{
    sink_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_hparams *hp = &m->hp;
    const npl_layer *L = &m->layers[c->layer];
    npl_forward_ws *fw = &m->fw;
    size_t hd = hp->head_dim, qd = (size_t)hp->n_head * hd, group = hp->n_head / hp->n_head_kv;
    float *krow = fw->attn_scratch + (size_t)thread * fw->attn_scratch_per_thread;
    for (size_t t = begin; t < end; t++) {
        size_t i = t / hp->n_head;
        uint32_t h = (uint32_t)(t % hp->n_head);
        uint32_t pos = fw->row_pos[i];
        uint32_t lo = L->local && pos >= hp->n_swa ? pos - hp->n_swa + 1 : 0;
        double lse = key_logsumexp(m, fw->row_seq[i], c->layer, (uint32_t)(h / group), fw->q + i * qd + h * hd, lo,
                                   pos, krow);
        /* S / (S + e^sink) = 1 / (1 + e^(sink - log S)) */
        float f = (float)(1.0 / (1.0 + exp((double)L->attn_sinks[h] - lse)));
        float *out = fw->attn + i * qd + h * hd;
        for (size_t d = 0; d < hd; d++)
            out[d] *= f;
    }
}

void npl_attn_sinks_apply(npl_model *m, uint32_t layer, size_t n)
{
    sink_ctx c = {.m = m, .layer = layer};
    npl_threadpool_run(m->pool, n * m->hp.n_head, sink_task, &c);
}
