/* The NPU host runtime (see backend_npu.h): residency plan, per-sequence
 * run lists, chunked prefill and decode through the device interface. */
#include "backend_npu.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ggml_types.h"
#include "model_internal.h"
#include "npu_device.h"
#include "npu_weight_cache.h"
#include "npu_weight_packs.h"
#include "q4nx.h"

/* Weight offsets inside a static buffer are multiples of this: above the
 * device's argument alignment, and a cache line. */
#define WEIGHT_ALIGN 64u

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

    npl_npu_buffer **layer_w;        /* n_layer static buffers: w_attn, then w_ffn */
    size_t ffn_off;                  /* where w_ffn starts in a layer's buffer */
    npl_npu_buffer *head_w;          /* w_head */
    uint64_t weight_bytes;

    npl_npu_buffer *x;      /* io [chunk, n_embd] bf16: the residual stream */
    npl_npu_buffer *q;      /* intermediate [chunk, n_head*head_dim] bf16 */
    npl_npu_buffer *attn;   /* intermediate [chunk, n_head*head_dim] bf16 */
    npl_npu_buffer *logits; /* output [n_vocab] f32 */
    uint16_t *x_host;       /* host view of x */
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

/* The group whose contract lays out a pack, and the others taking it. */
static void pack_groups(const npl_backend_npu *b, npl_npu_pack pack, const npl_npu_group *g[3])
{
    const npu_groups *G = &b->g;
    g[1] = g[2] = NULL;
    if (pack == NPL_NPU_PACK_ATTN) {
        g[0] = G->qkv_mv;
        g[1] = G->qkv;
    } else if (pack == NPL_NPU_PACK_FFN) {
        g[0] = G->fused_decode ? G->attn_o_ffn_mv : G->o_ffn_mv;
        g[1] = G->o_ffn;
    } else {
        g[0] = G->lm_head;
    }
}

/* Bytes of a pack, checking that every group taking it agrees. */
static npl_status pack_bytes(const npl_backend_npu *b, npl_npu_pack pack, size_t *bytes,
                             npl_error *err)
{
    const npl_npu_group *g[3];
    pack_groups(b, pack, g);
    const npl_npu_group_spec *specs[3];
    for (size_t i = 0; i < 3; i++)
        specs[i] = g[i] ? npl_npu_group_spec_get(g[i]) : NULL;
    return npl_npu_pack_bytes(specs, 3, pack, &b->base, bytes, err);
}

/* Fills layer l's (or the head's) pack at host from the contract of the
 * group that lays it out. */
static npl_status fill_pack(const npl_backend_npu *b, npl_npu_pack pack, uint32_t l,
                            uint8_t *host, npl_npu_cache_matrix *mats, char (*names)[64],
                            size_t *n_mats, npl_error *err)
{
    const npl_npu_group *g[3];
    pack_groups(b, pack, g);
    return npl_npu_pack_fill(b->m, npl_npu_group_spec_get(g[0]), pack, l, &b->base, host, mats,
                             names, n_mats, err);
}

static npl_status alloc_weights(npl_backend_npu *b, size_t bytes, const char *label,
                                npl_npu_buffer **buf, uint8_t **host, npl_error *err)
{
    npl_status st = npl_npu_buffer_alloc(b->dev, bytes, NPL_NPU_BUF_STATIC, label, buf, err);
    if (st != NPL_OK)
        return st;
    *host = npl_npu_buffer_map(*buf, err);
    if (!*host)
        return err ? err->code : NPL_ERR_INTERNAL;
    b->weight_bytes += bytes;
    return NPL_OK;
}

/* Every layer's packs and the head's in their static buffers, the
 * matrices from the Q4NX cache or repacked; then each buffer is uploaded
 * once (the only time these bytes cross to the device) and the weights
 * are sealed. */
static npl_status upload_weights(npl_backend_npu *b, const char *cache_dir, npl_error *err)
{
    const npl_model *m = b->m;
    uint32_t L = m->hp.n_layer;
    size_t attn_bytes = 0, ffn_bytes = 0, head_bytes = 0;
    npl_status st;
    if ((st = pack_bytes(b, NPL_NPU_PACK_ATTN, &attn_bytes, err)) ||
        (st = pack_bytes(b, NPL_NPU_PACK_FFN, &ffn_bytes, err)) ||
        (st = pack_bytes(b, NPL_NPU_PACK_HEAD, &head_bytes, err)))
        return st;
    b->ffn_off = align_up(attn_bytes, WEIGHT_ALIGN);
    size_t layer_bytes = b->ffn_off + ffn_bytes;
    b->layer_w = calloc(L, sizeof *b->layer_w);
    uint8_t **hosts = calloc((size_t)L + 1, sizeof *hosts);
    npl_npu_cache_matrix *mats = calloc(((size_t)L + 1) * 2 * NPL_NPU_MAX_PARTS, sizeof *mats);
    char (*names)[64] = calloc(((size_t)L + 1) * 2 * NPL_NPU_MAX_PARTS, sizeof *names);
    if (!b->layer_w || !hosts || !mats || !names) {
        st = npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for the layer plan");
        goto done;
    }
    char label[NPL_NPU_NAME_MAX];
    size_t n_mats = 0;
    for (uint32_t l = 0; l < L && st == NPL_OK; l++) {
        snprintf(label, sizeof label, "layer %u weights", l);
        if (!(st = alloc_weights(b, layer_bytes, label, &b->layer_w[l], &hosts[l], err)) &&
            !(st = fill_pack(b, NPL_NPU_PACK_ATTN, l, hosts[l], mats, names, &n_mats, err)))
            st = fill_pack(b, NPL_NPU_PACK_FFN, l, hosts[l] + b->ffn_off, mats, names, &n_mats, err);
    }
    if (st == NPL_OK &&
        !(st = alloc_weights(b, head_bytes, "output weights", &b->head_w, &hosts[L], err)))
        st = fill_pack(b, NPL_NPU_PACK_HEAD, 0, hosts[L], mats, names, &n_mats, err);
    npl_npu_cache_report report;
    if (st == NPL_OK &&
        (st = npl_npu_weights_fill(npl_gguf_path(m->gguf), cache_dir, mats, n_mats, &report,
                                   err)) == NPL_OK) {
        b->stats.load_matrices_repacked = report.repacked;
        b->stats.load_matrices_cached = report.cached;
        b->stats.load_cache_written = report.written;
        snprintf(b->stats.load_cache_note, sizeof b->stats.load_cache_note, "%s", report.note);
    }
    for (uint32_t l = 0; l < L && st == NPL_OK; l++)
        st = npl_npu_buffer_sync(b->layer_w[l], NPL_NPU_SYNC_TO_DEVICE, 0, layer_bytes, err);
    if (st == NPL_OK)
        st = npl_npu_buffer_sync(b->head_w, NPL_NPU_SYNC_TO_DEVICE, 0, head_bytes, err);
    if (st == NPL_OK)
        st = npl_npu_device_seal_weights(b->dev, err);
done:
    free(hosts);
    free(mats);
    free(names);
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
     * one (all three must agree), else the model's working rows (its
     * prefill chunk, or its largest image block when that is larger). */
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
    b->chunk = chunk ? chunk : (uint32_t)b->m->fw.rows;
    return NPL_OK;
}

/* ---- shapes ------------------------------------------------------------ */

static npl_status init_base_shape(npl_backend_npu *b, npl_error *err)
{
    const npl_model *m = b->m;
    const npl_hparams *hp = &m->hp;
    /* The LM head reads the last row of a prefill chunk through an
     * argument offset, which must stay aligned. */
    if ((hp->n_embd * sizeof(uint16_t)) % NPL_NPU_ARG_ALIGN)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu: n_embd = %u is not a multiple of 32, which the device's "
                             "argument alignment needs (bf16 rows)", hp->n_embd);
    /* Variations without a kernel variant yet (the architecture's hook
     * names them): the CPU runs those. */
    if (m->npu_refusal)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "npu: %s is not supported", m->npu_refusal);
    /* The kernels' variants are flags of the shape, model-wide. */
    const npl_layer *L0 = &m->layers[0];
    bool qk_norm = L0->attn_q_norm != NULL, post_norms = L0->post_attn_norm != NULL;
    bool qkv_bias = L0->bq != NULL;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const npl_layer *L = &m->layers[l];
        if ((L->attn_q_norm != NULL) != qk_norm || (L->attn_k_norm != NULL) != qk_norm ||
            (L->post_attn_norm != NULL) != post_norms || (L->post_ffn_norm != NULL) != post_norms ||
            (L->bq != NULL) != qkv_bias || (L->bk != NULL) != qkv_bias || (L->bv != NULL) != qkv_bias)
            return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                                 "npu: layer %u has a different set of norms and biases (Q/K "
                                 "norms, post norms, Q/K/V biases) than layer 0: the kernels "
                                 "take them for every layer or none", l);
    }
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
    s->qk_norm = qk_norm;
    s->post_norms = post_norms;
    s->qkv_bias = qkv_bias;
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
        (st = set_arg(args, g, "w_attn", b->layer_w[l], 0, err)) ||
        (st = set_arg(args, g, "q", b->q, a->q, err)) || (st = set_kv(ns, args, g, l, err)))
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
        (st = set_arg(args, g, "w_ffn", b->layer_w[l], b->ffn_off, err)))
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
        (st = set_arg(args, g, "w_head", b->head_w, 0, err)) ||
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
    if ((st = alloc_activation(b, rows * hp->n_embd * sizeof(uint16_t), NPL_NPU_BUF_IO, "x", &b->x,
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
    b->x_stride = (size_t)hp->n_embd * sizeof(uint16_t); /* aligned: init_base_shape checked */
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
        b->seqs->seq->device = NULL;
        seq_free(b->seqs);
    }
    /* The device frees every buffer, group and run list still alive. */
    npl_npu_device_destroy(b->dev);
    free(b->layer_w);
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
    s->device = ns;
    return NPL_OK;
fail:
    seq_free(ns);
    return st;
}

void npl_backend_npu_seq_release(npl_seq *s)
{
    if (!s)
        return;
    seq_free(s->device);
    s->device = NULL;
}

size_t npl_backend_npu_seq_kv_bytes(const npl_seq *s)
{
    const npl_npu_seq *ns = s->device;
    return ns ? npl_npu_buffer_size(ns->k_cache) + npl_npu_buffer_size(ns->v_cache) : 0;
}

npl_status npl_backend_npu_seq_copy_prefix(npl_seq *dst, const npl_seq *src, uint32_t n,
                                           npl_error *err)
{
    npl_npu_seq *d = dst->device;
    const npl_npu_seq *s = src->device;
    if (!d || !s || d->b != s->b || dst->pos != 0 || n > src->pos || n > dst->n_ctx)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: a prefix copy needs an empty sequence and a filled one on the "
                             "same device");
    const npl_model *m = d->b->m;
    /* Every layer keeps n_ctx rows on the device, position p at row p. */
    size_t row = kv_dim(&m->hp) * sizeof(uint16_t), copied = 0;
    npl_status st = NPL_OK;
    for (uint32_t l = 0; l < m->hp.n_layer && st == NPL_OK; l++) {
        uint32_t lo = 0;
        if (m->layers[l].local && n + 1 > m->hp.n_swa)
            lo = n + 1 - m->hp.n_swa;
        size_t so = (size_t)l * s->kv_layer_bytes + lo * row;
        size_t d_o = (size_t)l * d->kv_layer_bytes + lo * row;
        size_t bytes = (size_t)(n - lo) * row;
        if (!(st = npl_npu_buffer_copy(d->k_cache, d_o, s->k_cache, so, bytes, err)))
            st = npl_npu_buffer_copy(d->v_cache, d_o, s->v_cache, so, bytes, err);
        copied += 2 * bytes;
    }
    if (st != NPL_OK)
        return st;
    d->b->stats.kv_reused_tokens += n;
    d->b->stats.kv_copy_bytes += copied;
    memcpy(dst->hist, src->hist, (size_t)n * sizeof *dst->hist);
    dst->pos = n;
    return NPL_OK;
}

/* ---- handing a cache to the CPU (the phase split) ---------------------- */

/* Positions per round trip through the staging buffer. */
#define EXPORT_ROWS 256u

/* Positions [lo, hi) of one layer's K or V (device rows of kv_dim bf16)
 * into the host array at `host` in the model's KV format: every KV head,
 * ring rows mirrored. The rows leave the device through `stage` (the
 * caches are device-only): copied there on the device, then read. */
static npl_status export_rows(const npl_npu_seq *ns, npl_seq *s, uint32_t l, npl_npu_buffer *cache,
                              uint8_t *host, uint32_t lo, uint32_t hi, npl_npu_buffer *stage,
                              uint16_t *rows, float *row, npl_error *err)
{
    const npl_model *m = s->model;
    size_t hd = m->hp.head_dim, kvd = kv_dim(&m->hp), rb = m->kv_row_bytes;
    for (uint32_t p0 = lo; p0 < hi; p0 += EXPORT_ROWS) {
        uint32_t n = hi - p0 < EXPORT_ROWS ? hi - p0 : EXPORT_ROWS;
        size_t bytes = (size_t)n * kvd * sizeof(uint16_t);
        size_t off = (size_t)l * ns->kv_layer_bytes + (size_t)p0 * kvd * sizeof(uint16_t);
        npl_status st = npl_npu_buffer_copy(stage, 0, cache, off, bytes, err);
        if (st == NPL_OK)
            st = npl_npu_buffer_read(stage, 0, rows, bytes, err);
        if (st != NPL_OK)
            return st;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t g = 0; g < m->hp.n_head_kv; g++) {
                const uint16_t *src = rows + (size_t)i * kvd + (size_t)g * hd;
                for (size_t j = 0; j < hd; j++)
                    row[j] = npl_bf16_to_fp32(src[j]);
                size_t head = npl_kv_head_offset(s, l, g);
                size_t at[2] = {npl_kv_row(s, l, p0 + i), npl_kv_mirror_row(s, l, p0 + i)};
                for (int k = 0; k < 2 && at[k] != SIZE_MAX; k++)
                    npl_kv_store_row(m->kv_format, row, host + head + at[k] * rb, hd);
            }
    }
    return NPL_OK;
}

/* Every position a later CPU step may read: all of a full layer (a pool
 * may seed another sequence from any prefix), the last kv_ring of a
 * ring. */
static uint32_t export_first(const npl_seq *s, uint32_t l)
{
    bool ring = s->kv_ring && s->model->layers[l].local;
    return ring && s->pos > s->kv_ring ? s->pos - s->kv_ring : 0;
}

npl_status npl_backend_npu_seq_export(npl_seq *s, npl_error *err)
{
    npl_npu_seq *ns = s->device;
    if (!ns)
        return npl_error_set(err, NPL_ERR_INTERNAL, "npu: the sequence has no device KV cache to move");
    npl_backend_npu *b = ns->b;
    const npl_hparams *hp = &b->m->hp;
    size_t kvd = kv_dim(hp);
    uint16_t *rows = malloc((size_t)EXPORT_ROWS * kvd * sizeof *rows);
    float *row = malloc(hp->head_dim * sizeof *row);
    npl_npu_buffer *stage = NULL;
    npl_status st = rows && row ? NPL_OK : npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory to move a KV cache");
    if (st == NPL_OK)
        st = npl_npu_buffer_alloc(b->dev, (size_t)EXPORT_ROWS * kvd * sizeof(uint16_t), NPL_NPU_BUF_OUTPUT,
                                  "kv export", &stage, err);
    uint64_t bytes = 0;
    for (uint32_t l = 0; l < hp->n_layer && st == NPL_OK; l++) {
        if (!npl_kv_rows(s, l))
            continue;
        uint32_t lo = export_first(s, l);
        if (!(st = export_rows(ns, s, l, ns->k_cache, s->k_cache, lo, s->pos, stage, rows, row, err)))
            st = export_rows(ns, s, l, ns->v_cache, s->v_cache, lo, s->pos, stage, rows, row, err);
        bytes += 2 * (uint64_t)(s->pos - lo) * kvd * sizeof(uint16_t);
    }
    npl_npu_buffer_free(stage);
    free(rows);
    free(row);
    if (st != NPL_OK)
        return st; /* the device cache is still whole: the sequence stays */
    b->stats.kv_moved_sequences++;
    b->stats.kv_moved_bytes += bytes;
    seq_free(ns);
    s->device = NULL;
    return NPL_OK;
}

/* ---- forward passes ---------------------------------------------------- */

/* The first layer's input into x rows 0..n-1 on the host, as bf16 (the
 * residual stream between groups), then to the device: the (scaled)
 * embedding rows of tokens, or when tokens is NULL the rows of embd. */
static npl_status upload_input(npl_backend_npu *b, const int32_t *tokens, const float *embd,
                               size_t n, npl_error *err)
{
    const npl_model *m = b->m;
    size_t e = m->hp.n_embd;
    float *row = malloc(e * sizeof *row);
    if (!row)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for an embedding row");
    for (size_t i = 0; i < n; i++) {
        if (!tokens) {
            memcpy(row, embd + i * e, e * sizeof *row);
        } else if (!npl_matrix_get_row(&m->tok_embd, tokens[i], row)) {
            free(row);
            return npl_error_set(err, NPL_ERR_INTERNAL, "npu: cannot read embedding row %d",
                                 tokens[i]);
        } else if (m->embd_scale != 1.0f) {
            for (size_t j = 0; j < e; j++)
                row[j] *= m->embd_scale;
        }
        for (size_t j = 0; j < e; j++)
            b->x_host[i * e + j] = npl_fp32_to_bf16(row[j]);
    }
    free(row);
    return npl_npu_buffer_sync(b->x, NPL_NPU_SYNC_TO_DEVICE, 0, n * e * sizeof(uint16_t), err);
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
    npl_npu_seq *ns = s->device;
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
            last_row.x = (size_t)(n - 1) * b->m->hp.n_embd * sizeof(uint16_t);
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
    npl_npu_seq *ns = s->device;
    act_slot a = solo_slot(b);
    npl_status st;
    s->has_logits = false;
    if ((st = upload_input(b, &token, NULL, 1, err)) ||
        (st = set_layer_shapes(ns, ns->decode, 0, decode_runs_per_layer(b), 1, s->pos, true, err)) ||
        (st = npl_npu_runlist_submit(ns->decode, err)) || (st = read_logits(b, s, &a, err)))
        return st;
    b->stats.decode_tokens++;
    s->hist[s->pos++] = token;
    return NPL_OK;
}

/* The batch list for seqs (n <= batch_cap): kept from the last step when
 * it held the same sequences in the same order, else rebuilt. */
static npl_status batch_list_for(npl_backend_npu *b, npl_seq *const *seqs, uint32_t n,
                                 npl_error *err)
{
    bool same = b->batch_n == n;
    for (uint32_t i = 0; same && i < n; i++)
        same = b->batch_seqs[i] == seqs[i]->device;
    if (same)
        return NPL_OK;
    batch_forget(b);
    for (uint32_t i = 0; i < n; i++) {
        act_slot a = batch_slot(b, i);
        npl_status st = add_decode_runs(seqs[i]->device, b->batch, &a, err);
        if (st != NPL_OK) {
            batch_forget(b);
            return st;
        }
        b->batch_seqs[i] = seqs[i]->device;
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
        if ((st = set_layer_shapes(seqs[i]->device, b->batch, i * decode_runs(b),
                                   decode_runs_per_layer(b), 1, seqs[i]->pos, true, err)))
            return st;
    if ((st = npl_npu_runlist_submit(b->batch, err)))
        return st;
    for (uint32_t i = 0; i < n; i++) {
        act_slot a = batch_slot(b, i);
        if ((st = read_logits(b, seqs[i], &a, err)))
            return st;
        b->stats.decode_tokens++;
        seqs[i]->hist[seqs[i]->pos++] = tokens[i];
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
    if (!s->device)
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
            for (uint32_t i = 0; i < c; i++) /* embedding rows: never matched by a pool */
                s->hist[s->pos + i] = tokens ? tokens[done + i] : -1;
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
    if (!m || !m->device || !m->device->context || !s || (n > 0 && !tokens))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_prefill: missing model, sequence or tokens");
    npl_status st = check_seq(m, s, "npl_prefill", err);
    if (st != NPL_OK || n == 0)
        return st;
    if ((st = check_tokens(m, tokens, n, err)) || (st = check_room(s, n, "prompt tokens", err)))
        return st;
    size_t todo = max_tokens_this_call && max_tokens_this_call < n ? max_tokens_this_call : n;
    size_t done = 0;
    st = prefill_rows(m->device->context, s, tokens, NULL, n, todo, true, &done, err);
    if (consumed)
        *consumed = done;
    return st;
}

npl_status npl_backend_npu_prefill_embeddings(npl_model *m, npl_seq *s, const float *embd,
                                              size_t n, bool bidirectional, npl_error *err)
{
    if (!m || !m->device || !m->device->context || !s || (n > 0 && !embd))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_prefill_embeddings: missing model, sequence or rows");
    npl_status st = check_seq(m, s, "npl_prefill_embeddings", err);
    if (st != NPL_OK || n == 0)
        return st;
    if ((st = check_room(s, n, "embedding rows", err)))
        return st;
    npl_backend_npu *b = m->device->context;
    /* Every row must see the others' keys in every layer: one chunk. */
    if (bidirectional && n > b->chunk)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npl_prefill_embeddings: a bidirectional block of %zu rows (an image) exceeds the "
                             "%u rows the NPU's kernels take in one step: run this model on the CPU (device cpu)",
                             n, b->chunk);
    size_t done = 0;
    return prefill_rows(b, s, NULL, embd, n, n, !bidirectional, &done, err);
}

npl_status npl_backend_npu_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens,
                                  size_t n_seqs, npl_error *err)
{
    if (!m || !m->device || !m->device->context || (n_seqs > 0 && (!seqs || !tokens)))
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

    npl_backend_npu *b = m->device->context;
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
