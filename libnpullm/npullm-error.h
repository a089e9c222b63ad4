#pragma once

#if !defined(__NPULLM_H_INSIDE__) && !defined(NPULLM_COMPILATION)
#error "Only <npullm.h> can be included directly."
#endif

#include <glib-object.h>

#include "npullm-export.h"

G_BEGIN_DECLS

/**
 * NpullmError:
 * @NPULLM_ERROR_INVALID_ARGUMENT: org.npullm.Error.InvalidArgument: a bad argument or option
 * @NPULLM_ERROR_NOT_AUTHORIZED: org.npullm.Error.NotAuthorized: polkit said no
 * @NPULLM_ERROR_BUSY: org.npullm.Error.Busy: the queue or the caller's share of it is full
 * @NPULLM_ERROR_NO_SUCH_MODEL: org.npullm.Error.NoSuchModel: no model of that name
 * @NPULLM_ERROR_NOT_SUPPORTED: org.npullm.Error.NotSupported: the model cannot do this
 * @NPULLM_ERROR_MODEL_LOAD_FAILED: org.npullm.Error.ModelLoadFailed: the model file did not load
 * @NPULLM_ERROR_CONTEXT_OVERFLOW: org.npullm.Error.ContextOverflow: the prompt does not fit the context
 * @NPULLM_ERROR_CANCELLED: org.npullm.Error.Cancelled: the request was cancelled
 * @NPULLM_ERROR_INTERNAL: org.npullm.Error.Internal: anything else, including a daemon that went away
 * @NPULLM_ERROR_NO_SPACE: org.npullm.Error.NoSpace: not enough free space to install a model
 *
 * The errors of npullmd, one per `org.npullm.Error.*` D-Bus error name.
 * They are registered with g_dbus_error_register_error(), so an error
 * returned by the service arrives in the %NPULLM_ERROR domain.
 *
 * Since: 1.0
 */
typedef enum {
    NPULLM_ERROR_INVALID_ARGUMENT,
    NPULLM_ERROR_NOT_AUTHORIZED,
    NPULLM_ERROR_BUSY,
    NPULLM_ERROR_NO_SUCH_MODEL,
    NPULLM_ERROR_NOT_SUPPORTED,
    NPULLM_ERROR_MODEL_LOAD_FAILED,
    NPULLM_ERROR_CONTEXT_OVERFLOW,
    NPULLM_ERROR_CANCELLED,
    NPULLM_ERROR_INTERNAL,
    NPULLM_ERROR_NO_SPACE,
} NpullmError;

/**
 * NPULLM_ERROR:
 *
 * The error domain of #NpullmError.
 *
 * Since: 1.0
 */
#define NPULLM_ERROR (npullm_error_quark())

NPULLM_EXPORT GQuark npullm_error_quark(void);
NPULLM_EXPORT GType npullm_error_get_type(void);
#define NPULLM_TYPE_ERROR (npullm_error_get_type())

NPULLM_EXPORT const char *npullm_error_to_dbus_name(NpullmError code);

G_END_DECLS
