/* Detokenization: the bytes of one token, and the streaming detokenizer
 * that only ever hands out complete, valid UTF-8. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "npl_hex.h"
#include "unicode_utf8.h"

/* Writes into buf up to cap bytes while counting the full length. */
typedef struct piece_writer {
    char *buf;
    size_t cap, len;
} piece_writer;

static void put(piece_writer *w, const void *p, size_t n)
{
    if (w->buf && w->len < w->cap) {
        size_t room = w->cap - w->len;
        memcpy(w->buf + w->len, p, n < room ? n : room);
    }
    w->len += n;
}

/* "<0xNN>" -> NN, -1 when the text has another shape. */
static int byte_token_value(npl_str s)
{
    if (s.len != 6 || memcmp(s.ptr, "<0x", 3) != 0 || s.ptr[5] != '>')
        return -1;
    int hi = npl_hex_digit(s.ptr[3]), lo = npl_hex_digit(s.ptr[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static void put_spm_text(piece_writer *w, npl_str s)
{
    size_t i = 0, run = 0;
    while (i < s.len) {
        if (i + 3 <= s.len && memcmp(s.ptr + i, "\xE2\x96\x81", 3) == 0) {
            put(w, s.ptr + run, i - run);
            put(w, " ", 1);
            i += 3;
            run = i;
        } else {
            i++;
        }
    }
    put(w, s.ptr + run, s.len - run);
}

static void put_bpe_text(piece_writer *w, const npl_tokenizer *tok, npl_str s)
{
    const unsigned char *p = (const unsigned char *)s.ptr;
    for (size_t i = 0; i < s.len;) {
        size_t used;
        uint32_t cp = npl_utf8_decode_lenient(p + i, s.len - i, &used);
        int b = cp < 0x144 ? tok->byte_of_cp[cp] : -1;
        if (b >= 0) {
            unsigned char c = (unsigned char)b;
            put(w, &c, 1);
        } else {
            put(w, p + i, used); /* outside the byte alphabet: keep as is */
        }
        i += used;
    }
}

size_t npl_token_to_bytes(const npl_tokenizer *tok, int32_t id, bool render_special, char *buf, size_t cap)
{
    piece_writer w = {buf, buf ? cap : 0, 0};
    if (!tok || id < 0 || id >= tok->n_vocab)
        return 0;
    uint8_t a = tok->attr[id];
    npl_str s = tok->text[id];
    if (a & (NPL_TATTR_CONTROL | NPL_TATTR_UNKNOWN)) {
        if (render_special)
            put(&w, s.ptr, s.len);
    } else if (a & NPL_TATTR_USER_DEFINED) {
        /* Literal text. SentencePiece vocabularies also have user-defined
         * runs of U+2581 (Gemma 3): those are spaces, as HF decodes them
         * (llama.cpp would print the U+2581 characters). */
        if (tok->kind == NPL_TOKENIZER_SPM || tok->pretok == NPL_PRETOK_GEMMA4)
            put_spm_text(&w, s);
        else
            put(&w, s.ptr, s.len);
    } else if (a & NPL_TATTR_NORMAL) {
        if (tok->kind == NPL_TOKENIZER_BPE && tok->pretok != NPL_PRETOK_GEMMA4)
            put_bpe_text(&w, tok, s);
        else /* SentencePiece, WordPiece and Gemma 4's BPE: U+2581 is a space */
            put_spm_text(&w, s);
    } else if (a & NPL_TATTR_BYTE) {
        int v = byte_token_value(s);
        if (v >= 0) {
            unsigned char c = (unsigned char)v;
            put(&w, &c, 1);
        }
    }
    if (!buf)
        return w.len;
    return w.len < cap ? w.len : cap;
}

void npl_detok_init(npl_detok *d, const npl_tokenizer *tok, bool render_special)
{
    memset(d, 0, sizeof *d);
    d->tok = tok;
    d->render_special = render_special;
    d->at_start = tok && tok->kind == NPL_TOKENIZER_SPM && tok->add_space_prefix;
}

static const char replacement[3] = {'\xEF', '\xBF', '\xBD'};

/* Emits the complete characters of s[0..n), replacing ill-formed parts,
 * and keeps an unfinished tail in d->pending. */
static npl_status emit_valid(npl_detok *d, const unsigned char *s, size_t n, npl_buf *out, npl_error *err)
{
    size_t i = 0, run = 0;
    npl_status st;
    while (i < n) {
        uint32_t cp;
        int r = npl_utf8_decode_strict(s + i, n - i, &cp);
        if (r > 0) {
            i += (size_t)r;
            continue;
        }
        if (i > run && (st = npl_buf_append(out, s + run, i - run, err)) != NPL_OK)
            return st;
        if (r == 0) {
            memcpy(d->pending, s + i, n - i); /* at most 3 bytes */
            d->n_pending = n - i;
            return NPL_OK;
        }
        if ((st = npl_buf_append(out, replacement, sizeof replacement, err)) != NPL_OK)
            return st;
        i += (size_t)-r;
        run = i;
    }
    d->n_pending = 0;
    if (i > run)
        return npl_buf_append(out, s + run, i - run, err);
    return NPL_OK;
}

npl_status npl_detok_push(npl_detok *d, int32_t id, npl_buf *out, npl_error *err)
{
    unsigned char local[256];
    size_t n = npl_token_to_bytes(d->tok, id, d->render_special, NULL, 0);
    size_t total = d->n_pending + n;
    unsigned char *s = total <= sizeof local ? local : malloc(total);
    if (!s)
        return npl_error_set(err, NPL_ERR_NOMEM, "detok: out of memory for %zu bytes", total);
    memcpy(s, d->pending, d->n_pending);
    npl_token_to_bytes(d->tok, id, d->render_special, (char *)s + d->n_pending, n);

    size_t skip = 0;
    if (d->at_start) {
        /* The tokenizer added this space; it is not part of the text. */
        if (n > 0 && s[d->n_pending] == ' ') {
            memmove(s + d->n_pending, s + d->n_pending + 1, n - 1);
            skip = 1;
        }
        d->at_start = false;
    }
    npl_status st = emit_valid(d, s, total - skip, out, err);
    if (s != local)
        free(s);
    return st;
}

npl_status npl_detok_flush(npl_detok *d, npl_buf *out, npl_error *err)
{
    if (d->n_pending == 0)
        return NPL_OK;
    d->n_pending = 0; /* an unfinished character: one replacement */
    return npl_buf_append(out, replacement, sizeof replacement, err);
}
