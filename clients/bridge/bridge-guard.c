/* Who may use the bridge: only its own user, only from loopback, never a
 * web page of another origin (DNS rebinding, cross-site POSTs). */
#include "bridge-guard.h"

#include "bridge-accept.h"
#include "bridge-http.h"
#include "bridge-peer.h"

gboolean bridge_guard_is_loopback_host(const char *host)
{
    if (g_ascii_strcasecmp(host, "localhost") == 0 || g_str_has_suffix(host, ".localhost"))
        return TRUE;
    g_autoptr(GInetAddress) a = g_inet_address_new_from_string(host);
    return a != NULL && g_inet_address_get_is_loopback(a);
}

/* "name", "name:port", "[v6]" or "[v6]:port" → the host part */
static char *host_of(const char *value)
{
    if (value[0] == '[') {
        const char *end = strchr(value, ']');
        if (end == NULL || (end[1] != '\0' && end[1] != ':'))
            return NULL;
        return g_strndup(value + 1, end - value - 1);
    }
    const char *colon = strchr(value, ':');
    if (colon != NULL && strchr(colon + 1, ':') != NULL)
        return NULL;
    return colon != NULL ? g_strndup(value, colon - value) : g_strdup(value);
}

/* Only a page the bridge itself serves (none, today) may send requests
 * from a browser: a loopback name on the bridge's own port. Another local
 * web server, even another user's, is a foreign origin. */
static gboolean origin_allowed(const char *origin, SoupServerMessage *msg)
{
    g_autoptr(GUri) uri = g_uri_parse(origin, G_URI_FLAGS_NONE, NULL);
    if (uri == NULL)
        return FALSE;
    const char *host = g_uri_get_host(uri);
    if (g_strcmp0(g_uri_get_scheme(uri), "http") != 0 || host == NULL || !bridge_guard_is_loopback_host(host))
        return FALSE;
    GSocketAddress *local = soup_server_message_get_local_address(msg);
    gint port = g_uri_get_port(uri) > 0 ? g_uri_get_port(uri) : 80;
    return local != NULL && G_IS_INET_SOCKET_ADDRESS(local) &&
           port == g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(local));
}

static gboolean token_matches(const char *header, const char *token)
{
    if (header == NULL || g_ascii_strncasecmp(header, "Bearer ", 7) != 0)
        return FALSE;
    const char *given = header + 7;
    gsize a = strlen(given), b = strlen(token);
    /* compare all of it, whatever differs first */
    guint diff = a != b;
    for (gsize i = 0; i < b; i++)
        diff |= (guint)(guchar)token[i] ^ (guint)(guchar)(i < a ? given[i] : 0);
    return diff == 0;
}

static gboolean peer_is_us(Bridge *bridge, SoupServerMessage *msg, char **why)
{
    GSocket *socket = bridge_accept_socket_of(bridge, msg);
    if (socket == NULL) {
        *why = g_strdup("no connection");
        return FALSE;
    }
    /* one lookup per connection */
    gpointer cached = g_object_get_data(G_OBJECT(socket), "npullm-bridge-peer-uid");
    if (cached != NULL)
        return GPOINTER_TO_UINT(cached) - 1 == bridge->uid;
    uid_t uid = 0;
    g_autoptr(GError) error = NULL;
    if (!bridge_peer_uid(socket, &uid, &error)) {
        *why = g_strdup_printf("the connection's owner is unknown (%s)", error->message);
        return FALSE;
    }
    g_object_set_data(G_OBJECT(socket), "npullm-bridge-peer-uid", GUINT_TO_POINTER((guint)uid + 1));
    if (uid != bridge->uid) {
        *why = g_strdup_printf("this bridge serves uid %u only", (guint)bridge->uid);
        return FALSE;
    }
    return TRUE;
}

/* A refused request with a body loses its connection: libsoup would read
 * the whole body (and keep it) before answering. */
G_GNUC_PRINTF(5, 6)
static void refuse(Bridge *bridge, SoupServerMessage *msg, BridgeApi api, guint status, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    g_autofree char *message = g_strdup_vprintf(format, ap);
    va_end(ap);
    SoupMessageHeaders *h = soup_server_message_get_request_headers(msg);
    GSocket *socket = bridge_accept_socket_of(bridge, msg);
    gboolean body = soup_message_headers_get_encoding(h) == SOUP_ENCODING_CHUNKED ||
                    soup_message_headers_get_content_length(h) > 0;
    if (!body || socket == NULL) {
        bridge_reply_error(msg, api, status, "%s", message);
        return;
    }
    g_autoptr(GSocket) held = g_object_ref(socket);
    g_autoptr(GIOStream) stream = soup_server_message_steal_connection(msg);
    g_autofree char *text = bridge_error_json(api, message);
    bridge_accept_refuse(bridge, held, status, text, stream);
}

void bridge_guard_check(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                        gpointer data)
{
    Bridge *bridge = data;
    BridgeApi api = g_str_has_prefix(path, "/v1") ? BRIDGE_API_OPENAI : BRIDGE_API_OLLAMA;
    SoupMessageHeaders *h = soup_server_message_get_request_headers(msg);
    g_autofree char *why = NULL;
    if (!peer_is_us(bridge, msg, &why)) {
        refuse(bridge, msg, api, SOUP_STATUS_FORBIDDEN, "forbidden: %s", why);
        return;
    }
    const char *host = soup_message_headers_get_one(h, "Host");
    g_autofree char *host_name = host != NULL ? host_of(host) : NULL;
    if (host_name == NULL || !bridge_guard_is_loopback_host(host_name)) {
        refuse(bridge, msg, api, SOUP_STATUS_FORBIDDEN, "forbidden: Host must be a loopback name");
        return;
    }
    const char *origin = soup_message_headers_get_one(h, "Origin");
    if (origin != NULL && !origin_allowed(origin, msg)) {
        refuse(bridge, msg, api, SOUP_STATUS_FORBIDDEN, "forbidden: requests from the web page %s are refused",
                           origin);
        return;
    }
    if (bridge->token != NULL && !token_matches(soup_message_headers_get_one(h, "Authorization"), bridge->token)) {
        refuse(bridge, msg, api, SOUP_STATUS_UNAUTHORIZED,
                           "unauthorized: send the token of ~/.config/npullm/bridge-token as a bearer token");
        return;
    }
    if (soup_message_headers_get_encoding(h) == SOUP_ENCODING_CHUNKED) {
        refuse(bridge, msg, api, SOUP_STATUS_BAD_REQUEST, "request bodies need a Content-Length");
        return;
    }
    if (soup_message_headers_get_content_length(h) > BRIDGE_MAX_BODY) {
        refuse(bridge, msg, api, SOUP_STATUS_BAD_REQUEST, "the request body is larger than %d MiB",
                           BRIDGE_MAX_BODY / (1024 * 1024));
        return;
    }
}
