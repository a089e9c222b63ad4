/* npullm-client: command-line client of npullmd (org.npullm).
 *
 * Streaming never loses a token: each request is made with a
 * handle_token, so its object path is known in advance and the client
 * subscribes to that path (from the daemon's unique name) before calling. */
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <gio/gunixfdlist.h>
#include <gio/gunixinputstream.h>
#include <glib-unix.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client-events.h"
#include "client-models.h"
#include "client-options.h"
#include "dbus-errors.h"
#include "request-path.h"

#define BUS_NAME "org.npullm"
#define MANAGER_PATH "/org/npullm"
#define MANAGER_IFACE "org.npullm.Manager"
#define REQUEST_IFACE "org.npullm.Request"

typedef struct Client Client;

/* Called when a streamed request ends; exit_code is 0 on success. */
typedef void (*StreamDone)(Client *c, int exit_code);

struct Client {
    NpcOptions opts;
    NpcOutput out;
    GDBusConnection *bus;
    gchar *daemon; /* unique name owning org.npullm */
    GMainLoop *loop;
    int exit_code;

    /* the request being streamed */
    gboolean streaming;
    gboolean replied;
    gboolean cancel_requested;
    gchar *request_path;
    guint signal_sub;
    guint token_counter;
    GString *reply;
    StreamDone done;

    /* chat */
    GPtrArray *history; /* GVariant* a{sv} messages */
    GDataInputStream *stdin_lines;
    int last_failure;
};

static void client_quit(Client *c, int code)
{
    c->exit_code = code;
    g_main_loop_quit(c->loop);
}

static gboolean connect_bus(Client *c, GError **error)
{
    if (c->opts.address != NULL)
        c->bus = g_dbus_connection_new_for_address_sync(
            c->opts.address,
            G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL,
            NULL, error);
    else
        c->bus = g_bus_get_sync(c->opts.session_bus ? G_BUS_TYPE_SESSION : G_BUS_TYPE_SYSTEM, NULL, error);
    if (c->bus == NULL)
        return FALSE;
    g_dbus_connection_set_exit_on_close(c->bus, FALSE);
    return TRUE;
}

/* Starts npullmd if needed (D-Bus activation) and learns its unique
 * name, so that signals are accepted from it only. */
static gboolean resolve_daemon(Client *c, GError **error)
{
    g_autoptr(GVariant) ping = g_dbus_connection_call_sync(c->bus, BUS_NAME, MANAGER_PATH,
                                                           "org.freedesktop.DBus.Peer", "Ping", NULL, NULL,
                                                           G_DBUS_CALL_FLAGS_NONE, -1, NULL, error);
    if (ping == NULL)
        return FALSE;
    g_autoptr(GVariant) owner = g_dbus_connection_call_sync(
        c->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
        g_variant_new("(s)", BUS_NAME), G_VARIANT_TYPE("(s)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, error);
    if (owner == NULL)
        return FALSE;
    g_variant_get(owner, "(s)", &c->daemon);
    return TRUE;
}

/* ---- streaming a request ----------------------------------------------- */

static void stream_end(Client *c, int code)
{
    if (c->signal_sub != 0) {
        g_dbus_connection_signal_unsubscribe(c->bus, c->signal_sub);
        c->signal_sub = 0;
    }
    c->streaming = FALSE;
    g_clear_pointer(&c->request_path, g_free);
    c->done(c, code);
}

static void cancel_reply_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    Client *c = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) ret = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res, &error);
    if (ret == NULL && c->streaming)
        npc_output_error(&c->out, error);
}

static void send_cancel(Client *c)
{
    g_dbus_connection_call(c->bus, c->daemon, c->request_path, REQUEST_IFACE, "Cancel", NULL, NULL,
                           G_DBUS_CALL_FLAGS_NONE, -1, NULL, cancel_reply_cb, c);
}

static int exit_code_for_finish(Client *c, const char *reason, GVariant *stats)
{
    if (strcmp(reason, "stop") == 0 || strcmp(reason, "length") == 0)
        return NPC_EXIT_OK;
    if (strcmp(reason, "cancelled") == 0)
        return c->cancel_requested ? NPC_EXIT_INTERRUPTED : NPC_EXIT_ERROR;
    const char *name = NULL;
    g_variant_lookup(stats, "error_name", "&s", &name);
    return npc_exit_code_for_error_name(name);
}

static void request_signal_cb(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                              const char *member, GVariant *params, gpointer data)
{
    Client *c = data;
    if (!c->streaming)
        return;
    if (g_strcmp0(iface, REQUEST_IFACE) == 0 && g_strcmp0(member, "Token") == 0 &&
        g_variant_is_of_type(params, G_VARIANT_TYPE("(s)"))) {
        const char *text = NULL;
        g_variant_get(params, "(&s)", &text);
        g_string_append(c->reply, text);
        npc_output_token(&c->out, text);
    } else if (g_strcmp0(iface, REQUEST_IFACE) == 0 && g_strcmp0(member, "Finished") == 0 &&
               g_variant_is_of_type(params, G_VARIANT_TYPE("(sa{sv})"))) {
        const char *reason = NULL;
        g_autoptr(GVariant) stats = NULL;
        g_variant_get(params, "(&s@a{sv})", &reason, &stats);
        npc_output_finished(&c->out, reason, stats);
        stream_end(c, exit_code_for_finish(c, reason, stats));
    } else if (g_strcmp0(iface, "org.freedesktop.DBus.Properties") == 0 &&
               g_strcmp0(member, "PropertiesChanged") == 0 &&
               g_variant_is_of_type(params, G_VARIANT_TYPE("(sa{sv}as)"))) {
        g_autoptr(GVariant) changed = g_variant_get_child_value(params, 1);
        const char *state = NULL;
        guint32 position = 0;
        if (g_variant_lookup(changed, "State", "&s", &state)) {
            g_variant_lookup(changed, "QueuePosition", "u", &position);
            if (strcmp(state, "finished") != 0)
                npc_output_state(&c->out, state, position);
        }
    }
}

static void request_reply_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    Client *c = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) ret =
        g_dbus_connection_call_with_unix_fd_list_finish(G_DBUS_CONNECTION(source), NULL, res, &error);
    if (ret == NULL) {
        npc_output_error(&c->out, error);
        stream_end(c, npc_exit_code_for_error(error));
        return;
    }
    const char *path = NULL;
    g_variant_get(ret, "(&o)", &path);
    if (g_strcmp0(path, c->request_path) != 0) {
        /* An older daemon ignoring handle_token: signals could be missed. */
        npc_output_message(&c->out, "error", "the service returned an unexpected request path");
        stream_end(c, NPC_EXIT_ERROR);
        return;
    }
    c->replied = TRUE;
    npc_output_request(&c->out, path);
    if (c->cancel_requested)
        send_cancel(c);
}

/* Calls method with (args..., options) and streams the request it
 * creates. args_builder holds the arguments before the options. */
static void stream_request(Client *c, const char *method, GVariantBuilder *args, GUnixFDList *fds,
                           StreamDone done)
{
    g_autofree gchar *token = g_strdup_printf("npc%u_%u", (unsigned)getpid(), ++c->token_counter);
    c->request_path = npd_request_path_for_token(g_dbus_connection_get_unique_name(c->bus), token);
    c->streaming = TRUE;
    c->replied = FALSE;
    c->cancel_requested = FALSE;
    c->done = done;
    g_string_truncate(c->reply, 0);
    c->signal_sub = g_dbus_connection_signal_subscribe(c->bus, c->daemon, NULL, NULL, c->request_path, NULL,
                                                       G_DBUS_SIGNAL_FLAGS_NONE, request_signal_cb, c, NULL);
    g_variant_builder_add_value(args, npc_options_to_variant(&c->opts, token));
    g_dbus_connection_call_with_unix_fd_list(c->bus, c->daemon, MANAGER_PATH, MANAGER_IFACE, method,
                                             g_variant_builder_end(args), G_VARIANT_TYPE("(o)"),
                                             G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION, G_MAXINT, fds,
                                             NULL, request_reply_cb, c);
}

static gboolean sigint_cb(gpointer data)
{
    Client *c = data;
    if (c->streaming && !c->cancel_requested) {
        c->cancel_requested = TRUE;
        if (!c->out.json) {
            npc_output_end_line(&c->out);
            g_printerr("[cancelling; press Ctrl-C again to quit]\n");
        }
        if (c->replied)
            send_cancel(c);
        return G_SOURCE_CONTINUE;
    }
    npc_output_end_line(&c->out);
    client_quit(c, NPC_EXIT_INTERRUPTED);
    return G_SOURCE_CONTINUE;
}

/* ---- generate / describe-image ------------------------------------------- */

static void single_done(Client *c, int code)
{
    if (code == NPC_EXIT_OK)
        npc_output_end_line(&c->out);
    client_quit(c, code);
}

static gchar *read_all_stdin(GError **error)
{
    GString *text = g_string_new(NULL);
    char buf[4096];
    for (;;) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
        if (n == 0)
            break;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "reading stdin: %s", g_strerror(errno));
            g_string_free(text, TRUE);
            return NULL;
        }
        g_string_append_len(text, buf, n);
    }
    return g_string_free(text, FALSE);
}

static int start_generate(Client *c, int argc, char **argv)
{
    g_autofree gchar *prompt = NULL;
    if (argc == 0 || (argc == 1 && strcmp(argv[0], "-") == 0)) {
        if (argc == 0 && isatty(STDIN_FILENO)) {
            g_printerr("npullm-client: generate needs a prompt (or '-' to read it from stdin)\n");
            return NPC_EXIT_USAGE;
        }
        g_autoptr(GError) error = NULL;
        prompt = read_all_stdin(&error);
        if (prompt == NULL) {
            g_printerr("npullm-client: %s\n", error->message);
            return NPC_EXIT_ERROR;
        }
    } else {
        prompt = g_strjoinv(" ", argv);
    }
    if (!g_utf8_validate(prompt, -1, NULL)) {
        g_printerr("npullm-client: the prompt is not valid UTF-8\n");
        return NPC_EXIT_USAGE;
    }
    GVariantBuilder args;
    g_variant_builder_init(&args, G_VARIANT_TYPE_TUPLE);
    g_variant_builder_add(&args, "s", prompt);
    stream_request(c, "Generate", &args, NULL, single_done);
    return -1;
}

static int start_describe_image(Client *c, int argc, char **argv)
{
    if (argc < 1 || argc > 2) {
        g_printerr("npullm-client: describe-image FILE|- [PROMPT]\n");
        return NPC_EXIT_USAGE;
    }
    const char *prompt = argc == 2 ? argv[1] : "Describe this image.";
    if (!g_utf8_validate(prompt, -1, NULL)) {
        g_printerr("npullm-client: the prompt is not valid UTF-8\n");
        return NPC_EXIT_USAGE;
    }
    /* "-": whatever stdin is (a file or a pipe); the daemon reads it. */
    gboolean from_stdin = strcmp(argv[0], "-") == 0;
    int fd = from_stdin ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3) : open(argv[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        g_printerr("npullm-client: %s: %s\n", from_stdin ? "stdin" : argv[0], g_strerror(errno));
        return NPC_EXIT_ERROR;
    }
    g_autoptr(GUnixFDList) fds = g_unix_fd_list_new_from_array(&fd, 1); /* takes fd */
    GVariantBuilder args;
    g_variant_builder_init(&args, G_VARIANT_TYPE_TUPLE);
    g_variant_builder_add(&args, "h", 0);
    g_variant_builder_add(&args, "s", prompt);
    stream_request(c, "DescribeImage", &args, fds, single_done);
    return -1;
}

/* ---- chat ---------------------------------------------------------------- */

static GVariant *chat_message(const char *role, const char *content)
{
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&b, "{sv}", "role", g_variant_new_string(role));
    g_variant_builder_add(&b, "{sv}", "content", g_variant_new_string(content));
    return g_variant_ref_sink(g_variant_builder_end(&b));
}

static void chat_prompt(Client *c);

static void chat_turn_done(Client *c, int code)
{
    if (code == NPC_EXIT_OK) {
        npc_output_end_line(&c->out);
        g_ptr_array_add(c->history, chat_message("assistant", c->reply->str));
    } else {
        /* The turn did not complete: forget the question too. */
        if (c->history->len > 0)
            g_ptr_array_remove_index(c->history, c->history->len - 1);
        c->last_failure = code;
    }
    chat_prompt(c);
}

static void chat_line_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    Client *c = data;
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    g_autofree gchar *line = g_data_input_stream_read_line_finish_utf8(G_DATA_INPUT_STREAM(source), res, &len, &error);
    if (line == NULL) {
        if (error != NULL)
            npc_output_message(&c->out, "error", error->message);
        client_quit(c, error != NULL ? NPC_EXIT_ERROR : c->last_failure);
        return;
    }
    g_strstrip(line);
    if (line[0] == '\0') {
        chat_prompt(c);
        return;
    }
    g_ptr_array_add(c->history, chat_message("user", line));
    GVariantBuilder messages;
    g_variant_builder_init(&messages, G_VARIANT_TYPE("aa{sv}"));
    for (guint i = 0; i < c->history->len; i++)
        g_variant_builder_add_value(&messages, c->history->pdata[i]);
    GVariantBuilder args;
    g_variant_builder_init(&args, G_VARIANT_TYPE_TUPLE);
    g_variant_builder_add_value(&args, g_variant_builder_end(&messages));
    stream_request(c, "Chat", &args, NULL, chat_turn_done);
}

static void chat_prompt(Client *c)
{
    if (!c->out.json && isatty(STDIN_FILENO)) {
        fputs("> ", stdout);
        fflush(stdout);
    }
    g_data_input_stream_read_line_async(c->stdin_lines, G_PRIORITY_DEFAULT, NULL, chat_line_cb, c);
}

static int start_chat(Client *c, int argc, char **argv)
{
    if (argc != 0) {
        g_printerr("npullm-client: chat takes no arguments; it reads one user turn per line from stdin\n");
        return NPC_EXIT_USAGE;
    }
    c->history = g_ptr_array_new_with_free_func((GDestroyNotify)g_variant_unref);
    g_autoptr(GInputStream) in = g_unix_input_stream_new(STDIN_FILENO, FALSE);
    c->stdin_lines = g_data_input_stream_new(in);
    chat_prompt(c);
    return -1;
}

/* ---- one-shot commands ------------------------------------------------- */

static int call_simple(Client *c, const char *path, const char *iface, const char *method, GVariant *args,
                       const GVariantType *reply_type, GVariant **reply)
{
    g_autoptr(GError) error = NULL;
    GVariant *ret = g_dbus_connection_call_sync(c->bus, c->daemon, path, iface, method, args, reply_type,
                                                G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION, G_MAXINT, NULL,
                                                &error);
    if (ret == NULL) {
        npc_output_error(&c->out, error);
        return npc_exit_code_for_error(error);
    }
    if (reply != NULL)
        *reply = ret;
    else
        g_variant_unref(ret);
    return NPC_EXIT_OK;
}

static int run_models(Client *c)
{
    GVariant *reply = NULL;
    int code = call_simple(c, MANAGER_PATH, MANAGER_IFACE, "ListModels", NULL, G_VARIANT_TYPE("(aa{sv})"), &reply);
    if (code == NPC_EXIT_OK) {
        g_autoptr(GVariant) models = g_variant_get_child_value(reply, 0);
        npc_output_models(&c->out, models);
        g_variant_unref(reply);
    }
    return code;
}

static int run_status(Client *c)
{
    GVariant *reply = NULL;
    int code = call_simple(c, MANAGER_PATH, "org.freedesktop.DBus.Properties", "GetAll",
                           g_variant_new("(s)", MANAGER_IFACE), G_VARIANT_TYPE("(a{sv})"), &reply);
    if (code == NPC_EXIT_OK) {
        g_autoptr(GVariant) props = g_variant_get_child_value(reply, 0);
        npc_output_status(&c->out, props);
        g_variant_unref(reply);
    }
    return code;
}

static int run_model_op(Client *c, const char *method, int argc, char **argv)
{
    if (argc != 1) {
        g_printerr("npullm-client: %s NAME\n", method[0] == 'L' ? "load" : "unload");
        return NPC_EXIT_USAGE;
    }
    int code = call_simple(c, MANAGER_PATH, MANAGER_IFACE, method, g_variant_new("(s)", argv[0]), NULL, NULL);
    if (code == NPC_EXIT_OK && c->out.json)
        npc_output_message(&c->out, "done", method);
    return code;
}

static int run_cancel(Client *c, int argc, char **argv)
{
    if (argc != 1 || !g_variant_is_object_path(argv[0])) {
        g_printerr("npullm-client: cancel REQUEST-PATH\n");
        return NPC_EXIT_USAGE;
    }
    return call_simple(c, argv[0], REQUEST_IFACE, "Cancel", NULL, NULL, NULL);
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    Client c = {.exit_code = NPC_EXIT_OK, .out = {.at_line_start = TRUE}};
    g_autoptr(GError) error = NULL;
    (void)NPD_ERROR; /* registers the org.npullm.Error names */

    if (!npc_options_parse(&c.opts, &argc, &argv, &error)) {
        g_printerr("npullm-client: %s\n", error->message);
        npc_options_clear(&c.opts);
        return NPC_EXIT_USAGE;
    }
    c.out.json = c.opts.json;
    c.out.stats = c.opts.stats;
    if (argc < 2) {
        g_printerr("npullm-client: missing command (try --help)\n");
        npc_options_clear(&c.opts);
        return NPC_EXIT_USAGE;
    }
    const char *command = argv[1];
    int cargc = argc - 2;
    char **cargv = argv + 2;
    static const char *const known[] = {"generate", "chat", "describe-image", "models", "status",
                                        "load",     "unload", "cancel",       NULL};
    if (!g_strv_contains(known, command) && !npc_models_is_command(command)) {
        g_printerr("npullm-client: unknown command '%s' (try --help)\n", command);
        npc_options_clear(&c.opts);
        return NPC_EXIT_USAGE;
    }

    if (!connect_bus(&c, &error) || !resolve_daemon(&c, &error)) {
        npc_output_error(&c.out, error);
        int code = npc_exit_code_for_error(error);
        g_clear_object(&c.bus);
        npc_options_clear(&c.opts);
        return code;
    }
    c.loop = g_main_loop_new(NULL, FALSE);
    c.reply = g_string_new(NULL);
    guint sigint = g_unix_signal_add(SIGINT, sigint_cb, &c);

    int code;
    if (strcmp(command, "generate") == 0)
        code = start_generate(&c, cargc, cargv);
    else if (strcmp(command, "describe-image") == 0)
        code = start_describe_image(&c, cargc, cargv);
    else if (strcmp(command, "chat") == 0)
        code = start_chat(&c, cargc, cargv);
    else if (strcmp(command, "models") == 0)
        code = run_models(&c);
    else if (strcmp(command, "status") == 0)
        code = run_status(&c);
    else if (strcmp(command, "load") == 0)
        code = run_model_op(&c, "LoadModel", cargc, cargv);
    else if (strcmp(command, "unload") == 0)
        code = run_model_op(&c, "UnloadModel", cargc, cargv);
    else if (npc_models_is_command(command))
        code = npc_models_run(c.bus, c.daemon, &c.opts, &c.out, command, cargc, cargv);
    else
        code = run_cancel(&c, cargc, cargv);

    if (code < 0) { /* a streaming command: the main loop decides */
        g_main_loop_run(c.loop);
        code = c.exit_code;
    }
    g_source_remove(sigint);
    if (c.signal_sub != 0)
        g_dbus_connection_signal_unsubscribe(c.bus, c.signal_sub);
    g_dbus_connection_flush_sync(c.bus, NULL, NULL);
    g_clear_object(&c.stdin_lines);
    if (c.history != NULL)
        g_ptr_array_unref(c.history);
    g_string_free(c.reply, TRUE);
    g_free(c.request_path);
    g_free(c.daemon);
    g_main_loop_unref(c.loop);
    g_object_unref(c.bus);
    npc_options_clear(&c.opts);
    return code;
}
