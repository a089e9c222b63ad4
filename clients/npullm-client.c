/* npullm-client: command-line client of npullmd (org.npullm), a thin
 * program on libnpullm-1: the library does the protocol (activation, the
 * daemon's unique name, request paths known before the call, errors), this
 * file only turns commands into calls and events into output. */
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <gio/gunixinputstream.h>
#include <glib-unix.h>
#include <locale.h>
#include <npullm.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client-embed.h"
#include "client-events.h"
#include "client-models.h"
#include "client-options.h"
#include "npullm-protocol.h"

typedef struct Client Client;

/* Called when a streamed request ends; exit_code is 0 on success. */
typedef void (*StreamDone)(Client *c, int exit_code);

/* The library's finish functions of the streaming calls share this shape. */
typedef NpullmRequest *(*RequestFinish)(NpullmClient *self, GAsyncResult *result, GError **error);

struct Client {
    NpcOptions opts;
    NpcOutput out;
    NpullmClient *lib;
    GMainLoop *loop;
    int exit_code;

    /* the request being streamed */
    gboolean streaming;
    gboolean cancel_requested;
    GCancellable *cancellable; /* cancels the stream (Ctrl-C) */
    RequestFinish finish;      /* of the call that starts it */
    NpullmRequest *request;
    NpullmRequestState shown_state; /* last state event printed */
    guint shown_position;
    StreamDone done;

    /* chat */
    GPtrArray *history; /* gchar* role, content, role, content, ... */
    NpullmConversation *conversation; /* the turn being streamed */
    GDataInputStream *stdin_lines;
    int last_failure;
    GArray *image_fds; /* int: --image files, shown with the first user turn */
};

static void client_quit(Client *c, int code)
{
    c->exit_code = code;
    g_main_loop_quit(c->loop);
}

static GDBusConnection *connect_bus(Client *c, GError **error)
{
    GDBusConnection *bus;
    if (c->opts.address != NULL)
        bus = g_dbus_connection_new_for_address_sync(
            c->opts.address,
            G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION, NULL,
            NULL, error);
    else
        bus = g_bus_get_sync(c->opts.session_bus ? G_BUS_TYPE_SESSION : G_BUS_TYPE_SYSTEM, NULL, error);
    if (bus != NULL)
        g_dbus_connection_set_exit_on_close(bus, FALSE);
    return bus;
}

/* ---- streaming a request ----------------------------------------------- */

static void stream_end(Client *c, int code)
{
    if (c->request != NULL) {
        g_signal_handlers_disconnect_by_data(c->request, c);
        g_clear_object(&c->request);
    }
    g_clear_object(&c->cancellable);
    c->streaming = FALSE;
    c->done(c, code);
}

static int exit_code_for_finish(Client *c, const char *reason, GVariant *stats)
{
    if (strcmp(reason, "stop") == 0 || strcmp(reason, "length") == 0 || strcmp(reason, "tool_calls") == 0)
        return NPC_EXIT_OK;
    if (strcmp(reason, "cancelled") == 0)
        return c->cancel_requested ? NPC_EXIT_INTERRUPTED : NPC_EXIT_ERROR;
    const char *name = NULL;
    g_variant_lookup(stats, "error_name", "&s", &name);
    return npc_exit_code_for_error_name(name);
}

static void on_token(NpullmRequest *r, const char *text, Client *c)
{
    npc_output_token(&c->out, text);
}

static void on_thinking(NpullmRequest *r, const char *text, Client *c)
{
    npc_output_thinking(&c->out, text);
}

static void on_tool_call(NpullmRequest *r, const char *id, const char *name, const char *arguments, Client *c)
{
    npc_output_tool_call(&c->out, id, name, arguments);
}

/* The service reports state and queue position together; print the pair
 * when it changed, as it arrives. */
static void on_state(NpullmRequest *r, GParamSpec *pspec, Client *c)
{
    NpullmRequestState state = npullm_request_get_state(r);
    guint position = npullm_request_get_queue_position(r);
    if (state == c->shown_state && position == c->shown_position)
        return;
    c->shown_state = state;
    c->shown_position = position;
    if (state != NPULLM_REQUEST_STATE_FINISHED) {
        g_autoptr(GEnumClass) states = g_type_class_ref(NPULLM_TYPE_REQUEST_STATE);
        npc_output_state(&c->out, g_enum_get_value(states, state)->value_nick, position);
    }
}

static void on_finished(NpullmRequest *r, const char *reason, GVariant *stats, Client *c)
{
    npc_output_finished(&c->out, reason, stats);
    stream_end(c, exit_code_for_finish(c, reason, stats));
}

static void request_started_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    Client *c = data;
    g_autoptr(GError) error = NULL;
    c->request = c->finish(c->lib, res, &error);
    if (c->request == NULL) {
        if (g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED)) {
            /* Ctrl-C before the service had the request */
            npc_output_end_line(&c->out);
            stream_end(c, NPC_EXIT_INTERRUPTED);
            return;
        }
        npc_output_error(&c->out, error);
        stream_end(c, npc_exit_code_for_error(error));
        return;
    }
    npc_output_request(&c->out, npullm_request_get_object_path(c->request));
    g_signal_connect(c->request, "token", G_CALLBACK(on_token), c);
    g_signal_connect(c->request, "thinking", G_CALLBACK(on_thinking), c);
    g_signal_connect(c->request, "tool-call", G_CALLBACK(on_tool_call), c);
    g_signal_connect(c->request, "notify::state", G_CALLBACK(on_state), c);
    g_signal_connect(c->request, "notify::queue-position", G_CALLBACK(on_state), c);
    g_signal_connect(c->request, "finished", G_CALLBACK(on_finished), c);
}

/* Prepares the stream state; returns the cancellable for the call. */
static GCancellable *stream_begin(Client *c, RequestFinish finish, StreamDone done)
{
    c->streaming = TRUE;
    c->cancel_requested = FALSE;
    c->shown_state = NPULLM_REQUEST_STATE_QUEUED;
    c->shown_position = 0;
    c->done = done;
    c->cancellable = g_cancellable_new();
    c->finish = finish;
    return c->cancellable;
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
        g_cancellable_cancel(c->cancellable);
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
    g_autoptr(NpullmOptions) options = npc_options_to_npullm(&c->opts);
    GCancellable *cancellable = stream_begin(c, npullm_client_generate_finish, single_done);
    npullm_client_generate_async(c->lib, prompt, options, cancellable, request_started_cb, c);
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
    int fd = from_stdin ? STDIN_FILENO : open(argv[0], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        g_printerr("npullm-client: %s: %s\n", argv[0], g_strerror(errno));
        return NPC_EXIT_ERROR;
    }
    g_autoptr(NpullmOptions) options = npc_options_to_npullm(&c->opts);
    GCancellable *cancellable = stream_begin(c, npullm_client_describe_image_fd_finish, single_done);
    /* the library passes its own copy of the descriptor */
    npullm_client_describe_image_fd_async(c->lib, fd, prompt, options, cancellable, request_started_cb, c);
    if (!from_stdin)
        close(fd);
    return -1;
}

/* ---- chat ---------------------------------------------------------------- */

static void chat_prompt(Client *c);

static void chat_turn_done(Client *c, int code)
{
    NpullmConversation *conv = c->conversation;
    if (code == NPC_EXIT_OK) {
        npc_output_end_line(&c->out);
        /* the library appended the reply as the last message */
        guint n = npullm_conversation_get_n_messages(conv);
        g_ptr_array_add(c->history, g_strdup("assistant"));
        g_ptr_array_add(c->history, g_strdup(npullm_conversation_get_content(conv, n - 1)));
    } else {
        /* The turn did not complete: forget the question too. */
        g_ptr_array_set_size(c->history, c->history->len - 2);
        c->last_failure = code;
    }
    g_clear_object(&c->conversation);
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
    g_ptr_array_add(c->history, g_strdup("user"));
    g_ptr_array_add(c->history, g_strdup(line));
    c->conversation = npullm_conversation_new();
    for (guint i = 0; i + 1 < c->history->len; i += 2) {
        npullm_conversation_add_message(c->conversation, c->history->pdata[i], c->history->pdata[i + 1]);
        for (guint k = 0; i == 0 && k < c->image_fds->len; k++) {
            g_autoptr(GError) e = NULL;
            if (!npullm_conversation_add_image_fd(c->conversation, g_array_index(c->image_fds, int, k), &e)) {
                npc_output_message(&c->out, "error", e->message);
                client_quit(c, NPC_EXIT_ERROR);
                return;
            }
        }
    }
    g_autoptr(NpullmOptions) options = npc_options_to_npullm(&c->opts);
    GCancellable *cancellable = stream_begin(c, npullm_client_chat_finish, chat_turn_done);
    npullm_client_chat_async(c->lib, c->conversation, options, cancellable, request_started_cb, c);
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
    for (gchar **f = c->opts.images; f != NULL && *f != NULL; f++) {
        int fd = open(*f, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            g_printerr("npullm-client: %s: %s\n", *f, g_strerror(errno));
            return NPC_EXIT_ERROR;
        }
        g_array_append_val(c->image_fds, fd);
    }
    c->history = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GInputStream) in = g_unix_input_stream_new(STDIN_FILENO, FALSE);
    c->stdin_lines = g_data_input_stream_new(in);
    chat_prompt(c);
    return -1;
}

/* ---- one-shot commands ------------------------------------------------- */

static void store_result(GObject *source, GAsyncResult *res, gpointer data)
{
    *(GAsyncResult **)data = g_object_ref(res);
}

/* Runs the main context until an async call of the library is done. */
static GAsyncResult *wait_result(GAsyncResult **slot)
{
    while (*slot == NULL)
        g_main_context_iteration(NULL, TRUE);
    return *slot;
}

static int report(Client *c, gboolean ok, const GError *error)
{
    if (ok)
        return NPC_EXIT_OK;
    npc_output_error(&c->out, error);
    return npc_exit_code_for_error(error);
}

static int run_models(Client *c, int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    GAsyncResult *res = NULL;
    npullm_client_list_models_async(c->lib, NULL, store_result, &res);
    g_autoptr(GVariant) models = npullm_client_list_models_finish(c->lib, wait_result(&res), &error);
    g_object_unref(res);
    if (models != NULL)
        npc_output_models(&c->out, models);
    return report(c, models != NULL, error);
}

static int run_status(Client *c, int argc, char **argv)
{
    /* in the order of the interface (and of Properties.GetAll) */
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    const gchar *const none[] = {NULL};
    const char *const *loaded = npullm_client_get_loaded_models(c->lib);
    g_variant_builder_add(&b, "{sv}", "Version", g_variant_new_string(npullm_client_get_version(c->lib)));
    g_variant_builder_add(&b, "{sv}", "Device", g_variant_new_string(npullm_client_get_device(c->lib)));
    g_variant_builder_add(&b, "{sv}", "DeviceStatus",
                          g_variant_new_string(npullm_client_get_device_status(c->lib)));
    g_variant_builder_add(&b, "{sv}", "DefaultModel",
                          g_variant_new_string(npullm_client_get_default_model(c->lib)));
    g_variant_builder_add(&b, "{sv}", "LoadedModels", g_variant_new_strv(loaded != NULL ? loaded : none, -1));
    g_variant_builder_add(&b, "{sv}", "ActiveRequests",
                          g_variant_new_uint32(npullm_client_get_active_requests(c->lib)));
    g_variant_builder_add(&b, "{sv}", "QueuedRequests",
                          g_variant_new_uint32(npullm_client_get_queued_requests(c->lib)));
    g_variant_builder_add(&b, "{sv}", "IdleTimeout", g_variant_new_uint32(npullm_client_get_idle_timeout(c->lib)));
    g_autoptr(GVariant) props = g_variant_ref_sink(g_variant_builder_end(&b));
    npc_output_status(&c->out, props);
    return NPC_EXIT_OK;
}

static int run_model_op(Client *c, gboolean load, int argc, char **argv)
{
    const char *method = load ? "LoadModel" : "UnloadModel";
    if (argc != 1) {
        g_printerr("npullm-client: %s NAME\n", load ? "load" : "unload");
        return NPC_EXIT_USAGE;
    }
    g_autoptr(GError) error = NULL;
    GAsyncResult *res = NULL;
    gboolean ok;
    if (load) {
        npullm_client_load_model_async(c->lib, argv[0], NULL, store_result, &res);
        ok = npullm_client_load_model_finish(c->lib, wait_result(&res), &error);
    } else {
        npullm_client_unload_model_async(c->lib, argv[0], NULL, store_result, &res);
        ok = npullm_client_unload_model_finish(c->lib, wait_result(&res), &error);
    }
    g_object_unref(res);
    if (ok && c->out.json)
        npc_output_message(&c->out, "done", method);
    return report(c, ok, error);
}

static int run_load(Client *c, int argc, char **argv)
{
    return run_model_op(c, TRUE, argc, argv);
}

static int run_unload(Client *c, int argc, char **argv)
{
    return run_model_op(c, FALSE, argc, argv);
}

/* ForgetCache: the service drops the conversations it keeps for this
 * user's requests (KV reuse). */
static int run_forget_cache(Client *c, int argc, char **argv)
{
    if (argc != 0) {
        g_printerr("npullm-client: forget-cache takes no arguments\n");
        return NPC_EXIT_USAGE;
    }
    g_autoptr(GError) error = NULL;
    GAsyncResult *res = NULL;
    npullm_client_forget_cache_async(c->lib, NULL, store_result, &res);
    gboolean ok = npullm_client_forget_cache_finish(c->lib, wait_result(&res), &error);
    g_object_unref(res);
    if (ok && c->out.json)
        npc_output_message(&c->out, "done", "ForgetCache");
    return report(c, ok, error);
}

/* A request object by path: the service lets only its creator's
 * connection cancel it (the library's requests cancel themselves). */
static int run_cancel(Client *c, int argc, char **argv)
{
    if (argc != 1 || !g_variant_is_object_path(argv[0])) {
        g_printerr("npullm-client: cancel REQUEST-PATH\n");
        return NPC_EXIT_USAGE;
    }
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) ret = g_dbus_connection_call_sync(
        npullm_client_get_connection(c->lib), NPP_BUS_NAME, argv[0], NPP_REQUEST_IFACE, "Cancel", NULL, NULL,
        G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION, G_MAXINT, NULL, &error);
    if (ret == NULL && error->domain == NPULLM_ERROR)
        g_dbus_error_strip_remote_error(error);
    return report(c, ret != NULL, error);
}

/* add, remove, import-ollama (client-models.c): AddModel's job object
 * signals come from the daemon's unique name. */
static int run_model_library(Client *c, const char *command, int argc, char **argv)
{
    GDBusConnection *bus = npullm_client_get_connection(c->lib);
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) owner = g_dbus_connection_call_sync(
        bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
        g_variant_new("(s)", NPP_BUS_NAME), G_VARIANT_TYPE("(s)"), G_DBUS_CALL_FLAGS_NONE, -1, NULL, &error);
    if (owner == NULL)
        return report(c, FALSE, error);
    const char *daemon = NULL;
    g_variant_get(owner, "(&s)", &daemon);
    return npc_models_run(bus, daemon, &c->opts, &c->out, command, argc, argv);
}

static int run_add(Client *c, int argc, char **argv)
{
    return run_model_library(c, "add", argc, argv);
}

static int run_remove(Client *c, int argc, char **argv)
{
    return run_model_library(c, "remove", argc, argv);
}

static int run_import_ollama(Client *c, int argc, char **argv)
{
    return run_model_library(c, "import-ollama", argc, argv);
}

static int run_embed(Client *c, int argc, char **argv)
{
    return npc_run_embed(c->lib, &c->opts, &c->out, argc, argv);
}

static int run_rerank(Client *c, int argc, char **argv)
{
    return npc_run_rerank(c->lib, &c->opts, &c->out, argc, argv);
}

/* ---- main ---------------------------------------------------------------- */

/* One row per command; run returns an exit status, or -1 when it started
 * a stream and the main loop decides. */
static const struct {
    const char *name;
    int (*run)(Client *c, int argc, char **argv);
} commands[] = {
    {"generate", start_generate},
    {"chat", start_chat},
    {"describe-image", start_describe_image},
    {"models", run_models},
    {"status", run_status},
    {"load", run_load},
    {"unload", run_unload},
    {"forget-cache", run_forget_cache},
    {"cancel", run_cancel},
    {"add", run_add},
    {"remove", run_remove},
    {"import-ollama", run_import_ollama},
    {"embed", run_embed},
    {"rerank", run_rerank},
};

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    Client c = {.exit_code = NPC_EXIT_OK, .out = {.at_line_start = TRUE}};
    g_autoptr(GError) error = NULL;

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
    int (*run)(Client *, int, char **) = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(commands); i++)
        if (strcmp(commands[i].name, command) == 0)
            run = commands[i].run;
    if (run == NULL) {
        g_printerr("npullm-client: unknown command '%s' (try --help)\n", command);
        npc_options_clear(&c.opts);
        return NPC_EXIT_USAGE;
    }
    if (c.opts.images != NULL && run != start_chat) {
        g_printerr("npullm-client: --image is for chat (describe-image takes its file as an argument)\n");
        npc_options_clear(&c.opts);
        return NPC_EXIT_USAGE;
    }

    g_autoptr(GDBusConnection) bus = connect_bus(&c, &error);
    c.lib = bus != NULL ? npullm_client_new_sync(bus, NULL, &error) : NULL;
    if (c.lib == NULL) {
        npc_output_error(&c.out, error);
        int code = npc_exit_code_for_error(error);
        npc_options_clear(&c.opts);
        return code;
    }
    c.image_fds = g_array_new(FALSE, FALSE, sizeof(int));
    c.loop = g_main_loop_new(NULL, FALSE);
    guint sigint = g_unix_signal_add(SIGINT, sigint_cb, &c);

    int code = run(&c, argc - 2, argv + 2);
    if (code < 0) { /* a streaming command: the main loop decides */
        g_main_loop_run(c.loop);
        code = c.exit_code;
    }
    g_source_remove(sigint);
    if (c.request != NULL) {
        g_signal_handlers_disconnect_by_data(c.request, &c);
        g_clear_object(&c.request); /* unfinished (second Ctrl-C): cancels it */
    }
    g_clear_object(&c.cancellable);
    g_clear_object(&c.conversation);
    g_dbus_connection_flush_sync(bus, NULL, NULL);
    g_clear_object(&c.stdin_lines);
    if (c.history != NULL)
        g_ptr_array_unref(c.history);
    for (guint i = 0; i < c.image_fds->len; i++)
        close(g_array_index(c.image_fds, int, i));
    g_array_unref(c.image_fds);
    g_main_loop_unref(c.loop);
    g_object_unref(c.lib);
    npc_options_clear(&c.opts);
    return code;
}
