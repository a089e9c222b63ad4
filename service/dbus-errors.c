#include "dbus-errors.h"

#include <gio/gio.h>

static const GDBusErrorEntry error_entries[] = {
    {NPD_ERROR_INVALID_ARGUMENT, "org.npullm.Error.InvalidArgument"},
    {NPD_ERROR_NOT_AUTHORIZED, "org.npullm.Error.NotAuthorized"},
    {NPD_ERROR_BUSY, "org.npullm.Error.Busy"},
    {NPD_ERROR_NO_SUCH_MODEL, "org.npullm.Error.NoSuchModel"},
    {NPD_ERROR_NOT_SUPPORTED, "org.npullm.Error.NotSupported"},
    {NPD_ERROR_MODEL_LOAD_FAILED, "org.npullm.Error.ModelLoadFailed"},
    {NPD_ERROR_CONTEXT_OVERFLOW, "org.npullm.Error.ContextOverflow"},
    {NPD_ERROR_CANCELLED, "org.npullm.Error.Cancelled"},
    {NPD_ERROR_INTERNAL, "org.npullm.Error.Internal"},
    {NPD_ERROR_NO_SPACE, "org.npullm.Error.NoSpace"},
};

G_STATIC_ASSERT(G_N_ELEMENTS(error_entries) == NPD_ERROR_N_CODES);

GQuark npd_error_quark(void)
{
    static gsize quark = 0;
    g_dbus_error_register_error_domain("npd-error-quark", &quark, error_entries,
                                       G_N_ELEMENTS(error_entries));
    return (GQuark)quark;
}

const char *npd_error_dbus_name(NpdError code)
{
    if ((unsigned)code >= G_N_ELEMENTS(error_entries))
        return "org.npullm.Error.Internal";
    return error_entries[code].dbus_error_name;
}
