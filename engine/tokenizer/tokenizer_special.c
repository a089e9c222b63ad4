/* Special-token recognition: before the model's tokenizer runs, the text
 * is cut into raw spans and special tokens. Control (and unknown) tokens
 * are recognised only with NPL_TOKENIZE_PARSE_SPECIAL; user-defined ones
 * always are, as in the reference.
 *
 * The reference takes the special tokens one at a time, longest text
 * first, and claims every leftmost non-overlapping occurrence that still
 * lies wholly inside unclaimed text. Doing that literally costs
 * (number of special tokens) x (text length). Here each position is queued
 * under the length of its longest match and the queues are served longest
 * first, left to right; a position whose match runs into claimed text is
 * re-queued under its longest match that stops before the claim. That
 * claims the same occurrences (ties between different texts of equal
 * length that overlap each other are resolved leftmost first, where the
 * reference's order is unspecified). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static npl_status trie_new_node(npl_special_trie *t, unsigned char byte, int32_t *out, npl_error *err)
{
    if (t->n_nodes == t->cap_nodes) {
        size_t cap = t->cap_nodes ? t->cap_nodes * 2 : 256;
        npl_trie_node *v = realloc(t->nodes, cap * sizeof *v);
        if (!v)
            return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for special tokens");
        t->nodes = v;
        t->cap_nodes = cap;
    }
    if (t->n_nodes >= INT32_MAX)
        return npl_error_set(err, NPL_ERR_FORMAT, "tokenizer: special token texts too large");
    npl_trie_node *nd = &t->nodes[t->n_nodes];
    nd->child = nd->sibling = nd->token = nd->token_always = -1;
    nd->byte = byte;
    *out = (int32_t)t->n_nodes++;
    return NPL_OK;
}

npl_status npl_special_trie_insert(npl_special_trie *t, const unsigned char *s, size_t n, int32_t id, bool always,
                                  bool last_wins, npl_error *err)
{
    npl_status st;
    int32_t node = t->root[s[0]];
    if (node < 0) {
        if ((st = trie_new_node(t, s[0], &node, err)) != NPL_OK)
            return st;
        t->root[s[0]] = node;
    }
    for (size_t i = 1; i < n; i++) {
        int32_t c = t->nodes[node].child, prev = -1;
        while (c >= 0 && t->nodes[c].byte != s[i]) {
            prev = c;
            c = t->nodes[c].sibling;
        }
        if (c < 0) {
            if ((st = trie_new_node(t, s[i], &c, err)) != NPL_OK)
                return st;
            if (prev < 0)
                t->nodes[node].child = c;
            else
                t->nodes[prev].sibling = c;
        }
        node = c;
    }
    /* Duplicate texts: the first id keeps the occurrences (the unigram
     * pieces' trie: the last, as the reference's). */
    if (t->nodes[node].token < 0 || last_wins)
        t->nodes[node].token = id;
    if (always && t->nodes[node].token_always < 0)
        t->nodes[node].token_always = id;
    return NPL_OK;
}

npl_status npl_special_trie_build(npl_tokenizer *tok, npl_error *err)
{
    npl_special_trie *t = &tok->special;
    memset(t->root, 0xFF, sizeof t->root);
    for (int32_t id = 0; id < tok->n_vocab; id++) {
        uint8_t a = tok->attr[id];
        if (!(a & (NPL_TATTR_CONTROL | NPL_TATTR_USER_DEFINED | NPL_TATTR_UNKNOWN)))
            continue;
        const npl_str s = tok->text[id];
        if (s.len == 0)
            continue;
        bool always = !(a & (NPL_TATTR_CONTROL | NPL_TATTR_UNKNOWN));
        npl_status st = npl_special_trie_insert(t, (const unsigned char *)s.ptr, s.len, id, always, false, err);
        if (st != NPL_OK)
            return st;
        t->has_any = true;
        t->has_always |= always;
        if (s.len > t->max_len)
            t->max_len = s.len;
    }
    return NPL_OK;
}

void npl_special_trie_free(npl_special_trie *t)
{
    free(t->nodes);
    t->nodes = NULL;
    t->n_nodes = t->cap_nodes = 0;
}

/* Longest special text starting at s, at most limit bytes long. Returns
 * its length (0: none) and sets *id. */
static size_t longest_match(const npl_special_trie *t, const unsigned char *s, size_t limit,
                            bool parse_special, int32_t *id)
{
    size_t best = 0;
    int32_t node = limit > 0 ? t->root[s[0]] : -1;
    for (size_t depth = 1; node >= 0; depth++) {
        const npl_trie_node *nd = &t->nodes[node];
        int32_t tid = parse_special ? nd->token : nd->token_always;
        if (tid >= 0) {
            best = depth;
            *id = tid;
        }
        if (depth >= limit)
            break;
        int32_t c = nd->child;
        while (c >= 0 && t->nodes[c].byte != s[depth])
            c = t->nodes[c].sibling;
        node = c;
    }
    return best;
}

typedef struct occurrence {
    size_t pos;
    int32_t token;
    uint32_t len;
} occurrence;

typedef struct occ_list {
    occurrence *v;
    size_t n, cap;
    bool unsorted;
} occ_list;

static npl_status occ_push(occ_list *l, occurrence o, npl_error *err)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        occurrence *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for special tokens");
        l->v = v;
        l->cap = cap;
    }
    if (l->n > 0 && l->v[l->n - 1].pos > o.pos)
        l->unsorted = true;
    l->v[l->n++] = o;
    return NPL_OK;
}

static int occ_by_pos(const void *a, const void *b)
{
    size_t x = ((const occurrence *)a)->pos, y = ((const occurrence *)b)->pos;
    return x < y ? -1 : x > y;
}

static npl_status frag_push(npl_fragments *f, size_t start, size_t len, int32_t token, npl_error *err)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        npl_fragment *v = realloc(f->v, cap * sizeof *v);
        if (!v)
            return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for fragments");
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (npl_fragment){start, len, token};
    return NPL_OK;
}

npl_status npl_special_partition(const npl_tokenizer *tok, const char *text, size_t len,
                                 bool parse_special, npl_fragments *out, npl_error *err)
{
    const npl_special_trie *t = &tok->special;
    out->n = 0;
    if (len == 0)
        return NPL_OK;
    if (!(parse_special ? t->has_any : t->has_always))
        return frag_push(out, 0, len, -1, err);

    const unsigned char *s = (const unsigned char *)text;
    size_t max_len = t->max_len;
    unsigned char *claimed = calloc(len, 1);
    occ_list *queue = calloc(max_len + 1, sizeof *queue);
    occ_list accepted = {0};
    npl_status st = NPL_OK;
    if (!claimed || !queue) {
        st = npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", len);
        goto out;
    }

    for (size_t p = 0; p < len; p++) {
        if (t->root[s[p]] < 0)
            continue;
        int32_t id = -1;
        size_t l = longest_match(t, s + p, len - p, parse_special, &id);
        if (l > 0 && (st = occ_push(&queue[l], (occurrence){p, id, (uint32_t)l}, err)) != NPL_OK)
            goto out;
    }

    for (size_t l = max_len; l > 0; l--) {
        occ_list *q = &queue[l];
        if (q->unsorted)
            qsort(q->v, q->n, sizeof *q->v, occ_by_pos);
        for (size_t i = 0; i < q->n; i++) {
            occurrence o = q->v[i];
            size_t c = o.pos;
            while (c < o.pos + l && !claimed[c])
                c++;
            if (c == o.pos + l) {
                memset(claimed + o.pos, 1, l);
                if ((st = occ_push(&accepted, o, err)) != NPL_OK)
                    goto out;
                continue;
            }
            /* Blocked at c: only a shorter text ending before c can still
             * start here. */
            int32_t id = -1;
            size_t shorter = longest_match(t, s + o.pos, c - o.pos, parse_special, &id);
            if (shorter > 0 &&
                (st = occ_push(&queue[shorter], (occurrence){o.pos, id, (uint32_t)shorter}, err)) != NPL_OK)
                goto out;
        }
        free(q->v);
        q->v = NULL;
        q->n = 0;
    }

    if (accepted.n > 1)
        qsort(accepted.v, accepted.n, sizeof *accepted.v, occ_by_pos);
    size_t at = 0;
    for (size_t i = 0; i < accepted.n; i++) {
        const occurrence *o = &accepted.v[i];
        if (o->pos > at && (st = frag_push(out, at, o->pos - at, -1, err)) != NPL_OK)
            goto out;
        if ((st = frag_push(out, o->pos, o->len, o->token, err)) != NPL_OK)
            goto out;
        at = o->pos + o->len;
    }
    if (at < len)
        st = frag_push(out, at, len - at, -1, err);

out:
    if (queue)
        for (size_t l = 0; l <= max_len; l++)
            free(queue[l].v);
    free(queue);
    free(accepted.v);
    free(claimed);
    return st;
}
