/* The forward pass of a llama-style decoder over a "step": a set of rows,
 * each one token of some sequence at some position. A prefill chunk is a
 * step whose rows all belong to one sequence; a batched decode is a step
 * with one row per sequence. Both run the same code, and every row's
 * arithmetic is independent of the other rows, so a token's logits do not
 * depend on how it was batched or chunked.
 *
 * Per layer: RMSNorm -> Q, K, V projections -> RoPE -> K, V appended to
 * each row's cache -> attention over that row's cache (online softmax) ->
 * output projection + residual -> RMSNorm -> SwiGLU FFN + residual. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "act_gelu.h"
#include "attention.h"
#include "attention_tiled.h"
#include "backend.h"
#include "forward_dnet.h"
#include "forward_ple.h"
#include "forward_shortconv.h"
#include "model_internal.h"
#include "moe.h"
#include "seq_state.h"

static size_t q_dim(const npl_hparams *hp)
{
    return (size_t)hp->n_head * hp->head_dim;
}

static size_t kv_dim(const npl_hparams *hp)
{
    return (size_t)hp->n_head_kv * hp->head_dim;
}

/* The most query heads per KV head of any layer (gemma4 31B's layers
 * have their own KV head counts): the attention scratch is sized for it. */
static size_t max_group(const npl_model *m)
{
    uint32_t kv = m->hp.n_head_kv;
    for (uint32_t l = 0; l < m->hp.n_layer; l++)
        kv = m->layers[l].n_head_kv < kv ? m->layers[l].n_head_kv : kv;
    return m->hp.n_head / kv;
}

/* Query positions per block of the tiled attention: about 256 query rows
 * (16 tiles) share each converted block of keys and values (a kernel
 * microbenchmark: 25 GMAC/s at one tile, 56 at 4, 87 at 16). */
static size_t attn_block_positions(const npl_model *m)
{
    size_t group = max_group(m);
    return group >= 256 ? 1 : 256 / group;
}

npl_status npl_forward_ws_init(npl_model *m, npl_error *err)
{
    const npl_hparams *hp = &m->hp;
    npl_forward_ws *fw = &m->fw;
    /* A bidirectional block (an image) goes in one step: the working rows
     * hold the largest one the model was loaded for. */
    size_t rows = m->block_rows > m->prefill_chunk ? m->block_rows : m->prefill_chunk;
    int n_threads = npl_threadpool_size(m->pool);
    fw->rows = rows;

    fw->x = malloc(rows * hp->n_embd * sizeof(float));
    fw->xn = malloc(rows * hp->n_embd * sizeof(float));
    fw->q = malloc(rows * q_dim(hp) * sizeof(float));
    fw->k = malloc(rows * kv_dim(hp) * sizeof(float));
    fw->v = malloc(rows * kv_dim(hp) * sizeof(float));
    fw->attn = malloc(rows * q_dim(hp) * sizeof(float));
    fw->gate = malloc(rows * hp->n_ff * sizeof(float));
    fw->up = malloc(rows * hp->n_ff * sizeof(float));
    fw->rope = malloc(rows * hp->n_rot * sizeof(float));
    fw->rope_swa = m->rope_inv_freq_swa ? malloc(rows * hp->n_rot * sizeof(float)) : NULL;
    fw->attn_scratch_per_thread = npl_attention_scratch_floats(max_group(m), hp->head_dim);
    fw->attn_scratch = malloc((size_t)n_threads * fw->attn_scratch_per_thread * sizeof(float));
    bool tiled = true; /* for every layer's head size */
    for (uint32_t l = 0; l < hp->n_layer; l++)
        tiled &= npl_attention_tiled_available(m->simd, m->kv_format, m->layers[l].head_dim);
    if (tiled) {
        size_t block = attn_block_positions(m);
        fw->attn_tiled_scratch_per_thread =
            (2 * block * sizeof(uint32_t) + npl_attention_tiled_scratch_bytes(block, max_group(m), hp->head_dim) + 63) &
            ~(size_t)63;
        fw->attn_tiled_scratch = malloc((size_t)n_threads * fw->attn_tiled_scratch_per_thread);
        fw->attn_block = malloc((rows + 1) * sizeof *fw->attn_block);
        if (!fw->attn_tiled_scratch || !fw->attn_block)
            return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the attention's scratch");
    } else if (rows > 1) {
        size_t block = attn_block_positions(m);
        fw->attn_rows_scratch_per_thread = block + npl_attention_rows_scratch_floats(block, max_group(m), hp->head_dim);
        fw->attn_rows_scratch = malloc((size_t)n_threads * fw->attn_rows_scratch_per_thread * sizeof(float));
        fw->attn_block = malloc((rows + 1) * sizeof *fw->attn_block);
        if (!fw->attn_rows_scratch || !fw->attn_block)
            return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the attention's scratch");
    }
    bool gated = false;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        gated |= m->layers[l].attn_gate;
    if (gated) {
        fw->qg = malloc(rows * 2 * q_dim(hp) * sizeof(float));
        fw->attn_gate = malloc(rows * q_dim(hp) * sizeof(float));
        if (!fw->qg || !fw->attn_gate)
            return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the attention gates");
    }
    if (npl_dnet_ws_init(m, rows, err) || npl_shortconv_ws_init(m, rows, err) || npl_moe_ws_init(m, rows, err) ||
        npl_ple_ws_init(m, rows, err))
        return err ? err->code : NPL_ERR_NOMEM;
    fw->row_seq = malloc(rows * sizeof *fw->row_seq);
    fw->row_pos = malloc(rows * sizeof *fw->row_pos);
    fw->row_last = malloc(rows * sizeof *fw->row_last);
    fw->logit_out = malloc(rows * sizeof *fw->logit_out);

    int64_t max_cols = hp->n_embd;
    if ((int64_t)q_dim(hp) > max_cols)
        max_cols = (int64_t)q_dim(hp);
    if ((int64_t)hp->n_ff > max_cols)
        max_cols = hp->n_ff;
    if ((int64_t)hp->ssm_d_state * hp->ssm_n_v > max_cols) /* the DeltaNet's output projection */
        max_cols = (int64_t)hp->ssm_d_state * hp->ssm_n_v;
    if ((int64_t)npl_moe_max_cols(m) > max_cols) /* an expert's down projection */
        max_cols = npl_moe_max_cols(m);
    if ((int64_t)hp->n_embd_per_layer > max_cols) /* gemma4's per-layer projections */
        max_cols = hp->n_embd_per_layer;
    if (m->enc.dense3.n_cols > max_cols) /* gemma-embedding's second dense projection */
        max_cols = m->enc.dense3.n_cols;
    m->mm_ws = npl_matmul_ws_create(n_threads, max_cols, rows);
    /* The weights are pages of the read-only mapped file: the kernels may
     * drop them once repacked, so the repacked copy does not double RSS. */
    if (m->mm_ws)
        npl_matmul_ws_set_release_source(m->mm_ws, true);

    if (!fw->x || !fw->xn || !fw->q || !fw->k || !fw->v || !fw->attn || !fw->gate || !fw->up || !fw->rope ||
        !fw->attn_scratch || !fw->row_seq || !fw->row_pos || !fw->row_last || !fw->logit_out || !m->mm_ws ||
        (m->rope_inv_freq_swa && !fw->rope_swa))
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the forward-pass buffers (%zu-token chunks)",
                             rows);
    return NPL_OK;
}

void npl_forward_ws_free(npl_forward_ws *fw)
{
    free(fw->x);
    free(fw->xn);
    free(fw->q);
    free(fw->k);
    free(fw->v);
    free(fw->attn);
    free(fw->gate);
    free(fw->up);
    free(fw->rope);
    free(fw->rope_swa);
    free(fw->attn_scratch);
    free(fw->attn_tiled_scratch);
    free(fw->attn_rows_scratch);
    free(fw->attn_block);
    free(fw->row_seq);
    free(fw->row_pos);
    free(fw->row_last);
    free(fw->logit_out);
    free(fw->qg);
    free(fw->attn_gate);
    free(fw->ple);
    memset(fw, 0, sizeof *fw);
}

/* ---- per-row tasks ---------------------------------------------------- */

typedef struct step_ctx {
    npl_model *m;
    size_t n_rows;
    uint32_t layer;
    const float *norm_w;  /* add_norm_task */
    const float *delta;   /* add_norm_task: added to x first, or NULL */
    size_t first_row;     /* add_norm_task: rows before it are skipped */
    const float *delta_norm_w; /* add_norm_task: delta is RMS-normalised with these weights
                                * before the add (gemma3 post-norms), or NULL */
    bool bidirectional;   /* attention_task: each row sees every row of its sequence in the step */
    size_t hd;            /* the layer's head size */
    uint32_t nkv;         /* the layer's KV heads */
    uint32_t kvl;         /* the layer whose cache it reads (its own unless it shares one) */
} step_ctx;

/* 1 / RMS(x). The sum of squares is taken in double so long rows lose
 * nothing to rounding. */
static float rms_scale(const float *x, size_t n, float eps)
{
    double ss = 0.0;
    for (size_t j = 0; j < n; j++)
        ss += (double)x[j] * (double)x[j];
    float mean = (float)(ss / (double)n);
    return 1.0f / sqrtf(mean + eps);
}

/* x += delta (when given, RMS-normalised first when delta_norm_w is);
 * xn = RMSNorm(x) * w. */
static void add_norm_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    step_ctx *c = ctx;
    const npl_hparams *hp = &c->m->hp;
    size_t e = hp->n_embd;
    for (size_t i = c->first_row + begin; i < c->first_row + end; i++) {
        float *x = c->m->fw.x + i * e;
        float *xn = c->m->fw.xn + i * e;
        if (c->delta) {
            const float *d = c->delta + i * e;
            float rs = c->m->residual_scale;
            if (c->delta_norm_w) {
                float ds = rms_scale(d, e, hp->rms_eps);
                for (size_t j = 0; j < e; j++)
                    x[j] += (d[j] * ds) * c->delta_norm_w[j];
            } else if (rs != 1.0f) {
                for (size_t j = 0; j < e; j++)
                    x[j] += d[j] * rs;
            } else {
                for (size_t j = 0; j < e; j++)
                    x[j] += d[j];
            }
        }
        float scale = rms_scale(x, e, hp->rms_eps);
        for (size_t j = 0; j < e; j++)
            xn[j] = (x[j] * scale) * c->norm_w[j];
    }
}

/* Per-head RMSNorm of Q and K (gemma3, qwen3), and without weights
 * (w NULL) of V (gemma4). */
static void head_norm(float *h, const float *w, size_t n, float eps)
{
    float scale = rms_scale(h, n, eps);
    if (!w) {
        for (size_t j = 0; j < n; j++)
            h[j] *= scale;
        return;
    }
    for (size_t j = 0; j < n; j++)
        h[j] = (h[j] * scale) * w[j];
}

static void rope_rotate(float *h, const float *cs, uint32_t half)
{
    for (uint32_t i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        float x0 = h[2 * i], x1 = h[2 * i + 1];
        h[2 * i] = x0 * c - x1 * s;
        h[2 * i + 1] = x0 * s + x1 * c;
    }
}

/* NEOX pairs (gemma3, qwen2, qwen3): x[i] with x[i + half]. */
static void rope_rotate_neox(float *h, const float *cs, uint32_t half)
{
    for (uint32_t i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        float x0 = h[i], x1 = h[i + half];
        h[i] = x0 * c - x1 * s;
        h[i + half] = x0 * s + x1 * c;
    }
}

/* One Q or K head: the per-head norm when the layer has one, then RoPE
 * unless the layer has none (cs NULL). */
static void norm_rope_head(const npl_model *m, const npl_layer *L, float *h, const float *norm_w, const float *cs)
{
    if (norm_w)
        head_norm(h, norm_w, L->head_dim, m->hp.rms_eps);
    if (!cs)
        return;
    if (m->rope_neox)
        rope_rotate_neox(h, cs, L->n_rot / 2);
    else
        rope_rotate(h, cs, L->n_rot / 2);
}

/* One K or V row into the cache, in the model's format; halves through
 * the SIMD-level conversion the rest of the engine uses. */
static void kv_store(const npl_model *m, const float *src, uint8_t *dst, size_t hd)
{
    if (m->kv_format == NPL_KV_F16)
        npl_f32_to_f16_row(m->simd, src, (uint16_t *)(void *)dst, hd);
    else
        npl_kv_store_row(m->kv_format, src, dst, hd);
}

/* x += bias, when the layer has one (qwen2's Q, K and V). */
static void add_bias(float *x, const float *bias, size_t n)
{
    if (bias)
        for (size_t j = 0; j < n; j++)
            x[j] += bias[j];
}

/* The projections' biases, then RoPE on the row's Q and K heads, then K
 * and V into its cache (twice for a mirrored ring row, see
 * npl_seq.kv_ring). */
static void rope_store_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    step_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_hparams *hp = &m->hp;
    const npl_layer *L = &m->layers[c->layer];
    npl_forward_ws *fw = &m->fw;
    size_t hd = c->hd, rb = m->kv_row_bytes;
    const float *table = L->local && fw->rope_swa ? fw->rope_swa : fw->rope;
    for (size_t i = begin; i < end; i++) {
        const float *cs = L->no_rope ? NULL : table + i * hp->n_rot;
        float *q = fw->q + i * q_dim(hp);
        float *k = fw->k + i * kv_dim(hp);
        float *v = fw->v + i * kv_dim(hp);
        add_bias(q, L->bq, q_dim(hp));
        add_bias(k, L->bk, kv_dim(hp));
        add_bias(v, L->bv, kv_dim(hp));
        for (uint32_t h = 0; h < hp->n_head; h++)
            norm_rope_head(m, L, q + h * hd, L->attn_q_norm, cs);
        npl_seq *s = fw->row_seq[i];
        uint32_t pos = fw->row_pos[i];
        if (m->attn_temp_scale != 0.0f && pos >= m->attn_temp_length) {
            float t = (float)(1.0 + m->attn_temp_scale * log(1.0 + (double)(pos / m->attn_temp_length)));
            for (size_t j = 0; j < q_dim(hp); j++)
                q[j] *= t;
        }
        if (L->kv_shared) /* its keys and values are another layer's */
            continue;
        if (L->v_norm && !L->wv.data) /* gemma4 without attn_v: V is K's projection */
            memcpy(v, k, kv_dim(hp) * sizeof *v);
        size_t row = npl_kv_row(s, c->layer, pos), mirror = npl_kv_mirror_row(s, c->layer, pos);
        for (uint32_t g = 0; g < c->nkv; g++) {
            norm_rope_head(m, L, k + g * hd, L->attn_k_norm, cs);
            if (L->v_norm)
                head_norm(v + g * hd, NULL, hd, hp->rms_eps);
            size_t head = npl_kv_head_offset(s, c->layer, g);
            kv_store(m, k + g * hd, s->k_cache + head + row * rb, hd);
            kv_store(m, v + g * hd, s->v_cache + head + row * rb, hd);
            if (mirror != SIZE_MAX) {
                kv_store(m, k + g * hd, s->k_cache + head + mirror * rb, hd);
                kv_store(m, v + g * hd, s->v_cache + head + mirror * rb, hd);
            }
        }
    }
}

/* Row i of the step sees key positions [lo, hi] (its
 * window's start in a local layer; its own position, or its sequence's
 * last in the step when bidirectional). A bidirectional embedder's local
 * layers (gemma-embedding) see n_swa / 2 positions on either side, as
 * llama.cpp's symmetric window. */
static void attention_key_range(const step_ctx *c, size_t i, uint32_t *lo, uint32_t *hi)
{
    const npl_hparams *hp = &c->m->hp;
    uint32_t pos = c->m->fw.row_pos[i];
    bool local = c->m->layers[c->layer].local;
    *hi = c->bidirectional ? c->m->fw.row_last[i] : pos;
    if (local && c->m->enc.bidirectional) {
        uint32_t half = hp->n_swa / 2;
        *lo = pos >= half ? pos - half : 0;
        if (*hi - pos > half)
            *hi = pos + half;
        return;
    }
    *lo = local && pos >= hp->n_swa ? pos - hp->n_swa + 1 : 0;
}

/* fw.row_last of a bidirectional step's n rows. */
static void mark_sequence_ends(npl_forward_ws *fw, size_t n)
{
    for (size_t i = n; i-- > 0;)
        fw->row_last[i] = i + 1 < n && fw->row_seq[i + 1] == fw->row_seq[i] ? fw->row_last[i + 1] : fw->row_pos[i];
}

/* The sink logits of KV head g's query heads (gpt-oss), or NULL. */
static const float *group_sinks(const step_ctx *c, uint32_t g)
{
    const float *z = c->m->layers[c->layer].attn_sinks;
    return z ? z + (size_t)g * (c->m->hp.n_head / c->nkv) : NULL;
}

/* Task = (row, kv head): the query heads of that group against the row's
 * cache up to and including its own position (the step's last one when
 * bidirectional), from the start of its window in a local layer. */
static void attention_task(void *ctx, size_t begin, size_t end, int thread)
{
    step_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_hparams *hp = &m->hp;
    npl_forward_ws *fw = &m->fw;
    size_t hd = c->hd;
    size_t group = hp->n_head / c->nkv;
    float *scratch = fw->attn_scratch + (size_t)thread * fw->attn_scratch_per_thread;
    for (size_t t = begin; t < end; t++) {
        size_t i = t / c->nkv;
        uint32_t g = (uint32_t)(t % c->nkv);
        npl_seq *s = fw->row_seq[i];
        uint32_t first, last;
        attention_key_range(c, i, &first, &last);
        size_t off = npl_kv_head_offset(s, c->kvl, g) + npl_kv_row(s, c->kvl, first) * m->kv_row_bytes;
        size_t q_off = i * q_dim(hp) + (size_t)g * group * hd;
        npl_attention_kv_sinks(m->simd, m->kv_format, fw->q + q_off, hd, group, s->k_cache + off, s->v_cache + off,
                               m->kv_row_bytes, (size_t)(last - first) + 1, hd, m->attn_scale, group_sinks(c, g),
                               fw->attn + q_off, hd, scratch);
    }
}

/* The step's rows in query blocks: runs of one sequence's consecutive
 * positions, at most attn_block_positions long. Returns the count. */
static size_t attention_blocks(npl_model *m, size_t n)
{
    npl_forward_ws *fw = &m->fw;
    size_t cap = attn_block_positions(m), nb = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || fw->row_seq[i] != fw->row_seq[i - 1] || fw->row_pos[i] != fw->row_pos[i - 1] + 1 ||
            i - fw->attn_block[nb - 1] == cap)
            fw->attn_block[nb++] = i;
    fw->attn_block[nb] = n;
    return nb;
}

/* Task t of a block-wise attention: query block t / n_head_kv (its first
 * row and length), KV head t % n_head_kv (its cache offset, its first
 * query's offset), every row's key range into lo[] / hi[] (lo may be
 * NULL). */
typedef struct attn_block_task {
    npl_seq *s;
    size_t i0, np, head, q_off;
    const float *sinks;
} attn_block_task;

static attn_block_task attention_block_task(const step_ctx *c, size_t t, uint32_t *lo, uint32_t *hi)
{
    const npl_hparams *hp = &c->m->hp;
    const npl_forward_ws *fw = &c->m->fw;
    attn_block_task bt;
    size_t b = t / c->nkv, group = hp->n_head / c->nkv;
    uint32_t g = (uint32_t)(t % c->nkv);
    bt.i0 = fw->attn_block[b];
    bt.np = fw->attn_block[b + 1] - bt.i0;
    bt.s = fw->row_seq[bt.i0];
    for (size_t i = 0; i < bt.np; i++) {
        uint32_t l;
        attention_key_range(c, bt.i0 + i, lo ? &lo[i] : &l, &hi[i]);
    }
    bt.head = npl_kv_head_offset(bt.s, c->kvl, g);
    bt.sinks = group_sinks(c, g);
    bt.q_off = bt.i0 * q_dim(hp) + (size_t)g * group * c->hd;
    return bt;
}

/* Task = (query block, kv head) on the tiled kernel: every query head of
 * the group at every position of the block against the cache. */
static void attention_tiled_task(void *ctx, size_t begin, size_t end, int thread)
{
    step_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_hparams *hp = &m->hp;
    npl_forward_ws *fw = &m->fw;
    size_t hd = c->hd, group = hp->n_head / c->nkv, cap = attn_block_positions(m);
    uint8_t *scratch = fw->attn_tiled_scratch + (size_t)thread * fw->attn_tiled_scratch_per_thread;
    uint32_t *lo = (uint32_t *)(void *)scratch, *hi = lo + cap;
    for (size_t t = begin; t < end; t++) {
        attn_block_task bt = attention_block_task(c, t, lo, hi);
        npl_attn_tiled_job job = {
            .q = fw->q + bt.q_off, .q_stride = q_dim(hp), .out = fw->attn + bt.q_off, .out_stride = q_dim(hp),
            .n_pos = bt.np, .group = group, .head_dim = hd, .key_lo = lo, .key_hi = hi,
            .k = bt.s->k_cache + bt.head, .v = bt.s->v_cache + bt.head, .row_bytes = m->kv_row_bytes,
            .ring = bt.s->kv_ring && m->layers[c->layer].local ? bt.s->kv_ring : 0, .scale = m->attn_scale,
            .sinks = bt.sinks,
        };
        npl_attention_tiled(&job, hi + cap);
    }
}

/* Task = (query block, kv head) on the multi-position kernel, in a layer
 * without a window (every row's keys start at position 0, row =
 * position): the same bits as attention_task, each converted block of
 * keys and values shared by the block's positions. */
static void attention_rows_task(void *ctx, size_t begin, size_t end, int thread)
{
    step_ctx *c = ctx;
    npl_model *m = c->m;
    const npl_hparams *hp = &m->hp;
    npl_forward_ws *fw = &m->fw;
    size_t hd = c->hd, group = hp->n_head / c->nkv, cap = attn_block_positions(m);
    float *scratch = fw->attn_rows_scratch + (size_t)thread * fw->attn_rows_scratch_per_thread;
    uint32_t *hi = (uint32_t *)(void *)scratch;
    for (size_t t = begin; t < end; t++) {
        attn_block_task bt = attention_block_task(c, t, NULL, hi);
        const uint8_t *k = bt.s->k_cache + bt.head, *v = bt.s->v_cache + bt.head;
        if (bt.np == 1) { /* one position (a batched decode): nothing to share */
            npl_attention_kv_sinks(m->simd, m->kv_format, fw->q + bt.q_off, hd, group, k, v, m->kv_row_bytes,
                                   (size_t)hi[0] + 1, hd, m->attn_scale, bt.sinks, fw->attn + bt.q_off, hd,
                                   scratch + cap);
            continue;
        }
        npl_attn_rows_job job = {
            .fmt = m->kv_format, .q = fw->q + bt.q_off, .q_stride = q_dim(hp), .out = fw->attn + bt.q_off,
            .out_stride = q_dim(hp), .n_pos = bt.np, .group = group, .head_dim = hd, .key_hi = hi, .k = k, .v = v,
            .row_bytes = m->kv_row_bytes, .scale = m->attn_scale, .sinks = bt.sinks,
        };
        npl_attention_rows(m->simd, &job, scratch + cap);
    }
}

/* A gated Q projection (qwen35): each head's query then its gate, split
 * into fw.q and fw.attn_gate. */
static void split_gate_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    step_ctx *c = ctx;
    npl_forward_ws *fw = &c->m->fw;
    size_t hd = c->m->hp.head_dim, qd = q_dim(&c->m->hp);
    for (size_t i = begin; i < end; i++)
        for (uint32_t h = 0; h < c->m->hp.n_head; h++) {
            memcpy(fw->q + i * qd + h * hd, fw->qg + i * 2 * qd + 2 * h * hd, hd * sizeof(float));
            memcpy(fw->attn_gate + i * qd + h * hd, fw->qg + i * 2 * qd + (2 * h + 1) * hd, hd * sizeof(float));
        }
}

/* attn *= sigmoid(gate), before the output projection. */
static void apply_gate_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    step_ctx *c = ctx;
    npl_forward_ws *fw = &c->m->fw;
    size_t qd = q_dim(&c->m->hp);
    for (size_t j = begin * qd; j < end * qd; j++)
        fw->attn[j] *= 1.0f / (1.0f + expf(-fw->attn_gate[j]));
}

/* gate = act(gate) * up: SwiGLU, or GEGLU (GELU in its tanh form) for
 * gemma3. */
static void gated_ffn_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    step_ctx *c = ctx;
    npl_forward_ws *fw = &c->m->fw;
    size_t f = c->m->hp.n_ff, lf = c->m->layers[c->layer].n_ff;
    npl_act_kind act = c->m->ffn_gelu ? NPL_ACT_GELU_TANH : NPL_ACT_SILU;
    if (lf == f) {
        npl_act_gated_f32(c->m->simd, act, fw->gate + begin * f, fw->up + begin * f, (end - begin) * f);
        return;
    }
    for (size_t i = begin; i < end; i++) /* a narrower layer (gemma4): rows stay n_ff apart */
        npl_act_gated_f32(c->m->simd, act, fw->gate + i * f, fw->up + i * f, lf);
}

/* cos/sin per rotated pair for each row's position, times the model's
 * RoPE magnitude (phi3's LongRoPE attention factor; 1 elsewhere). Rows of
 * a sequence with a context beyond m->rope_long_ctx take inv_freq_long
 * when there is one (phi3's long factors). */
static void fill_rope_tables(npl_model *m, size_t n, uint32_t half, const double *inv_freq_all,
                             const double *inv_freq_long, float *table)
{
    const npl_hparams *hp = &m->hp;
    double mscale = m->rope_mscale;
    for (size_t i = 0; i < n; i++) {
        float *cs = table + i * hp->n_rot;
        double pos = (double)m->fw.row_pos[i];
        const double *inv_freq =
            inv_freq_long && m->fw.row_seq[i]->n_ctx > m->rope_long_ctx ? inv_freq_long : inv_freq_all;
        for (uint32_t j = 0; j < half; j++) {
            double theta = pos * inv_freq[j];
            cs[2 * j] = (float)(cos(theta) * mscale);
            cs[2 * j + 1] = (float)(sin(theta) * mscale);
        }
    }
}

/* The first layer's input for tokens: embedding rows, times the model's
 * scale (gemma3: sqrt(n_embd)). */
static void embed_tokens(const npl_model *m, const int32_t *tokens, size_t n, float *out)
{
    size_t e = m->hp.n_embd;
    for (size_t i = 0; i < n; i++) {
        float *x = out + i * e;
        npl_matrix_get_row(&m->tok_embd, tokens[i], x);
        if (m->embd_scale != 1.0f)
            for (size_t j = 0; j < e; j++)
                x[j] *= m->embd_scale;
    }
}

/* The attention sub-layer of layer c->layer over the step's n rows: fw.xn
 * in, its output projection in fw.xn. */
static void attention_sublayer(npl_model *m, step_ctx *c, size_t n, bool bidirectional)
{
    const npl_hparams *hp = &m->hp;
    const npl_layer *L = &m->layers[c->layer];
    npl_forward_ws *fw = &m->fw;
    npl_threadpool *pool = m->pool;
    {
        /* one activation quantization and one parallel section; a layer
         * sharing another's cache projects Q only, one without attn_v
         * (gemma4) Q and K */
        const npl_matrix *qkv[3] = {&L->wq, &L->wk, &L->wv};
        float *out[3] = {L->attn_gate ? fw->qg : fw->q, fw->k, fw->v};
        size_t stride[3] = {(L->attn_gate ? 2 : 1) * q_dim(hp), kv_dim(hp), kv_dim(hp)};
        size_t n_mats = L->kv_shared ? 1 : L->wv.data ? 3 : 2;
        npl_matmul_multi(pool, m->mm_ws, n_mats, qkv, fw->xn, hp->n_embd, n, out, stride);
    }
    if (L->attn_gate)
        npl_threadpool_run(pool, n, split_gate_task, c);
    npl_threadpool_run(pool, n, rope_store_task, c);
    /* a bidirectional image block keeps the per-query kernel's f32
     * arithmetic (tests/gemma3 reference.image-block's tolerance) */
    if (fw->attn_tiled_scratch && !(bidirectional && n > 1))
        npl_threadpool_run(pool, attention_blocks(m, n) * c->nkv, attention_tiled_task, c);
    else if (fw->attn_rows_scratch && n > 1 && !L->local)
        npl_threadpool_run(pool, attention_blocks(m, n) * c->nkv, attention_rows_task, c);
    else
        npl_threadpool_run(pool, n * c->nkv, attention_task, c);
    if (L->attn_gate)
        npl_threadpool_run(pool, n, apply_gate_task, c);
    npl_matmul_contig(pool, m->mm_ws, &L->wo, fw->attn, q_dim(hp), n, fw->xn, hp->n_embd);
    for (size_t i = 0; L->bo && i < n; i++)
        add_bias(fw->xn + i * hp->n_embd, L->bo, hp->n_embd);
}

/* Runs the rows set up in fw.row_seq / fw.row_pos over tokens[0..n), or
 * when tokens is NULL over the first layer's input embd[0..n) as is, and
 * writes the logits of rows [first_logit_row, n) to their sequences, or
 * when hidden is given their final-norm outputs there instead (rows of
 * n_embd, decoder embedders). */
static void forward_step(npl_model *m, const int32_t *tokens, const float *embd, size_t n,
                         size_t first_logit_row, bool bidirectional, float *hidden)
{
    const npl_hparams *hp = &m->hp;
    npl_forward_ws *fw = &m->fw;
    npl_threadpool *pool = m->pool;
    npl_matmul_ws *ws = m->mm_ws;
    size_t e = hp->n_embd;

    if (tokens)
        embed_tokens(m, tokens, n, fw->x);
    else
        memcpy(fw->x, embd, n * e * sizeof *fw->x);
    fill_rope_tables(m, n, hp->n_rot / 2, m->rope_inv_freq, m->rope_inv_freq_long, fw->rope);
    if (fw->rope_swa)
        fill_rope_tables(m, n, hp->n_rot_swa / 2, m->rope_inv_freq_swa, NULL, fw->rope_swa);
    npl_ple_inputs(m, tokens, n);
    if (bidirectional)
        mark_sequence_ends(fw, n);

    step_ctx c = {.m = m, .n_rows = n, .bidirectional = bidirectional};
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const npl_layer *L = &m->layers[l];
        c.layer = l;
        c.hd = L->head_dim;
        c.nkv = L->n_head_kv;
        c.kvl = L->kv_shared ? L->kv_src : l;

        /* The previous layer's FFN output is still in xn: fold it into
         * the residual stream on the way (unless the layer's end did). */
        c.norm_w = L->attn_norm;
        c.delta = l == 0 || m->fold_layer_end ? NULL : fw->xn;
        c.delta_norm_w = l == 0 ? NULL : m->layers[l - 1].post_ffn_norm;
        c.first_row = 0;
        npl_threadpool_run(pool, n, add_norm_task, &c);

        if (L->shortconv)
            npl_shortconv_layer(m, l, n);
        else if (L->state_conv || L->state_mat)
            npl_dnet_layer(m, l, n);
        else
            attention_sublayer(m, &c, n, bidirectional);

        c.norm_w = L->ffn_norm;
        c.delta = fw->xn;
        c.delta_norm_w = L->post_attn_norm;
        npl_threadpool_run(pool, n, add_norm_task, &c);
        if (L->moe && !L->moe->post_norm) {
            npl_moe_ffn(m, l, n);
            continue;
        }
        {
            const npl_matrix *gate_up[2] = {&L->w_gate, &L->w_up};
            float *out[2] = {fw->gate, fw->up};
            size_t stride[2] = {hp->n_ff, hp->n_ff};
            npl_matmul_multi(pool, ws, 2, gate_up, fw->xn, e, n, out, stride);
        }
        npl_threadpool_run(pool, n, gated_ffn_task, &c);
        npl_matmul_contig(pool, ws, &L->w_down, fw->gate, hp->n_ff, n, fw->xn, e);
        if (L->moe) /* gemma4's experts beside the dense FFN */
            npl_moe_beside_dense(m, l, n);
        if (m->fold_layer_end)
            npl_ple_layer_end(m, l, n);
    }

    if (first_logit_row >= n)
        return;
    size_t n_out = n - first_logit_row;
    c.norm_w = m->output_norm;
    c.delta = m->fold_layer_end ? NULL : fw->xn;
    c.delta_norm_w = m->layers[hp->n_layer - 1].post_ffn_norm;
    c.first_row = first_logit_row;
    npl_threadpool_run(pool, n_out, add_norm_task, &c);
    if (hidden) {
        memcpy(hidden, fw->xn + first_logit_row * e, n_out * e * sizeof *hidden);
        return;
    }
    for (size_t j = 0; j < n_out; j++) {
        npl_seq *s = fw->row_seq[first_logit_row + j];
        fw->logit_out[j] = s->logits;
        s->has_logits = true;
    }
    npl_matmul(pool, ws, &m->output, fw->xn + first_logit_row * e, e, n_out, fw->logit_out);
    if (m->logit_scale != 1.0f)
        for (size_t j = 0; j < n_out; j++)
            for (size_t t = 0; t < hp->n_vocab; t++)
                fw->logit_out[j][t] *= m->logit_scale;
    if (m->logit_softcap != 0.0f) /* gemma4 */
        for (size_t j = 0; j < n_out; j++)
            for (size_t t = 0; t < hp->n_vocab; t++)
                fw->logit_out[j][t] = m->logit_softcap * tanhf(fw->logit_out[j][t] / m->logit_softcap);
}

/* ---- public entry points -------------------------------------------- */

static npl_status check_tokens(const npl_model *m, const int32_t *tokens, size_t n, npl_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->hp.n_vocab)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "token %zu has id %d, outside the vocabulary [0, %u)", i,
                                 tokens[i], m->hp.n_vocab);
    return NPL_OK;
}

npl_status npl_cpu_prefill(npl_model *m, npl_seq *s, const int32_t *tokens, size_t n,
                       size_t max_tokens_this_call, size_t *consumed, npl_error *err)
{
    if (consumed)
        *consumed = 0;
    if (!m || !s || (n > 0 && !tokens))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_prefill: missing model, sequence or tokens");
    if (s->model != m)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_prefill: the sequence belongs to another model");
    if (n == 0)
        return NPL_OK;
    npl_status st = check_tokens(m, tokens, n, err);
    if (st)
        return st;
    if (n > (size_t)(s->n_ctx - s->pos))
        return npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                             "%zu prompt tokens after the %u already cached exceed the context of %u tokens", n,
                             s->pos, s->n_ctx);

    size_t todo = max_tokens_this_call && max_tokens_this_call < n ? max_tokens_this_call : n;
    size_t done = 0;
    s->has_logits = false;
    while (done < todo) {
        size_t c = todo - done < m->prefill_chunk ? todo - done : m->prefill_chunk;
        for (size_t i = 0; i < c; i++) {
            m->fw.row_seq[i] = s;
            m->fw.row_pos[i] = s->pos + (uint32_t)i;
        }
        bool last = done + c == n;
        forward_step(m, tokens + done, NULL, c, last ? c - 1 : c, false, NULL);
        memcpy(s->hist + s->pos, tokens + done, c * sizeof *tokens);
        s->pos += (uint32_t)c;
        done += c;
    }
    if (done == n) /* the end of a prompt: a turn boundary a later prompt may resume from */
        npl_seq_state_checkpoint(s);
    if (consumed)
        *consumed = done;
    return NPL_OK;
}

npl_status npl_cpu_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n_seqs,
                      npl_error *err)
{
    if (!m || (n_seqs > 0 && (!seqs || !tokens)))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_decode: missing model, sequences or tokens");
    npl_status st = check_tokens(m, tokens, n_seqs, err);
    if (st)
        return st;

    /* Check the whole batch before touching any cache, so a bad entry
     * leaves every sequence as it was. */
    size_t i = 0;
    for (; i < n_seqs; i++) {
        npl_seq *s = seqs[i];
        if (!s) {
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_decode: sequence %zu is NULL", i);
            break;
        }
        if (s->model != m) {
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_decode: sequence %zu belongs to another model", i);
            break;
        }
        if (s->in_batch) {
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_decode: sequence %zu appears twice in the batch", i);
            break;
        }
        if (s->pos >= s->n_ctx) {
            st = npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                               "npl_decode: sequence %zu is full (context of %u tokens)", i, s->n_ctx);
            break;
        }
        s->in_batch = true;
    }
    for (size_t j = 0; j < i; j++)
        seqs[j]->in_batch = false;
    if (st)
        return st;

    for (size_t b0 = 0; b0 < n_seqs; b0 += m->fw.rows) {
        size_t c = n_seqs - b0 < m->fw.rows ? n_seqs - b0 : m->fw.rows;
        for (size_t r = 0; r < c; r++) {
            m->fw.row_seq[r] = seqs[b0 + r];
            m->fw.row_pos[r] = seqs[b0 + r]->pos;
        }
        forward_step(m, tokens + b0, NULL, c, 0, false, NULL);
        for (size_t r = 0; r < c; r++)
            seqs[b0 + r]->hist[seqs[b0 + r]->pos++] = tokens[b0 + r];
    }
    return NPL_OK;
}

/* ---- embeddings in place of tokens ------------------------------------ */

npl_status npl_model_embed_tokens(const npl_model *m, const int32_t *tokens, size_t n, float *out,
                                  npl_error *err)
{
    if (!m || (n > 0 && (!tokens || !out)))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_model_embed_tokens: missing model, tokens or output");
    npl_status st = check_tokens(m, tokens, n, err);
    if (st)
        return st;
    embed_tokens(m, tokens, n, out);
    return NPL_OK;
}

npl_status npl_cpu_prefill_embeddings(npl_model *m, npl_seq *s, const float *embd, size_t n, bool bidirectional,
                                  npl_error *err)
{
    if (!m || !s || (n > 0 && !embd))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_prefill_embeddings: missing model, sequence or rows");
    if (s->model != m)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_prefill_embeddings: the sequence belongs to another model");
    if (n == 0)
        return NPL_OK;
    if (n > (size_t)(s->n_ctx - s->pos))
        return npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                             "%zu embedding rows after the %u positions already cached exceed the context of %u tokens",
                             n, s->pos, s->n_ctx);
    /* Every row must see the others' keys in every layer: one step. */
    if (bidirectional && n > m->fw.rows)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_prefill_embeddings: a bidirectional block of %zu rows exceeds the model's %zu working "
                             "rows (load it with npl_model_params.block_rows of its projector's max_tokens)",
                             n, m->fw.rows);

    size_t e = m->hp.n_embd;
    size_t chunk = bidirectional ? n : m->prefill_chunk;
    s->has_logits = false;
    for (size_t done = 0; done < n;) {
        size_t c = n - done < chunk ? n - done : chunk;
        for (size_t i = 0; i < c; i++) {
            m->fw.row_seq[i] = s;
            m->fw.row_pos[i] = s->pos + (uint32_t)i;
        }
        forward_step(m, NULL, embd + done * e, c, done + c == n ? c - 1 : c, bidirectional, NULL);
        for (size_t i = 0; i < c; i++) /* no token: never matched by a pool */
            s->hist[s->pos + i] = -1;
        s->pos += (uint32_t)c;
        done += c;
    }
    return NPL_OK;
}

/* ---- hidden states (decoder embedders, engine/models/embed_decoder.c) ---- */

void npl_cpu_forward_hidden(npl_model *m, const int32_t *tokens, size_t n, float *hidden)
{
    forward_step(m, tokens, NULL, n, 0, m->enc.bidirectional, hidden);
}
