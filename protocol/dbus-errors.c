#include "dbus-errors.h"

#include <gio/gio.h>

#include "npullm-protocol.h"

G_STATIC_ASSERT(NPD_ERROR_N_CODES == NPP_ERROR_N_CODES);

GQuark npd_error_quark(void)
{
    static gsize quark = 0;
    static GDBusErrorEntry entries[NPP_ERROR_N_CODES];
    if (g_once_init_enter(&quark)) {
        for (guint i = 0; i < NPP_ERROR_N_CODES; i++)
            entries[i] = (GDBusErrorEntry){(gint)i, npp_error_name(i)};
        gsize q = 0;
        g_dbus_error_register_error_domain("npd-error-quark", &q, entries, G_N_ELEMENTS(entries));
        g_once_init_leave(&quark, q);
    }
    return (GQuark)quark;
}

const char *npd_error_dbus_name(NpdError code)
{
    return npp_error_name(code);
}
