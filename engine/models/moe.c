/* The mixture-of-experts feed-forward (moe.h), as llama.cpp's
 * build_moe_ffn computes it: router logits (plus bias), the family's
 * gating, then per selected expert gate and up (plus biases), the gated
 * activation, down (plus bias, or times the expert's scale, gemma4),
 * times the expert's weight, summed over
 * the k slots in slot order; then the shared expert's output (times
 * sigmoid of its gate logit) added, as the qwen2moe and qwen35moe graphs
 * add it. */
#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_gelu.h"
#include "ggml_types.h"

#define NPL_MAX_EXPERTS 4096u
/* llama.cpp clamps the sum of the selected weights before dividing by it. */
#define NORM_W_MIN 6.103515625e-5f
/* gpt-oss's clamped SwiGLU (ggml's swiglu_oai). */
#define OAI_ALPHA 1.702f
#define OAI_LIMIT 7.0f

npl_status npl_moe_read(npl_binder *b, const npl_moe_cfg *cfg)
{
    npl_model *m = b->m;
    npl_moe_cfg c = *cfg;
    npl_status st;
    if ((st = npl_bind_u32(b, "expert_count", true, 0, 1, NPL_MAX_EXPERTS, &c.n_expert)) ||
        (st = npl_bind_u32(b, "expert_used_count", true, 0, 1, c.n_expert, &c.n_used)) ||
        (st = npl_bind_u32(b, "expert_feed_forward_length", false, m->hp.n_ff, 1, NPL_MAX_FF, &c.n_ff)))
        return st;
    char key[96];
    snprintf(key, sizeof key, "%s.expert_shared_count", b->arch);
    uint32_t shared = 0;
    /* Qwen's families have one shared expert and no key for it */
    if (npl_gguf_get_u32(m->gguf, key, &shared) && shared > (c.shared ? 1u : 0u))
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: %u shared experts (%s) are not supported%s", b->path,
                             shared, key, c.shared ? " (one is)" : "");
    if (c.shared && (st = npl_bind_u32(b, "expert_shared_feed_forward_length", false, m->hp.n_ff, 1, NPL_MAX_FF,
                                       &c.n_ff_shexp)))
        return st;
    npl_moe *mo = calloc(1, sizeof *mo);
    if (!mo)
        return npl_error_set(b->err, NPL_ERR_NOMEM, "out of memory");
    m->moe = mo;
    mo->cfg = c;
    mo->layers = calloc(m->hp.n_layer, sizeof *mo->layers);
    mo->slices = calloc((size_t)m->hp.n_layer * 3 * c.n_expert, sizeof *mo->slices);
    if (!mo->layers || !mo->slices)
        return npl_error_set(b->err, NPL_ERR_NOMEM, "out of memory for %u experts in %u layers", c.n_expert,
                             m->hp.n_layer);
    /* the NPU kernel groups have no expert selection yet (docs/npu.md) */
    m->npu_refusal = "mixture-of-experts feed-forward layers";
    return NPL_OK;
}

/* blk.<l>.<suffix> (its name into name[96]), or NULL with the error set. */
static const npl_gguf_tensor *layer_tensor(const npl_binder *b, uint32_t l, const char *suffix, char *name)
{
    snprintf(name, 96, "blk.%u.%s", l, suffix);
    const npl_gguf_tensor *t = npl_gguf_find_tensor(b->m->gguf, name);
    if (!t)
        npl_error_set(b->err, NPL_ERR_FORMAT, "%s: missing tensor '%s'", b->path, name);
    return t;
}

/* blk.<l>.<suffix>: n_expert stacked matrices [ne0, parts * ne1], each
 * cut into parts slices of ne1 rows: out[p][i] is expert i's part p. */
static npl_status bind_stack(const npl_binder *b, uint32_t l, const char *suffix, uint64_t ne0, uint64_t ne1,
                             uint32_t parts, npl_matrix *const *out)
{
    uint32_t n_expert = b->m->moe->cfg.n_expert;
    char name[96];
    const npl_gguf_tensor *t = layer_tensor(b, l, suffix, name);
    if (!t)
        return NPL_ERR_FORMAT;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 * parts || t->ne[2] != n_expert || t->ne[3] != 1)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: tensor '%s' has shape [%llu, %llu, %llu], expected [%llu, %llu, %u]", b->path, name,
                             (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                             (unsigned long long)t->ne[2], (unsigned long long)ne0,
                             (unsigned long long)(ne1 * parts), n_expert);
    npl_matrix all;
    if (!npl_matmul_type_supported(t->type) ||
        !npl_matrix_init(&all, t->type, t->data, (int64_t)ne0, (int64_t)(ne1 * parts * n_expert)))
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: tensor '%s' (type %u) cannot be multiplied by the CPU kernels", b->path, name,
                             t->type);
    for (uint32_t i = 0; i < n_expert; i++)
        for (uint32_t p = 0; p < parts; p++)
            if (!npl_matrix_init(&out[p][i], t->type,
                                 (const uint8_t *)t->data + ((size_t)i * parts + p) * ne1 * all.row_bytes,
                                 (int64_t)ne0, (int64_t)ne1))
                return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor '%s': expert %u cannot be read", b->path,
                                     name, i);
    return NPL_OK;
}

/* Layer l's gate and up stacks: ffn_gate_exps and ffn_up_exps, or where
 * the family allows it and the file has it ffn_gate_up_exps. */
static npl_status bind_gate_up(const npl_binder *b, uint32_t l, npl_moe_layer *ML)
{
    const npl_moe_cfg *c = &b->m->moe->cfg;
    uint64_t e = b->m->hp.n_embd;
    char name[96];
    snprintf(name, sizeof name, "blk.%u.ffn_gate_up_exps.weight", l);
    npl_matrix *gate_up[2] = {ML->gate, ML->up};
    if (c->gemma4 && npl_gguf_find_tensor(b->m->gguf, name))
        return bind_stack(b, l, "ffn_gate_up_exps.weight", e, c->n_ff, 2, gate_up);
    npl_status st = bind_stack(b, l, "ffn_gate_exps.weight", e, c->n_ff, 1, &gate_up[0]);
    return st ? st : bind_stack(b, l, "ffn_up_exps.weight", e, c->n_ff, 1, &gate_up[1]);
}

/* blk.<l>.<suffix>: an f32 [n, n_expert] bias, one row per expert. */
static npl_status bind_bias(const npl_binder *b, uint32_t l, const char *suffix, uint64_t n, const float **out)
{
    uint32_t n_expert = b->m->moe->cfg.n_expert;
    char name[96];
    const npl_gguf_tensor *t = layer_tensor(b, l, suffix, name);
    if (!t)
        return NPL_ERR_FORMAT;
    if (t->ne[0] != n || t->ne[1] != n_expert || t->ne[2] != 1 || t->ne[3] != 1 || t->type != NPL_TYPE_F32 ||
        (uintptr_t)t->data % sizeof(float))
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: tensor '%s' must be f32 of shape [%llu, %u]", b->path,
                             name, (unsigned long long)n, n_expert);
    *out = t->data;
    return NPL_OK;
}

npl_status npl_moe_bind_layer(const npl_binder *b, uint32_t l, npl_layer *L, bool biases)
{
    npl_model *m = b->m;
    npl_moe *mo = m->moe;
    const npl_moe_cfg *c = &mo->cfg;
    npl_moe_layer *ML = &mo->layers[l];
    uint64_t e = m->hp.n_embd;
    npl_matrix *s = mo->slices + (size_t)l * 3 * c->n_expert;
    ML->gate = s;
    ML->up = s + c->n_expert;
    ML->down = s + 2 * (size_t)c->n_expert;
    char name[96];
    snprintf(name, sizeof name, "blk.%u.ffn_gate_inp.weight", l);
    npl_status st;
    if ((st = npl_bind_matrix(b, name, e, c->n_expert, "n_embd, expert_count", &ML->router)) ||
        (st = bind_gate_up(b, l, ML)) || (st = bind_stack(b, l, "ffn_down_exps.weight", c->n_ff, e, 1, &ML->down)))
        return st;
    if (biases) {
        snprintf(name, sizeof name, "blk.%u.ffn_gate_inp.bias", l);
        if ((st = npl_bind_vector(b, name, c->n_expert, "expert_count", &ML->router_b)) ||
            (st = bind_bias(b, l, "ffn_gate_exps.bias", c->n_ff, &ML->gate_b)) ||
            (st = bind_bias(b, l, "ffn_up_exps.bias", c->n_ff, &ML->up_b)) ||
            (st = bind_bias(b, l, "ffn_down_exps.bias", e, &ML->down_b)))
            return st;
    }
    L->moe = ML;
    return NPL_OK;
}

npl_status npl_moe_bind_shared(const npl_binder *b, uint32_t l, bool gated)
{
    const npl_moe_cfg *c = &b->m->moe->cfg;
    npl_moe_layer *ML = &b->m->moe->layers[l];
    uint64_t e = b->m->hp.n_embd;
    char n[4][96];
    const char *suffix[4] = {"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight",
                             "ffn_gate_inp_shexp.weight"};
    for (int i = 0; i < 4; i++)
        snprintf(n[i], sizeof n[i], "blk.%u.%s", l, suffix[i]);
    npl_status st;
    if ((st = npl_bind_matrix(b, n[0], e, c->n_ff_shexp, "n_embd, expert_shared_feed_forward_length", &ML->sh_gate)) ||
        (st = npl_bind_matrix(b, n[1], e, c->n_ff_shexp, "n_embd, expert_shared_feed_forward_length", &ML->sh_up)) ||
        (st = npl_bind_matrix(b, n[2], c->n_ff_shexp, e, "expert_shared_feed_forward_length, n_embd", &ML->sh_down)))
        return st;
    if (gated || npl_gguf_find_tensor(b->m->gguf, n[3]))
        return npl_bind_matrix(b, n[3], e, 1, "n_embd", &ML->sh_gate_inp);
    return NPL_OK;
}

uint32_t npl_moe_max_cols(const npl_model *m)
{
    const npl_moe_cfg *c = m->moe ? &m->moe->cfg : NULL;
    if (!c)
        return 0;
    return c->shared && c->n_ff_shexp > c->n_ff ? c->n_ff_shexp : c->n_ff;
}

npl_status npl_moe_ws_init(npl_model *m, size_t rows, npl_error *err)
{
    npl_moe *mo = m->moe;
    if (!mo)
        return NPL_OK;
    const npl_moe_cfg *c = &mo->cfg;
    size_t e = m->hp.n_embd, k = c->n_used, f = npl_moe_max_cols(m);
    mo->rows = rows;
    mo->logits = malloc(rows * c->n_expert * sizeof(float));
    mo->sel = malloc(rows * k * sizeof *mo->sel);
    mo->w = malloc(rows * k * sizeof(float));
    mo->order = malloc(rows * k * sizeof *mo->order);
    mo->where = malloc(rows * k * sizeof *mo->where);
    mo->start = malloc(((size_t)c->n_expert + 1) * sizeof *mo->start);
    mo->xg = malloc(rows * e * sizeof(float));
    mo->g = malloc(rows * f * sizeof(float));
    mo->u = malloc(rows * f * sizeof(float));
    mo->y = malloc(rows * k * e * sizeof(float));
    if (c->shared) {
        mo->sh_y = malloc(rows * e * sizeof(float));
        mo->sh_w = malloc(rows * sizeof(float));
    }
    if (c->gemma4) {
        mo->xr = malloc(rows * e * sizeof(float));
        mo->xe = malloc(rows * e * sizeof(float));
    }
    if (!mo->logits || !mo->sel || !mo->w || !mo->order || !mo->where || !mo->start || !mo->xg || !mo->g || !mo->u ||
        !mo->y || (c->shared && (!mo->sh_y || !mo->sh_w)) || (c->gemma4 && (!mo->xr || !mo->xe)))
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the experts' step buffers (%zu rows)", rows);
    return NPL_OK;
}

void npl_moe_free(npl_model *m)
{
    npl_moe *mo = m->moe;
    if (!mo)
        return;
    free(mo->layers);
    free(mo->slices);
    free(mo->logits);
    free(mo->sel);
    free(mo->w);
    free(mo->order);
    free(mo->where);
    free(mo->start);
    free(mo->xg);
    free(mo->g);
    free(mo->u);
    free(mo->y);
    free(mo->sh_y);
    free(mo->sh_w);
    free(mo->xr);
    free(mo->xe);
    free(mo);
    m->moe = NULL;
}

typedef struct moe_ctx {
    npl_model *m;
    const npl_moe_layer *L;
    /* act_task: the rows' width, the expert's gate and up biases (or NULL)
     * and its activation */
    size_t f;
    const float *gb, *ub;
    npl_moe_act act;
    bool shared; /* combine_task: add the shared expert */
    float *out;  /* combine_task: the rows' sums */
} moe_ctx;

/* The index of the largest of v[0..n) not yet taken (lowest index on ties). */
static uint32_t arg_max_free(const float *v, uint32_t n, const int32_t *taken, uint32_t n_taken)
{
    uint32_t best = UINT32_MAX;
    for (uint32_t j = 0; j < n; j++) {
        bool used = false;
        for (uint32_t t = 0; t < n_taken && !used; t++)
            used = taken[t] == (int32_t)j;
        if (!used && (best == UINT32_MAX || v[j] > v[best]))
            best = j;
    }
    return best;
}

/* softmax of v[0..n) in place. */
static void softmax(float *v, uint32_t n)
{
    float mx = v[0];
    for (uint32_t j = 1; j < n; j++)
        mx = v[j] > mx ? v[j] : mx;
    float sum = 0.0f;
    for (uint32_t j = 0; j < n; j++)
        sum += v[j] = expf(v[j] - mx);
    for (uint32_t j = 0; j < n; j++)
        v[j] /= sum;
}

/* Per row: router bias, gating, top-k, weight normalisation and scale. */
static void select_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    moe_ctx *x = ctx;
    npl_moe *mo = x->m->moe;
    const npl_moe_cfg *c = &mo->cfg;
    for (size_t i = begin; i < end; i++) {
        float *p = mo->logits + i * c->n_expert;
        int32_t *sel = mo->sel + i * c->n_used;
        float *w = mo->w + i * c->n_used;
        if (x->L->router_b)
            for (uint32_t j = 0; j < c->n_expert; j++)
                p[j] += x->L->router_b[j];
        if (c->gating == NPL_MOE_SOFTMAX)
            softmax(p, c->n_expert);
        for (uint32_t s = 0; s < c->n_used; s++) {
            sel[s] = (int32_t)arg_max_free(p, c->n_expert, sel, s);
            w[s] = p[sel[s]];
        }
        if (c->gating == NPL_MOE_TOPK_SOFTMAX)
            softmax(w, c->n_used);
        if (c->norm_w) {
            float sum = 0.0f;
            for (uint32_t s = 0; s < c->n_used; s++)
                sum += w[s];
            sum = sum > NORM_W_MIN ? sum : NORM_W_MIN;
            for (uint32_t s = 0; s < c->n_used; s++)
                w[s] /= sum;
        }
        if (c->w_scale != 1.0f)
            for (uint32_t s = 0; s < c->n_used; s++)
                w[s] *= c->w_scale;
    }
}

/* The (row, slot) pairs of the step in expert order (a counting sort):
 * expert j's run is order[start[j] .. start[j + 1]). */
static void group_by_expert(npl_moe *mo, size_t n)
{
    const npl_moe_cfg *c = &mo->cfg;
    size_t pairs = n * c->n_used;
    memset(mo->start, 0, ((size_t)c->n_expert + 1) * sizeof *mo->start);
    for (size_t p = 0; p < pairs; p++)
        mo->start[mo->sel[p] + 1]++;
    for (uint32_t j = 0; j < c->n_expert; j++)
        mo->start[j + 1] += mo->start[j];
    for (size_t p = 0; p < pairs; p++) {
        uint32_t at = mo->start[mo->sel[p]]++;
        mo->order[at] = (uint32_t)p;
        mo->where[p] = at;
    }
    for (uint32_t j = c->n_expert; j > 0; j--) /* back to run starts */
        mo->start[j] = mo->start[j - 1];
    mo->start[0] = 0;
}

/* An expert's gate and up biases, then the gated activation, on its rows. */
static void act_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    moe_ctx *x = ctx;
    npl_moe *mo = x->m->moe;
    size_t f = x->f;
    const float *gb = x->gb, *ub = x->ub;
    for (size_t i = begin; i < end; i++) {
        float *g = mo->g + i * f, *u = mo->u + i * f;
        for (size_t j = 0; gb && j < f; j++)
            g[j] += gb[j];
        for (size_t j = 0; ub && j < f; j++)
            u[j] += ub[j];
        if (x->act != NPL_MOE_SWIGLU_OAI) {
            npl_act_gated_f32(x->m->simd, x->act == NPL_MOE_SILU ? NPL_ACT_SILU : NPL_ACT_GELU_TANH, g, u, f);
            continue;
        }
        for (size_t j = 0; j < f; j++) {
            float a = g[j] < OAI_LIMIT ? g[j] : OAI_LIMIT;
            float b = u[j] < -OAI_LIMIT ? -OAI_LIMIT : u[j] > OAI_LIMIT ? OAI_LIMIT : u[j];
            g[j] = a / (1.0f + expf(-OAI_ALPHA * a)) * (b + 1.0f);
        }
    }
}

/* Per row: sum over its slots, in slot order, of (expert output + down
 * bias, or times the expert's scale) times the slot's weight, into out;
 * then plus the shared
 * expert's output times sigmoid of its gate logit (1 when ungated). */
static void combine_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    moe_ctx *x = ctx;
    npl_moe *mo = x->m->moe;
    size_t e = x->m->hp.n_embd, k = mo->cfg.n_used;
    for (size_t i = begin; i < end; i++) {
        float *out = x->out + i * e;
        for (size_t s = 0; s < k; s++) {
            const float *y = mo->y + (size_t)mo->where[i * k + s] * e;
            int32_t ex = mo->sel[i * k + s];
            const float *db = x->L->down_b ? x->L->down_b + (size_t)ex * e : NULL;
            float w = mo->w[i * k + s], ds = x->L->down_s ? x->L->down_s[ex] : 1.0f;
            for (size_t j = 0; j < e; j++) {
                float v = (db ? y[j] + db[j] : x->L->down_s ? y[j] * ds : y[j]) * w;
                out[j] = s ? out[j] + v : v;
            }
        }
        if (!x->shared)
            continue;
        const float *sy = mo->sh_y + i * e;
        float sw = x->L->sh_gate_inp.n_rows ? 1.0f / (1.0f + expf(-mo->sh_w[i])) : 1.0f;
        for (size_t j = 0; j < e; j++)
            out[j] += sy[j] * sw;
    }
}

/* The shared expert over the step's n rows of in, before the routed
 * experts reuse g and u: its output into sh_y, its gate logit into sh_w. */
static void shared_expert(npl_model *m, moe_ctx *x, const float *in, size_t n)
{
    npl_moe *mo = m->moe;
    const npl_moe_layer *L = x->L;
    size_t e = m->hp.n_embd, f = mo->cfg.n_ff_shexp;
    const npl_matrix *gate_up[2] = {&L->sh_gate, &L->sh_up};
    float *out[2] = {mo->g, mo->u};
    size_t stride[2] = {f, f};
    npl_matmul_multi(m->pool, m->mm_ws, 2, gate_up, in, e, n, out, stride);
    *x = (moe_ctx){.m = m, .L = L, .f = f, .act = NPL_MOE_SILU, .out = x->out};
    npl_threadpool_run(m->pool, n, act_task, x);
    npl_matmul_contig(m->pool, m->mm_ws, &L->sh_down, mo->g, f, n, mo->sh_y, e);
    if (L->sh_gate_inp.n_rows)
        npl_matmul_contig(m->pool, m->mm_ws, &L->sh_gate_inp, in, e, n, mo->sh_w, 1);
    x->shared = true;
}

/* The bytes of expert j's gate, up and down matrices in the file. */
static uint64_t expert_bytes(const npl_moe_layer *L, uint32_t j)
{
    const npl_matrix *mx[3] = {&L->gate[j], &L->up[j], &L->down[j]};
    uint64_t b = 0;
    for (int i = 0; i < 3; i++)
        b += (uint64_t)mx[i]->n_rows * mx[i]->row_bytes;
    return b;
}

void npl_moe_ffn(npl_model *m, uint32_t l, size_t n)
{
    npl_moe_ffn_rows(m, l, n, m->fw.xn, m->fw.xn, m->fw.xn);
}

void npl_moe_ffn_rows(npl_model *m, uint32_t l, size_t n, const float *in, const float *xr, float *out)
{
    npl_moe *mo = m->moe;
    const npl_moe_cfg *c = &mo->cfg;
    const npl_moe_layer *L = m->layers[l].moe;
    size_t e = m->hp.n_embd, f = c->n_ff;
    moe_ctx x = {.m = m, .L = L, .out = out};
    if (L->sh_down.n_rows)
        shared_expert(m, &x, in, n);
    npl_matmul_contig(m->pool, m->mm_ws, &L->router, xr, e, n, mo->logits, c->n_expert);
    npl_threadpool_run(m->pool, n, select_task, &x);
    group_by_expert(mo, n);
    /* Each expert that any row selected, once, over all of its rows. */
    for (uint32_t j = 0; j < c->n_expert; j++) {
        size_t first = mo->start[j], cnt = mo->start[j + 1] - first;
        if (cnt == 0)
            continue;
        for (size_t r = 0; r < cnt; r++)
            memcpy(mo->xg + r * e, in + (mo->order[first + r] / c->n_used) * e, e * sizeof(float));
        const npl_matrix *gate_up[2] = {&L->gate[j], &L->up[j]};
        float *gu[2] = {mo->g, mo->u};
        size_t stride[2] = {f, f};
        npl_matmul_multi(m->pool, m->mm_ws, 2, gate_up, mo->xg, e, cnt, gu, stride);
        moe_ctx a = {.m = m, .L = L, .f = f, .act = c->act, .gb = L->gate_b ? L->gate_b + (size_t)j * f : NULL,
                     .ub = L->up_b ? L->up_b + (size_t)j * f : NULL};
        npl_threadpool_run(m->pool, cnt, act_task, &a);
        npl_matmul_contig(m->pool, m->mm_ws, &L->down[j], mo->g, f, cnt, mo->y + first * e, e);
        mo->expert_bytes_read += expert_bytes(L, j);
    }
    mo->rows_done += n;
    npl_threadpool_run(m->pool, n, combine_task, &x);
}

bool npl_model_moe_stats(const npl_model *m, npl_moe_stats *out)
{
    memset(out, 0, sizeof *out);
    const npl_moe *mo = m->moe;
    if (!mo)
        return false;
    out->n_expert = mo->cfg.n_expert;
    out->n_used = mo->cfg.n_used;
    out->rows = mo->rows_done;
    out->expert_bytes_read = mo->expert_bytes_read;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const npl_moe_layer *L = &mo->layers[l];
        if (!L->gate)
            continue;
        out->n_moe_layers++;
        for (uint32_t j = 0; j < mo->cfg.n_expert; j++)
            out->expert_bytes_all += expert_bytes(L, j);
    }
    return true;
}
