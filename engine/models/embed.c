/* npl_embed: texts to vectors with an encoder (docs/embeddings.md).
 *
 * The texts' tokens are packed into forward passes of up to
 * PASS_TOKENS rows (more when one text is longer), each text a run of
 * consecutive rows at positions 0..len-1 that attends only to its own run:
 * no padding, and a row's result does not depend on the other texts.
 *
 *   x = LayerNorm(tok_embd[id] + pos_embd[pos] + type_embd[0])
 *   per layer (post-norm):
 *     q, k, v = Wq x + bq, Wk x + bk, Wv x + bv
 *     a = softmax(q k^T / sqrt(head_dim)) v       over the text's rows
 *     x = LayerNorm(x + Wo a + bo)
 *     x = LayerNorm(x + Wdown GELU(Wup x + bup) + bdown)
 *   vector = pool(x over the text's rows), cut to `dimensions`, L2-normalised
 *
 * nomic-bert: no pos_embd, NEOX RoPE on q and k at the row's position
 * instead, no projection biases but the output's (when present), and the
 * FFN is Wdown (SiLU(Wgate x) * Wup x). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "act_gelu.h"
#include "embed_internal.h"
#include "model_arch.h"
#include "model_internal.h"

/* Rows per forward pass: enough to fill the matrix kernels, small enough
 * to keep the scratch (about 12 n_embd floats per row) modest. */
#define PASS_TOKENS 2048u

static const npl_embed_options default_options = {.dimensions = 0, .truncate = true, .normalize = true};

void npl_embed_options_default(npl_embed_options *o)
{
    *o = default_options;
}

npl_embed_info *npl_embed_info_start(npl_embed_info *info, npl_embed_info *local)
{
    if (!info)
        info = local;
    memset(info, 0, sizeof *info);
    return info;
}

bool npl_model_is_embedding(const npl_model *m)
{
    return m && m->arch && (m->arch->encoder || m->enc.decoder);
}

uint32_t npl_model_embedding_dim(const npl_model *m)
{
    return npl_model_is_embedding(m) ? m->hp.n_embd : 0;
}

const char *npl_model_pooling_name(const npl_model *m)
{
    if (!npl_model_is_embedding(m))
        return NULL;
    switch (m->enc.pooling) {
    case NPL_POOLING_CLS:
        return "cls";
    case NPL_POOLING_LAST:
        return "last";
    case NPL_POOLING_RANK:
        return "rank";
    default:
        return "mean";
    }
}

/* One forward pass: rows [0, n_rows) of texts [0, n_seqs), text s at rows
 * [start[s], start[s + 1]). */
typedef struct pass {
    npl_model *m;
    const int32_t *tokens;
    const size_t *start;
    const uint32_t *row_seq; /* text of each row */
    size_t n_rows, n_seqs, max_len;
    float *x, *t, *q, *k, *v, *a, *up; /* rows * (n_embd | n_ff) */
    float *gate;                       /* rows * n_ff, gated FFNs only */
    float *rope;                       /* rows * n_rot: cos, sin per pair; RoPE models only */
    float *scores;                     /* n_threads * max_len */
    const float *bias, *norm_w, *norm_b; /* add_norm_task's arguments */
} pass;

/* y = (x - mean) / sqrt(var + eps) * w + b, statistics in double. */
static void layer_norm(float *x, size_t n, float eps, const float *w, const float *b)
{
    double sum = 0.0, sq = 0.0;
    for (size_t j = 0; j < n; j++)
        sum += x[j];
    double mean = sum / (double)n;
    for (size_t j = 0; j < n; j++) {
        double d = x[j] - mean;
        sq += d * d;
    }
    float inv = (float)(1.0 / sqrt(sq / (double)n + (double)eps));
    for (size_t j = 0; j < n; j++)
        x[j] = ((x[j] - (float)mean) * inv) * w[j] + b[j];
}

static void embed_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    pass *p = ctx;
    const npl_model *m = p->m;
    const npl_encoder *enc = &m->enc;
    size_t e = m->hp.n_embd, half = m->hp.n_rot / 2;
    float *row = p->t + begin * e; /* this slice's rows of scratch */
    for (size_t i = begin; i < end; i++, row += e) {
        float *x = p->x + i * e;
        uint32_t pos = (uint32_t)(i - p->start[p->row_seq[i]]);
        npl_matrix_get_row(&m->tok_embd, p->tokens[i], x);
        if (enc->type_embd.data) {
            npl_matrix_get_row(&enc->type_embd, 0, row);
            for (size_t j = 0; j < e; j++)
                x[j] += row[j];
        }
        if (enc->pos_embd.data) {
            npl_matrix_get_row(&enc->pos_embd, pos, row);
            for (size_t j = 0; j < e; j++)
                x[j] += row[j];
        }
        layer_norm(x, e, enc->norm_eps, enc->embd_norm, enc->embd_norm_b);
        for (size_t j = 0; enc->rope && j < half; j++) {
            double theta = (double)pos * m->rope_inv_freq[j];
            p->rope[i * 2 * half + 2 * j] = (float)cos(theta);
            p->rope[i * 2 * half + 2 * j + 1] = (float)sin(theta);
        }
    }
}

/* NEOX RoPE (pairs x[j], x[j + half]) of every head of q and k of a row. */
static void rope_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    pass *p = ctx;
    const npl_hparams *hp = &p->m->hp;
    size_t e = hp->n_embd, hd = hp->head_dim, half = hp->n_rot / 2;
    for (size_t i = begin; i < end; i++) {
        const float *cs = p->rope + i * 2 * half;
        for (size_t h = 0; h < 2 * (size_t)hp->n_head; h++) {
            float *v = (h < hp->n_head ? p->q : p->k) + i * e + (h % hp->n_head) * hd;
            for (size_t j = 0; j < half; j++) {
                float x0 = v[j], x1 = v[j + half];
                v[j] = x0 * cs[2 * j] - x1 * cs[2 * j + 1];
                v[j + half] = x0 * cs[2 * j + 1] + x1 * cs[2 * j];
            }
        }
    }
}

/* x = LayerNorm(x + t + bias). */
static void add_norm_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    pass *p = ctx;
    size_t e = p->m->hp.n_embd;
    for (size_t i = begin; i < end; i++) {
        float *x = p->x + i * e;
        const float *t = p->t + i * e;
        for (size_t j = 0; j < e; j++)
            x[j] += t[j] + (p->bias ? p->bias[j] : 0.0f);
        layer_norm(x, e, p->m->enc.norm_eps, p->norm_w, p->norm_b);
    }
}

/* Task r * n_head + h: head h of row r over the rows of its text. */
static void attention_task(void *ctx, size_t begin, size_t end, int thread)
{
    pass *p = ctx;
    const npl_hparams *hp = &p->m->hp;
    size_t e = hp->n_embd, hd = hp->head_dim;
    float scale = p->m->attn_scale;
    float *sc = p->scores + (size_t)thread * p->max_len;
    for (size_t task = begin; task < end; task++) {
        size_t r = task / hp->n_head, h = task % hp->n_head;
        size_t s0 = p->start[p->row_seq[r]], len = p->start[p->row_seq[r] + 1] - s0;
        const float *q = p->q + r * e + h * hd;
        float mx = -INFINITY;
        for (size_t j = 0; j < len; j++) {
            const float *k = p->k + (s0 + j) * e + h * hd;
            float d = 0.0f;
            for (size_t c = 0; c < hd; c++)
                d += q[c] * k[c];
            sc[j] = d * scale;
            if (sc[j] > mx)
                mx = sc[j];
        }
        float sum = 0.0f;
        for (size_t j = 0; j < len; j++) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
        float *o = p->a + r * e + h * hd;
        memset(o, 0, hd * sizeof *o);
        for (size_t j = 0; j < len; j++) {
            const float *v = p->v + (s0 + j) * e + h * hd;
            float w = sc[j] / sum;
            for (size_t c = 0; c < hd; c++)
                o[c] += w * v[c];
        }
    }
}

/* up = GELU(up + b_up), or with a gate gate = SiLU(gate) * up; one row
 * per task. */
static void ffn_act_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    pass *p = ctx;
    size_t f = p->m->hp.n_ff;
    for (size_t i = begin; i < end; i++) {
        if (p->gate)
            npl_act_gated_f32(p->m->simd, NPL_ACT_SILU, p->gate + i * f, p->up + i * f, f);
        else
            npl_act_bias_f32(p->m->simd, NPL_ACT_GELU_TANH, p->up + i * f, p->bias, f);
    }
}

/* y[rows] = W x[rows] (+ bias when given), in runs of the matrix
 * workspace's batch size. */
static void project(pass *p, const npl_matrix *w, const float *x, size_t x_dim, float *y, const float *bias)
{
    npl_model *m = p->m;
    size_t out = (size_t)w->n_rows, batch = m->fw.rows;
    for (size_t r = 0; r < p->n_rows; r += batch) {
        size_t n = p->n_rows - r < batch ? p->n_rows - r : batch;
        npl_matmul_contig(m->pool, m->mm_ws, w, x + r * x_dim, x_dim, n, y + r * out, out);
    }
    if (bias)
        for (size_t r = 0; r < p->n_rows; r++)
            for (size_t j = 0; j < out; j++)
                y[r * out + j] += bias[j];
}

static void run_pass(pass *p)
{
    npl_model *m = p->m;
    const npl_hparams *hp = &m->hp;
    size_t e = hp->n_embd;
    npl_threadpool_run(m->pool, p->n_rows, embed_task, p);
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const npl_layer *L = &m->layers[l];
        project(p, &L->wq, p->x, e, p->q, L->bq);
        project(p, &L->wk, p->x, e, p->k, L->bk);
        project(p, &L->wv, p->x, e, p->v, L->bv);
        if (m->enc.rope)
            npl_threadpool_run(m->pool, p->n_rows, rope_task, p);
        npl_threadpool_run(m->pool, p->n_rows * hp->n_head, attention_task, p);
        project(p, &L->wo, p->a, e, p->t, NULL);
        p->bias = L->bo, p->norm_w = L->attn_out_norm, p->norm_b = L->attn_out_norm_b;
        npl_threadpool_run(m->pool, p->n_rows, add_norm_task, p);
        project(p, &L->w_up, p->x, e, p->up, NULL);
        if (p->gate)
            project(p, &L->w_gate, p->x, e, p->gate, NULL);
        p->bias = L->b_up;
        npl_threadpool_run(m->pool, p->n_rows, ffn_act_task, p);
        project(p, &L->w_down, p->gate ? p->gate : p->up, hp->n_ff, p->t, NULL);
        p->bias = L->b_down, p->norm_w = L->out_norm, p->norm_b = L->out_norm_b;
        npl_threadpool_run(m->pool, p->n_rows, add_norm_task, p);
    }
}

/* The first dim values of a vector as they are or L2-normalised. */
static void finish_vector(float *out, uint32_t dim, bool normalize)
{
    if (!normalize)
        return;
    double sq = 0.0;
    for (size_t j = 0; j < dim; j++)
        sq += (double)out[j] * out[j];
    float inv = sq > 0.0 ? (float)(1.0 / sqrt(sq)) : 0.0f;
    for (size_t j = 0; j < dim; j++)
        out[j] *= inv;
}

/* Text s's full vector from its rows, pooled (rank: the first row, for
 * the classification head). */
static void pool_text(const pass *p, size_t s, float *out)
{
    const npl_model *m = p->m;
    size_t e = m->hp.n_embd, a = p->start[s], len = p->start[s + 1] - a;
    if (m->enc.pooling == NPL_POOLING_MEAN) {
        for (size_t j = 0; j < e; j++) {
            double sum = 0.0;
            for (size_t r = a; r < a + len; r++)
                sum += p->x[r * e + j];
            out[j] = (float)(sum / (double)len);
        }
    } else {
        size_t r = m->enc.pooling == NPL_POOLING_LAST ? a + len - 1 : a;
        memcpy(out, p->x + r * e, e * sizeof *out);
    }
}

/* Pooled full vectors (encoder or decoder), then each cut and normalised. */
static npl_status embed_pooled(npl_model *m, const npl_tokens *all, const size_t *starts, size_t n,
                               const npl_embed_options *o, uint32_t dim, float *out, npl_embed_info *info,
                               npl_error *err)
{
    size_t e = m->hp.n_embd;
    float *pooled = malloc(n * e * sizeof *pooled);
    if (!pooled)
        return npl_error_set(err, NPL_ERR_NOMEM, "embed: out of memory for %zu vectors", n);
    npl_status st = m->enc.decoder ? npl_embed_decoder(m, all->ids, starts, n, pooled, &info->n_passes, err)
                                   : npl_encoder_pool(m, all->ids, starts, n, pooled, &info->n_passes, err);
    for (size_t i = 0; !st && i < n; i++) {
        memcpy(out + i * dim, pooled + i * e, dim * sizeof *out);
        finish_vector(out + i * dim, dim, o->normalize);
    }
    free(pooled);
    return st;
}

/* Every text's tokens, one after the other, at starts[i]..starts[i+1]. */
static npl_status tokenize_all(npl_model *m, const char *const *texts, const size_t *lens, size_t n,
                               const npl_embed_options *o, npl_tokens *all, size_t *starts, npl_embed_info *info,
                               npl_error *err)
{
    uint32_t ctx = m->hp.n_ctx_train;
    int32_t sep = npl_tokenizer_end(m->tok); /* [SEP], or Qwen3-Embedding's EOS */
    for (size_t i = 0; i < n; i++) {
        if (!texts[i])
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "embed: text %zu is NULL", i);
        size_t len = lens ? lens[i] : strnlen(texts[i], (size_t)NPL_EMBED_MAX_TEXT_BYTES + 1);
        if (len > NPL_EMBED_MAX_TEXT_BYTES)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "embed: text %zu is longer than %u bytes", i,
                                 NPL_EMBED_MAX_TEXT_BYTES);
        starts[i] = all->n;
        npl_status st = npl_tokenize(m->tok, texts[i], len, NPL_TOKENIZE_ADD_BOS, all, err);
        if (st)
            return st;
        size_t nt = all->n - starts[i];
        if (nt == 0)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "embed: text %zu has no tokens", i);
        if (nt > ctx) {
            if (!o->truncate)
                return npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                                     "embed: text %zu has %zu tokens, more than the model's context of %u", i, nt,
                                     ctx);
            all->n = starts[i] + ctx;
            if (sep >= 0) /* the text still ends as the model was trained */
                all->ids[all->n - 1] = sep;
            info->n_truncated++;
        }
    }
    starts[n] = all->n;
    return NPL_OK;
}

static npl_status check_args(const npl_model *m, const char *const *texts, size_t n, const npl_embed_options *o,
                             const float *out, npl_error *err)
{
    if (!m || !out || (!texts && n))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "embed: NULL argument");
    if (!npl_model_is_embedding(m))
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "%s is not an embedding model (architecture %s generates text)", m->name,
                             m->architecture);
    if (npl_model_is_reranker(m))
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "%s is a reranker (pooling rank): it scores query and document pairs, it does not embed",
                             m->name);
    if (n == 0 || n > NPL_EMBED_MAX_TEXTS)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "embed: %zu texts (from 1 to %u)", n, NPL_EMBED_MAX_TEXTS);
    if (o->dimensions > m->hp.n_embd)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "embed: %u dimensions asked, the model has %u",
                             o->dimensions, m->hp.n_embd);
    return NPL_OK;
}

static npl_status pass_alloc(pass *p, size_t rows, size_t max_len, npl_error *err)
{
    const npl_hparams *hp = &p->m->hp;
    size_t e = hp->n_embd;
    p->x = malloc(rows * e * sizeof(float));
    p->t = malloc(rows * e * sizeof(float));
    p->q = malloc(rows * e * sizeof(float));
    p->k = malloc(rows * e * sizeof(float));
    p->v = malloc(rows * e * sizeof(float));
    p->a = malloc(rows * e * sizeof(float));
    p->up = malloc(rows * hp->n_ff * sizeof(float));
    p->scores = malloc((size_t)npl_threadpool_size(p->m->pool) * max_len * sizeof(float));
    p->row_seq = malloc(rows * sizeof *p->row_seq);
    bool gated = p->m->layers[0].w_gate.data != NULL, rope = p->m->enc.rope;
    if (gated)
        p->gate = malloc(rows * hp->n_ff * sizeof(float));
    if (rope)
        p->rope = malloc(rows * hp->n_rot * sizeof(float));
    if (!p->x || !p->t || !p->q || !p->k || !p->v || !p->a || !p->up || !p->scores || !p->row_seq ||
        (gated && !p->gate) || (rope && !p->rope))
        return npl_error_set(err, NPL_ERR_NOMEM, "embed: out of memory for a pass of %zu tokens", rows);
    return NPL_OK;
}

static void pass_free(pass *p)
{
    free(p->x), free(p->t), free(p->q), free(p->k), free(p->v), free(p->a), free(p->up), free(p->scores);
    free(p->gate), free(p->rope);
    free((void *)p->row_seq);
}

npl_status npl_encoder_pool(npl_model *m, const int32_t *ids, const size_t *starts, size_t n, float *pooled,
                            size_t *n_passes, npl_error *err)
{
    size_t max_len = 0, n_rows = starts[n] - starts[0];
    for (size_t i = 0; i < n; i++)
        if (starts[i + 1] - starts[i] > max_len)
            max_len = starts[i + 1] - starts[i];
    size_t cap = max_len > PASS_TOKENS ? max_len : PASS_TOKENS;
    if (cap > n_rows)
        cap = n_rows;
    pass p = {.m = m};
    size_t *rel = malloc((n + 1) * sizeof *rel);
    npl_status st = rel ? pass_alloc(&p, cap, max_len, err)
                        : npl_error_set(err, NPL_ERR_NOMEM, "embed: out of memory for %zu texts", n);
    /* Whole texts into each pass, in order, up to cap rows. */
    for (size_t first = 0; !st && first < n;) {
        size_t last = first + 1;
        while (last < n && starts[last + 1] - starts[first] <= cap)
            last++;
        uint32_t *row_seq = (uint32_t *)p.row_seq;
        for (size_t s = first; s < last; s++)
            for (size_t r = starts[s]; r < starts[s + 1]; r++)
                row_seq[r - starts[first]] = (uint32_t)(s - first);
        for (size_t s = first; s <= last; s++)
            rel[s - first] = starts[s] - starts[first];
        p.tokens = ids + starts[first];
        p.start = rel;
        p.n_seqs = last - first;
        p.n_rows = rel[p.n_seqs];
        p.max_len = max_len;
        run_pass(&p);
        for (size_t s = 0; s < p.n_seqs; s++)
            pool_text(&p, s, pooled + (first + s) * m->hp.n_embd);
        (*n_passes)++;
        first = last;
    }
    pass_free(&p);
    free(rel);
    return st;
}

npl_status npl_embed(npl_model *m, const char *const *texts, const size_t *lens, size_t n,
                     const npl_embed_options *opts, float *out, npl_embed_info *info, npl_error *err)
{
    if (!opts)
        opts = &default_options;
    npl_embed_info local;
    info = npl_embed_info_start(info, &local);
    npl_status st = check_args(m, texts, n, opts, out, err);
    if (st)
        return st;
    uint32_t dim = opts->dimensions ? opts->dimensions : m->hp.n_embd;

    npl_tokens all = {0};
    size_t *starts = malloc((n + 1) * sizeof *starts);
    if (!starts)
        return npl_error_set(err, NPL_ERR_NOMEM, "embed: out of memory for %zu texts", n);
    if (!(st = tokenize_all(m, texts, lens, n, opts, &all, starts, info, err))) {
        info->n_tokens = all.n;
        st = embed_pooled(m, &all, starts, n, opts, dim, out, info, err);
    }
    free(starts);
    npl_tokens_free(&all);
    return st;
}
