/* The org.npullm.Error.* D-Bus errors as a GError domain, shared by the
 * daemon (to return them) and the client (to recognise them). */
#ifndef NPD_DBUS_ERRORS_H
#define NPD_DBUS_ERRORS_H

#include <glib.h>

#define NPD_ERROR (npd_error_quark())

typedef enum {
    NPD_ERROR_INVALID_ARGUMENT,
    NPD_ERROR_NOT_AUTHORIZED,
    NPD_ERROR_BUSY,
    NPD_ERROR_NO_SUCH_MODEL,
    NPD_ERROR_NOT_SUPPORTED,
    NPD_ERROR_MODEL_LOAD_FAILED,
    NPD_ERROR_CONTEXT_OVERFLOW,
    NPD_ERROR_CANCELLED,
    NPD_ERROR_INTERNAL,
    NPD_ERROR_NO_SPACE,
} NpdError;

#define NPD_ERROR_N_CODES (NPD_ERROR_NO_SPACE + 1)

/* Registers the D-Bus names on first use (thread-safe). */
GQuark npd_error_quark(void);

/* "org.npullm.Error.InvalidArgument" etc. */
const char *npd_error_dbus_name(NpdError code);

#endif
