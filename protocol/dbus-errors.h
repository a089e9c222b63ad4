/* The org.npullm.Error.* D-Bus errors as npullmd's GError domain (the
 * names and codes come from the protocol table, npullm-protocol.h;
 * libnpullm has the public NpullmError with the same codes). */
#ifndef NPD_DBUS_ERRORS_H
#define NPD_DBUS_ERRORS_H

#include <glib.h>

#include "npullm-protocol.h"

#define NPD_ERROR (npd_error_quark())

typedef enum {
    NPD_ERROR_INVALID_ARGUMENT = NPP_ERROR_INVALID_ARGUMENT,
    NPD_ERROR_NOT_AUTHORIZED = NPP_ERROR_NOT_AUTHORIZED,
    NPD_ERROR_BUSY = NPP_ERROR_BUSY,
    NPD_ERROR_NO_SUCH_MODEL = NPP_ERROR_NO_SUCH_MODEL,
    NPD_ERROR_NOT_SUPPORTED = NPP_ERROR_NOT_SUPPORTED,
    NPD_ERROR_MODEL_LOAD_FAILED = NPP_ERROR_MODEL_LOAD_FAILED,
    NPD_ERROR_CONTEXT_OVERFLOW = NPP_ERROR_CONTEXT_OVERFLOW,
    NPD_ERROR_CANCELLED = NPP_ERROR_CANCELLED,
    NPD_ERROR_INTERNAL = NPP_ERROR_INTERNAL,
    NPD_ERROR_NO_SPACE = NPP_ERROR_NO_SPACE,
} NpdError;

#define NPD_ERROR_N_CODES (NPD_ERROR_NO_SPACE + 1)

/* Registers the D-Bus names on first use (thread-safe). */
GQuark npd_error_quark(void);

/* "org.npullm.Error.InvalidArgument" etc. */
const char *npd_error_dbus_name(NpdError code);

#endif
