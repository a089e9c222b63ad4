/* File descriptors attached to a method call. A call may carry as many
 * as npp_call_max_fds() allows (one per 'h' of its signature, one per
 * image handle of a Chat), each named by exactly one handle: anything else
 * is refused with NPD_ERROR_INVALID_ARGUMENT and every descriptor closed
 * at once (not when the message is finally freed), so that a caller
 * cannot park descriptors in the daemon. */
#ifndef NPD_CALL_FDS_H
#define NPD_CALL_FDS_H

#include <gio/gio.h>

gboolean npd_call_fds_check(GDBusMethodInvocation *inv, GVariant *params, GError **error);

/* Takes the call's descriptors out of its message (so each is held once,
 * not twice): out[i] (owned by the caller) is the one handles[i] names.
 * NPD_ERROR_INVALID_ARGUMENT, every descriptor closed, unless the handles
 * name each descriptor passed exactly once. */
gboolean npd_call_fds_take(GDBusMethodInvocation *inv, const gint32 *handles, guint n_handles, int *out,
                           GError **error);

#endif
