/* Machinery shared by the BPE and SentencePiece merge loops: the linked
 * symbol list and the priority queue of candidate merges. */
#include <stdlib.h>

#include "tokenizer_internal.h"

static bool cand_before(const npl_merge_cand *a, const npl_merge_cand *b)
{
    return a->order < b->order;
}

npl_status npl_merge_heap_push(npl_merge_heap *h, npl_merge_cand c, npl_error *err)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        npl_merge_cand *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for merge queue");
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_before(&c, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = c;
    return NPL_OK;
}

npl_merge_cand npl_merge_heap_pop(npl_merge_heap *h)
{
    npl_merge_cand top = h->v[0];
    npl_merge_cand last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->n)
            break;
        if (child + 1 < h->n && cand_before(&h->v[child + 1], &h->v[child]))
            child++;
        if (!cand_before(&h->v[child], &last))
            break;
        h->v[i] = h->v[child];
        i = child;
    }
    if (h->n > 0)
        h->v[i] = last;
    return top;
}

void npl_merge_heap_free(npl_merge_heap *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}

npl_status npl_symbols_reserve(npl_symbols *s, size_t n, npl_error *err)
{
    if (n <= s->cap)
        return NPL_OK;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n)
        cap *= 2;
    uint32_t *start = realloc(s->start, cap * sizeof *start);
    if (start)
        s->start = start;
    uint32_t *len = realloc(s->len, cap * sizeof *len);
    if (len)
        s->len = len;
    int32_t *prev = realloc(s->prev, cap * sizeof *prev);
    if (prev)
        s->prev = prev;
    int32_t *next = realloc(s->next, cap * sizeof *next);
    if (next)
        s->next = next;
    int32_t *id = realloc(s->id, cap * sizeof *id);
    if (id)
        s->id = id;
    if (!start || !len || !prev || !next || !id)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu symbols", n);
    s->cap = cap;
    return NPL_OK;
}

void npl_symbols_free(npl_symbols *s)
{
    free(s->start);
    free(s->len);
    free(s->prev);
    free(s->next);
    free(s->id);
    s->start = s->len = NULL;
    s->prev = s->next = s->id = NULL;
    s->n = s->cap = 0;
}

int32_t npl_symbols_merge(npl_symbols *s, npl_merge_cand c)
{
    int32_t left = npl_merge_cand_left(c);
    uint32_t ll = s->len[left], rl = s->len[c.right];
    if (ll == 0 || rl == 0 || ll + rl != c.size)
        return -1;
    s->len[left] = ll + rl;
    s->len[c.right] = 0;
    s->next[left] = s->next[c.right];
    if (s->next[c.right] >= 0)
        s->prev[s->next[c.right]] = left;
    return left;
}
