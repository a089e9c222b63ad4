#pragma once

#include "bridge.h"

/* Checks a request once its headers are in, before its body is read:
 * the peer is this user, Host is a loopback name, Origin (if any) is
 * the bridge's own, the bearer token (if configured) matches, and the body
 * is within BRIDGE_MAX_BODY. A refused request gets its reply here. */
void bridge_guard_check(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                        gpointer bridge);

/* A host name or address literal (without port) that is loopback. */
gboolean bridge_guard_is_loopback_host(const char *host);
