#include "npl_error.h"

#include <stdio.h>

npl_status npl_error_set(npl_error *err, npl_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void npl_error_clear(npl_error *err)
{
    if (err) {
        err->code = NPL_OK;
        err->message[0] = '\0';
    }
}

const char *npl_status_name(npl_status code)
{
    switch (code) {
    case NPL_OK: return "ok";
    case NPL_ERR_IO: return "io";
    case NPL_ERR_FORMAT: return "format";
    case NPL_ERR_UNSUPPORTED: return "unsupported";
    case NPL_ERR_NOMEM: return "nomem";
    case NPL_ERR_INVALID_ARG: return "invalid-argument";
    case NPL_ERR_CONTEXT_OVERFLOW: return "context-overflow";
    case NPL_ERR_CANCELLED: return "cancelled";
    case NPL_ERR_INTERNAL: return "internal";
    }
    return "unknown";
}
