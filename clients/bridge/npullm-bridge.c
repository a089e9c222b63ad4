/* npullm-bridge: serves Ollama's and OpenAI's HTTP APIs on loopback to one
 * user and answers them through npullmd, called on the system bus as
 * that user (so polkit and per-user privacy hold). Socket-activated by
 * the user's systemd, or listening itself (--listen). */
#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <locale.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "bridge-accept.h"
#include "bridge-embed.h"
#include "bridge-guard.h"
#include "bridge-http.h"
#include "bridge-rerank.h"
#include "bridge.h"

#define DEFAULT_PORT 11434
#define ACTIVATED_IDLE_EXIT 300

static gboolean idle_quit(gpointer data)
{
    Bridge *bridge = data;
    bridge->idle_source = 0;
    g_message("idle for %u s: exiting", bridge->idle_exit);
    g_main_loop_quit(bridge->loop);
    return G_SOURCE_REMOVE;
}

void bridge_hold(Bridge *bridge)
{
    bridge->active++;
    g_clear_handle_id(&bridge->idle_source, g_source_remove);
}

void bridge_release(Bridge *bridge)
{
    g_return_if_fail(bridge->active > 0);
    if (--bridge->active == 0 && bridge->idle_exit > 0)
        bridge->idle_source = g_timeout_add_seconds(bridge->idle_exit, idle_quit, bridge);
}

static void on_request_started(SoupServer *server, SoupServerMessage *msg, Bridge *bridge)
{
    /* libsoup closes a connection it was handed (bridge-accept.c) after
     * one request: say so, so that no client sends a second one on it */
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Connection", "close");
    bridge_hold(bridge);
    g_object_set_data(G_OBJECT(msg), "npullm-bridge-held", GINT_TO_POINTER(1));
}

static void on_request_done(SoupServer *server, SoupServerMessage *msg, Bridge *bridge)
{
    if (g_object_steal_data(G_OBJECT(msg), "npullm-bridge-held") != NULL)
        bridge_release(bridge);
}

/* The token file, when there is one: ours and readable by us only. */
static gboolean read_token(const char *path, gboolean explicit, char **token, GError **error)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT && !explicit)
            return TRUE;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "%s: %s", path, g_strerror(e));
        return FALSE;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
        close(fd);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
                    "%s must be a regular file of yours with mode 0600", path);
        return FALSE;
    }
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s: cannot read it", path);
        return FALSE;
    }
    buf[n] = '\0';
    g_strstrip(buf);
    if (buf[0] == '\0') {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is empty", path);
        return FALSE;
    }
    *token = g_strdup(buf);
    return TRUE;
}

/* HOST:PORT or [V6]:PORT, loopback only. */
static GSocketAddress *parse_listen(const char *spec, GError **error)
{
    const char *colon = strrchr(spec, ':');
    g_autofree char *host = NULL;
    if (colon == NULL) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "--listen %s: use HOST:PORT", spec);
        return NULL;
    }
    host = spec[0] == '[' && colon > spec + 1 && colon[-1] == ']' ? g_strndup(spec + 1, colon - spec - 2)
                                                                   : g_strndup(spec, colon - spec);
    char *end = NULL;
    guint64 port = g_ascii_strtoull(colon + 1, &end, 10);
    g_autoptr(GInetAddress) addr = g_inet_address_new_from_string(host);
    if (g_strcmp0(host, "localhost") == 0)
        addr = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    if (end == colon + 1 || *end != '\0' || port > 65535 || addr == NULL) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "--listen %s: use HOST:PORT", spec);
        return NULL;
    }
    if (!g_inet_address_get_is_loopback(addr)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "--listen %s: the bridge listens on loopback addresses only", spec);
        return NULL;
    }
    return g_inet_socket_address_new(addr, (guint16)port);
}

/* A listening TCP socket on @address (loopback). */
static gboolean listen_address(Bridge *bridge, GSocketAddress *address, GError **error)
{
    g_autoptr(GSocket) socket = g_socket_new(g_socket_address_get_family(address), G_SOCKET_TYPE_STREAM,
                                             G_SOCKET_PROTOCOL_TCP, error);
    if (socket == NULL)
        return FALSE;
    /* as systemd's sockets: connections wait in the kernel while the
     * bridge is at its cap, instead of being retried by their clients */
    g_socket_set_listen_backlog(socket, 128);
    if (!g_socket_bind(socket, address, TRUE, error) || !g_socket_listen(socket, error))
        return FALSE;
    bridge_accept_on(bridge, socket);
    return TRUE;
}

/* Sockets passed by systemd (npullm-bridge.socket). */
static int listen_activated(Bridge *bridge, GError **error)
{
    int n = sd_listen_fds(TRUE);
    if (n < 0) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "sd_listen_fds: %s", g_strerror(-n));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        g_autoptr(GSocket) socket = g_socket_new_from_fd(SD_LISTEN_FDS_START + i, error);
        if (socket == NULL)
            return -1;
        g_autoptr(GSocketAddress) local = g_socket_get_local_address(socket, error);
        if (local == NULL)
            return -1;
        if (!G_IS_INET_SOCKET_ADDRESS(local) ||
            !g_inet_address_get_is_loopback(g_inet_socket_address_get_address(G_INET_SOCKET_ADDRESS(local)))) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                        "socket %d from systemd is not a loopback TCP socket", i);
            return -1;
        }
        bridge_accept_on(bridge, socket);
    }
    return n;
}

/* Ollama listens on the same port: say so, and how to find who holds it. */
static gboolean default_port_error(GError **error, const char *host)
{
    if (*error == NULL)
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "libsoup gave no reason");
    if (g_error_matches(*error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE)) {
        g_clear_error(error);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
                    "cannot listen on %s:%d: port %d is in use, likely by a running Ollama or another npullm-bridge "
                    "(`ss -ltnp sport = %d` shows which program); stop it, or pick another port with --listen",
                    host, DEFAULT_PORT, DEFAULT_PORT, DEFAULT_PORT);
    } else {
        g_prefix_error(error, "cannot listen on %s:%d: ", host, DEFAULT_PORT);
    }
    return FALSE;
}

static gboolean listen_on(Bridge *bridge, char **specs, GError **error)
{
    if (specs != NULL) {
        for (char **s = specs; *s != NULL; s++) {
            g_autoptr(GSocketAddress) addr = parse_listen(*s, error);
            if (addr == NULL)
                return FALSE;
            if (!listen_address(bridge, addr, error)) {
                g_prefix_error(error, "cannot listen on %s: ", *s);
                return FALSE;
            }
        }
        return TRUE;
    }
    /* the default: Ollama's port on 127.0.0.1, and on [::1] where the host has IPv6 */
    g_autoptr(GInetAddress) v4 = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) a4 = g_inet_socket_address_new(v4, DEFAULT_PORT);
    if (!listen_address(bridge, a4, error))
        return default_port_error(error, "127.0.0.1");
    g_autoptr(GInetAddress) v6 = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV6);
    g_autoptr(GSocketAddress) a6 = g_inet_socket_address_new(v6, DEFAULT_PORT);
    g_autoptr(GError) e6 = NULL;
    if (!listen_address(bridge, a6, &e6)) {
        if (g_error_matches(e6, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE)) {
            g_propagate_error(error, g_steal_pointer(&e6));
            return default_port_error(error, "[::1]");
        }
        /* no IPv6 here (disabled, or no ::1 on lo): 127.0.0.1 alone serves */
        g_message("not listening on [::1]:%d: %s", DEFAULT_PORT, e6 != NULL ? e6->message : "unknown error");
    }
    return TRUE;
}

void bridge_add_handler(Bridge *bridge, const char *path, SoupServerCallback callback)
{
    /* libsoup runs the early handler of the path that matched only */
    soup_server_add_early_handler(bridge->server, path, bridge_guard_check, bridge, NULL);
    soup_server_add_handler(bridge->server, path, callback, bridge, NULL);
}

static void handle_unknown(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                           gpointer data)
{
    bridge_reply_error(msg, BRIDGE_API_OLLAMA, SOUP_STATUS_NOT_FOUND, "no such endpoint: %s", path);
}

static gboolean on_signal(gpointer data)
{
    g_main_loop_quit(((Bridge *)data)->loop);
    return G_SOURCE_CONTINUE;
}

static GDBusConnection *connect_bus(const char *address, GError **error)
{
    if (address == NULL)
        return g_bus_get_sync(G_BUS_TYPE_SYSTEM, NULL, error);
    return g_dbus_connection_new_for_address_sync(
        address, G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL,
        NULL, error);
}

int main(int argc, char **argv)
{
    g_auto(GStrv) listen = NULL;
    g_autofree char *address = NULL;
    g_autofree char *token_file = NULL;
    gint idle_exit = -1;
    gint header_timeout = BRIDGE_HEADER_TIMEOUT;
    GOptionEntry entries[] = {
        {"listen", 'l', 0, G_OPTION_ARG_STRING_ARRAY, &listen,
         "Listen on HOST:PORT, a loopback address (repeatable; default 127.0.0.1:11434 and [::1]:11434; port 0 picks "
         "one)",
         "HOST:PORT"},
        {"token-file", 0, 0, G_OPTION_ARG_FILENAME, &token_file,
         "Require the bearer token in this file (mode 0600; default ~/.config/npullm/bridge-token when it exists)",
         "FILE"},
        {"idle-exit", 0, 0, G_OPTION_ARG_INT, &idle_exit,
         "Exit after SECONDS without requests (0: never; default 300 when socket-activated, else 0)", "SECONDS"},
        {"header-timeout", 0, 0, G_OPTION_ARG_INT, &header_timeout,
         "Close a connection that takes longer than SECONDS to send a request, or stays idle that long (0: never; "
         "default " G_STRINGIFY(BRIDGE_HEADER_TIMEOUT) ")",
         "SECONDS"},
        {"address", 0, 0, G_OPTION_ARG_STRING, &address, "D-Bus address of the bus of npullmd (default: the system bus)",
         "ADDRESS"},
        {NULL},
    };
    setlocale(LC_ALL, "");
    /* stdout is for the listening addresses only */
    g_log_writer_default_set_use_stderr(TRUE);
    g_autoptr(GOptionContext) ctx = g_option_context_new("— Ollama and OpenAI HTTP APIs for npullm");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        g_printerr("npullm-bridge: %s\n", error->message);
        return 2;
    }

    Bridge bridge = {0};
    bridge.uid = getuid();
    bridge.header_timeout = header_timeout > 0 ? (guint)header_timeout : 0;
    g_autofree char *default_token = g_build_filename(g_get_user_config_dir(), "npullm", "bridge-token", NULL);
    if (!read_token(token_file != NULL ? token_file : default_token, token_file != NULL, &bridge.token, &error)) {
        g_printerr("npullm-bridge: %s\n", error->message);
        return 1;
    }
    g_autoptr(GDBusConnection) bus = connect_bus(address, &error);
    if (bus != NULL)
        bridge.client = npullm_client_new_sync(bus, NULL, &error);
    if (bridge.client == NULL) {
        g_printerr("npullm-bridge: cannot reach npullmd: %s\n", error->message);
        return 1;
    }
    bridge.server = soup_server_new("server-header", "npullm-bridge ", NULL);
    bridge_add_handler(&bridge, "/", handle_unknown);
    bridge_ollama_register(&bridge);
    bridge_openai_register(&bridge);
    bridge_embed_register(&bridge);
    bridge_rerank_register(&bridge);
    g_signal_connect(bridge.server, "request-started", G_CALLBACK(on_request_started), &bridge);
    g_signal_connect(bridge.server, "request-finished", G_CALLBACK(on_request_done), &bridge);
    g_signal_connect(bridge.server, "request-aborted", G_CALLBACK(on_request_done), &bridge);

    int activated = listen == NULL ? listen_activated(&bridge, &error) : 0;
    if (activated < 0 || (activated == 0 && !listen_on(&bridge, listen, &error))) {
        g_printerr("npullm-bridge: %s\n", error->message);
        return 1;
    }
    bridge.idle_exit = idle_exit >= 0 ? (guint)idle_exit : activated > 0 ? ACTIVATED_IDLE_EXIT : 0;
    bridge_accept_print(&bridge);

    bridge.loop = g_main_loop_new(NULL, FALSE);
    bridge.active = 1; /* released once the loop runs: starts the idle timer */
    bridge_release(&bridge);
    g_unix_signal_add(SIGTERM, on_signal, &bridge);
    g_unix_signal_add(SIGINT, on_signal, &bridge);
    sd_notify(0, "READY=1");
    g_main_loop_run(bridge.loop);

    bridge_accept_stop(&bridge);
    soup_server_disconnect(bridge.server);
    g_clear_handle_id(&bridge.idle_source, g_source_remove);
    g_object_unref(bridge.server);
    bridge_accept_free(&bridge);
    g_object_unref(bridge.client);
    g_main_loop_unref(bridge.loop);
    g_free(bridge.token);
    return 0;
}
