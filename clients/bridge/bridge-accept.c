/* Accepting connections: the peer's uid before a byte is read, a cap on
 * open connections, header and idle timeouts, EMFILE survived. */
#include "bridge-accept.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>

#include "bridge-http.h"
#include "bridge-peer.h"

#define RETRY_MS 500            /* after EMFILE and the like */
#define REFUSE_DRAIN (1 << 20)  /* bytes read and dropped after a refusal */
#define REFUSE_LINGER_S 2       /* ... for at most this long */

typedef struct {
    Bridge *bridge;
    GSocket *socket;
    GSource *source; /* NULL while paused */
} Listener;

/* One accepted connection handed to libsoup, until it is freed. */
typedef struct {
    Bridge *bridge;
    GSocket *socket; /* owned by the connection */
    char *peer;      /* its key in bridge->by_peer */
    guint timer;     /* header/idle timeout; 0 while a request is handled */
} Connection;

/* libsoup gives no socket for a connection it was handed
 * (soup_server_message_get_socket() is NULL): it is found by the peer's
 * address, unique among open loopback connections. */
static char *peer_key(GSocketAddress *remote)
{
    if (remote == NULL || !G_IS_INET_SOCKET_ADDRESS(remote))
        return NULL;
    GInetSocketAddress *in = G_INET_SOCKET_ADDRESS(remote);
    g_autofree char *host = g_inet_address_to_string(g_inet_socket_address_get_address(in));
    return g_strdup_printf("%s %u", host, g_inet_socket_address_get_port(in));
}

typedef struct {
    Bridge *bridge;
    GSocket *socket;
    GIOStream *stream; /* held, when it was taken from libsoup */
    GSource *readable;
    guint timeout;
    gsize drained;
} Refusal;

static void resume(Bridge *bridge);

static gboolean on_incoming(GSocket *socket, GIOCondition condition, gpointer data);

static void pause_listeners(Bridge *bridge)
{
    for (guint i = 0; bridge->listeners != NULL && i < bridge->listeners->len; i++) {
        Listener *l = bridge->listeners->pdata[i];
        if (l->source != NULL) {
            g_source_destroy(l->source);
            g_clear_pointer(&l->source, g_source_unref);
        }
    }
}

static void resume(Bridge *bridge)
{
    if (bridge->accept_retry != 0 || bridge->connections >= BRIDGE_MAX_CONNECTIONS)
        return;
    for (guint i = 0; bridge->listeners != NULL && i < bridge->listeners->len; i++) {
        Listener *l = bridge->listeners->pdata[i];
        if (l->source != NULL)
            continue;
        l->source = g_socket_create_source(l->socket, G_IO_IN, NULL);
        g_source_set_callback(l->source, G_SOURCE_FUNC(on_incoming), l, NULL);
        g_source_attach(l->source, NULL);
    }
}

static gboolean retry_accept(gpointer data)
{
    Bridge *bridge = data;
    bridge->accept_retry = 0;
    resume(bridge);
    return G_SOURCE_REMOVE;
}

/* ---- refusing: an answer, then closed ----------------------------------- */

static void refusal_end(Refusal *r)
{
    if (r->readable != NULL) {
        g_source_destroy(r->readable);
        g_source_unref(r->readable);
    }
    g_clear_handle_id(&r->timeout, g_source_remove);
    g_socket_close(r->socket, NULL);
    g_object_unref(r->socket);
    g_clear_object(&r->stream);
    r->bridge->refusals = g_list_remove(r->bridge->refusals, r);
    r->bridge->connections--;
    resume(r->bridge);
    g_free(r);
}

static gboolean refusal_readable(GSocket *socket, GIOCondition condition, gpointer data)
{
    Refusal *r = data;
    char scratch[16384];
    gssize n = g_socket_receive(socket, scratch, sizeof scratch, NULL, NULL);
    if (n < 0 && g_socket_condition_check(socket, G_IO_IN) == 0)
        return G_SOURCE_CONTINUE; /* would block */
    if (n > 0 && (r->drained += (gsize)n) < REFUSE_DRAIN)
        return G_SOURCE_CONTINUE;
    g_clear_pointer(&r->readable, g_source_unref);
    refusal_end(r);
    return G_SOURCE_REMOVE;
}

static gboolean refusal_timeout(gpointer data)
{
    Refusal *r = data;
    r->timeout = 0;
    refusal_end(r);
    return G_SOURCE_REMOVE;
}

static void refuse(Bridge *bridge, GSocket *socket, GIOStream *stream, guint status, const char *text)
{
    g_autofree char *reply =
        g_strdup_printf("HTTP/1.1 %u %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %zu\r\n"
                        "Connection: close\r\n\r\n%s",
                        status, soup_status_get_phrase(status), strlen(text), text);
    g_socket_set_blocking(socket, FALSE);
    /* a short answer fits the socket's buffer; it is all there is to say */
    g_socket_send(socket, reply, strlen(reply), NULL, NULL);
    g_socket_shutdown(socket, FALSE, TRUE, NULL);
    Refusal *r = g_new0(Refusal, 1);
    r->bridge = bridge;
    r->socket = g_object_ref(socket);
    r->stream = stream != NULL ? g_object_ref(stream) : NULL;
    r->readable = g_socket_create_source(socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
    g_source_set_callback(r->readable, G_SOURCE_FUNC(refusal_readable), r, NULL);
    g_source_attach(r->readable, NULL);
    r->timeout = g_timeout_add_seconds(REFUSE_LINGER_S, refusal_timeout, r);
    bridge->refusals = g_list_prepend(bridge->refusals, r);
}

void bridge_accept_refuse(Bridge *bridge, GSocket *socket, guint status, const char *text, GIOStream *stream)
{
    /* a connection libsoup had: it counts as one again until it closes */
    bridge->connections++;
    refuse(bridge, socket, stream, status, text);
}

/* ---- served connections ------------------------------------------------- */

static gboolean connection_timeout(gpointer data)
{
    Connection *c = data;
    c->timer = 0;
    g_debug("closing a connection idle for %u s", c->bridge->header_timeout);
    /* libsoup finds it closed and drops it */
    g_socket_shutdown(c->socket, TRUE, TRUE, NULL);
    return G_SOURCE_REMOVE;
}

static void arm(Connection *c)
{
    g_clear_handle_id(&c->timer, g_source_remove);
    if (c->bridge->header_timeout > 0)
        c->timer = g_timeout_add_seconds(c->bridge->header_timeout, connection_timeout, c);
}

static void connection_gone(gpointer data, GObject *where_the_object_was)
{
    Connection *c = data;
    g_clear_handle_id(&c->timer, g_source_remove);
    if (c->peer != NULL && c->bridge->by_peer != NULL)
        g_hash_table_remove(c->bridge->by_peer, c->peer);
    g_free(c->peer);
    c->bridge->connections--;
    resume(c->bridge);
    g_free(c);
}

static Connection *connection_of(Bridge *bridge, SoupServerMessage *msg)
{
    g_autofree char *key = peer_key(soup_server_message_get_remote_address(msg));
    return key != NULL && bridge->by_peer != NULL ? g_hash_table_lookup(bridge->by_peer, key) : NULL;
}

GSocket *bridge_accept_socket_of(Bridge *bridge, SoupServerMessage *msg)
{
    Connection *c = connection_of(bridge, msg);
    return c != NULL ? c->socket : NULL;
}

/* The request is in: it may take long to answer (a stream). */
static void on_request_read(SoupServer *server, SoupServerMessage *msg, gpointer data)
{
    Connection *c = connection_of(data, msg);
    if (c != NULL)
        g_clear_handle_id(&c->timer, g_source_remove);
}

/* Answered: the next request must come within the idle timeout. */
static void on_request_done(SoupServer *server, SoupServerMessage *msg, gpointer data)
{
    Connection *c = connection_of(data, msg);
    if (c != NULL)
        arm(c);
}

static void serve(Bridge *bridge, GSocket *socket)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocketAddress) local = g_socket_get_local_address(socket, &error);
    g_autoptr(GSocketAddress) remote = local != NULL ? g_socket_get_remote_address(socket, &error) : NULL;
    g_autoptr(GSocketConnection) conn = g_socket_connection_factory_create_connection(socket);
    /* a stream is many small writes: send each at once */
    g_socket_set_option(socket, IPPROTO_TCP, TCP_NODELAY, 1, NULL);
    Connection *c = g_new0(Connection, 1);
    c->bridge = bridge;
    c->socket = socket;
    c->peer = peer_key(remote);
    bridge->connections++;
    if (c->peer != NULL)
        g_hash_table_replace(bridge->by_peer, c->peer, c);
    g_object_weak_ref(G_OBJECT(socket), connection_gone, c);
    arm(c);
    if (remote == NULL || !soup_server_accept_iostream(bridge->server, G_IO_STREAM(conn), local, remote, &error)) {
        g_message("cannot serve a connection: %s", error->message);
        g_socket_close(socket, NULL);
    }
}

static void take(Bridge *bridge, GSocket *socket)
{
    uid_t uid = 0;
    g_autoptr(GError) error = NULL;
    if (!bridge_peer_uid(socket, &uid, &error) || uid != bridge->uid) {
        g_autofree char *why = error != NULL
                                   ? g_strdup_printf("forbidden: the connection's owner is unknown (%s)", error->message)
                                   : g_strdup_printf("forbidden: this bridge serves uid %u only", (guint)bridge->uid);
        g_autofree char *text = bridge_error_json(BRIDGE_API_OLLAMA, why);
        bridge->connections++;
        refuse(bridge, socket, NULL, SOUP_STATUS_FORBIDDEN, text);
        return;
    }
    /* the guard's per-request check finds it done */
    g_object_set_data(G_OBJECT(socket), "npullm-bridge-peer-uid", GUINT_TO_POINTER((guint)uid + 1));
    serve(bridge, socket);
}

static gboolean on_incoming(GSocket *listener, GIOCondition condition, gpointer data)
{
    Listener *l = data;
    Bridge *bridge = l->bridge;
    while (bridge->connections < BRIDGE_MAX_CONNECTIONS) {
        g_autoptr(GError) error = NULL;
        g_autoptr(GSocket) socket = g_socket_accept(listener, NULL, &error);
        if (socket != NULL) {
            take(bridge, socket);
            continue;
        }
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            return G_SOURCE_CONTINUE;
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED))
            continue; /* gone before it was accepted */
        /* EMFILE, ENFILE, ENOBUFS: try again once some are freed */
        g_message("cannot accept connections for now (%u open): %s", bridge->connections, error->message);
        pause_listeners(bridge);
        bridge->accept_retry = g_timeout_add(RETRY_MS, retry_accept, bridge);
        return G_SOURCE_CONTINUE;
    }
    g_debug("%u connections open: accepting more once one closes", bridge->connections);
    pause_listeners(bridge);
    return G_SOURCE_CONTINUE;
}

void bridge_accept_on(Bridge *bridge, GSocket *listener)
{
    if (bridge->listeners == NULL) {
        bridge->listeners = g_ptr_array_new();
        bridge->by_peer = g_hash_table_new(g_str_hash, g_str_equal);
        g_signal_connect(bridge->server, "request-read", G_CALLBACK(on_request_read), bridge);
        g_signal_connect(bridge->server, "request-finished", G_CALLBACK(on_request_done), bridge);
        g_signal_connect(bridge->server, "request-aborted", G_CALLBACK(on_request_done), bridge);
    }
    Listener *l = g_new0(Listener, 1);
    l->bridge = bridge;
    l->socket = g_object_ref(listener);
    g_socket_set_blocking(listener, FALSE);
    g_ptr_array_add(bridge->listeners, l);
    resume(bridge);
}

void bridge_accept_print(Bridge *bridge)
{
    for (guint i = 0; bridge->listeners != NULL && i < bridge->listeners->len; i++) {
        Listener *l = bridge->listeners->pdata[i];
        g_autoptr(GSocketAddress) a = g_socket_get_local_address(l->socket, NULL);
        if (a == NULL || !G_IS_INET_SOCKET_ADDRESS(a))
            continue;
        GInetSocketAddress *in = G_INET_SOCKET_ADDRESS(a);
        g_autofree char *host = g_inet_address_to_string(g_inet_socket_address_get_address(in));
        gboolean v6 = g_socket_address_get_family(a) == G_SOCKET_FAMILY_IPV6;
        printf("npullm-bridge: listening on http://%s%s%s:%u/\n", v6 ? "[" : "", host, v6 ? "]" : "",
               g_inet_socket_address_get_port(in));
    }
    fflush(stdout);
}

void bridge_accept_free(Bridge *bridge)
{
    g_clear_pointer(&bridge->by_peer, g_hash_table_unref);
}

void bridge_accept_stop(Bridge *bridge)
{
    pause_listeners(bridge);
    g_clear_handle_id(&bridge->accept_retry, g_source_remove);
    while (bridge->refusals != NULL)
        refusal_end(bridge->refusals->data);
    for (guint i = 0; bridge->listeners != NULL && i < bridge->listeners->len; i++) {
        Listener *l = bridge->listeners->pdata[i];
        g_socket_close(l->socket, NULL);
        g_object_unref(l->socket);
        g_free(l);
    }
    g_clear_pointer(&bridge->listeners, g_ptr_array_unref);
}
