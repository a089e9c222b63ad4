/* SentencePiece-style tokenization (GGUF model "llama", e.g. Gemma 3):
 * spaces become U+2581, the text starts as one symbol per UTF-8 character
 * and the adjacent pair whose concatenation is the highest-scoring
 * vocabulary entry is merged first (ties: leftmost). Characters that end
 * up outside the vocabulary are emitted as <0xNN> byte tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"

static const char spm_space[3] = {'\xE2', '\x96', '\x81'}; /* U+2581 */

npl_status npl_spm_build(npl_tokenizer *tok, npl_error *err)
{
    (void)err;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        int32_t id = npl_tok_lookup(tok, name, strlen(name));
        if (id < 0) {
            char c = (char)b;
            id = npl_tok_lookup(tok, &c, 1);
        }
        tok->byte_token[b] = id;
    }
    return NPL_OK;
}

typedef struct spm_session {
    const npl_tokenizer *tok;
    const unsigned char *text;
    npl_symbols sym;
    npl_merge_heap heap;
} spm_session;

static npl_status try_add_pair(spm_session *s, int32_t left, int32_t right, npl_error *err)
{
    if (left < 0 || right < 0)
        return NPL_OK;
    uint32_t size = s->sym.len[left] + s->sym.len[right];
    int32_t id = npl_tok_lookup(s->tok, s->text + s->sym.start[left], size);
    if (id < 0)
        return NPL_OK;
    npl_merge_cand c = npl_merge_cand_make(npl_score_priority(s->tok->scores[id]), left, right, size);
    return npl_merge_heap_push(&s->heap, c, err);
}

static npl_status emit_symbol(const spm_session *s, int32_t i, npl_tokens *out, npl_error *err)
{
    const unsigned char *p = s->text + s->sym.start[i];
    size_t n = s->sym.len[i];
    int32_t id = npl_tok_lookup(s->tok, p, n);
    if (id >= 0)
        return npl_tokens_push(out, id, err);
    for (size_t k = 0; k < n; k++) {
        int32_t b = s->tok->byte_token[p[k]];
        if (b < 0)
            b = s->tok->unk; /* the vocabulary lacks byte fallback */
        if (b < 0)
            continue;
        npl_status st = npl_tokens_push(out, b, err);
        if (st != NPL_OK)
            return st;
    }
    return NPL_OK;
}

static npl_status spm_run(spm_session *s, size_t n, npl_tokens *out, npl_error *err)
{
    npl_symbols *sym = &s->sym;
    npl_status st;
    size_t count = 0;
    for (size_t off = 0; off < n; count++) {
        size_t l = npl_utf8_lead_len(s->text[off]);
        if (l > n - off)
            l = n - off;
        off += l;
    }
    if (count == 0)
        return NPL_OK;
    if (count > INT32_MAX)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "tokenizer: text too long (%zu characters)", count);
    if ((st = npl_symbols_reserve(sym, count, err)) != NPL_OK)
        return st;

    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        size_t l = npl_utf8_lead_len(s->text[off]);
        if (l > n - off)
            l = n - off;
        sym->start[i] = (uint32_t)off;
        sym->len[i] = (uint32_t)l;
        sym->prev[i] = (int32_t)i - 1;
        sym->next[i] = i + 1 < count ? (int32_t)i + 1 : -1;
        off += l;
    }
    sym->n = count;

    for (size_t i = 1; i < count; i++)
        if ((st = try_add_pair(s, (int32_t)i - 1, (int32_t)i, err)) != NPL_OK)
            return st;

    while (s->heap.n > 0) {
        int32_t left = npl_symbols_merge(sym, npl_merge_heap_pop(&s->heap));
        if (left < 0)
            continue;
        if ((st = try_add_pair(s, sym->prev[left], left, err)) != NPL_OK)
            return st;
        if ((st = try_add_pair(s, left, sym->next[left], err)) != NPL_OK)
            return st;
    }

    for (int32_t i = 0; i >= 0; i = sym->next[i])
        if ((st = emit_symbol(s, i, out, err)) != NPL_OK)
            return st;
    return NPL_OK;
}

npl_status npl_spm_tokenize(const npl_tokenizer *tok, const char *text, size_t len,
                            bool prefix_space, npl_tokens *out, npl_error *err)
{
    size_t spaces = prefix_space ? 1 : 0;
    for (size_t i = 0; i < len; i++)
        spaces += text[i] == ' ';
    size_t n = len + (prefix_space ? 1 : 0) + 2 * spaces;
    if (n > UINT32_MAX / 2)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "tokenizer: text too long (%zu bytes)", len);

    unsigned char *buf = malloc(n ? n : 1);
    if (!buf)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", n);
    size_t w = 0;
    if (prefix_space) {
        memcpy(buf, spm_space, 3);
        w = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + w, spm_space, 3);
            w += 3;
        } else {
            buf[w++] = (unsigned char)text[i];
        }
    }

    spm_session s = {.tok = tok, .text = buf};
    npl_status st = spm_run(&s, w, out, err);
    npl_symbols_free(&s.sym);
    npl_merge_heap_free(&s.heap);
    free(buf);
    return st;
}
