#include "call-fds.h"

#include <gio/gunixfdlist.h>
#include <string.h>
#include <unistd.h>

#include "dbus-errors.h"
#include "npullm-protocol.h"

static GUnixFDList *fd_list_of(GDBusMethodInvocation *inv)
{
    return g_dbus_message_get_unix_fd_list(g_dbus_method_invocation_get_message(inv));
}

static void close_all(GUnixFDList *fds)
{
    gint n = 0;
    gint *stolen = g_unix_fd_list_steal_fds(fds, &n);
    for (gint i = 0; i < n; i++)
        close(stolen[i]);
    g_free(stolen);
}

gboolean npd_call_fds_check(GDBusMethodInvocation *inv, GVariant *params, GError **error)
{
    GUnixFDList *fds = fd_list_of(inv);
    gint n = fds != NULL ? g_unix_fd_list_get_length(fds) : 0;
    if (n == 0)
        return TRUE;
    const char *sig = g_dbus_message_get_signature(g_dbus_method_invocation_get_message(inv));
    const char *method = g_dbus_method_invocation_get_method_name(inv);
    gint allowed = (gint)npp_call_max_fds(method, sig, params);
    if (n <= allowed)
        return TRUE;
    close_all(fds);
    if (allowed == 0)
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s takes no file descriptor (%d passed)", method,
                    n);
    else if (allowed == 1)
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s takes exactly one file descriptor (%d passed)",
                    method, n);
    else
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s takes at most %d file descriptors (%d passed)",
                    method, allowed, n);
    return FALSE;
}

gboolean npd_call_fds_take(GDBusMethodInvocation *inv, const gint32 *handles, guint n_handles, int *out,
                           GError **error)
{
    GUnixFDList *fds = fd_list_of(inv);
    gint n = fds != NULL ? g_unix_fd_list_get_length(fds) : 0;
    const char *why = n == 0 ? "no file descriptor was passed with the call"
                    : n != (gint)n_handles ? "the handles do not name the descriptors passed, one each"
                                           : NULL;
    for (guint i = 0; why == NULL && i < n_handles; i++) {
        if (handles[i] < 0 || handles[i] >= n)
            why = "a handle does not name a descriptor passed";
        for (guint k = 0; why == NULL && k < i; k++)
            if (handles[k] == handles[i])
                why = "two handles name the same descriptor";
    }
    if (why != NULL) {
        if (fds != NULL)
            close_all(fds);
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: %s",
                    g_dbus_method_invocation_get_method_name(inv), why);
        return FALSE;
    }
    gint *stolen = g_unix_fd_list_steal_fds(fds, &n);
    for (guint i = 0; i < n_handles; i++)
        out[i] = stolen[handles[i]];
    g_free(stolen);
    return TRUE;
}
