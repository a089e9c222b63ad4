/* The bridge accepts its connections itself, before libsoup reads
 * anything: another user's are refused at once, at most
 * BRIDGE_MAX_CONNECTIONS are open, each must send a request within the
 * header timeout and is closed when idle that long, and running out of
 * descriptors pauses accepting instead of ending it. */
#pragma once

#include "bridge.h"

#define BRIDGE_MAX_CONNECTIONS 64
#define BRIDGE_HEADER_TIMEOUT 15 /* seconds, the default of --header-timeout */

/* Serves the connections of @listener (a listening loopback TCP socket). */
void bridge_accept_on(Bridge *bridge, GSocket *listener);

/* The socket of the connection @msg came on (libsoup's
 * soup_server_message_get_socket() knows none for connections handed to
 * it), or NULL once it is closed. */
GSocket *bridge_accept_socket_of(Bridge *bridge, SoupServerMessage *msg);

/* Prints the addresses listened on, one "npullm-bridge: listening on URL"
 * line each, on stdout. */
void bridge_accept_print(Bridge *bridge);

/* Stops accepting and closes the listeners. */
void bridge_accept_stop(Bridge *bridge);

/* Answers @status with @text (JSON) on @socket and closes it, reading
 * and discarding at most a little of what the client still sends (so
 * that it gets the answer, not a reset), never keeping it. @stream, the
 * connection taken from libsoup, is held until then. */
void bridge_accept_refuse(Bridge *bridge, GSocket *socket, guint status, const char *text, GIOStream *stream);

/* Once the server is gone (its connections closed). */
void bridge_accept_free(Bridge *bridge);
