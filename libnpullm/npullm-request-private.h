#pragma once

#include "npullm-conversation.h"
#include "npullm-request.h"

/* Subscribes to the signals of path from daemon (its unique name) on bus,
 * before the call that creates the request is made. conversation, when
 * not NULL, gets the reply appended as it streams. */
NpullmRequest *_npullm_request_new(GDBusConnection *bus, const char *daemon, const char *path,
                                   NpullmConversation *conversation, GCancellable *cancellable);
/* The call that creates it succeeded. */
void _npullm_request_started(NpullmRequest *self);
/* The call failed or was never made: stop listening, nothing to cancel. */
void _npullm_request_abandon(NpullmRequest *self);
/* Handed to the caller: what arrived until now is emitted from an idle,
 * after the caller could connect its handlers. */
void _npullm_request_deliver(NpullmRequest *self);
/* The daemon left the bus: it finishes with reason "error". */
void _npullm_request_daemon_gone(NpullmRequest *self, const char *daemon);
/* Its NpullmClient is disposed: cancelled, and it finishes with reason
 * "cancelled" at once (the daemon's answer may never come). */
void _npullm_request_client_gone(NpullmRequest *self);
gboolean _npullm_request_is_finished(NpullmRequest *self);
