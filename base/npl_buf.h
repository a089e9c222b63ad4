/* Growable byte buffer, always NUL-terminated once anything was appended. */
#ifndef NPL_BUF_H
#define NPL_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "npl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_buf {
    char *data;
    size_t len;
    size_t cap;
} npl_buf;

npl_status npl_buf_append(npl_buf *b, const void *bytes, size_t n, npl_error *err);
npl_status npl_buf_appendf(npl_buf *b, npl_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
npl_status npl_buf_vappendf(npl_buf *b, npl_error *err, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
void npl_buf_clear(npl_buf *b); /* len = 0, keeps memory */
void npl_buf_free(npl_buf *b);

#ifdef __cplusplus
}
#endif

#endif
