/* npl_stream: sampled ids -> showable text (see stop_stream.h). */
#include "stop_stream.h"

#include <stdlib.h>
#include <string.h>

#include "unicode_utf8.h"

struct npl_stream {
    const npl_tokenizer *tok;
    npl_detok detok;
    char **stops;
    size_t *stop_len;
    size_t n_stop;
    uint32_t max_tokens; /* 0: no limit */
    uint32_t n_tokens;
    npl_buf held; /* decoded, complete UTF-8, not yet emitted */
    npl_finish_reason finish;
    bool closed; /* everything was emitted or dropped: nothing more will be */
    int32_t keep[NPL_STREAM_MAX_KEEP]; /* control tokens shown as their text */
    size_t n_keep;
};

/* Output is valid UTF-8, so only a valid stop string can ever match, and
 * then only at character boundaries: held-back text never splits one. */
static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    while (n > 0) {
        uint32_t cp;
        int len = npl_utf8_decode_strict(p, n, &cp);
        if (len <= 0)
            return false;
        p += len;
        n -= (size_t)len;
    }
    return true;
}

npl_stream *npl_stream_create_for_tokenizer(const npl_tokenizer *tok,
                                            const char *const *stop_strings, size_t n_stop,
                                            uint32_t max_tokens, npl_error *err)
{
    if (!tok) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: no tokenizer");
        return NULL;
    }
    if (n_stop > 0 && !stop_strings) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: %zu stop strings but no array", n_stop);
        return NULL;
    }
    for (size_t i = 0; i < n_stop; i++) {
        if (!stop_strings[i]) {
            npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: stop string %zu is NULL", i);
            return NULL;
        }
        if (!valid_utf8(stop_strings[i])) {
            npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: stop string %zu is not valid UTF-8", i);
            return NULL;
        }
    }

    npl_stream *st = calloc(1, sizeof(*st));
    if (!st)
        goto oom;
    st->tok = tok;
    st->max_tokens = max_tokens;
    npl_detok_init(&st->detok, tok, false);
    if (n_stop > 0) {
        st->stops = calloc(n_stop, sizeof(*st->stops));
        st->stop_len = calloc(n_stop, sizeof(*st->stop_len));
        if (!st->stops || !st->stop_len)
            goto oom;
    }
    for (size_t i = 0; i < n_stop; i++) {
        size_t len = strlen(stop_strings[i]);
        if (len == 0)
            continue; /* would match everywhere: treat as "no stop string" */
        char *copy = malloc(len + 1);
        if (!copy)
            goto oom;
        memcpy(copy, stop_strings[i], len + 1);
        st->stops[st->n_stop] = copy;
        st->stop_len[st->n_stop] = len;
        st->n_stop++;
    }
    return st;

oom:
    npl_stream_free(st);
    npl_error_set(err, NPL_ERR_NOMEM, "stream: out of memory");
    return NULL;
}

void npl_stream_free(npl_stream *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n_stop; i++)
        free(st->stops[i]);
    free(st->stops);
    free(st->stop_len);
    npl_buf_free(&st->held);
    free(st);
}

/* Start of the earliest complete stop string in held, if any. */
static bool find_stop(const npl_stream *st, size_t *pos)
{
    bool found = false;
    size_t best = 0;
    for (size_t i = 0; i < st->n_stop; i++) {
        if (st->stop_len[i] > st->held.len)
            continue;
        const char *hit = memmem(st->held.data, st->held.len, st->stops[i], st->stop_len[i]);
        if (hit && (!found || (size_t)(hit - st->held.data) < best)) {
            best = (size_t)(hit - st->held.data);
            found = true;
        }
    }
    *pos = best;
    return found;
}

/* Length of the longest tail of held that some stop string starts with
 * (and is longer than): the text that must wait for more tokens. */
static size_t undecided_tail(const npl_stream *st)
{
    size_t longest = 0;
    for (size_t i = 0; i < st->n_stop; i++) {
        size_t max = st->stop_len[i] - 1;
        if (max > st->held.len)
            max = st->held.len;
        for (size_t k = max; k > longest; k--) {
            if (memcmp(st->held.data + st->held.len - k, st->stops[i], k) == 0) {
                longest = k;
                break;
            }
        }
    }
    return longest;
}

/* Moves held[0..n) to out. */
static npl_status emit(npl_stream *st, size_t n, npl_buf *out, npl_error *err)
{
    if (n == 0)
        return NPL_OK;
    npl_status s = npl_buf_append(out, st->held.data, n, err);
    if (s != NPL_OK)
        return s;
    memmove(st->held.data, st->held.data + n, st->held.len - n);
    st->held.len -= n;
    st->held.data[st->held.len] = '\0';
    return NPL_OK;
}

/* Generation is over: everything still undecided is released, up to a
 * stop string if one completes now. */
static npl_status release_all(npl_stream *st, npl_buf *out, npl_error *err)
{
    st->closed = true;
    npl_status s = npl_detok_flush(&st->detok, &st->held, err);
    if (s == NPL_OK) {
        size_t pos;
        s = emit(st, find_stop(st, &pos) ? pos : st->held.len, out, err);
    }
    npl_buf_clear(&st->held);
    return s;
}

static npl_finish_reason fail(npl_stream *st)
{
    st->finish = NPL_FINISH_STOP;
    st->closed = true;
    npl_buf_clear(&st->held);
    return st->finish;
}

npl_status npl_stream_keep_tokens(npl_stream *st, const char *const *texts, size_t n, npl_error *err)
{
    if (!st || (n > 0 && !texts))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: stream and texts are required");
    for (size_t i = 0; i < n; i++) {
        int32_t id = texts[i] ? npl_tokenizer_find(st->tok, texts[i]) : -1;
        if (id < 0 || npl_tokenizer_token_type(st->tok, id) != NPL_TOKEN_CONTROL)
            continue;
        if (st->n_keep == NPL_STREAM_MAX_KEEP)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: more than %d kept tokens", NPL_STREAM_MAX_KEEP);
        st->keep[st->n_keep++] = id;
    }
    return NPL_OK;
}

static bool kept(const npl_stream *st, int32_t id)
{
    for (size_t i = 0; i < st->n_keep; i++)
        if (st->keep[i] == id)
            return true;
    return false;
}

/* A kept control token: what came before it, then its spelling. */
static npl_status push_kept(npl_stream *st, int32_t id, npl_error *err)
{
    npl_status s = npl_detok_flush(&st->detok, &st->held, err);
    if (s != NPL_OK)
        return s;
    char text[256];
    size_t len = npl_token_to_bytes(st->tok, id, true, text, sizeof text);
    return npl_buf_append(&st->held, text, len < sizeof text ? len : sizeof text, err);
}

npl_finish_reason npl_stream_push(npl_stream *st, int32_t id, npl_buf *out, npl_error *err)
{
    npl_error_clear(err);
    if (!st || !out) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: stream and output buffer are required");
        return NPL_FINISH_STOP;
    }
    if (st->closed)
        return st->finish != NPL_FINISH_NONE ? st->finish : NPL_FINISH_STOP;
    if (id < 0 || id >= npl_tokenizer_n_vocab(st->tok)) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: token id %d is outside the vocabulary (%d)",
                      (int)id, (int)npl_tokenizer_n_vocab(st->tok));
        return fail(st);
    }
    st->n_tokens++;

    if (npl_tokenizer_is_eog(st->tok, id)) {
        st->finish = NPL_FINISH_STOP;
        return release_all(st, out, err) == NPL_OK ? st->finish : fail(st);
    }
    npl_status pushed = kept(st, id) ? push_kept(st, id, err) : npl_detok_push(&st->detok, id, &st->held, err);
    if (pushed != NPL_OK)
        return fail(st);

    size_t pos;
    if (find_stop(st, &pos)) {
        st->finish = NPL_FINISH_STOP;
        npl_status s = emit(st, pos, out, err);
        st->closed = true;
        npl_buf_clear(&st->held);
        return s == NPL_OK ? st->finish : fail(st);
    }
    if (st->max_tokens > 0 && st->n_tokens >= st->max_tokens) {
        st->finish = NPL_FINISH_LENGTH;
        return release_all(st, out, err) == NPL_OK ? st->finish : fail(st);
    }

    if (emit(st, st->held.len - undecided_tail(st), out, err) != NPL_OK)
        return fail(st);
    return NPL_FINISH_NONE;
}

npl_status npl_stream_finish(npl_stream *st, npl_buf *out, npl_error *err)
{
    if (!st || !out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "stream: stream and output buffer are required");
    if (st->closed)
        return NPL_OK;
    return release_all(st, out, err);
}
