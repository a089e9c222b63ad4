/* Public tokenizer entry points: queries and npl_tokenize, which cuts out
 * special tokens and hands the raw spans to the model's tokenizer. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

npl_status npl_tokens_reserve(npl_tokens *t, size_t extra, npl_error *err)
{
    if (extra <= t->cap - t->n)
        return NPL_OK;
    if (extra > SIZE_MAX / sizeof *t->ids - t->n)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokens: list too long");
    size_t need = t->n + extra;
    size_t cap = t->cap ? t->cap : 16;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 / sizeof *t->ids ? need : cap * 2;
    int32_t *ids = realloc(t->ids, cap * sizeof *ids);
    if (!ids)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokens: out of memory for %zu ids", cap);
    t->ids = ids;
    t->cap = cap;
    return NPL_OK;
}

npl_status npl_tokens_push(npl_tokens *t, int32_t id, npl_error *err)
{
    if (t->n == t->cap) {
        npl_status st = npl_tokens_reserve(t, 1, err);
        if (st != NPL_OK)
            return st;
    }
    t->ids[t->n++] = id;
    return NPL_OK;
}

void npl_tokens_free(npl_tokens *t)
{
    free(t->ids);
    t->ids = NULL;
    t->n = t->cap = 0;
}

int32_t npl_tokenizer_sep(const npl_tokenizer *tok)
{
    return tok->kind == NPL_TOKENIZER_WPM && tok->add_sep ? tok->sep : -1;
}

int32_t npl_tokenizer_pair_sep(const npl_tokenizer *tok)
{
    return tok->kind == NPL_TOKENIZER_UGM && tok->add_sep ? tok->sep : -1;
}

int32_t npl_tokenizer_end(const npl_tokenizer *tok)
{
    if (tok->kind == NPL_TOKENIZER_WPM && tok->add_sep && tok->sep >= 0)
        return tok->sep;
    return tok->add_eos && tok->eos >= 0 ? tok->eos : -1;
}

npl_tokenizer_kind npl_tokenizer_kind_of(const npl_tokenizer *tok)
{
    return tok->kind;
}

const char *npl_tokenizer_kind_name(const npl_tokenizer *tok)
{
    switch (tok->kind) {
    case NPL_TOKENIZER_BPE: return "bpe";
    case NPL_TOKENIZER_WPM: return "wpm";
    case NPL_TOKENIZER_UGM: return "ugm";
    default: return "spm";
    }
}

const char *npl_tokenizer_pre_name(const npl_tokenizer *tok)
{
    return tok->pre_name;
}

int32_t npl_tokenizer_n_vocab(const npl_tokenizer *tok)
{
    return tok->n_vocab;
}

int32_t npl_tokenizer_bos(const npl_tokenizer *tok)
{
    return tok->bos;
}

int32_t npl_tokenizer_eos(const npl_tokenizer *tok)
{
    return tok->eos;
}

bool npl_tokenizer_adds_bos(const npl_tokenizer *tok)
{
    return tok->add_bos && tok->bos >= 0;
}

bool npl_tokenizer_is_eog(const npl_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n_vocab && (tok->attr[id] & NPL_TATTR_EOG);
}

npl_token_type npl_tokenizer_token_type(const npl_tokenizer *tok, int32_t id)
{
    if (id < 0 || id >= tok->n_vocab)
        return NPL_TOKEN_UNDEFINED;
    /* The effective type: adjustments made at build time (e.g. an
     * end-of-turn marker forced to control) are reflected. */
    uint8_t a = tok->attr[id];
    if (a & NPL_TATTR_CONTROL)
        return NPL_TOKEN_CONTROL;
    if (a & NPL_TATTR_UNKNOWN)
        return NPL_TOKEN_UNKNOWN;
    if (a & NPL_TATTR_USER_DEFINED)
        return NPL_TOKEN_USER_DEFINED;
    if (a & NPL_TATTR_BYTE)
        return NPL_TOKEN_BYTE;
    if (a & NPL_TATTR_UNUSED)
        return NPL_TOKEN_UNUSED;
    if (a & NPL_TATTR_NORMAL)
        return NPL_TOKEN_NORMAL;
    return NPL_TOKEN_UNDEFINED;
}

int32_t npl_tokenizer_find(const npl_tokenizer *tok, const char *text)
{
    if (!text)
        return -1;
    return npl_tok_lookup(tok, text, strlen(text));
}

/* A control token whose text overlaps caller bytes becomes raw text again,
 * merged with the raw spans around it (user-defined tokens stay: they are
 * recognised even without special parsing). */
static void demote_masked(const npl_tokenizer *tok, const uint8_t *mask, npl_fragments *frags)
{
    size_t w = 0;
    for (size_t i = 0; i < frags->n; i++) {
        npl_fragment f = frags->v[i];
        if (f.token >= 0 && !(tok->attr[f.token] & NPL_TATTR_USER_DEFINED)) {
            for (size_t k = 0; k < f.len; k++)
                if (mask[f.start + k]) {
                    f.token = -1;
                    break;
                }
        }
        if (f.token < 0 && w > 0 && frags->v[w - 1].token < 0)
            frags->v[w - 1].len += f.len;
        else
            frags->v[w++] = f;
    }
    frags->n = w;
}

npl_status npl_tokenize(const npl_tokenizer *tok, const char *text, size_t len,
                        unsigned flags, npl_tokens *out, npl_error *err)
{
    return npl_tokenize_masked(tok, text, len, NULL, flags, out, err);
}

npl_status npl_tokenize_masked(const npl_tokenizer *tok, const char *text, size_t len, const uint8_t *mask,
                               unsigned flags, npl_tokens *out, npl_error *err)
{
    if (!tok || !out || (!text && len > 0))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_tokenize: NULL argument");

    const size_t n_before = out->n;
    const bool add_special = flags & NPL_TOKENIZE_ADD_BOS;
    npl_fragments frags = {0};
    npl_status st = NPL_OK;

    if (add_special && tok->add_bos && tok->bos >= 0 && (st = npl_tokens_push(out, tok->bos, err)) != NPL_OK)
        goto out;

    if ((st = npl_special_partition(tok, text, len, flags & NPL_TOKENIZE_PARSE_SPECIAL, &frags, err)) != NPL_OK)
        goto out;
    if (mask)
        demote_masked(tok, mask, &frags);

    /* SentencePiece with add_space_prefix: a raw span that starts the text
     * or follows a special token gets a leading space. */
    bool prev_special = true;
    for (size_t i = 0; i < frags.n; i++) {
        const npl_fragment *f = &frags.v[i];
        if (f->token >= 0) {
            st = npl_tokens_push(out, f->token, err);
            prev_special = true;
        } else if (tok->kind == NPL_TOKENIZER_SPM) {
            st = npl_spm_tokenize(tok, text + f->start, f->len, tok->add_space_prefix && prev_special, out, err);
            prev_special = false;
        } else if (tok->kind == NPL_TOKENIZER_WPM) {
            st = npl_wpm_tokenize(tok, text + f->start, f->len, out, err);
        } else if (tok->kind == NPL_TOKENIZER_UGM) {
            st = npl_ugm_tokenize(tok, text + f->start, f->len, out, err);
        } else {
            st = npl_bpe_tokenize(tok, text + f->start, f->len, out, err);
        }
        if (st != NPL_OK)
            goto out;
    }

    /* Like the reference's add_special: the model's EOS too, for the rare
     * models that ask for one (none of Llama 3, Gemma 3, Qwen2 do). */
    if (add_special && tok->add_eos && tok->eos >= 0)
        st = npl_tokens_push(out, tok->eos, err);
    /* WordPiece: [SEP] closes the text. */
    if (st == NPL_OK && add_special && tok->kind == NPL_TOKENIZER_WPM && tok->add_sep && tok->sep >= 0)
        st = npl_tokens_push(out, tok->sep, err);

out:
    free(frags.v);
    if (st != NPL_OK)
        out->n = n_before; /* all or nothing */
    return st;
}
