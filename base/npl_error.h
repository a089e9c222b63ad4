/* Error reporting shared by every engine and kernel entry point:
 * a status code plus a human-readable message, never global state. */
#ifndef NPL_ERROR_H
#define NPL_ERROR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum npl_status {
    NPL_OK = 0,
    NPL_ERR_IO,               /* open/read/mmap failed */
    NPL_ERR_FORMAT,           /* malformed file or data */
    NPL_ERR_UNSUPPORTED,      /* well-formed but not something we can run */
    NPL_ERR_NOMEM,            /* allocation failed */
    NPL_ERR_INVALID_ARG,      /* caller passed something out of range */
    NPL_ERR_CONTEXT_OVERFLOW, /* prompt + generation exceeds the KV cache */
    NPL_ERR_CANCELLED,        /* caller asked us to stop */
    NPL_ERR_INTERNAL,         /* a bug: an invariant did not hold */
} npl_status;

#define NPL_ERROR_MESSAGE_MAX 512

typedef struct npl_error {
    npl_status code;
    char message[NPL_ERROR_MESSAGE_MAX];
} npl_error;

/* Records code and a printf-style message in *err (err may be NULL).
 * Returns code so callers can write `return npl_error_set(err, ...)`. */
npl_status npl_error_set(npl_error *err, npl_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears *err to NPL_OK with an empty message (err may be NULL). */
void npl_error_clear(npl_error *err);

/* Short stable name of a status code, e.g. "format". */
const char *npl_status_name(npl_status code);

#ifdef __cplusplus
}
#endif

#endif
