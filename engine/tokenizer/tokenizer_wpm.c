/* WordPiece (tokenizer.ggml.model "bert"), as the reference tokenizes it:
 *
 *   1. when the model strips accents (tokenizer.ggml.normalizer.
 *      strip_accents, by default as lowercase), every code point is
 *      replaced by the head of its canonical decomposition and combining
 *      marks are dropped ("é" -> "e"); when it lower-cases
 *      (tokenizer.ggml.normalizer.lowercase, default true), it is
 *      lower-cased;
 *   2. words are split at white space; punctuation, ASCII symbols and CJK
 *      ideographs are words of their own; control characters, NUL and
 *      U+FFFD (invalid UTF-8) are dropped;
 *   3. each word, with a leading U+2581 (the converter writes word-initial
 *      pieces as "▁piece" and "##piece" continuations as "piece"), is cut
 *      greedily into the longest vocabulary entries from the left; a word
 *      with a piece that matches nothing is one [UNK].
 *
 * [CLS] and [SEP] around the text are added by npl_tokenize_masked. */
#include <stdlib.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"
#include "unicode_wpm.h"

/* The value of the range of t holding cp, or fallback. */
static uint32_t range_value(const npl_wpm_range *t, size_t n, uint32_t cp, uint32_t fallback)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < t[mid].first)
            hi = mid;
        else if (cp > t[mid].last)
            lo = mid + 1;
        else
            return t[mid].value;
    }
    return fallback;
}

npl_wpm_class npl_wpm_class_of(uint32_t cp)
{
    return (npl_wpm_class)range_value(npl_wpm_classes, npl_wpm_n_classes, cp, NPL_WPM_OTHER);
}

uint32_t npl_wpm_tolower(uint32_t cp)
{
    return range_value(npl_wpm_lower, npl_wpm_n_lower, cp, cp);
}

uint32_t npl_wpm_nfd_first(uint32_t cp)
{
    return range_value(npl_wpm_nfd, npl_wpm_n_nfd, cp, cp);
}

/* The CJK ideograph blocks BERT splits into single characters (the range
 * 0x2B920 rather than 0x2B820 is the reference's, after Hugging Face's). */
static bool is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
           (cp >= 0x2B920 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

#define WPM_PREFIX "\xe2\x96\x81" /* U+2581 */
#define WPM_PREFIX_LEN 3

/* Cuts one word (WPM_PREFIX + normalized bytes) into pieces. */
static npl_status wpm_word(const npl_tokenizer *tok, const unsigned char *word, size_t n, npl_tokens *out,
                           npl_error *err)
{
    const size_t n_before = out->n;
    npl_status st;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > tok->max_token_len ? i + tok->max_token_len : n;
        int32_t id = -1;
        for (; j > i; j--)
            if ((id = npl_tok_lookup(tok, word + i, j - i)) >= 0)
                break;
        if (id < 0) {
            out->n = n_before; /* a piece nothing matches: the whole word is unknown */
            break;
        }
        if ((st = npl_tokens_push(out, id, err)) != NPL_OK)
            return st;
        i = j;
    }
    if (out->n == n_before && tok->unk >= 0)
        return npl_tokens_push(out, tok->unk, err);
    return NPL_OK;
}

npl_status npl_wpm_tokenize(const npl_tokenizer *tok, const char *text, size_t len, npl_tokens *out,
                            npl_error *err)
{
    /* A word's bytes: the prefix, then at most 4 bytes per input byte's
     * code point (a code point never grows beyond 4 bytes). */
    if (len > (SIZE_MAX - WPM_PREFIX_LEN) / 4)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "tokenizer: text too long");
    unsigned char *word = malloc(WPM_PREFIX_LEN + 4 * len + 4);
    if (!word)
        return npl_error_set(err, NPL_ERR_NOMEM, "tokenizer: out of memory for %zu bytes of text", len);
    memcpy(word, WPM_PREFIX, WPM_PREFIX_LEN);
    size_t wn = WPM_PREFIX_LEN;
    npl_status st = NPL_OK;
    const unsigned char *s = (const unsigned char *)text;

    for (size_t i = 0; i < len && st == NPL_OK;) {
        size_t used;
        uint32_t cp = npl_utf8_decode_lenient(s + i, len - i, &used);
        i += used;
        if (tok->strip_accents)
            cp = npl_wpm_nfd_first(cp);
        npl_wpm_class c = npl_wpm_class_of(cp);
        if (c == NPL_WPM_SPACE) {
            if (wn > WPM_PREFIX_LEN)
                st = wpm_word(tok, word, wn, out, err);
            wn = WPM_PREFIX_LEN;
            continue;
        }
        if (cp == 0 || cp == NPL_UTF8_REPLACEMENT || c == NPL_WPM_CONTROL ||
            (tok->strip_accents && c == NPL_WPM_MARK))
            continue;
        unsigned char enc[4];
        size_t en = npl_utf8_encode(tok->lowercase ? npl_wpm_tolower(cp) : cp, enc);
        if (c == NPL_WPM_PUNCT || (cp < 0x7F && c == NPL_WPM_SYMBOL) || is_cjk(cp)) {
            if (wn > WPM_PREFIX_LEN && (st = wpm_word(tok, word, wn, out, err)) != NPL_OK)
                break;
            memcpy(word + WPM_PREFIX_LEN, enc, en);
            st = wpm_word(tok, word, WPM_PREFIX_LEN + en, out, err);
            wn = WPM_PREFIX_LEN;
        } else {
            memcpy(word + wn, enc, en);
            wn += en;
        }
    }
    if (st == NPL_OK && wn > WPM_PREFIX_LEN)
        st = wpm_word(tok, word, wn, out, err);
    free(word);
    return st;
}

void npl_wpm_build(npl_tokenizer *tok)
{
    size_t max = 1;
    for (int32_t i = 0; i < tok->n_vocab; i++)
        if (tok->text[i].len > max)
            max = tok->text[i].len;
    tok->max_token_len = max;
}
