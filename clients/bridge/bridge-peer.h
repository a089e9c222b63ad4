#pragma once

#include <gio/gio.h>
#include <sys/types.h>

/* The uid owning the other end of a loopback TCP connection, from the
 * kernel's socket table (NETLINK_SOCK_DIAG), since TCP carries no
 * credentials. */
gboolean bridge_peer_uid(GSocket *connection, uid_t *uid, GError **error);
