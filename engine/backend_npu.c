/* The NPU host runtime (see backend_npu.h): residency plan, per-sequence
 * run lists, chunked prefill and decode through the device interface. */
#include "backend_npu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "model_internal.h"
#include "npu_device.h"
#include "npu_weight_cache.h"
#include "q4nx.h"

/* Weight offsets inside a static buffer are multiples of this: above the
 * device's argument alignment, and a cache line. */
#define WEIGHT_ALIGN 64u
#define ABSENT SIZE_MAX

/* ---- the residency plan ------------------------------------------------ */

/* A layer's weights, in one static buffer each layer. */
enum layer_weight {
    LW_ATTN_NORM, LW_WQ, LW_WK, LW_WV, LW_Q_NORM, LW_K_NORM,
    LW_WO, LW_POST_ATTN_NORM, LW_FFN_NORM, LW_GATE, LW_UP, LW_DOWN, LW_POST_FFN_NORM,
    LW_COUNT
};

/* Contract argument names, in enum order. */
static const char *const layer_weight_arg[LW_COUNT] = {
    "attn_norm", "wq", "wk", "wv", "q_norm", "k_norm",
    "wo", "post_attn_norm", "ffn_norm", "w_gate", "w_up", "w_down", "post_ffn_norm",
};

/* Which of them each kind of group takes. */
static const enum layer_weight qkv_weights[] = {
    LW_ATTN_NORM, LW_WQ, LW_WK, LW_WV, LW_Q_NORM, LW_K_NORM,
};
static const enum layer_weight o_ffn_weights[] = {
    LW_WO, LW_POST_ATTN_NORM, LW_FFN_NORM, LW_GATE, LW_UP, LW_DOWN, LW_POST_FFN_NORM,
};

/* The output norm, LM head and rope factors share one more buffer. */
enum head_weight { HW_OUT_NORM, HW_W_OUT, HW_ROPE_FREQS, HW_COUNT };

/* Where a device weight comes from: a matrix of the model (repacked to
 * Q4NX) or a vector (norms to bf16, rope factors kept f32). */
typedef struct weight_src {
    char name[64];          /* GGUF tensor name: the cache's key, and for messages */
    const npl_matrix *mat;
    const float *vec;
    uint32_t n;             /* vector length */
    bool keep_f32;
} weight_src;

/* ---- the runtime ------------------------------------------------------- */

/* The kernel groups, loaded once. */
typedef struct npu_groups {
    npl_npu_group *qkv_mv, *attn_o_ffn_mv, *attention_decode, *o_ffn_mv; /* decode */
    npl_npu_group *qkv, *attention, *o_ffn;                             /* prefill */
    npl_npu_group *lm_head;
    bool fused_decode; /* attn_o_ffn_mv present: 2 dispatches per layer */
} npu_groups;

struct npl_backend_npu {
    npl_model *m; /* borrowed: the model owns this runtime */
    npl_npu_device *dev;
    npu_groups g;
    uint32_t chunk;
    npl_npu_shape base; /* what every run shares */

    npl_npu_buffer **layer_w;        /* n_layer static buffers */
    size_t (*layer_off)[LW_COUNT];   /* n_layer: offset of each weight or ABSENT */
    npl_npu_buffer *head_w;
    size_t head_off[HW_COUNT];
    uint64_t weight_bytes;

    npl_npu_buffer *x;      /* io [chunk, n_embd] f32: the residual stream */
    npl_npu_buffer *q;      /* intermediate [chunk, n_head*head_dim] bf16 */
    npl_npu_buffer *attn;   /* intermediate [chunk, n_head*head_dim] bf16 */
    npl_npu_buffer *logits; /* output [n_vocab] f32 */
    float *x_host;          /* host view of x */
    uint64_t activation_bytes;

    /* Batched decode: sequence i of a step uses row i of x, q and attn
     * and slot i of batch_logits, so a step of up to batch_cap sequences
     * is one run list and one submission. The list is kept while the
     * same sequences come back in the same order. */
    size_t x_stride, q_stride, logits_stride; /* bytes between slots */
    uint32_t batch_cap;
    npl_npu_buffer *batch_logits; /* output [batch_logits_slots][n_vocab] f32, grown on demand */
    uint32_t batch_logits_slots;
    npl_npu_runlist *batch;
    npl_npu_seq **batch_seqs;     /* batch_cap entries: whom `batch` holds */
    uint32_t batch_n;             /* 0: batch holds nothing */
    uint64_t kv_bytes;      /* live sequences */
    npl_npu_seq *seqs;      /* live sequences, so freeing the model first is safe */

    npl_device_stats stats; /* per-phase traffic; the rest filled on demand */
};

struct npl_npu_seq {
    npl_backend_npu *b;
    npl_seq *seq;
    npl_npu_seq *prev, *next;
    uint32_t n_ctx;
    npl_npu_buffer *k_cache, *v_cache; /* [n_layer][n_ctx, n_head_kv*head_dim] bf16 */
    size_t kv_layer_bytes;             /* stride between layers (aligned) */
    npl_npu_runlist *decode;           /* every layer + lm_head, one token */
    npl_npu_runlist *prefill;          /* every layer over one chunk */
    npl_npu_runlist *prefill_last;     /* the same + lm_head of row prefill_last_rows-1 */
    uint32_t prefill_last_rows;        /* 0: prefill_last not built yet */
};

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static size_t q_dim(const npl_hparams *hp)
{
    return (size_t)hp->n_head * hp->head_dim;
}

static size_t kv_dim(const npl_hparams *hp)
{
    return (size_t)hp->n_head_kv * hp->head_dim;
}

/* Where one sequence's activations sit in a run: byte offsets of its row
 * of x, q and attn, and its logits. */
typedef struct act_slot {
    size_t x, q, attn;
    npl_npu_buffer *logits;
    size_t logits_off;
} act_slot;

/* ---- weights ----------------------------------------------------------- */

static void src_matrix(weight_src *s, const npl_matrix *mat, const char *fmt, uint32_t layer)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, fmt, layer);
    s->mat = mat;
}

static void src_vector(weight_src *s, const float *vec, uint32_t n, const char *fmt, uint32_t layer)
{
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, fmt, layer);
    s->vec = vec;
    s->n = vec ? n : 0;
}

static void layer_sources(const npl_model *m, uint32_t l, weight_src src[LW_COUNT])
{
    const npl_layer *L = &m->layers[l];
    const npl_hparams *hp = &m->hp;
    src_vector(&src[LW_ATTN_NORM], L->attn_norm, hp->n_embd, "blk.%u.attn_norm.weight", l);
    src_matrix(&src[LW_WQ], &L->wq, "blk.%u.attn_q.weight", l);
    src_matrix(&src[LW_WK], &L->wk, "blk.%u.attn_k.weight", l);
    src_matrix(&src[LW_WV], &L->wv, "blk.%u.attn_v.weight", l);
    src_vector(&src[LW_Q_NORM], L->attn_q_norm, hp->head_dim, "blk.%u.attn_q_norm.weight", l);
    src_vector(&src[LW_K_NORM], L->attn_k_norm, hp->head_dim, "blk.%u.attn_k_norm.weight", l);
    src_matrix(&src[LW_WO], &L->wo, "blk.%u.attn_output.weight", l);
    src_vector(&src[LW_POST_ATTN_NORM], L->post_attn_norm, hp->n_embd,
               "blk.%u.post_attention_norm.weight", l);
    src_vector(&src[LW_FFN_NORM], L->ffn_norm, hp->n_embd, "blk.%u.ffn_norm.weight", l);
    src_matrix(&src[LW_GATE], &L->w_gate, "blk.%u.ffn_gate.weight", l);
    src_matrix(&src[LW_UP], &L->w_up, "blk.%u.ffn_up.weight", l);
    src_matrix(&src[LW_DOWN], &L->w_down, "blk.%u.ffn_down.weight", l);
    src_vector(&src[LW_POST_FFN_NORM], L->post_ffn_norm, hp->n_embd,
               "blk.%u.post_ffw_norm.weight", l);
}

static void head_sources(const npl_model *m, weight_src src[HW_COUNT])
{
    src_vector(&src[HW_OUT_NORM], m->output_norm, m->hp.n_embd, "output_norm.weight", 0);
    src_matrix(&src[HW_W_OUT], &m->output,
               m->output.data == m->tok_embd.data ? "token_embd.weight" : "output.weight", 0);
    src_vector(&src[HW_ROPE_FREQS], m->rope_freqs, m->hp.n_rot / 2, "rope_freqs.weight", 0);
    src[HW_ROPE_FREQS].keep_f32 = true;
}

static bool src_present(const weight_src *s)
{
    return s->mat || s->vec;
}

/* Device bytes of one weight; checks that it can be repacked. */
static npl_status src_bytes(const weight_src *s, size_t *bytes, npl_error *err)
{
    if (s->vec) {
        *bytes = (size_t)s->n * (s->keep_f32 ? sizeof(float) : sizeof(uint16_t));
        return NPL_OK;
    }
    if (!npl_q4nx_can_repack(s->mat->type)) {
        const npl_type_traits *tr = npl_type_traits_get(s->mat->type);
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu: tensor '%s' has type %s, which cannot be repacked to Q4NX",
                             s->name, tr ? tr->name : "unknown");
    }
    npl_q4nx_layout layout;
    npl_status st = npl_q4nx_layout_init(&layout, s->mat->n_rows, s->mat->n_cols, err);
    if (st == NPL_OK)
        *bytes = layout.bytes;
    return st;
}

/* A vector in its device format at dst: bf16, or f32 kept as it is. */
static void vector_fill(const weight_src *s, uint8_t *dst)
{
    if (s->keep_f32) {
        memcpy(dst, s->vec, (size_t)s->n * sizeof(float));
        return;
    }
    for (uint32_t i = 0; i < s->n; i++) {
        uint16_t h = npl_fp32_to_bf16(s->vec[i]);
        memcpy(dst + 2 * (size_t)i, &h, sizeof h);
    }
}

/* One static buffer of weights: a layer's, or the output weights. */
typedef struct weight_block {
    weight_src src[LW_COUNT]; /* n of them; LW_COUNT >= HW_COUNT */
    size_t n;
    size_t *off;              /* n offsets into the buffer, or ABSENT */
    npl_npu_buffer **buf;
    size_t bytes;
    uint8_t *host;            /* host view, filled before the one upload */
} weight_block;

/* Lays out a block's weights and allocates its buffer. */
static npl_status place_block(npl_backend_npu *b, weight_block *blk, const char *label,
                              npl_error *err)
{
    size_t cursor = 0;
    for (size_t i = 0; i < blk->n; i++) {
        blk->off[i] = ABSENT;
        if (!src_present(&blk->src[i]))
            continue;
        size_t bytes = 0;
        npl_status st = src_bytes(&blk->src[i], &bytes, err);
        if (st != NPL_OK)
            return st;
        blk->off[i] = cursor;
        cursor = align_up(cursor + bytes, WEIGHT_ALIGN);
    }
    npl_status st = npl_npu_buffer_alloc(b->dev, cursor, NPL_NPU_BUF_STATIC, label, blk->buf, err);
    if (st != NPL_OK)
        return st;
    blk->host = npl_npu_buffer_map(*blk->buf, err);
    if (!blk->host)
        return err ? err->code : NPL_ERR_INTERNAL;
    blk->bytes = cursor;
    b->weight_bytes += cursor;
    return NPL_OK;
}

/* Fills a block's vectors and lists its matrices (with their room) for
 * npl_npu_weights_fill. */
static void block_contents(weight_block *blk, npl_npu_cache_matrix *mats, size_t *n_mats)
{
    for (size_t i = 0; i < blk->n; i++) {
        if (blk->off[i] == ABSENT)
            continue;
        size_t end = blk->bytes;
        for (size_t j = 0; j < blk->n; j++)
            if (blk->off[j] != ABSENT && blk->off[j] > blk->off[i] && blk->off[j] < end)
                end = blk->off[j];
        const weight_src *s = &blk->src[i];
        if (s->vec) {
            vector_fill(s, blk->host + blk->off[i]);
            continue;
        }
        mats[(*n_mats)++] = (npl_npu_cache_matrix){
            .name = s->name, .mat = s->mat, .dst = blk->host + blk->off[i],
            .dst_bytes = end - blk->off[i]};
    }
}

/* Every layer's weights and the output weights in their static buffers,
 * the matrices from the Q4NX cache or repacked; then each buffer is
 * uploaded once (the only time these bytes cross to the device) and the
 * weights are sealed. */
static npl_status upload_weights(npl_backend_npu *b, const char *cache_dir, npl_error *err)
{
    const npl_model *m = b->m;
    size_t n_blocks = (size_t)m->hp.n_layer + 1;
    b->layer_w = calloc(m->hp.n_layer, sizeof *b->layer_w);
    b->layer_off = calloc(m->hp.n_layer, sizeof *b->layer_off);
    weight_block *blocks = calloc(n_blocks, sizeof *blocks);
    npl_npu_cache_matrix *mats = calloc(n_blocks * LW_COUNT, sizeof *mats);
    npl_status st = NPL_OK;
    if (!b->layer_w || !b->layer_off || !blocks || !mats) {
        st = npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for the layer plan");
        goto done;
    }
    char label[NPL_NPU_NAME_MAX];
    size_t n_mats = 0;
    for (size_t k = 0; k < n_blocks && st == NPL_OK; k++) {
        weight_block *blk = &blocks[k];
        if (k < m->hp.n_layer) {
            layer_sources(m, (uint32_t)k, blk->src);
            blk->n = LW_COUNT;
            blk->off = b->layer_off[k];
            blk->buf = &b->layer_w[k];
            snprintf(label, sizeof label, "layer %zu weights", k);
        } else {
            head_sources(m, blk->src);
            blk->n = HW_COUNT;
            blk->off = b->head_off;
            blk->buf = &b->head_w;
            snprintf(label, sizeof label, "output weights");
        }
        if ((st = place_block(b, blk, label, err)) == NPL_OK)
            block_contents(blk, mats, &n_mats);
    }
    npl_npu_cache_report report;
    if (st == NPL_OK &&
        (st = npl_npu_weights_fill(npl_gguf_path(m->gguf), cache_dir, mats, n_mats, &report,
                                   err)) == NPL_OK) {
        b->stats.load_matrices_repacked = report.repacked;
        b->stats.load_matrices_cached = report.cached;
        b->stats.load_cache_written = report.written;
        snprintf(b->stats.load_cache_note, sizeof b->stats.load_cache_note, "%s", report.note);
    }
    for (size_t k = 0; k < n_blocks && st == NPL_OK; k++)
        st = npl_npu_buffer_sync(*blocks[k].buf, NPL_NPU_SYNC_TO_DEVICE, 0, blocks[k].bytes, err);
    if (st == NPL_OK)
        st = npl_npu_device_seal_weights(b->dev, err);
done:
    free(blocks);
    free(mats);
    return st;
}

/* ---- kernel groups ----------------------------------------------------- */

static npl_status load_group(npl_backend_npu *b, const char *name, npl_npu_group **out,
                             npl_error *err)
{
    npl_error sub;
    npl_error_clear(&sub);
    npl_status st = npl_npu_group_load(b->dev, name, out, &sub);
    if (st != NPL_OK)
        return npl_error_set(err, st, "npu: kernel group %s: %s", name, sub.message);
    return NPL_OK;
}

/* The fixed `chunk` a prefill binary was built for, or 0. */
static uint32_t fixed_chunk(const npl_npu_group *g)
{
    const npl_npu_group_spec *spec = npl_npu_group_spec_get(g);
    for (uint32_t i = 0; i < spec->n_fixed; i++)
        if (strcmp(npl_npu_shape_symbol_names[spec->fixed[i].symbol], "chunk") == 0)
            return spec->fixed[i].value;
    return 0;
}

static npl_status load_groups(npl_backend_npu *b, npl_error *err)
{
    npu_groups *g = &b->g;
    const npl_npu_manifest *man = npl_npu_device_manifest(b->dev);
    g->fused_decode = npl_npu_manifest_find(man, "attn_o_ffn_mv") != NULL;
    npl_status st;
    if ((st = load_group(b, "rms_qkv_rope_mv", &g->qkv_mv, err)) ||
        (st = load_group(b, "lm_head", &g->lm_head, err)) ||
        (st = load_group(b, "rms_qkv_rope", &g->qkv, err)) ||
        (st = load_group(b, "attention", &g->attention, err)) ||
        (st = load_group(b, "o_ffn", &g->o_ffn, err)))
        return st;
    if (g->fused_decode)
        st = load_group(b, "attn_o_ffn_mv", &g->attn_o_ffn_mv, err);
    else if (!(st = load_group(b, "attention_decode", &g->attention_decode, err)))
        st = load_group(b, "o_ffn_mv", &g->o_ffn_mv, err);
    if (st != NPL_OK)
        return st;

    /* The prefill chunk is the binaries' fixed row count when they have
     * one (all three must agree), else the model's prefill chunk. */
    uint32_t chunk = 0;
    const npl_npu_group *prefill[] = {g->qkv, g->attention, g->o_ffn};
    for (size_t i = 0; i < 3; i++) {
        uint32_t c = fixed_chunk(prefill[i]);
        if (c && chunk && c != chunk)
            return npl_error_set(err, NPL_ERR_FORMAT,
                                 "npu: the prefill kernel groups are built for different chunks "
                                 "(%u and %u rows)", chunk, c);
        if (c)
            chunk = c;
    }
    b->chunk = chunk ? chunk : b->m->prefill_chunk;
    return NPL_OK;
}

/* ---- shapes ------------------------------------------------------------ */

static npl_status init_base_shape(npl_backend_npu *b, npl_error *err)
{
    const npl_model *m = b->m;
    const npl_hparams *hp = &m->hp;
    /* The LM head reads the last row of a prefill chunk through an
     * argument offset, which must stay aligned. */
    if ((hp->n_embd * sizeof(float)) % NPL_NPU_ARG_ALIGN)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu: n_embd = %u is not a multiple of 16, which the device's "
                             "argument alignment needs", hp->n_embd);
    npl_npu_shape *s = &b->base;
    memset(s, 0, sizeof *s);
    s->n_embd = hp->n_embd;
    s->n_head = hp->n_head;
    s->n_head_kv = hp->n_head_kv;
    s->head_dim = hp->head_dim;
    s->n_ff = hp->n_ff;
    s->n_vocab = hp->n_vocab;
    s->n_tokens = 1;
    s->rope_dims = hp->n_rot;
    s->chunk = b->chunk;
    s->rope_style = m->rope_neox ? NPL_NPU_ROPE_NEOX : NPL_NPU_ROPE_NORM;
    s->act = m->ffn_gelu ? NPL_NPU_ACT_GELU_TANH : NPL_NPU_ACT_SILU;
    s->causal = 1;
    s->rms_eps = hp->rms_eps;
    s->rope_theta = hp->rope_base;
    s->rope_freq_scale = 1.0f;
    s->attn_scale = m->attn_scale;
    return NPL_OK;
}

/* The shape of layer l's groups over rows pos .. pos+n_tokens-1. */
static npl_npu_shape layer_shape(const npl_backend_npu *b, uint32_t l, uint32_t n_tokens,
                                 uint32_t pos, uint32_t n_ctx)
{
    const npl_hparams *hp = &b->m->hp;
    npl_npu_shape s = b->base;
    s.n_tokens = n_tokens;
    s.pos = pos;
    s.n_ctx = n_ctx;
    if (b->m->layers[l].local) {
        s.window = hp->n_swa;
        s.rope_theta = hp->rope_base_swa;
    } else if (hp->rope_scale > 0.0f) {
        s.rope_freq_scale = hp->rope_scale;
    }
    return s;
}

static npl_npu_shape head_shape(const npl_backend_npu *b)
{
    npl_npu_shape s = b->base;
    s.n_tokens = 1;
    return s;
}

/* ---- run lists --------------------------------------------------------- */

static npl_status set_arg(npl_npu_arg *args, const npl_npu_group *g, const char *name,
                          npl_npu_buffer *buf, size_t offset, npl_error *err)
{
    if (npl_npu_group_arg_index(npl_npu_group_spec_get(g), name) < 0)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu: kernel group %s has no argument '%s', which this model needs",
                             npl_npu_group_spec_get(g)->name, name);
    return npl_npu_args_set(args, g, name, buf, offset, err);
}

static npl_status set_layer_weights(const npl_backend_npu *b, npl_npu_arg *args,
                                    const npl_npu_group *g, uint32_t l,
                                    const enum layer_weight *which, size_t n, npl_error *err)
{
    for (size_t i = 0; i < n; i++) {
        size_t off = b->layer_off[l][which[i]];
        if (off == ABSENT)
            continue;
        npl_status st = set_arg(args, g, layer_weight_arg[which[i]], b->layer_w[l], off, err);
        if (st != NPL_OK)
            return st;
    }
    return NPL_OK;
}

static npl_status set_kv(const npl_npu_seq *ns, npl_npu_arg *args, const npl_npu_group *g,
                         uint32_t l, npl_error *err)
{
    size_t off = (size_t)l * ns->kv_layer_bytes;
    npl_status st = set_arg(args, g, "k_cache", ns->k_cache, off, err);
    if (st == NPL_OK)
        st = set_arg(args, g, "v_cache", ns->v_cache, off, err);
    return st;
}

/* rms_qkv_rope(_mv): x -> q, and K/V rows into the layer's cache. */
static npl_status add_qkv(const npl_npu_seq *ns, npl_npu_runlist *rl, npl_npu_group *g,
                          uint32_t l, const npl_npu_shape *shape, const act_slot *a,
                          npl_error *err)
{
    const npl_backend_npu *b = ns->b;
    npl_npu_arg args[NPL_NPU_MAX_ARGS];
    memset(args, 0, sizeof args);
    npl_status st;
    if ((st = set_arg(args, g, "x", b->x, a->x, err)) ||
        (st = set_layer_weights(b, args, g, l, qkv_weights,
                                sizeof qkv_weights / sizeof qkv_weights[0], err)) ||
        (st = set_arg(args, g, "q", b->q, a->q, err)) || (st = set_kv(ns, args, g, l, err)))
        return st;
    if (b->head_off[HW_ROPE_FREQS] != ABSENT &&
        (st = set_arg(args, g, "rope_freqs", b->head_w, b->head_off[HW_ROPE_FREQS], err)))
        return st;
    return npl_npu_runlist_add(rl, g, args, shape, err);
}

/* attention(_decode): q and the cache -> attn. */
static npl_status add_attention(const npl_npu_seq *ns, npl_npu_runlist *rl, npl_npu_group *g,
                                uint32_t l, const npl_npu_shape *shape, const act_slot *a,
                                npl_error *err)
{
    const npl_backend_npu *b = ns->b;
    npl_npu_arg args[NPL_NPU_MAX_ARGS];
    memset(args, 0, sizeof args);
    npl_status st;
    if ((st = set_arg(args, g, "q", b->q, a->q, err)) || (st = set_kv(ns, args, g, l, err)) ||
        (st = set_arg(args, g, "attn", b->attn, a->attn, err)))
        return st;
    return npl_npu_runlist_add(rl, g, args, shape, err);
}

/* o_ffn(_mv) from attn, or attn_o_ffn_mv from q and the cache: x updated. */
static npl_status add_o_ffn(const npl_npu_seq *ns, npl_npu_runlist *rl, npl_npu_group *g,
                            uint32_t l, bool fused_attention, const npl_npu_shape *shape,
                            const act_slot *a, npl_error *err)
{
    const npl_backend_npu *b = ns->b;
    npl_npu_arg args[NPL_NPU_MAX_ARGS];
    memset(args, 0, sizeof args);
    npl_status st;
    if (fused_attention) {
        if ((st = set_arg(args, g, "q", b->q, a->q, err)) || (st = set_kv(ns, args, g, l, err)))
            return st;
    } else if ((st = set_arg(args, g, "attn", b->attn, a->attn, err))) {
        return st;
    }
    if ((st = set_arg(args, g, "x", b->x, a->x, err)) ||
        (st = set_layer_weights(b, args, g, l, o_ffn_weights,
                                sizeof o_ffn_weights / sizeof o_ffn_weights[0], err)))
        return st;
    return npl_npu_runlist_add(rl, g, args, shape, err);
}

/* lm_head of the slot's row of x into its logits. */
static npl_status add_lm_head(const npl_backend_npu *b, npl_npu_runlist *rl, const act_slot *a,
                              npl_error *err)
{
    npl_npu_group *g = b->g.lm_head;
    npl_npu_arg args[NPL_NPU_MAX_ARGS];
    memset(args, 0, sizeof args);
    npl_status st;
    npl_npu_shape shape = head_shape(b);
    if ((st = set_arg(args, g, "x", b->x, a->x, err)) ||
        (st = set_arg(args, g, "out_norm", b->head_w, b->head_off[HW_OUT_NORM], err)) ||
        (st = set_arg(args, g, "w_out", b->head_w, b->head_off[HW_W_OUT], err)) ||
        (st = set_arg(args, g, "logits", a->logits, a->logits_off, err)))
        return st;
    return npl_npu_runlist_add(rl, g, args, &shape, err);
}

static uint32_t decode_runs_per_layer(const npl_backend_npu *b)
{
    return b->g.fused_decode ? 2 : 3;
}

/* Sequence i of a batched step: row i of x, q and attn, logits slot i. */
static act_slot batch_slot(const npl_backend_npu *b, uint32_t i)
{
    return (act_slot){.x = i * b->x_stride, .q = i * b->q_stride, .attn = i * b->q_stride,
                      .logits = b->batch_logits, .logits_off = i * b->logits_stride};
}

/* Row 0 and the logits buffer: a sequence decoding or prefilling alone. */
static act_slot solo_slot(const npl_backend_npu *b)
{
    return (act_slot){.logits = b->logits};
}

/* Runs in a decode step: runs_per_layer per layer and the LM head. */
static size_t decode_runs(const npl_backend_npu *b)
{
    return (size_t)decode_runs_per_layer(b) * b->m->hp.n_layer + 1;
}

/* One token of ns through every layer and the LM head, its activations
 * in slot a. */
static npl_status add_decode_runs(npl_npu_seq *ns, npl_npu_runlist *rl, const act_slot *a,
                                  npl_error *err)
{
    npl_backend_npu *b = ns->b;
    const npu_groups *g = &b->g;
    npl_status st = NPL_OK;
    for (uint32_t l = 0; l < b->m->hp.n_layer && st == NPL_OK; l++) {
        npl_npu_shape s = layer_shape(b, l, 1, 0, ns->n_ctx);
        st = add_qkv(ns, rl, g->qkv_mv, l, &s, a, err);
        if (st == NPL_OK && g->fused_decode)
            st = add_o_ffn(ns, rl, g->attn_o_ffn_mv, l, true, &s, a, err);
        if (st == NPL_OK && !g->fused_decode &&
            !(st = add_attention(ns, rl, g->attention_decode, l, &s, a, err)))
            st = add_o_ffn(ns, rl, g->o_ffn_mv, l, false, &s, a, err);
    }
    if (st == NPL_OK)
        st = add_lm_head(b, rl, a, err);
    return st;
}

static npl_status build_decode_list(npl_npu_seq *ns, npl_error *err)
{
    act_slot a = solo_slot(ns->b);
    return add_decode_runs(ns, ns->decode, &a, err);
}

static npl_status add_prefill_layers(npl_npu_seq *ns, npl_npu_runlist *rl, npl_error *err)
{
    npl_backend_npu *b = ns->b;
    act_slot a = solo_slot(b);
    npl_status st = NPL_OK;
    for (uint32_t l = 0; l < b->m->hp.n_layer && st == NPL_OK; l++) {
        npl_npu_shape s = layer_shape(b, l, 1, 0, ns->n_ctx);
        if (!(st = add_qkv(ns, rl, b->g.qkv, l, &s, &a, err)) &&
            !(st = add_attention(ns, rl, b->g.attention, l, &s, &a, err)))
            st = add_o_ffn(ns, rl, b->g.o_ffn, l, false, &s, &a, err);
    }
    return st;
}

/* Sets the shapes of ns's layer runs in rl (runs_per_layer each, layer
 * order, from run `first` on) for rows pos .. pos+n_tokens-1; an lm_head
 * after them keeps its own. Not causal: the rows also see each other's
 * keys ahead of them. */
static npl_status set_layer_shapes(npl_npu_seq *ns, npl_npu_runlist *rl, size_t first,
                                   uint32_t runs_per_layer, uint32_t n_tokens, uint32_t pos,
                                   bool causal, npl_error *err)
{
    const npl_backend_npu *b = ns->b;
    for (uint32_t l = 0; l < b->m->hp.n_layer; l++) {
        npl_npu_shape s = layer_shape(b, l, n_tokens, pos, ns->n_ctx);
        s.causal = causal ? 1 : 0;
        for (uint32_t r = 0; r < runs_per_layer; r++) {
            npl_status st = npl_npu_runlist_set_shape(
                rl, first + (size_t)l * runs_per_layer + r, &s, err);
            if (st != NPL_OK)
                return st;
        }
    }
    return NPL_OK;
}

/* ---- creation ---------------------------------------------------------- */

static npl_status alloc_activation(npl_backend_npu *b, size_t size, npl_npu_buf_class cls,
                                   const char *label, npl_npu_buffer **out, npl_error *err)
{
    npl_status st = npl_npu_buffer_alloc(b->dev, size, cls, label, out, err);
    if (st == NPL_OK)
        b->activation_bytes += size;
    return st;
}

static npl_status alloc_activations(npl_backend_npu *b, npl_error *err)
{
    const npl_hparams *hp = &b->m->hp;
    size_t rows = b->chunk;
    npl_status st;
    if ((st = alloc_activation(b, rows * hp->n_embd * sizeof(float), NPL_NPU_BUF_IO, "x", &b->x,
                               err)) ||
        (st = alloc_activation(b, rows * q_dim(hp) * sizeof(uint16_t), NPL_NPU_BUF_INTERMEDIATE,
                               "q", &b->q, err)) ||
        (st = alloc_activation(b, rows * q_dim(hp) * sizeof(uint16_t), NPL_NPU_BUF_INTERMEDIATE,
                               "attn", &b->attn, err)) ||
        (st = alloc_activation(b, (size_t)hp->n_vocab * sizeof(float), NPL_NPU_BUF_OUTPUT,
                               "logits", &b->logits, err)))
        return st;
    b->x_host = npl_npu_buffer_map(b->x, err);
    return b->x_host ? NPL_OK : (err ? err->code : NPL_ERR_INTERNAL);
}

/* Slots of a batched step: as many rows as x, q and attn hold at
 * aligned strides (the chunk, unless q rows need padding to align). */
static npl_status init_batch(npl_backend_npu *b, npl_error *err)
{
    const npl_hparams *hp = &b->m->hp;
    b->x_stride = (size_t)hp->n_embd * sizeof(float); /* aligned: init_base_shape checked */
    b->q_stride = align_up(q_dim(hp) * sizeof(uint16_t), NPL_NPU_ARG_ALIGN);
    b->logits_stride = align_up((size_t)hp->n_vocab * sizeof(float), NPL_NPU_ARG_ALIGN);
    size_t q_rows = npl_npu_buffer_size(b->q) / b->q_stride;
    b->batch_cap = q_rows < b->chunk ? (uint32_t)q_rows : b->chunk;
    if (b->batch_cap == 0)
        b->batch_cap = 1; /* row 0 is always there */
    b->batch_seqs = calloc(b->batch_cap, sizeof *b->batch_seqs);
    if (!b->batch_seqs)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for batched decode");
    return npl_npu_runlist_create(b->dev, &b->batch, err);
}

/* Forgets the batch list (its sequences changed, or the logits moved). */
static void batch_forget(npl_backend_npu *b)
{
    npl_npu_runlist_clear(b->batch);
    b->batch_n = 0;
}

/* Logits slots for n sequences, the buffer grown (and the list that
 * pointed into the old one forgotten) when it has fewer. */
static npl_status batch_logits_reserve(npl_backend_npu *b, uint32_t n, npl_error *err)
{
    if (b->batch_logits_slots >= n)
        return NPL_OK;
    batch_forget(b);
    if (b->batch_logits) {
        b->activation_bytes -= npl_npu_buffer_size(b->batch_logits);
        npl_npu_buffer_free(b->batch_logits);
        b->batch_logits = NULL;
        b->batch_logits_slots = 0;
    }
    npl_status st = alloc_activation(b, (size_t)n * b->logits_stride, NPL_NPU_BUF_OUTPUT,
                                     "batch logits", &b->batch_logits, err);
    if (st == NPL_OK)
        b->batch_logits_slots = n;
    return st;
}

static void seq_free(npl_npu_seq *ns);

static void traffic_add(npl_device_traffic *t, const npl_npu_stats *before,
                        const npl_npu_stats *after)
{
    t->dispatches += after->dispatches - before->dispatches;
    t->submissions += after->submissions - before->submissions;
    t->h2d_weight_bytes += after->h2d_weight_bytes - before->h2d_weight_bytes;
    t->h2d_activation_bytes += after->h2d_activation_bytes - before->h2d_activation_bytes;
    t->d2h_activation_bytes += after->d2h_activation_bytes - before->d2h_activation_bytes;
}

npl_status npl_backend_npu_create(npl_model *m, struct npl_npu_device *dev,
                                  npl_backend_npu **out, npl_error *err)
{
    return npl_backend_npu_create_in(m, dev, NULL, out, err);
}

npl_status npl_backend_npu_create_in(npl_model *m, struct npl_npu_device *dev,
                                     const char *cache_dir, npl_backend_npu **out,
                                     npl_error *err)
{
    *out = NULL;
    if (!m || !dev) {
        npl_npu_device_destroy(dev);
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: runtime needs a model and a device");
    }
    npl_backend_npu *b = calloc(1, sizeof *b);
    if (!b) {
        npl_npu_device_destroy(dev);
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for the runtime");
    }
    b->m = m;
    b->dev = dev;
    npl_npu_stats before, after;
    npl_npu_device_stats(dev, &before);
    npl_status st;
    if ((st = load_groups(b, err)) || (st = init_base_shape(b, err)) ||
        (st = upload_weights(b, cache_dir, err)) || (st = alloc_activations(b, err)) ||
        (st = init_batch(b, err))) {
        npl_backend_npu_free(b);
        return st;
    }
    npl_npu_device_stats(dev, &after);
    traffic_add(&b->stats.load, &before, &after);
    *out = b;
    return NPL_OK;
}

void npl_backend_npu_free(npl_backend_npu *b)
{
    if (!b)
        return;
    /* Sequences outliving the model lose their device cache here; using
     * them afterwards is an error, as for any sequence of a freed model. */
    while (b->seqs) {
        b->seqs->seq->npu = NULL;
        seq_free(b->seqs);
    }
    /* The device frees every buffer, group and run list still alive. */
    npl_npu_device_destroy(b->dev);
    free(b->layer_w);
    free(b->layer_off);
    free(b->batch_seqs);
    free(b);
}

void npl_backend_npu_stats(const npl_backend_npu *b, npl_device_stats *out)
{
    *out = b->stats;
    out->weight_bytes = b->weight_bytes;
    out->kv_bytes = b->kv_bytes;
    out->activation_bytes = b->activation_bytes;
    out->prefill_chunk = b->chunk;
    out->groups_per_layer_decode = decode_runs_per_layer(b);
}

/* ---- sequences --------------------------------------------------------- */

static void seq_free(npl_npu_seq *ns)
{
    if (!ns)
        return;
    if (ns->prev)
        ns->prev->next = ns->next;
    else if (ns->b->seqs == ns)
        ns->b->seqs = ns->next;
    if (ns->next)
        ns->next->prev = ns->prev;
    for (uint32_t i = 0; i < ns->b->batch_n; i++)
        if (ns->b->batch_seqs[i] == ns) { /* the list names its KV cache */
            batch_forget(ns->b);
            break;
        }
    npl_npu_runlist_free(ns->decode);
    npl_npu_runlist_free(ns->prefill);
    npl_npu_runlist_free(ns->prefill_last);
    if (ns->k_cache) {
        ns->b->kv_bytes -= npl_npu_buffer_size(ns->k_cache);
        npl_npu_buffer_free(ns->k_cache);
    }
    if (ns->v_cache) {
        ns->b->kv_bytes -= npl_npu_buffer_size(ns->v_cache);
        npl_npu_buffer_free(ns->v_cache);
    }
    free(ns);
}

npl_status npl_backend_npu_seq_attach(npl_backend_npu *b, npl_seq *s, npl_error *err)
{
    const npl_hparams *hp = &b->m->hp;
    npl_npu_seq *ns = calloc(1, sizeof *ns);
    if (!ns)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for a sequence");
    ns->b = b;
    ns->n_ctx = s->n_ctx;
    ns->kv_layer_bytes = align_up((size_t)s->n_ctx * kv_dim(hp) * sizeof(uint16_t),
                                  NPL_NPU_ARG_ALIGN);
    size_t bytes = ns->kv_layer_bytes * hp->n_layer;
    npl_status st;
    if ((st = npl_npu_buffer_alloc(b->dev, bytes, NPL_NPU_BUF_INTERMEDIATE, "k_cache",
                                   &ns->k_cache, err)))
        goto fail;
    b->kv_bytes += bytes;
    if ((st = npl_npu_buffer_alloc(b->dev, bytes, NPL_NPU_BUF_INTERMEDIATE, "v_cache",
                                   &ns->v_cache, err)))
        goto fail;
    b->kv_bytes += bytes;
    if ((st = npl_npu_runlist_create(b->dev, &ns->decode, err)) ||
        (st = npl_npu_runlist_create(b->dev, &ns->prefill, err)) ||
        (st = npl_npu_runlist_create(b->dev, &ns->prefill_last, err)) ||
        (st = build_decode_list(ns, err)) || (st = add_prefill_layers(ns, ns->prefill, err)))
        goto fail;
    ns->seq = s;
    ns->next = b->seqs;
    if (b->seqs)
        b->seqs->prev = ns;
    b->seqs = ns;
    s->npu = ns;
    return NPL_OK;
fail:
    seq_free(ns);
    return st;
}

void npl_backend_npu_seq_release(npl_seq *s)
{
    if (!s)
        return;
    seq_free(s->npu);
    s->npu = NULL;
}

/* ---- forward passes ---------------------------------------------------- */

/* The first layer's input into x rows 0..n-1 on the host, then to the
 * device: the (scaled) embedding rows of tokens, or when tokens is NULL
 * the rows of embd as they are. */
static npl_status upload_input(npl_backend_npu *b, const int32_t *tokens, const float *embd,
                               size_t n, npl_error *err)
{
    const npl_model *m = b->m;
    size_t e = m->hp.n_embd;
    if (!tokens)
        memcpy(b->x_host, embd, n * e * sizeof(float));
    for (size_t i = 0; tokens && i < n; i++) {
        float *row = b->x_host + i * e;
        if (!npl_matrix_get_row(&m->tok_embd, tokens[i], row))
            return npl_error_set(err, NPL_ERR_INTERNAL, "npu: cannot read embedding row %d",
                                 tokens[i]);
        if (m->embd_scale != 1.0f)
            for (size_t j = 0; j < e; j++)
                row[j] *= m->embd_scale;
    }
    return npl_npu_buffer_sync(b->x, NPL_NPU_SYNC_TO_DEVICE, 0, n * e * sizeof(float), err);
}

/* s's logits from the slot a filled. */
static npl_status read_logits(npl_backend_npu *b, npl_seq *s, const act_slot *a, npl_error *err)
{
    npl_status st = npl_npu_buffer_read(a->logits, a->logits_off, s->logits,
                                        (size_t)b->m->hp.n_vocab * sizeof(float), err);
    s->has_logits = st == NPL_OK;
    return st;
}

/* Rows pos .. pos+n-1 of s from tokens (or embd rows when tokens is
 * NULL); the logits of the last one when last. */
static npl_status prefill_chunk(npl_backend_npu *b, npl_seq *s, const int32_t *tokens,
                                const float *embd, uint32_t n, bool last, bool causal,
                                npl_error *err)
{
    npl_npu_seq *ns = s->npu;
    npl_npu_runlist *rl = ns->prefill;
    npl_status st;
    if (last) {
        /* The LM head's row is an argument offset: rebuild when the
         * final chunk's length changes. */
        rl = ns->prefill_last;
        if (ns->prefill_last_rows != n) {
            npl_npu_runlist_clear(rl);
            ns->prefill_last_rows = 0;
            act_slot last_row = solo_slot(b);
            last_row.x = (size_t)(n - 1) * b->m->hp.n_embd * sizeof(float);
            if ((st = add_prefill_layers(ns, rl, err)) || (st = add_lm_head(b, rl, &last_row, err)))
                return st;
            ns->prefill_last_rows = n;
        }
    }
    if ((st = upload_input(b, tokens, embd, n, err)) ||
        (st = set_layer_shapes(ns, rl, 0, 3, n, s->pos, causal, err)) ||
        (st = npl_npu_runlist_submit(rl, err)))
        return st;
    b->stats.prefill_chunks++;
    b->stats.prefill_tokens += n;
    if (!last)
        return NPL_OK;
    b->stats.prefill_prompts++;
    act_slot a = solo_slot(b);
    return read_logits(b, s, &a, err);
}

static npl_status decode_one(npl_backend_npu *b, npl_seq *s, int32_t token, npl_error *err)
{
    npl_npu_seq *ns = s->npu;
    act_slot a = solo_slot(b);
    npl_status st;
    s->has_logits = false;
    if ((st = upload_input(b, &token, NULL, 1, err)) ||
        (st = set_layer_shapes(ns, ns->decode, 0, decode_runs_per_layer(b), 1, s->pos, true, err)) ||
        (st = npl_npu_runlist_submit(ns->decode, err)) || (st = read_logits(b, s, &a, err)))
        return st;
    b->stats.decode_tokens++;
    s->pos++;
    return NPL_OK;
}

/* The batch list for seqs (n <= batch_cap): kept from the last step when
 * it held the same sequences in the same order, else rebuilt. */
static npl_status batch_list_for(npl_backend_npu *b, npl_seq *const *seqs, uint32_t n,
                                 npl_error *err)
{
    bool same = b->batch_n == n;
    for (uint32_t i = 0; same && i < n; i++)
        same = b->batch_seqs[i] == seqs[i]->npu;
    if (same)
        return NPL_OK;
    batch_forget(b);
    for (uint32_t i = 0; i < n; i++) {
        act_slot a = batch_slot(b, i);
        npl_status st = add_decode_runs(seqs[i]->npu, b->batch, &a, err);
        if (st != NPL_OK) {
            batch_forget(b);
            return st;
        }
        b->batch_seqs[i] = seqs[i]->npu;
    }
    b->batch_n = n;
    return NPL_OK;
}

/* One token for each of n sequences (2 <= n <= batch_cap) in one
 * submission: their embedding rows into rows 0..n-1 of x, each
 * sequence's runs at its own position, then every slot's logits back. */
static npl_status decode_batch(npl_backend_npu *b, npl_seq *const *seqs, const int32_t *tokens,
                               uint32_t n, npl_error *err)
{
    npl_status st;
    for (uint32_t i = 0; i < n; i++)
        seqs[i]->has_logits = false;
    if ((st = batch_logits_reserve(b, n, err)) || (st = batch_list_for(b, seqs, n, err)) ||
        (st = upload_input(b, tokens, NULL, n, err)))
        return st;
    for (uint32_t i = 0; i < n; i++)
        if ((st = set_layer_shapes(seqs[i]->npu, b->batch, i * decode_runs(b),
                                   decode_runs_per_layer(b), 1, seqs[i]->pos, true, err)))
            return st;
    if ((st = npl_npu_runlist_submit(b->batch, err)))
        return st;
    for (uint32_t i = 0; i < n; i++) {
        act_slot a = batch_slot(b, i);
        if ((st = read_logits(b, seqs[i], &a, err)))
            return st;
        b->stats.decode_tokens++;
        seqs[i]->pos++;
    }
    return NPL_OK;
}

static npl_status check_tokens(const npl_model *m, const int32_t *tokens, size_t n, npl_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->hp.n_vocab)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "token %zu has id %d, outside the vocabulary [0, %u)", i,
                                 tokens[i], m->hp.n_vocab);
    return NPL_OK;
}

static npl_status check_seq(const npl_model *m, const npl_seq *s, const char *fn, npl_error *err)
{
    if (s->model != m)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: the sequence belongs to another model",
                             fn);
    if (!s->npu)
        return npl_error_set(err, NPL_ERR_INTERNAL, "%s: the sequence has no device KV cache", fn);
    return NPL_OK;
}

/* Feeds up to todo of the n rows (tokens or embd) in chunks. */
static npl_status prefill_rows(npl_backend_npu *b, npl_seq *s, const int32_t *tokens,
                               const float *embd, size_t n, size_t todo, bool causal,
                               size_t *consumed, npl_error *err)
{
    npl_npu_stats before, after;
    npl_npu_device_stats(b->dev, &before);
    size_t e = b->m->hp.n_embd;
    size_t done = 0;
    npl_status st = NPL_OK;
    s->has_logits = false;
    while (done < todo && st == NPL_OK) {
        uint32_t c = (uint32_t)(todo - done < b->chunk ? todo - done : b->chunk);
        st = prefill_chunk(b, s, tokens ? tokens + done : NULL, tokens ? NULL : embd + done * e, c,
                           done + c == n, causal, err);
        if (st == NPL_OK) {
            s->pos += c;
            done += c;
        }
    }
    npl_npu_device_stats(b->dev, &after);
    traffic_add(&b->stats.prefill, &before, &after);
    *consumed = done;
    return st;
}

static npl_status check_room(const npl_seq *s, size_t n, const char *what, npl_error *err)
{
    if (n > (size_t)(s->n_ctx - s->pos))
        return npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                             "%zu %s after the %u already cached exceed the context of %u tokens",
                             n, what, s->pos, s->n_ctx);
    return NPL_OK;
}

npl_status npl_backend_npu_prefill(npl_model *m, npl_seq *s, const int32_t *tokens, size_t n,
                                   size_t max_tokens_this_call, size_t *consumed,
                                   npl_error *err)
{
    if (consumed)
        *consumed = 0;
    if (!m || !m->device || !m->device->npu || !s || (n > 0 && !tokens))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_prefill: missing model, sequence or tokens");
    npl_status st = check_seq(m, s, "npl_prefill", err);
    if (st != NPL_OK || n == 0)
        return st;
    if ((st = check_tokens(m, tokens, n, err)) || (st = check_room(s, n, "prompt tokens", err)))
        return st;
    size_t todo = max_tokens_this_call && max_tokens_this_call < n ? max_tokens_this_call : n;
    size_t done = 0;
    st = prefill_rows(m->device->npu, s, tokens, NULL, n, todo, true, &done, err);
    if (consumed)
        *consumed = done;
    return st;
}

npl_status npl_backend_npu_prefill_embeddings(npl_model *m, npl_seq *s, const float *embd,
                                              size_t n, bool bidirectional, npl_error *err)
{
    if (!m || !m->device || !m->device->npu || !s || (n > 0 && !embd))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_prefill_embeddings: missing model, sequence or rows");
    npl_status st = check_seq(m, s, "npl_prefill_embeddings", err);
    if (st != NPL_OK || n == 0)
        return st;
    if ((st = check_room(s, n, "embedding rows", err)))
        return st;
    npl_backend_npu *b = m->device->npu;
    /* Every row must see the others' keys in every layer: one chunk. */
    if (bidirectional && n > b->chunk)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_prefill_embeddings: a bidirectional block of %zu rows exceeds "
                             "the prefill chunk of %u", n, b->chunk);
    size_t done = 0;
    return prefill_rows(b, s, NULL, embd, n, n, !bidirectional, &done, err);
}

npl_status npl_backend_npu_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens,
                                  size_t n_seqs, npl_error *err)
{
    if (!m || !m->device || !m->device->npu || (n_seqs > 0 && (!seqs || !tokens)))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_decode: missing model, sequences or tokens");
    npl_status st = check_tokens(m, tokens, n_seqs, err);
    if (st != NPL_OK)
        return st;
    /* The whole batch is checked before any cache is touched, so a bad
     * entry leaves every sequence as it was. */
    size_t i = 0;
    for (; i < n_seqs && st == NPL_OK; i++) {
        npl_seq *s = seqs[i];
        if (!s)
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_decode: sequence %zu is NULL", i);
        else if ((st = check_seq(m, s, "npl_decode", err)))
            ;
        else if (s->in_batch)
            st = npl_error_set(err, NPL_ERR_INVALID_ARG,
                               "npl_decode: sequence %zu appears twice in the batch", i);
        else if (s->pos >= s->n_ctx)
            st = npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                               "npl_decode: sequence %zu is full (context of %u tokens)", i,
                               s->n_ctx);
        else
            seqs[i]->in_batch = true;
    }
    size_t marked = st == NPL_OK ? i : i - 1;
    for (size_t j = 0; j < marked; j++)
        seqs[j]->in_batch = false;
    if (st != NPL_OK)
        return st;

    npl_backend_npu *b = m->device->npu;
    npl_npu_stats before, after;
    npl_npu_device_stats(b->dev, &before);
    /* One submission per batch_cap sequences: each has its own row of
     * the activations and its own logits slot. */
    for (i = 0; i < n_seqs && st == NPL_OK;) {
        uint32_t n = (uint32_t)(n_seqs - i < b->batch_cap ? n_seqs - i : b->batch_cap);
        st = n == 1 ? decode_one(b, seqs[i], tokens[i], err)
                    : decode_batch(b, seqs + i, tokens + i, n, err);
        i += n;
    }
    npl_npu_device_stats(b->dev, &after);
    traffic_add(&b->stats.decode, &before, &after);
    return st;
}
