#include "npl_buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static npl_status reserve(npl_buf *b, size_t extra, npl_error *err)
{
    if (extra > SIZE_MAX - b->len - 1)
        return npl_error_set(err, NPL_ERR_NOMEM, "buffer size overflow");
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return NPL_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory growing a buffer to %zu bytes", cap);
    b->data = p;
    b->cap = cap;
    return NPL_OK;
}

npl_status npl_buf_append(npl_buf *b, const void *bytes, size_t n, npl_error *err)
{
    npl_status st = reserve(b, n, err);
    if (st)
        return st;
    if (n)
        memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return NPL_OK;
}

npl_status npl_buf_vappendf(npl_buf *b, npl_error *err, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0) {
        va_end(again);
        return npl_error_set(err, NPL_ERR_INTERNAL, "bad format string");
    }
    npl_status st = reserve(b, (size_t)n, err);
    if (st == NPL_OK) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
    return st;
}

npl_status npl_buf_appendf(npl_buf *b, npl_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    npl_status st = npl_buf_vappendf(b, err, fmt, ap);
    va_end(ap);
    return st;
}

void npl_buf_clear(npl_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void npl_buf_free(npl_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
