#include "npullm-error-private.h"

#include <gio/gio.h>

#include "npullm-protocol.h"

G_STATIC_ASSERT(NPULLM_ERROR_NO_SPACE + 1 == NPP_ERROR_N_CODES);
G_STATIC_ASSERT((int)NPULLM_ERROR_CANCELLED == (int)NPP_ERROR_CANCELLED);

GType npullm_error_get_type(void)
{
    static gsize type = 0;
    static const GEnumValue values[] = {
        {NPULLM_ERROR_INVALID_ARGUMENT, "NPULLM_ERROR_INVALID_ARGUMENT", "invalid-argument"},
        {NPULLM_ERROR_NOT_AUTHORIZED, "NPULLM_ERROR_NOT_AUTHORIZED", "not-authorized"},
        {NPULLM_ERROR_BUSY, "NPULLM_ERROR_BUSY", "busy"},
        {NPULLM_ERROR_NO_SUCH_MODEL, "NPULLM_ERROR_NO_SUCH_MODEL", "no-such-model"},
        {NPULLM_ERROR_NOT_SUPPORTED, "NPULLM_ERROR_NOT_SUPPORTED", "not-supported"},
        {NPULLM_ERROR_MODEL_LOAD_FAILED, "NPULLM_ERROR_MODEL_LOAD_FAILED", "model-load-failed"},
        {NPULLM_ERROR_CONTEXT_OVERFLOW, "NPULLM_ERROR_CONTEXT_OVERFLOW", "context-overflow"},
        {NPULLM_ERROR_CANCELLED, "NPULLM_ERROR_CANCELLED", "cancelled"},
        {NPULLM_ERROR_INTERNAL, "NPULLM_ERROR_INTERNAL", "internal"},
        {NPULLM_ERROR_NO_SPACE, "NPULLM_ERROR_NO_SPACE", "no-space"},
        {0, NULL, NULL},
    };
    if (g_once_init_enter(&type))
        g_once_init_leave(&type, g_enum_register_static(g_intern_static_string("NpullmError"), values));
    return (GType)type;
}

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
