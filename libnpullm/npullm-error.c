#include "npullm-error-private.h"

#include <gio/gio.h>

#include "npullm-protocol.h"

G_STATIC_ASSERT(NPULLM_ERROR_INTERNAL + 1 == NPP_ERROR_N_CODES);
G_STATIC_ASSERT((int)NPULLM_ERROR_CANCELLED == (int)NPP_ERROR_CANCELLED);

G_DEFINE_ENUM_TYPE(NpullmError, npullm_error, G_DEFINE_ENUM_VALUE(NPULLM_ERROR_INVALID_ARGUMENT, "invalid-argument"),
                   G_DEFINE_ENUM_VALUE(NPULLM_ERROR_NOT_AUTHORIZED, "not-authorized"),
                   G_DEFINE_ENUM_VALUE(NPULLM_ERROR_BUSY, "busy"),
                   G_DEFINE_ENUM_VALUE(NPULLM_ERROR_NO_SUCH_MODEL, "no-such-model"),
                   G_DEFINE_ENUM_VALUE(NPULLM_ERROR_NOT_SUPPORTED, "not-supported"),
                   G_DEFINE_ENUM_VALUE(NPULLM_ERROR_MODEL_LOAD_FAILED, "model-load-failed"),
                   G_DEFINE_ENUM_VALUE(NPULLM_ERROR_CONTEXT_OVERFLOW, "context-overflow"),
                   G_DEFINE_ENUM_VALUE(NPULLM_ERROR_CANCELLED, "cancelled"),
                   G_DEFINE_ENUM_VALUE(NPULLM_ERROR_INTERNAL, "internal"))

/**
 * npullm_error_quark:
 *
 * The error domain of #NpullmError; registers the `org.npullm.Error.*`
 * names with GDBus on first use.
 *
 * Returns: the quark
 *
 * Since: 1.0
 */
GQuark npullm_error_quark(void)
{
    static gsize quark = 0;
    if (g_once_init_enter(&quark)) {
        GQuark q = g_quark_from_static_string("npullm-error-quark");
        for (guint i = 0; i < NPP_ERROR_N_CODES; i++)
            g_dbus_error_register_error(q, (gint)i, npp_error_name(i));
        g_once_init_leave(&quark, q);
    }
    return (GQuark)quark;
}

/**
 * npullm_error_to_dbus_name:
 * @code: an #NpullmError
 *
 * The D-Bus error name of @code, e.g. `org.npullm.Error.NoSuchModel`.
 *
 * Returns: (transfer none): the name
 *
 * Since: 1.0
 */
const char *npullm_error_to_dbus_name(NpullmError code)
{
    return npp_error_name(code);
}

void _npullm_error_strip_remote(GError *error)
{
    /* An org.npullm.Error arrives as NPULLM_ERROR: its message needs no
     * "GDBus.Error:name: " prefix. Others keep it, it holds their name. */
    if (error->domain == NPULLM_ERROR)
        g_dbus_error_strip_remote_error(error);
}
