/* The KV cache pool: finished sequences kept per owner so that the next
 * turn of a conversation prefills only what is new (see npullm.h).
 *
 * A new request always gets a new sequence sized for it; the shared
 * prefix is copied into it row by row from the cached one. That keeps
 * every sequence's layout (n_ctx, sliding-window ring) its own, and a
 * copy of cached rows costs a small fraction of computing them. On an NPU
 * the rows stay on the device: the backend copies them between the two
 * sequences' device buffers (engine/backend/backend.h seq_copy_prefix). */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model_internal.h"
#include "seq_state.h"

typedef struct pool_entry {
    npl_seq *seq;
    uint64_t owner;
    size_t bytes;
    struct pool_entry *prev, *next; /* most recently used first */
} pool_entry;

struct npl_kv_pool {
    npl_model *model;
    uint64_t budget;
    uint64_t bytes;
    size_t count;
    pool_entry *head, *tail;
};

npl_kv_pool *npl_kv_pool_create(npl_model *m, uint64_t budget_bytes, npl_error *err)
{
    if (!m) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "no model");
        return NULL;
    }
    npl_kv_pool *p = calloc(1, sizeof *p);
    if (!p) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    p->model = m;
    p->budget = budget_bytes;
    return p;
}

static void unlink_entry(npl_kv_pool *p, pool_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        p->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        p->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(npl_kv_pool *p, pool_entry *e)
{
    e->prev = NULL;
    e->next = p->head;
    if (p->head)
        p->head->prev = e;
    else
        p->tail = e;
    p->head = e;
}

static void drop_entry(npl_kv_pool *p, pool_entry *e)
{
    unlink_entry(p, e);
    p->bytes -= e->bytes;
    p->count--;
    npl_seq_free(e->seq);
    free(e);
}

void npl_kv_pool_free(npl_kv_pool *p)
{
    if (!p)
        return;
    while (p->head)
        drop_entry(p, p->head);
    free(p);
}

/* Whether the first n positions of src can seed another sequence: the
 * sliding-window layers need the n_swa - 1 positions before n, and a ring
 * holds only the last kv_ring positions written. */
static bool prefix_usable(const npl_seq *src, uint32_t n)
{
    const npl_hparams *hp = &src->model->hp;
    if (src->device || !src->kv_ring || !hp->n_swa) /* a device cache keeps every position */
        return true;
    uint32_t lo = n + 1 > hp->n_swa ? n + 1 - hp->n_swa : 0;
    return (uint64_t)lo + src->kv_ring >= src->pos;
}

/* Positions [lo, n) of one layer's K and V from src to dst, every KV head,
 * mirrored ring rows included. */
static void copy_layer_rows(npl_seq *dst, const npl_seq *src, uint32_t layer, uint32_t lo, uint32_t n)
{
    const npl_model *m = src->model;
    size_t rb = m->kv_row_bytes;
    bool contiguous = !m->layers[layer].local || (!src->kv_ring && !dst->kv_ring);
    for (uint32_t g = 0; g < m->layers[layer].n_head_kv; g++) {
        size_t so = npl_kv_head_offset(src, layer, g), d_o = npl_kv_head_offset(dst, layer, g);
        if (contiguous) {
            memcpy(dst->k_cache + d_o + (size_t)lo * rb, src->k_cache + so + (size_t)lo * rb, (size_t)(n - lo) * rb);
            memcpy(dst->v_cache + d_o + (size_t)lo * rb, src->v_cache + so + (size_t)lo * rb, (size_t)(n - lo) * rb);
            continue;
        }
        for (uint32_t pos = lo; pos < n; pos++) {
            size_t sr = so + npl_kv_row(src, layer, pos) * rb;
            size_t rows[2] = {npl_kv_row(dst, layer, pos), npl_kv_mirror_row(dst, layer, pos)};
            for (int i = 0; i < 2 && rows[i] != SIZE_MAX; i++) {
                memcpy(dst->k_cache + d_o + rows[i] * rb, src->k_cache + sr, rb);
                memcpy(dst->v_cache + d_o + rows[i] * rb, src->v_cache + sr, rb);
            }
        }
    }
}

/* dst (empty) takes src's first n positions: what every later step reads
 * of them (all of a global layer, the window before n of a local one). */
static void copy_prefix(npl_seq *dst, const npl_seq *src, uint32_t n)
{
    const npl_model *m = src->model;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        if (!npl_kv_rows(dst, l)) /* a recurrent layer: its state is copied below */
            continue;
        uint32_t lo = 0;
        if (m->layers[l].local && n + 1 > m->hp.n_swa)
            lo = n + 1 - m->hp.n_swa;
        copy_layer_rows(dst, src, l, lo, n);
    }
    npl_seq_state_copy(dst, src, n);
    memcpy(dst->hist, src->hist, (size_t)n * sizeof *dst->hist);
    dst->pos = n;
}

/* Tokens of the prompt (at most limit) that a cached sequence holds. */
static uint32_t common_prefix(const npl_seq *s, const int32_t *tokens, size_t limit)
{
    uint32_t n = 0;
    while (n < limit && n < s->pos && s->hist[n] == tokens[n])
        n++;
    return n;
}

npl_seq *npl_kv_pool_acquire(npl_kv_pool *p, uint64_t owner, const int32_t *tokens, size_t n, uint32_t n_ctx,
                             uint32_t *reused, npl_error *err)
{
    if (reused)
        *reused = 0;
    if (!p || (n > 0 && !tokens)) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_kv_pool_acquire: missing pool or tokens");
        return NULL;
    }
    if (npl_model_is_embedding(p->model))
        return npl_seq_create(p->model, n_ctx, err); /* refused, with the reason */
    /* The owner's cached sequence sharing the longest usable prefix: of
     * this model's backend with its device cache still attached, or, while
     * the model decodes on the CPU (the phase split), one moved there that
     * holds at least half of the prompt: the new sequence continues on the
     * CPU, prefilling the rest there. At equal length the model's own
     * wins. */
    const npl_backend *be = npl_model_backend(p->model);
    const npl_backend *split = p->model->device ? p->model->device->decode_ops : NULL;
    pool_entry *best = NULL;
    uint32_t best_n = 0;
    for (pool_entry *e = p->head; n >= 2 && e; e = e->next) {
        bool own = e->seq->backend == be && !e->seq->device == !be->seq_attach;
        bool moved = split && e->seq->backend == split && !e->seq->device;
        if (e->owner != owner || (!own && !moved))
            continue;
        /* a recurrent state is known only at checkpoints */
        uint32_t c = npl_seq_state_prefix(e->seq, common_prefix(e->seq, tokens, n - 1));
        if (!own && 2 * (size_t)c < n)
            continue;
        bool better = c > best_n || (c == best_n && best && own && best->seq->backend != be);
        if (better && prefix_usable(e->seq, c)) {
            best = e;
            best_n = c;
        }
    }
    /* Cached sequences give way when the memory of a new one (on an NPU:
     * device memory) runs out: least recently used first, the one to
     * reuse last. */
    npl_error sub;
    npl_error_clear(&sub);
    npl_seq *s;
    while (!(s = npl_seq_create_on(p->model, n_ctx, best ? best->seq->backend : NULL, &sub)) &&
           sub.code == NPL_ERR_NOMEM && p->tail) {
        pool_entry *victim = p->tail == best ? best->prev : p->tail;
        if (!victim) {
            victim = best;
            best = NULL;
        }
        drop_entry(p, victim);
    }
    if (!s) {
        if (err)
            *err = sub;
        return NULL;
    }
    if (!best || best_n >= s->n_ctx) /* a prompt that long overflows anyway */
        return s;
    if (s->backend->seq_copy_prefix) {
        /* a failed copy costs only the reuse: prefill all */
        if (s->backend->seq_copy_prefix(s, best->seq, best_n, &sub) != NPL_OK) {
            s->pos = 0;
            return s;
        }
    } else {
        copy_prefix(s, best->seq, best_n);
    }
    unlink_entry(p, best);
    push_front(p, best);
    if (reused)
        *reused = best_n;
    return s;
}

/* Whether every position a holds is also in b (a adds nothing). */
static bool extended_by(const npl_seq *a, const npl_seq *b)
{
    return a->pos <= b->pos && memcmp(a->hist, b->hist, (size_t)a->pos * sizeof *a->hist) == 0;
}

void npl_kv_pool_release(npl_kv_pool *p, uint64_t owner, npl_seq *s)
{
    if (!s)
        return;
    if (!p || s->pos == 0 || s->model != p->model) {
        npl_seq_free(s);
        return;
    }
    for (pool_entry *e = p->head, *next; e; e = next) {
        next = e->next;
        if (e->owner == owner && extended_by(e->seq, s))
            drop_entry(p, e);
    }
    pool_entry *e = calloc(1, sizeof *e);
    if (!e) {
        npl_seq_free(s);
        return;
    }
    /* A cached sequence only seeds others: its logits are never read
     * (a reusing prompt always prefills at least one token). */
    free(s->logits);
    s->logits = NULL;
    s->has_logits = false;
    e->seq = s;
    e->owner = owner;
    e->bytes = npl_seq_bytes(s);
    push_front(p, e);
    p->bytes += e->bytes;
    p->count++;
    while (p->bytes > p->budget && p->tail)
        drop_entry(p, p->tail);
}

size_t npl_kv_pool_forget(npl_kv_pool *p, uint64_t owner)
{
    size_t n = 0;
    if (!p)
        return 0;
    for (pool_entry *e = p->head, *next; e; e = next) {
        next = e->next;
        if (e->owner == owner) {
            drop_entry(p, e);
            n++;
        }
    }
    return n;
}

size_t npl_kv_pool_count(const npl_kv_pool *p)
{
    return p ? p->count : 0;
}

uint64_t npl_kv_pool_bytes(const npl_kv_pool *p)
{
    return p ? p->bytes : 0;
}

npl_status npl_seq_key_positions(npl_seq *s, uint32_t from, const int32_t *keys, size_t n, npl_error *err)
{
    if (!s || (n > 0 && !keys) || from > s->pos || n > (size_t)(s->pos - from))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_seq_key_positions: positions not filled or no keys");
    for (size_t i = 0; i < n; i++)
        if (keys[i] >= 0)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_seq_key_positions: key %zu is a token id", i);
    memcpy(s->hist + from, keys, n * sizeof *keys);
    return NPL_OK;
}
