/* Harmony channels in streamed output (harmony_split.h). */
#include "harmony_split.h"

#include <string.h>

#define START "<|start|>"
#define CHANNEL "<|channel|>"
#define MESSAGE "<|message|>"
#define GEN_PROMPT "<|start|>assistant"

bool npl_harmony_prompt(const char *p, size_t n)
{
    size_t g = sizeof GEN_PROMPT - 1;
    return p && n >= g && memcmp(p + n - g, GEN_PROMPT, g) == 0;
}

/* First occurrence of tag in p[0..n), or n. */
static size_t find(const char *p, size_t n, const char *tag)
{
    size_t t = strlen(tag);
    for (size_t i = 0; n >= t && i <= n - t; i++)
        if (memcmp(p + i, tag, t) == 0)
            return i;
    return n;
}

size_t npl_tag_partial(const char *p, size_t n, const char *tag)
{
    size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (memcmp(p + n - k, tag, k) == 0)
            return k;
    return 0;
}

static void consume(npl_buf *held, size_t used)
{
    memmove(held->data, held->data + used, held->len - used);
    held->len -= used;
}

/* The header is complete: where its message's text goes. */
static npl_status end_header(npl_harmony_split *h, npl_buf *answer, npl_error *err)
{
    const char *p = h->header.data ? h->header.data : "";
    size_t n = h->header.len, c = find(p, n, CHANNEL), cl = sizeof CHANNEL - 1;
    const char *name = c < n ? p + c + cl : "";
    size_t len = c < n ? n - c - cl : 0, word = 0;
    while (word < len && name[word] != ' ' && name[word] != '<')
        word++;
    h->in_header = false;
    h->to_thinking = word == 8 && memcmp(name, "analysis", 8) == 0;
    bool plain = h->to_thinking || (word == 5 && memcmp(name, "final", 5) == 0);
    npl_status st = NPL_OK;
    if (!plain && c < n) /* commentary and others: the header stays visible */
        st = npl_buf_append(answer, p + c, n - c, err);
    if (!st && !plain && c < n)
        st = npl_buf_append(answer, MESSAGE, sizeof MESSAGE - 1, err);
    h->header.len = 0;
    return st;
}

npl_status npl_harmony_split_decide(npl_harmony_split *h, npl_buf *held, npl_buf *answer, npl_buf *thinking,
                                    npl_error *err)
{
    npl_status st = NPL_OK;
    while (!st && held->len) {
        const char *p = held->data;
        size_t n = held->len;
        if (h->in_header) {
            size_t m = find(p, n, MESSAGE);
            size_t take = m < n ? m : n - npl_tag_partial(p, n, MESSAGE);
            st = npl_buf_append(&h->header, p, take, err);
            if (st || m == n) {
                consume(held, take);
                return st;
            }
            consume(held, m + sizeof MESSAGE - 1);
            st = end_header(h, answer, err);
            continue;
        }
        size_t s = find(p, n, START), c = find(p, n, CHANNEL);
        size_t next = s < c ? s : c;
        size_t ks = npl_tag_partial(p, n, START), kc = npl_tag_partial(p, n, CHANNEL);
        size_t keep = next < n ? 0 : ks > kc ? ks : kc;
        size_t text = next < n ? next : n - keep;
        st = npl_buf_append(h->to_thinking ? thinking : answer, p, text, err);
        if (st || next == n) {
            consume(held, text);
            return st;
        }
        /* a new message: its header starts after <|start|>, or is the <|channel|> itself */
        consume(held, next == s ? next + sizeof START - 1 : next);
        h->in_header = true;
    }
    return st;
}

npl_status npl_harmony_split_finish(npl_harmony_split *h, npl_buf *held, npl_buf *answer, npl_buf *thinking,
                                    npl_error *err)
{
    npl_status st = NPL_OK;
    if (h->in_header)
        st = npl_buf_append(answer, h->header.data ? h->header.data : "", h->header.len, err);
    if (!st && held->len)
        st = npl_buf_append(h->in_header || !h->to_thinking ? answer : thinking, held->data, held->len, err);
    held->len = 0;
    h->header.len = 0;
    return st;
}

void npl_harmony_split_free(npl_harmony_split *h)
{
    npl_buf_free(&h->header);
}
