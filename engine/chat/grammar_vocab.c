/* The vocabulary pre-indexed for token masks: every token's bytes in a
 * byte trie laid out in preorder, so a mask walks the trie together with
 * the grammar state and skips a whole subtree as soon as its prefix is
 * refused. Tokens are sorted by their bytes, so a node's subtree holds a
 * contiguous run of them. */
#include <stdlib.h>
#include <string.h>

#include "grammar_vocab.h"

#define MAX_TOKEN_BYTES NPL_VOCAB_MAX_TOKEN_BYTES

typedef struct tok_entry {
    const char *s;
    uint32_t n;
    uint32_t id;
} tok_entry;

static int tok_cmp(const void *pa, const void *pb)
{
    const tok_entry *a = pa, *b = pb;
    uint32_t n = a->n < b->n ? a->n : b->n;
    int c = memcmp(a->s, b->s, n);
    if (c)
        return c;
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

void npl_vocab_index_free(npl_vocab_index *vi)
{
    if (!vi)
        return;
    free(vi->order);
    free(vi->nodes);
    free(vi->sub_ascii);
    free(vi->tok_chars);
    free(vi->tok_off);
    free(vi->blob);
    free(vi->eog);
    free(vi);
}

uint32_t npl_vocab_index_n_vocab(const npl_vocab_index *vi)
{
    return vi ? vi->n_vocab : 0;
}

/* Where a node stands in UTF-8 decoding of the path from the root. */
static void node_decode(tnode *n, const tnode *parent, uint32_t *acc, uint8_t *left, uint8_t *need_of)
{
    uint8_t b = n->byte;
    if (parent->cp_state == TN_INVALID) {
        n->cp_state = TN_INVALID;
        return;
    }
    if (parent->cp_state == TN_BOUNDARY) {
        if (b < 0x80) {
            n->cp_state = TN_BOUNDARY;
            n->cp = b;
            return;
        }
        uint8_t need = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
        if (!need) {
            n->cp_state = TN_INVALID;
            return;
        }
        *acc = b & (0x7Fu >> need);
        *left = need - 1;
        *need_of = need;
        n->cp_state = TN_MID;
        return;
    }
    if ((b & 0xC0) != 0x80) {
        n->cp_state = TN_INVALID;
        return;
    }
    *acc = (*acc << 6) | (b & 0x3Fu);
    if (--*left) {
        n->cp_state = TN_MID;
        return;
    }
    static const uint32_t min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (*acc > 0x10FFFF || (*acc >= 0xD800 && *acc <= 0xDFFF) || *acc < min_of[*need_of]) {
        n->cp_state = TN_INVALID;
        return;
    }
    n->cp_state = TN_BOUNDARY;
    n->cp = *acc;
}

/* Fills vi->tok_off, blob and eog from the tokenizer. */
static npl_status load_tokens(npl_vocab_index *vi, const npl_tokenizer *tok, npl_error *err)
{
    int32_t nv = npl_tokenizer_n_vocab(tok);
    vi->n_vocab = (uint32_t)nv;
    vi->tok_off = malloc(((size_t)nv + 1) * sizeof *vi->tok_off);
    if (!vi->tok_off)
        return npl_error_set(err, NPL_ERR_NOMEM, "vocab index: out of memory");
    size_t total = 0;
    uint32_t n_eog = 0;
    for (int32_t id = 0; id < nv; id++) {
        vi->tok_off[id] = (uint32_t)total;
        total += npl_token_to_bytes(tok, id, false, NULL, 0);
        if (total > UINT32_MAX / 2)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "vocab index: token texts too large");
        n_eog += npl_tokenizer_is_eog(tok, id);
    }
    vi->tok_off[nv] = (uint32_t)total;
    vi->blob = malloc(total + 1);
    vi->eog = malloc((n_eog + 1) * sizeof *vi->eog);
    if (!vi->blob || !vi->eog)
        return npl_error_set(err, NPL_ERR_NOMEM, "vocab index: out of memory");
    for (int32_t id = 0; id < nv; id++) {
        uint32_t off = vi->tok_off[id], k = vi->tok_off[id + 1] - off;
        if (k)
            npl_token_to_bytes(tok, id, false, vi->blob + off, k);
        if (npl_tokenizer_is_eog(tok, id))
            vi->eog[vi->n_eog++] = id;
    }
    return NPL_OK;
}

static npl_status build_trie(npl_vocab_index *vi, npl_error *err);

npl_vocab_index *npl_vocab_index_create(const npl_tokenizer *tok, npl_error *err)
{
    if (!tok) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "vocab index: tokenizer is NULL");
        return NULL;
    }
    if (npl_tokenizer_n_vocab(tok) <= 0) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "vocab index: empty vocabulary");
        return NULL;
    }
    npl_vocab_index *vi = calloc(1, sizeof *vi);
    if (!vi) {
        npl_error_set(err, NPL_ERR_NOMEM, "vocab index: out of memory");
        return NULL;
    }
    if (load_tokens(vi, tok, err) || build_trie(vi, err)) {
        npl_vocab_index_free(vi);
        return NULL;
    }
    return vi;
}

npl_vocab_index *npl_vocab_index_from_texts(const char *const *texts, const size_t *lens, uint32_t n,
                                            const int32_t *eog, uint32_t n_eog, npl_error *err)
{
    if (!texts || !lens || n == 0 || (n_eog && !eog)) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "vocab index: no tokens");
        return NULL;
    }
    npl_vocab_index *vi = calloc(1, sizeof *vi);
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += lens[i];
    if (vi) {
        vi->n_vocab = n;
        vi->tok_off = malloc(((size_t)n + 1) * sizeof *vi->tok_off);
        vi->blob = malloc(total + 1);
        vi->eog = malloc(((size_t)n_eog + 1) * sizeof *vi->eog);
    }
    if (!vi || !vi->tok_off || !vi->blob || !vi->eog || total > UINT32_MAX / 2) {
        npl_vocab_index_free(vi);
        npl_error_set(err, NPL_ERR_NOMEM, "vocab index: out of memory");
        return NULL;
    }
    total = 0;
    for (uint32_t i = 0; i < n; i++) {
        vi->tok_off[i] = (uint32_t)total;
        if (lens[i])
            memcpy(vi->blob + total, texts[i], lens[i]);
        total += lens[i];
    }
    vi->tok_off[n] = (uint32_t)total;
    for (uint32_t i = 0; i < n_eog; i++) {
        if (eog[i] < 0 || (uint32_t)eog[i] >= n) {
            npl_vocab_index_free(vi);
            npl_error_set(err, NPL_ERR_INVALID_ARG, "vocab index: end token %d out of range", eog[i]);
            return NULL;
        }
        vi->eog[vi->n_eog++] = eog[i];
    }
    if (build_trie(vi, err)) {
        npl_vocab_index_free(vi);
        return NULL;
    }
    return vi;
}

static bool in_eog(const npl_vocab_index *vi, uint32_t id)
{
    for (uint32_t i = 0; i < vi->n_eog; i++)
        if ((uint32_t)vi->eog[i] == id)
            return true;
    return false;
}

/* Per subtree, children before parents: the longest token in characters
 * and which characters occur (so a mask can tell at once that a subtree's
 * tokens all belong to a character class). */
static bool summarize(npl_vocab_index *vi)
{
    vi->sub_ascii = calloc(vi->n_nodes, sizeof *vi->sub_ascii);
    if (!vi->sub_ascii)
        return true;
    for (uint32_t i = vi->n_nodes; i-- > 1;) {
        tnode *n = &vi->nodes[i];
        bool ends = n->own_end > n->tok_lo;
        uint16_t m = ends ? n->chars : 0;
        uint32_t *asc = vi->sub_ascii[i];
        if (n->cp_state == TN_BOUNDARY && n->cp < 128)
            asc[n->cp >> 5] |= 1u << (n->cp & 31);
        n->sub = n->cp_state == TN_INVALID || (n->cp_state == TN_MID && ends) ? TS_BROKEN
                 : n->cp_state == TN_BOUNDARY && n->cp >= 128                 ? TS_NONASCII
                                                                              : 0;
        for (uint32_t j = i + 1; j < n->end; j = vi->nodes[j].end) {
            const tnode *c = &vi->nodes[j];
            if (c->maxc > m)
                m = c->maxc;
            n->sub |= c->sub;
            for (int w = 0; w < 4; w++)
                asc[w] |= vi->sub_ascii[j][w];
        }
        n->maxc = m;
    }
    return false;
}

static npl_status build_trie(npl_vocab_index *vi, npl_error *err)
{
    uint32_t nv = vi->n_vocab;
    tok_entry *ents = malloc((size_t)nv * sizeof *ents);
    uint32_t *path = NULL;
    uint32_t *accs = NULL;
    uint8_t *lefts = NULL, *needs = NULL;
    if (!ents)
        goto oom;
    uint32_t n_ents = 0;
    for (uint32_t id = 0; id < nv; id++) {
        uint32_t off = vi->tok_off[id], k = vi->tok_off[id + 1] - off;
        if (k > 0 && k <= MAX_TOKEN_BYTES && !in_eog(vi, id))
            ents[n_ents++] = (tok_entry){vi->blob + off, k, id};
    }
    qsort(ents, n_ents, sizeof *ents, tok_cmp);
    vi->order = malloc(((size_t)n_ents + 1) * sizeof *vi->order);
    vi->tok_chars = malloc(((size_t)n_ents + 1) * sizeof *vi->tok_chars);
    size_t cap = (size_t)n_ents + 1024;
    vi->nodes = malloc(cap * sizeof *vi->nodes);
    path = malloc((MAX_TOKEN_BYTES + 1) * sizeof *path);
    accs = malloc((MAX_TOKEN_BYTES + 1) * sizeof *accs);
    lefts = malloc(MAX_TOKEN_BYTES + 1);
    needs = malloc(MAX_TOKEN_BYTES + 1);
    if (!vi->order || !vi->tok_chars || !vi->nodes || !path || !accs || !lefts || !needs)
        goto oom;
    vi->n_order = n_ents;
    memset(&vi->nodes[0], 0, sizeof vi->nodes[0]);
    vi->nodes[0].cp_state = TN_BOUNDARY;
    vi->n_nodes = 1;
    path[0] = 0;
    accs[0] = 0;
    lefts[0] = 0;
    needs[0] = 0;
    uint32_t depth = 0;
    const tok_entry *prev = NULL;
    for (uint32_t k = 0; k < n_ents; k++) {
        const tok_entry *e = &ents[k];
        vi->order[k] = e->id;
        uint32_t lcp = 0;
        if (prev) {
            uint32_t m = prev->n < e->n ? prev->n : e->n;
            while (lcp < m && prev->s[lcp] == e->s[lcp])
                lcp++;
        }
        for (; depth > lcp; depth--)
            vi->nodes[path[depth]].end = vi->n_nodes;
        for (uint32_t d = lcp + 1; d <= e->n; d++) {
            if (vi->n_nodes == cap) {
                cap *= 2;
                tnode *nn = realloc(vi->nodes, cap * sizeof *nn);
                if (!nn)
                    goto oom;
                vi->nodes = nn;
            }
            tnode *n = &vi->nodes[vi->n_nodes];
            memset(n, 0, sizeof *n);
            n->byte = (uint8_t)e->s[d - 1];
            n->depth = (uint16_t)d;
            n->tok_lo = n->own_end = k;
            accs[d] = accs[d - 1];
            lefts[d] = lefts[d - 1];
            needs[d] = needs[d - 1];
            node_decode(n, &vi->nodes[path[d - 1]], &accs[d], &lefts[d], &needs[d]);
            n->chars = (uint16_t)(vi->nodes[path[d - 1]].chars + (n->cp_state == TN_BOUNDARY));
            path[d] = vi->n_nodes++;
        }
        depth = e->n;
        vi->nodes[path[depth]].own_end = k + 1;
        vi->tok_chars[k] = vi->nodes[path[depth]].chars;
        if (vi->tok_chars[k] > vi->max_chars)
            vi->max_chars = vi->tok_chars[k];
        if (depth > vi->max_depth)
            vi->max_depth = depth;
        prev = e;
    }
    for (; depth > 0; depth--)
        vi->nodes[path[depth]].end = vi->n_nodes;
    vi->nodes[0].end = vi->n_nodes;
    if (summarize(vi))
        goto oom;
    free(ents);
    free(path);
    free(accs);
    free(lefts);
    free(needs);
    return NPL_OK;
oom:
    free(ents);
    free(path);
    free(accs);
    free(lefts);
    free(needs);
    return npl_error_set(err, NPL_ERR_NOMEM, "vocab index: out of memory");
}
