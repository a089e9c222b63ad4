#include "call-fds.h"

#include <gio/gunixfdlist.h>
#include <string.h>
#include <unistd.h>

#include "dbus-errors.h"

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

gboolean npd_call_fds_check(GDBusMethodInvocation *inv, GError **error)
{
    GUnixFDList *fds = fd_list_of(inv);
    gint n = fds != NULL ? g_unix_fd_list_get_length(fds) : 0;
    if (n == 0)
        return TRUE;
    const char *sig = g_dbus_message_get_signature(g_dbus_method_invocation_get_message(inv));
    const char *method = g_dbus_method_invocation_get_method_name(inv);
    gint allowed = 0;
    for (const char *c = sig; c != NULL && *c != '\0'; c++)
        allowed += *c == 'h';
    /* AddModel's options may carry the projector as one more descriptor */
    if (allowed > 0 && g_strcmp0(method, "AddModel") == 0)
        allowed++;
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

int npd_call_fds_take(GDBusMethodInvocation *inv, gint32 handle, GError **error)
{
    GUnixFDList *fds = fd_list_of(inv);
    gint n = fds != NULL ? g_unix_fd_list_get_length(fds) : 0;
    if (n != 1 || handle != 0) {
        if (fds != NULL)
            close_all(fds);
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                            n == 0 ? "image: no file descriptor was passed with the call"
                                   : "image: the handle does not name the descriptor passed");
        return -1;
    }
    gint *stolen = g_unix_fd_list_steal_fds(fds, &n);
    int fd = stolen[0];
    g_free(stolen);
    return fd;
}
