/* SentencePiece unigram (tokenizer.ggml.model "t5": T5, XLM-RoBERTa,
 * bge-m3), as the reference tokenizes it:
 *
 *   1. normalization: at each position the user-defined texts are tried
 *      first (the input is copied as is for as far as their trie follows
 *      it), then the longest key of the precompiled charsmap (a double
 *      array of normalization rules: NFKC and the like) is replaced by its
 *      string; anything else is copied as is, an invalid UTF-8 byte becoming
 *      U+FFFD;
 *   2. spaces: every ' ' of the normalized text becomes U+2581, and a U+2581
 *      goes before the first word (add_space_prefix); with
 *      remove_extra_whitespaces, runs of spaces and the leading and
 *      trailing ones are dropped and every word gets one U+2581 before it;
 *   3. Viterbi: the segmentation into vocabulary pieces (normal,
 *      user-defined scoring 0 and unused ones) with the highest sum of
 *      scores, a code point that no piece covers on its own scoring the
 *      lowest normal score minus 10 as the unknown token; consecutive
 *      unknown tokens become one.
 *
 * BOS and EOS around the text are added by npl_tokenize_masked. */
#include <float.h>
#include <stdlib.h>

#include "le_bytes.h"
#include "unicode_utf8.h"
#include "tokenizer_internal.h"

#define UGM_SPACE "\xe2\x96\x81" /* U+2581 */

struct npl_ugm {
    npl_special_trie pieces; /* node.token: the piece's id (the last of equal texts) */
    npl_special_trie user;   /* user-defined texts */
    uint32_t *xcda;  /* the charsmap's double array, host order */
    size_t n_xcda;
    char *repl; /* its replacement strings, each NUL-terminated */
    size_t n_repl;
    double unk_score;
    bool remove_extra_ws;
    /* the pieces' edges by (node, byte): a node under "▁" has thousands
     * of children, too many to scan */
    uint64_t *edge_key; /* (node << 8 | byte) + 1, 0 = empty */
    int32_t *edge_child;
    size_t edge_mask;
};

static size_t edge_slot(uint64_t key, size_t mask)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static npl_status build_edges(struct npl_ugm *u, npl_error *err)
{
    const npl_special_trie *t = &u->pieces;
    size_t cap = 16;
    while (cap < 2 * t->n_nodes + 1)
        cap *= 2;
    u->edge_key = calloc(cap, sizeof *u->edge_key);
    u->edge_child = malloc(cap * sizeof *u->edge_child);
    if (!u->edge_key || !u->edge_child)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for the piece trie");
    u->edge_mask = cap - 1;
    for (size_t p = 0; p < t->n_nodes; p++)
        for (int32_t c = t->nodes[p].child; c >= 0; c = t->nodes[c].sibling) {
            uint64_t key = ((uint64_t)p << 8 | t->nodes[c].byte) + 1;
            size_t i = edge_slot(key, u->edge_mask);
            while (u->edge_key[i])
                i = (i + 1) & u->edge_mask;
            u->edge_key[i] = key;
            u->edge_child[i] = c;
        }
    return NPL_OK;
}

/* The pieces' child of node (-1: the root) for byte c, or -1. */
static int32_t piece_step(const struct npl_ugm *u, int32_t node, unsigned char c)
{
    if (node < 0)
        return u->pieces.root[c];
    uint64_t key = ((uint64_t)node << 8 | c) + 1;
    for (size_t i = edge_slot(key, u->edge_mask); u->edge_key[i]; i = (i + 1) & u->edge_mask)
        if (u->edge_key[i] == key)
            return u->edge_child[i];
    return -1;
}

/* The child of node (-1: the root) for byte c, or -1. */
static int32_t trie_step(const npl_special_trie *t, int32_t node, unsigned char c)
{
    int32_t k = node < 0 ? t->root[c] : t->nodes[node].child;
    if (node < 0)
        return k;
    while (k >= 0 && t->nodes[k].byte != c)
        k = t->nodes[k].sibling;
    return k;
}

static npl_status read_charsmap(struct npl_ugm *u, const uint8_t *cm, size_t n, npl_error *err)
{
    if (!cm || n == 0)
        return NPL_OK;
    uint32_t blob = n >= 4 ? npl_get_le32(cm) : 0;
    if (n < 4 || blob % 4 || (uint64_t)blob + 4 >= n)
        return npl_error_set(err, NPL_ERR_FORMAT,
                             "tokenizer: precompiled_charsmap of %zu bytes is damaged (double array of %u bytes)",
                             n, blob);
    u->n_xcda = blob / 4;
    u->n_repl = n - 4 - blob;
    u->xcda = malloc((u->n_xcda ? u->n_xcda : 1) * sizeof *u->xcda);
    u->repl = malloc(u->n_repl);
    if (!u->xcda || !u->repl)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for the charsmap");
    for (size_t i = 0; i < u->n_xcda; i++)
        u->xcda[i] = npl_get_le32(cm + 4 + 4 * i);
    memcpy(u->repl, cm + 4 + blob, u->n_repl);
    return NPL_OK;
}

npl_status npl_ugm_build(npl_tokenizer *tok, const npl_tokenizer_spec *spec, npl_error *err)
{
    struct npl_ugm *u = calloc(1, sizeof *u);
    if (!u)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory");
    tok->ugm = u;
    memset(u->pieces.root, 0xFF, sizeof u->pieces.root);
    memset(u->user.root, 0xFF, sizeof u->user.root);
    u->remove_extra_ws = spec->remove_extra_ws > 0;
    npl_status st = read_charsmap(u, spec->charsmap, spec->charsmap_len, err);

    /* The file's own token types, as the reference reads them before it
     * adjusts any (end-of-turn texts made control do stay pieces). */
    float min_score = FLT_MAX;
    for (int32_t id = 0; !st && id < tok->n_vocab; id++) {
        int32_t type = spec->types ? spec->types[id] : NPL_TOKEN_NORMAL;
        const npl_str s = tok->text[id];
        if (type == NPL_TOKEN_NORMAL && tok->scores[id] < min_score)
            min_score = tok->scores[id];
        bool piece = type == NPL_TOKEN_NORMAL || type == NPL_TOKEN_USER_DEFINED || type == NPL_TOKEN_UNUSED;
        if (piece && s.len > 0)
            st = npl_special_trie_insert(&u->pieces, (const unsigned char *)s.ptr, s.len, id, false, true, err);
        if (!st && type == NPL_TOKEN_USER_DEFINED && s.len > 0)
            st = npl_special_trie_insert(&u->user, (const unsigned char *)s.ptr, s.len, id, false, true, err);
    }
    u->unk_score = (double)(min_score - 10.0f);
    return st ? st : build_edges(u, err);
}

void npl_ugm_free(npl_tokenizer *tok)
{
    struct npl_ugm *u = tok->ugm;
    if (!u)
        return;
    npl_special_trie_free(&u->pieces);
    npl_special_trie_free(&u->user);
    free(u->xcda);
    free(u->repl);
    free(u->edge_key);
    free(u->edge_child);
    free(u);
    tok->ugm = NULL;
}

/* Length of the UTF-8 sequence at s as the reference accepts it (lead
 * byte and continuation bits only), 0 when it is not one. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : s[0] < 0xC0 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : s[0] < 0xF8 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* The normalized form of the input's prefix at s (out, out_len bytes) and
 * how many input bytes it consumes (used). */
static npl_status normalize_prefix(const struct npl_ugm *u, const unsigned char *s, size_t n, const char **out,
                                   size_t *out_len, size_t *used, npl_error *err)
{
    /* as far as the user-defined trie follows the input (a whole text or not) */
    size_t depth = 0;
    for (int32_t node = trie_step(&u->user, -1, s[0]); node >= 0;
         node = depth < n ? trie_step(&u->user, node, s[depth]) : -1)
        depth++;
    if (depth > 0) {
        *out = (const char *)s;
        *out_len = *used = depth;
        return NPL_OK;
    }

    size_t best_len = 0, best_off = 0;
    if (u->n_xcda > 0) {
        /* unit: offset in bits 10-30 (shifted by 8 when bit 9 is set),
         * label in 0-7 (bit 31 set for value units), has-leaf in bit 8 */
#define XCDA_OFFSET(x) (((x) >> 10) << (((x) & (1u << 9)) >> 6))
        size_t node = XCDA_OFFSET(u->xcda[0]);
        for (size_t i = 0; i < n && s[i] != 0; i++) {
            node ^= s[i];
            if (node >= u->n_xcda || (u->xcda[node] & ((1u << 31) | 0xFFu)) != s[i])
                break;
            bool leaf = (u->xcda[node] >> 8) & 1;
            node ^= XCDA_OFFSET(u->xcda[node]);
            if (leaf && node >= u->n_xcda)
                return npl_error_set(err, NPL_ERR_FORMAT, "tokenizer: precompiled_charsmap is damaged");
            if (leaf) {
                best_len = i + 1;
                best_off = u->xcda[node] & ((1u << 31) - 1);
            }
        }
#undef XCDA_OFFSET
    }
    if (best_len > 0) {
        if (best_off >= u->n_repl)
            return npl_error_set(err, NPL_ERR_FORMAT, "tokenizer: precompiled_charsmap is damaged");
        const char *r = u->repl + best_off;
        const char *end = memchr(r, 0, u->n_repl - best_off);
        if (!end)
            return npl_error_set(err, NPL_ERR_FORMAT, "tokenizer: precompiled_charsmap has an unterminated string");
        *out = r;
        *out_len = (size_t)(end - r);
        *used = best_len;
        return NPL_OK;
    }
    size_t len = utf8_seq_len(s, n);
    if (len == 0) {
        *out = "\xEF\xBF\xBD";
        *out_len = 3;
        *used = 1;
    } else {
        *out = (const char *)s;
        *out_len = *used = len;
    }
    return NPL_OK;
}

/* Steps 1 and 2 of the file's comment into out. */
static npl_status normalize(const npl_tokenizer *tok, const unsigned char *s, size_t n, npl_buf *out, npl_error *err)
{
    const struct npl_ugm *u = tok->ugm;
    bool prepend = tok->add_space_prefix, merge = u->remove_extra_ws;
    bool prepended = false, in_word = false;
    npl_status st = NPL_OK;
    for (size_t i = 0; i < n && !st;) {
        const char *r = NULL;
        size_t rn = 0, used = 1;
        if ((st = normalize_prefix(u, s + i, n - i, &r, &rn, &used, err)) != NPL_OK)
            break;
        i += used;
        for (size_t k = 0; k < rn && !st; k++) {
            if (r[k] != ' ') {
                if (!in_word) {
                    in_word = true;
                    if ((prepend && !prepended) || merge) {
                        st = npl_buf_append(out, UGM_SPACE, 3, err);
                        prepended = true;
                    }
                }
                if (!st)
                    st = npl_buf_append(out, r + k, 1, err);
            } else {
                in_word = false;
                if (!merge)
                    st = npl_buf_append(out, UGM_SPACE, 3, err);
            }
        }
    }
    return st;
}

typedef struct ugm_best {
    int32_t id;
    uint32_t from; /* where the piece ending here starts */
    double score;
} ugm_best;

/* Step 3 over the normalized text t[0..n), ids appended to out. */
static npl_status viterbi(const npl_tokenizer *tok, const unsigned char *t, size_t n, npl_tokens *out, npl_error *err)
{
    const struct npl_ugm *u = tok->ugm;
    ugm_best *best = malloc((n + 1) * sizeof *best);
    if (!best)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu bytes of text", n);
    best[0] = (ugm_best){tok->unk, 0, 0.0};
    for (size_t i = 1; i <= n; i++)
        best[i] = (ugm_best){tok->unk, 0, -DBL_MAX};

    for (size_t i = 0; i < n;) {
        size_t cp_len = npl_utf8_lead_len(t[i]);
        if (cp_len > n - i)
            cp_len = n - i;
        bool whole_cp = false;
        double base = best[i].score;
        size_t j = i;
        for (int32_t node = piece_step(u, -1, t[j++]); node >= 0; node = j < n ? piece_step(u, node, t[j++]) : -1) {
            int32_t id = u->pieces.nodes[node].token;
            if (id < 0)
                continue;
            if (j - i == cp_len)
                whole_cp = true;
            double sc = base + ((tok->attr[id] & NPL_TATTR_USER_DEFINED) ? 0.0 : (double)tok->scores[id]);
            if (sc > best[j].score)
                best[j] = (ugm_best){id, (uint32_t)i, sc};
        }
        if (!whole_cp && base + u->unk_score > best[i + cp_len].score)
            best[i + cp_len] = (ugm_best){tok->unk, (uint32_t)i, base + u->unk_score};
        i += cp_len;
    }

    /* back from the end; a run of unknown tokens is one */
    size_t first = out->n;
    npl_status st = NPL_OK;
    bool prev_unk = false;
    for (size_t at = n; at > 0 && !st; at = best[at].from) {
        bool unk = best[at].id == tok->unk;
        if (!(prev_unk && unk) && best[at].id >= 0)
            st = npl_tokens_push(out, best[at].id, err);
        prev_unk = unk;
    }
    free(best);
    for (size_t a = first, b = out->n; !st && a + 1 < b; a++, b--) {
        int32_t x = out->ids[a];
        out->ids[a] = out->ids[b - 1];
        out->ids[b - 1] = x;
    }
    return st;
}

npl_status npl_ugm_tokenize(const npl_tokenizer *tok, const char *text, size_t len, npl_tokens *out, npl_error *err)
{
    npl_buf norm = {0};
    npl_status st = normalize(tok, (const unsigned char *)text, len, &norm, err);
    if (!st && norm.len > UINT32_MAX - 1)
        st = npl_error_set(err, NPL_ERR_INVALID_ARG, "tokenizer: text too long (%zu bytes)", len);
    if (!st && norm.len > 0)
        st = viterbi(tok, (const unsigned char *)norm.data, norm.len, out, err);
    npl_buf_free(&norm);
    return st;
}
