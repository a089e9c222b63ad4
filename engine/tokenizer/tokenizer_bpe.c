/* Byte-level BPE (GGUF model "gpt2": Llama 3, Qwen2). Each pre-token's
 * bytes are mapped to the GPT-2 printable alphabet, then the adjacent pair
 * with the lowest merge rank is merged first (ties: leftmost) until no
 * ranked pair is left.
 *
 * Gemma 4's BPE (GGUF model "gemma4", NPL_PRETOK_GEMMA4) works on the raw
 * UTF-8 instead, as SentencePiece-converted vocabularies do: spaces become
 * U+2581, the text is split at runs of newlines only (a run that is a
 * vocabulary entry is that token), symbols start as single characters,
 * and a result that is no entry falls back to its bytes' <0xNN> tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"

/* GPT-2's reversible byte -> code point table: printable Latin-1 bytes
 * stand for themselves, the other 68 bytes take U+0100.. in byte order. */
static void build_byte_map(npl_tokenizer *tok)
{
    uint32_t next_extra = 256;
    memset(tok->byte_of_cp, 0xFF, sizeof tok->byte_of_cp);
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        uint32_t cp = printable ? (uint32_t)b : next_extra++;
        unsigned char buf[4];
        size_t n = npl_utf8_encode(cp, buf);
        memcpy(tok->byte_utf8[b], buf, n);
        tok->byte_utf8_len[b] = (unsigned char)n;
        tok->byte_token[b] = npl_tok_lookup(tok, buf, n);
        tok->byte_of_cp[cp] = (int16_t)b;
    }
}

static uint32_t pair_hash(int32_t left, int32_t right)
{
    uint64_t k = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static uint32_t text_pair_hash(const void *l, size_t ln, const void *r, size_t rn)
{
    return npl_tok_hash(l, ln) ^ (npl_tok_hash(r, rn) * 0x9E3779B1u);
}

static uint32_t pow2_at_least(size_t n)
{
    uint32_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static bool str_eq(npl_str a, const void *p, size_t n)
{
    return a.len == n && memcmp(a.ptr, p, n) == 0;
}

static int32_t text_rank(const npl_merge_map *m, const void *l, size_t ln, const void *r, size_t rn)
{
    if (m->n_text == 0)
        return -1;
    uint32_t h = text_pair_hash(l, ln, r, rn);
    for (uint32_t i = h & m->text_mask;; i = (i + 1) & m->text_mask) {
        int32_t e = m->text_slots[i];
        if (e < 0)
            return -1;
        if (str_eq(m->text_left[e], l, ln) && str_eq(m->text_right[e], r, rn))
            return m->text_rank[e];
    }
}

static int32_t id_rank(const npl_merge_map *m, int32_t left, int32_t right)
{
    uint32_t h = pair_hash(left, right);
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t slot = m->slots[i];
        if (slot == 0)
            return -1;
        if ((uint32_t)(slot >> 32) != h)
            continue;
        int32_t r = (int32_t)(uint32_t)slot - 1;
        if (m->left[r] == left && m->right[r] == right)
            return r;
    }
}

/* A merge line "left right", split at the first space after the first
 * byte (a lone space can itself be a half); false when a half is empty,
 * as such a merge never applies. */
static bool split_merge(npl_str s, npl_str *l, npl_str *r)
{
    const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
    if (!sp || sp == s.ptr + s.len - 1)
        return false;
    *l = (npl_str){s.ptr, (uint64_t)(sp - s.ptr)};
    *r = (npl_str){sp + 1, s.len - l->len - 1};
    return true;
}

static void insert_id_merge(npl_merge_map *m, int32_t rank, int32_t li, int32_t ri)
{
    uint32_t h = pair_hash(li, ri);
    for (uint32_t i = h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t slot = m->slots[i];
        if (slot == 0) {
            m->slots[i] = ((uint64_t)h << 32) | (uint32_t)(rank + 1);
            m->left[rank] = li;
            m->right[rank] = ri;
            return;
        }
        int32_t other = (int32_t)(uint32_t)slot - 1;
        if ((uint32_t)(slot >> 32) == h && m->left[other] == li && m->right[other] == ri)
            return; /* duplicate merge: the first rank stays */
    }
}

static npl_status build_text_merges(npl_tokenizer *tok, const npl_tokenizer_spec *spec, size_t n_text,
                                    npl_error *err)
{
    npl_merge_map *m = &tok->merges;
    uint32_t tcap = pow2_at_least(n_text * 2);
    m->text_left = malloc(n_text * sizeof *m->text_left);
    m->text_right = malloc(n_text * sizeof *m->text_right);
    m->text_rank = malloc(n_text * sizeof *m->text_rank);
    m->text_slots = malloc((size_t)tcap * sizeof *m->text_slots);
    if (!m->text_left || !m->text_right || !m->text_rank || !m->text_slots)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for merges");
    memset(m->text_slots, 0xFF, (size_t)tcap * sizeof *m->text_slots);
    m->text_mask = tcap - 1;
    for (size_t r = 0; r < spec->n_merges; r++) {
        npl_str l, rt;
        if (m->left[r] >= 0 || !split_merge(spec->merges[r], &l, &rt))
            continue;
        if (npl_tok_lookup(tok, l.ptr, l.len) >= 0 && npl_tok_lookup(tok, rt.ptr, rt.len) >= 0)
            continue; /* duplicate of an id-keyed merge */
        if (text_rank(m, l.ptr, l.len, rt.ptr, rt.len) >= 0)
            continue; /* duplicate: the first rank stays */
        size_t e = m->n_text++;
        m->text_left[e] = l;
        m->text_right[e] = rt;
        m->text_rank[e] = (int32_t)r;
        uint32_t i = text_pair_hash(l.ptr, l.len, rt.ptr, rt.len) & m->text_mask;
        while (m->text_slots[i] >= 0)
            i = (i + 1) & m->text_mask;
        m->text_slots[i] = (int32_t)e;
    }
    return NPL_OK;
}

npl_status npl_bpe_build(npl_tokenizer *tok, const npl_tokenizer_spec *spec, npl_error *err)
{
    npl_merge_map *m = &tok->merges;
    size_t n = spec->n_merges;
    if (n > NPL_TOKENIZER_MAX_ENTRIES)
        return npl_error_set(err, NPL_ERR_FORMAT, "tokenizer: %zu merges is too many", n);

    build_byte_map(tok);

    uint32_t cap = pow2_at_least(n * 2);
    m->left = malloc((n ? n : 1) * sizeof *m->left);
    m->right = malloc((n ? n : 1) * sizeof *m->right);
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->left || !m->right || !m->slots)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu merges", n);
    m->mask = cap - 1;

    /* Lookups of the merge halves are cache misses in a large table: do
     * them in batches, hashing and prefetching first. */
    enum { BATCH = 32 };
    size_t n_text = 0;
    for (size_t base = 0; base < n; base += BATCH) {
        size_t k = n - base < BATCH ? n - base : BATCH;
        npl_str l[BATCH], r[BATCH];
        uint32_t hl[BATCH], hr[BATCH];
        bool ok[BATCH];
        for (size_t j = 0; j < k; j++) {
            m->left[base + j] = m->right[base + j] = -1;
            ok[j] = split_merge(spec->merges[base + j], &l[j], &r[j]);
            if (!ok[j])
                continue;
            hl[j] = npl_tok_hash(l[j].ptr, l[j].len);
            hr[j] = npl_tok_hash(r[j].ptr, r[j].len);
            npl_tok_prefetch(tok, hl[j]);
            npl_tok_prefetch(tok, hr[j]);
        }
        int32_t li[BATCH], ri[BATCH];
        for (size_t j = 0; j < k; j++) {
            if (!ok[j])
                continue;
            li[j] = npl_tok_lookup_hashed(tok, l[j].ptr, l[j].len, hl[j]);
            ri[j] = npl_tok_lookup_hashed(tok, r[j].ptr, r[j].len, hr[j]);
            if (li[j] < 0 || ri[j] < 0) {
                ok[j] = false;
                n_text++;
                continue;
            }
            __builtin_prefetch(&m->slots[pair_hash(li[j], ri[j]) & m->mask]);
        }
        for (size_t j = 0; j < k; j++)
            if (ok[j])
                insert_id_merge(m, (int32_t)(base + j), li[j], ri[j]);
    }

    if (n_text > 0) {
        npl_status st = build_text_merges(tok, spec, n_text, err);
        if (st != NPL_OK)
            return st;
    }
    if (tok->pretok == NPL_PRETOK_GEMMA4) { /* no split pattern; bytes fall back to <0xNN> */
        for (int b = 0; b < 256; b++) {
            char hex[7];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            tok->byte_token[b] = npl_tok_lookup(tok, hex, 6);
        }
        return NPL_OK;
    }
    return npl_pretok_compile(tok, err);
}

void npl_bpe_free(npl_tokenizer *tok)
{
    npl_merge_map *m = &tok->merges;
    free(m->left);
    free(m->right);
    free(m->slots);
    free(m->text_left);
    free(m->text_right);
    free(m->text_rank);
    free(m->text_slots);
    memset(m, 0, sizeof *m);
    if (tok->pretok_re)
        pcre2_code_free(tok->pretok_re);
    tok->pretok_re = NULL;
}

typedef struct bpe_session {
    const npl_tokenizer *tok;
    npl_tokens *out;
    unsigned char *mapped; /* the current word in the GPT-2 alphabet */
    size_t mapped_cap;
    npl_symbols sym;
    npl_merge_heap heap;
} bpe_session;

static int32_t merge_rank(const bpe_session *s, int32_t l, int32_t r)
{
    const npl_symbols *sym = &s->sym;
    if (sym->id[l] >= 0 && sym->id[r] >= 0)
        return id_rank(&s->tok->merges, sym->id[l], sym->id[r]);
    return text_rank(&s->tok->merges, s->mapped + sym->start[l], sym->len[l],
                     s->mapped + sym->start[r], sym->len[r]);
}

static npl_status add_pair(bpe_session *s, int32_t l, int32_t r, npl_error *err)
{
    if (l < 0 || r < 0)
        return NPL_OK;
    int32_t rank = merge_rank(s, l, r);
    if (rank < 0)
        return NPL_OK;
    npl_merge_cand c = npl_merge_cand_make((uint32_t)rank, l, r, s->sym.len[l] + s->sym.len[r]);
    return npl_merge_heap_push(&s->heap, c, err);
}

static npl_status emit(bpe_session *s, int32_t i, npl_error *err)
{
    const npl_symbols *sym = &s->sym;
    if (sym->id[i] >= 0)
        return npl_tokens_push(s->out, sym->id[i], err);
    /* Not a vocabulary entry: the reference looks each byte of the mapped
     * text up on its own (gemma4: its <0xNN> token) and drops those that
     * are not entries either. */
    const unsigned char *p = s->mapped + sym->start[i];
    bool raw = s->tok->pretok == NPL_PRETOK_GEMMA4;
    for (uint32_t k = 0; k < sym->len[i]; k++) {
        int32_t id = raw ? s->tok->byte_token[p[k]] : npl_tok_lookup(s->tok, p + k, 1);
        if (id >= 0) {
            npl_status st = npl_tokens_push(s->out, id, err);
            if (st != NPL_OK)
                return st;
        }
    }
    return NPL_OK;
}

/* Symbols of one character each over s->mapped[0..n) (gemma4): a lead
 * byte's length by its high bits, as the reference reads it, cut at the
 * end of the word. */
static void raw_symbols(bpe_session *s, size_t n)
{
    static const uint8_t len_of_high[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    npl_symbols *sym = &s->sym;
    size_t k = 0;
    for (size_t off = 0; off < n; k++) {
        size_t len = len_of_high[s->mapped[off] >> 4];
        if (len > n - off)
            len = n - off;
        sym->start[k] = (uint32_t)off;
        sym->len[k] = (uint32_t)len;
        sym->prev[k] = (int32_t)k - 1;
        sym->id[k] = npl_tok_lookup(s->tok, s->mapped + off, len);
        off += len;
        sym->next[k] = off < n ? (int32_t)k + 1 : -1;
    }
    sym->n = k;
}

static npl_status bpe_word(void *ctx, const unsigned char *word, size_t n, npl_error *err)
{
    bpe_session *s = ctx;
    const npl_tokenizer *tok = s->tok;
    npl_status st;
    if (n == 0)
        return NPL_OK;
    if (n > INT32_MAX / 2)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "tokenizer: pre-token too long (%zu bytes)", n);

    if (s->mapped_cap < 2 * n) {
        unsigned char *p = realloc(s->mapped, 2 * n);
        if (!p)
            return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", 2 * n);
        s->mapped = p;
        s->mapped_cap = 2 * n;
    }
    if ((st = npl_symbols_reserve(&s->sym, n, err)) != NPL_OK)
        return st;

    npl_symbols *sym = &s->sym;
    size_t w = 0;
    if (tok->pretok == NPL_PRETOK_GEMMA4) {
        memcpy(s->mapped, word, n);
        w = n;
        /* a run of newlines that is an entry is that token */
        if (word[0] == '\n' && n == strspn((const char *)word, "\n") && npl_tok_lookup(tok, word, n) >= 0)
            return npl_tokens_push(s->out, npl_tok_lookup(tok, word, n), err);
        raw_symbols(s, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            unsigned char b = word[i];
            sym->start[i] = (uint32_t)w;
            sym->len[i] = tok->byte_utf8_len[b];
            sym->prev[i] = (int32_t)i - 1;
            sym->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
            sym->id[i] = tok->byte_token[b];
            memcpy(s->mapped + w, tok->byte_utf8[b], tok->byte_utf8_len[b]);
            w += tok->byte_utf8_len[b];
        }
        sym->n = n;
    }

    if (tok->ignore_merges) {
        int32_t id = npl_tok_lookup(tok, s->mapped, w);
        if (id >= 0)
            return npl_tokens_push(s->out, id, err);
    }

    s->heap.n = 0;
    for (size_t i = 1; i < sym->n; i++)
        if ((st = add_pair(s, (int32_t)i - 1, (int32_t)i, err)) != NPL_OK)
            return st;

    while (s->heap.n > 0) {
        int32_t left = npl_symbols_merge(sym, npl_merge_heap_pop(&s->heap));
        if (left < 0)
            continue;
        sym->id[left] = npl_tok_lookup(tok, s->mapped + sym->start[left], sym->len[left]);
        if ((st = add_pair(s, sym->prev[left], left, err)) != NPL_OK)
            return st;
        if ((st = add_pair(s, left, sym->next[left], err)) != NPL_OK)
            return st;
    }

    for (int32_t i = 0; i >= 0; i = sym->next[i])
        if ((st = emit(s, i, err)) != NPL_OK)
            return st;
    return NPL_OK;
}

/* gemma4: spaces escaped to U+2581 and the text re-encoded as the
 * reference decodes it (an invalid byte is U+FFFD), then words that are
 * runs of newlines or of anything else. */
static npl_status gemma4_split(bpe_session *s, const char *text, size_t len, npl_error *err)
{
    if (len > (SIZE_MAX - 1) / 3)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "tokenizer: text too long (%zu bytes)", len);
    unsigned char *esc = malloc(3 * len + 1); /* U+2581 and U+FFFD: 3 bytes from 1 */
    if (!esc)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", 3 * len);
    size_t n = npl_pretok_canonical(text, len, true, esc);
    npl_status st = NPL_OK;
    for (size_t i = 0; i < n && st == NPL_OK;) {
        size_t j = i + 1;
        while (j < n && (esc[j] == '\n') == (esc[i] == '\n'))
            j++;
        st = bpe_word(s, esc + i, j - i, err);
        i = j;
    }
    free(esc);
    return st;
}

npl_status npl_bpe_tokenize(const npl_tokenizer *tok, const char *text, size_t len,
                            npl_tokens *out, npl_error *err)
{
    bpe_session s = {.tok = tok, .out = out};
    npl_status st = tok->pretok == NPL_PRETOK_GEMMA4 ? gemma4_split(&s, text, len, err)
                                                     : npl_pretok_split(tok, text, len, bpe_word, &s, err);
    free(s.mapped);
    npl_symbols_free(&s.sym);
    npl_merge_heap_free(&s.heap);
    return st;
}
