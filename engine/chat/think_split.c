/* Thinking / answer separation of streamed output (think_split.h). */
#include "think_split.h"

#include <string.h>

#define OPEN_TAG "<think>"
#define CLOSE_TAG "</think>"

static bool is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static size_t skip_space(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && is_space(p[i]))
        i++;
    return i;
}

void npl_think_split_init(npl_think_split *s, const char *prompt)
{
    memset(s, 0, sizeof *s);
    s->state = NPL_THINK_START;
    if (!prompt)
        return;
    size_t n = strlen(prompt);
    while (n > 0 && is_space(prompt[n - 1]))
        n--;
    size_t tag = sizeof OPEN_TAG - 1;
    if (n >= tag && memcmp(prompt + n - tag, OPEN_TAG, tag) == 0)
        s->state = NPL_THINK_INSIDE;
    if (npl_harmony_prompt(prompt, n)) {
        s->state = NPL_THINK_HARMONY;
        s->harmony.in_header = true;
    }
}

void npl_think_split_free(npl_think_split *s)
{
    npl_buf_free(&s->held);
    npl_harmony_split_free(&s->harmony);
}

/* Decides as much of held as it can; returns with the rest still held. */
static npl_status decide(npl_think_split *s, npl_buf *answer, npl_buf *thinking, npl_error *err)
{
    npl_status st = NPL_OK;
    for (;;) {
        const char *p = s->held.data ? s->held.data : "";
        size_t n = s->held.len, used = 0;
        switch (s->state) {
        case NPL_THINK_START: {
            size_t ws = skip_space(p, n), tag = sizeof OPEN_TAG - 1;
            if (n - ws >= tag && memcmp(p + ws, OPEN_TAG, tag) == 0) {
                used = ws + tag;
                s->state = NPL_THINK_INSIDE;
            } else if (n - ws < tag && memcmp(p + ws, OPEN_TAG, n - ws) == 0) {
                return NPL_OK; /* could still open */
            } else {
                s->state = NPL_THINK_ANSWER;
            }
            break;
        }
        case NPL_THINK_INSIDE: {
            const char *end = NULL;
            size_t tag = sizeof CLOSE_TAG - 1;
            for (size_t i = 0; n >= tag && i <= n - tag && !end; i++)
                if (memcmp(p + i, CLOSE_TAG, tag) == 0)
                    end = p + i;
            if (end) {
                st = npl_buf_append(thinking, p, (size_t)(end - p), err);
                used = (size_t)(end - p) + tag;
                s->state = NPL_THINK_AFTER;
            } else {
                used = n - npl_tag_partial(p, n, CLOSE_TAG);
                st = npl_buf_append(thinking, p, used, err);
                if (!st && used) {
                    memmove(s->held.data, p + used, n - used);
                    s->held.len = n - used;
                }
                return st;
            }
            break;
        }
        case NPL_THINK_AFTER:
            used = skip_space(p, n);
            if (used < n)
                s->state = NPL_THINK_ANSWER;
            else if (n == 0)
                return NPL_OK;
            break;
        case NPL_THINK_ANSWER:
            st = npl_buf_append(answer, p, n, err);
            used = n;
            break;
        case NPL_THINK_HARMONY: /* harmony_split.c decides */
            return NPL_OK;
        }
        if (st)
            return st;
        if (used)
            memmove(s->held.data, p + used, n - used);
        s->held.len = n - used;
        if (s->held.len == 0)
            return NPL_OK;
    }
}

npl_status npl_think_split_push(npl_think_split *s, const char *text, size_t n, npl_buf *answer,
                                npl_buf *thinking, npl_error *err)
{
    if (n == 0)
        return NPL_OK;
    if (s->state == NPL_THINK_ANSWER && s->held.len == 0)
        return npl_buf_append(answer, text, n, err);
    npl_status st = npl_buf_append(&s->held, text, n, err);
    if (!st && s->state == NPL_THINK_HARMONY)
        return npl_harmony_split_decide(&s->harmony, &s->held, answer, thinking, err);
    return st ? st : decide(s, answer, thinking, err);
}

npl_status npl_think_split_finish(npl_think_split *s, npl_buf *answer, npl_buf *thinking, npl_error *err)
{
    npl_status st = NPL_OK;
    if (s->state == NPL_THINK_HARMONY)
        return npl_harmony_split_finish(&s->harmony, &s->held, answer, thinking, err);
    if (s->held.len && s->state == NPL_THINK_INSIDE)
        st = npl_buf_append(thinking, s->held.data, s->held.len, err);
    else if (s->held.len && s->state != NPL_THINK_AFTER)
        st = npl_buf_append(answer, s->held.data, s->held.len, err);
    s->held.len = 0;
    return st;
}
