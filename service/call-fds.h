/* File descriptors attached to a method call. Only a method whose
 * signature has an 'h' may carry one, and then exactly one: anything else
 * is refused with NPD_ERROR_INVALID_ARGUMENT and every descriptor closed
 * at once (not when the message is finally freed), so that a caller
 * cannot park descriptors in the daemon. */
#ifndef NPD_CALL_FDS_H
#define NPD_CALL_FDS_H

#include <gio/gio.h>

gboolean npd_call_fds_check(GDBusMethodInvocation *inv, GError **error);

/* Takes the call's descriptor out of its message (so it is held once, not
 * twice): the caller owns it. -1 with NPD_ERROR_INVALID_ARGUMENT when the
 * handle does not name the one descriptor passed. */
int npd_call_fds_take(GDBusMethodInvocation *inv, gint32 handle, GError **error);

#endif
