/* NpullmClient's requests: Generate, Chat, DescribeImage, and complete on
 * top of Generate. Each request gets a handle_token, so its object path is
 * known before the call; the NpullmRequest subscribes to that path for
 * signals from the daemon's unique name, then the call is made to that
 * unique name (never the well-known one, which a restarted daemon could
 * have taken over in between). */
#include <errno.h>
#include <fcntl.h>
#include <gio/gfiledescriptorbased.h>
#include <gio/gunixfdlist.h>
#include <glib-unix.h>
#include <signal.h>
#include <pthread.h>
#include <unistd.h>

#include "npullm-client-private.h"
#include "npullm-conversation-private.h"
#include "npullm-error-private.h"
#include "npullm-options-private.h"
#include "npullm-protocol.h"
#include "npullm-request-private.h"

typedef struct {
    gchar *method;
    GPtrArray *args; /* GVariant* (sunk): the arguments before the options */
    NpullmOptions *options;
    GUnixFDList *fds;
    NpullmConversation *conversation;
    NpullmRequest *request;
    gboolean activated; /* the service was asked to start */
    GError *invalid;    /* an argument that cannot be sent: the task fails with it */
} StartData;

static void start_data_free(StartData *s)
{
    g_free(s->method);
    g_ptr_array_unref(s->args);
    g_clear_object(&s->options);
    g_clear_object(&s->fds);
    g_clear_object(&s->conversation);
    g_clear_object(&s->request);
    g_clear_error(&s->invalid);
    g_free(s);
}

static StartData *start_data_new(const char *method, NpullmOptions *options)
{
    StartData *s = g_new0(StartData, 1);
    s->method = g_strdup(method);
    s->args = g_ptr_array_new_with_free_func((GDestroyNotify)g_variant_unref);
    s->options = options != NULL ? g_object_ref(options) : NULL;
    return s;
}

static void add_arg(StartData *s, GVariant *v)
{
    g_ptr_array_add(s->args, g_variant_ref_sink(v));
}

/* D-Bus strings are UTF-8: other text is refused with an error, never
 * handed to GVariant (which would only log a critical). */
static void add_text(StartData *s, const char *what, const char *text)
{
    if (!g_utf8_validate(text, -1, NULL)) {
        if (s->invalid == NULL)
            s->invalid = g_error_new(NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "the %s is not valid UTF-8", what);
        text = "";
    }
    add_arg(s, g_variant_new_string(text));
}

static void fail(GTask *task, GError *error)
{
    _npullm_error_strip_remote(error);
    g_task_return_error(task, error);
    g_object_unref(task);
}

static void call_reply_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    StartData *s = g_task_get_task_data(task);
    GError *error = NULL;
    g_autoptr(GVariant) ret =
        g_dbus_connection_call_with_unix_fd_list_finish(G_DBUS_CONNECTION(source), NULL, res, &error);
    if (ret == NULL) {
        _npullm_request_abandon(s->request);
        fail(task, error);
        return;
    }
    const char *path = NULL;
    g_variant_get(ret, "(&o)", &path);
    if (g_strcmp0(path, npullm_request_get_object_path(s->request)) != 0) {
        /* a service that ignored handle_token: its signals went elsewhere */
        _npullm_request_abandon(s->request);
        fail(task, g_error_new(NPULLM_ERROR, NPULLM_ERROR_INTERNAL,
                               "the service returned an unexpected request path %s", path));
        return;
    }
    _npullm_request_started(s->request);
    g_task_return_pointer(task, g_object_ref(s->request), g_object_unref);
    g_object_unref(task);
}

static void make_call(GTask *task, const char *owner)
{
    static gint counter = 0;
    NpullmClient *self = g_task_get_source_object(task);
    StartData *s = g_task_get_task_data(task);
    GDBusConnection *bus = npullm_client_get_connection(self);
    /* unique per connection, whatever number of clients share it */
    g_autofree gchar *token = g_strdup_printf("libnpullm%u", (guint)g_atomic_int_add(&counter, 1));
    g_autofree gchar *path = npp_request_path_for_token(g_dbus_connection_get_unique_name(bus), token);
    s->request = _npullm_request_new(bus, owner, path, s->conversation, g_task_get_cancellable(task));
    _npullm_client_track(self, s->request);

    GVariantBuilder params;
    g_variant_builder_init(&params, G_VARIANT_TYPE_TUPLE);
    for (guint i = 0; i < s->args->len; i++)
        g_variant_builder_add_value(&params, s->args->pdata[i]);
    g_variant_builder_add_value(&params, _npullm_options_to_variant(s->options, token));
    /* not cancellable: a request the service created must be cancelled
     * through it, which the request does once the reply is in */
    g_dbus_connection_call_with_unix_fd_list(bus, owner, NPP_MANAGER_PATH, NPP_MANAGER_IFACE, s->method,
                                             g_variant_builder_end(&params), G_VARIANT_TYPE("(o)"),
                                             G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION, G_MAXINT, s->fds,
                                             NULL, call_reply_cb, task);
}

static void resolve_owner(GTask *task);

static void ping_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    GError *error = NULL;
    g_autoptr(GVariant) ret = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res, &error);
    if (ret == NULL) {
        fail(task, error);
        return;
    }
    resolve_owner(task);
}

static void owner_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    StartData *s = g_task_get_task_data(task);
    GError *error = NULL;
    g_autoptr(GVariant) ret = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res, &error);
    if (ret == NULL && !s->activated && g_error_matches(error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER)) {
        /* not running: Peer.Ping through the well-known name starts it */
        g_error_free(error);
        s->activated = TRUE;
        g_dbus_connection_call(G_DBUS_CONNECTION(source), NPP_BUS_NAME, NPP_MANAGER_PATH,
                               "org.freedesktop.DBus.Peer", "Ping", NULL, NULL, G_DBUS_CALL_FLAGS_NONE, -1,
                               g_task_get_cancellable(task), ping_cb, task);
        return;
    }
    if (ret == NULL) {
        fail(task, error);
        return;
    }
    if (g_task_return_error_if_cancelled(task)) {
        g_object_unref(task);
        return;
    }
    const char *owner = NULL;
    g_variant_get(ret, "(&s)", &owner);
    make_call(task, owner);
}

/* The owner is asked each time: the daemon may have restarted since. */
static void resolve_owner(GTask *task)
{
    NpullmClient *self = g_task_get_source_object(task);
    g_dbus_connection_call(npullm_client_get_connection(self), "org.freedesktop.DBus", "/org/freedesktop/DBus",
                           "org.freedesktop.DBus", "GetNameOwner", g_variant_new("(s)", NPP_BUS_NAME),
                           G_VARIANT_TYPE("(s)"), G_DBUS_CALL_FLAGS_NONE, -1, g_task_get_cancellable(task),
                           owner_cb, task);
}

static void start(NpullmClient *self, gpointer tag, StartData *s, GCancellable *cancellable,
                  GAsyncReadyCallback callback, gpointer user_data)
{
    GTask *task = g_task_new(self, cancellable, callback, user_data);
    g_task_set_source_tag(task, tag);
    g_task_set_task_data(task, s, (GDestroyNotify)start_data_free);
    if (s->invalid == NULL)
        _npullm_options_check(s->options, &s->invalid);
    if (s->invalid != NULL) {
        g_task_return_error(task, g_steal_pointer(&s->invalid));
        g_object_unref(task);
        return;
    }
    if (g_task_return_error_if_cancelled(task)) {
        g_object_unref(task);
        return;
    }
    resolve_owner(task);
}

static NpullmRequest *request_finish(NpullmClient *self, GAsyncResult *result, gpointer tag, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), NULL);
    g_return_val_if_fail(g_task_get_source_tag(G_TASK(result)) == tag, NULL);
    NpullmRequest *request = g_task_propagate_pointer(G_TASK(result), error);
    if (request != NULL)
        _npullm_request_deliver(request);
    return request;
}

/**
 * npullm_client_generate_async:
 * @self: the client
 * @prompt: one user turn (the model's chat template is applied unless
 *   #NpullmOptions:raw is set)
 * @options: (nullable): options, %NULL for the service's defaults
 * @cancellable: (nullable): cancels the request, also once it runs
 * @callback: (scope async): called when the request was created
 * @user_data: data for @callback
 *
 * Starts a generation. npullm_client_generate_finish() gives the
 * #NpullmRequest, whose #NpullmRequest::token signals stream the text.
 *
 * Since: 1.0
 */
void npullm_client_generate_async(NpullmClient *self, const char *prompt, NpullmOptions *options,
                                  GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && prompt != NULL);
    StartData *s = start_data_new("Generate", options);
    add_text(s, "prompt", prompt);
    start(self, npullm_client_generate_async, s, cancellable, callback, user_data);
}

/**
 * npullm_client_generate_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_generate_async().
 *
 * Returns: (transfer full) (nullable): the running request, or %NULL with
 *   @error set. Text that arrived before this returned is emitted as one
 *   #NpullmRequest::token from an idle callback, so connect right away.
 *
 * Since: 1.0
 */
NpullmRequest *npullm_client_generate_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return request_finish(self, result, npullm_client_generate_async, error);
}

/**
 * npullm_client_chat_async:
 * @self: the client
 * @conversation: the messages so far; the reply is appended to it as an
 *   assistant message that grows as it streams
 * @options: (nullable): options, %NULL for the service's defaults
 * @cancellable: (nullable): cancels the request, also once it runs
 * @callback: (scope async): called when the request was created
 * @user_data: data for @callback
 *
 * Continues a conversation.
 *
 * Since: 1.0
 */
void npullm_client_chat_async(NpullmClient *self, NpullmConversation *conversation, NpullmOptions *options,
                              GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && NPULLM_IS_CONVERSATION(conversation));
    StartData *s = start_data_new("Chat", options);
    if (_npullm_conversation_check(conversation, &s->invalid))
        add_arg(s, _npullm_conversation_to_variant(conversation, &s->fds));
    s->conversation = g_object_ref(conversation);
    start(self, npullm_client_chat_async, s, cancellable, callback, user_data);
}

/**
 * npullm_client_chat_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_chat_async().
 *
 * Returns: (transfer full) (nullable): the running request, or %NULL with
 *   @error set
 *
 * Since: 1.0
 */
NpullmRequest *npullm_client_chat_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return request_finish(self, result, npullm_client_chat_async, error);
}

/* ---- images: always a descriptor, never a path ----------------------------- */

static void start_describe(NpullmClient *self, gpointer tag, int fd, const char *prompt, NpullmOptions *options,
                           GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    StartData *s = start_data_new("DescribeImage", options);
    s->fds = g_unix_fd_list_new_from_array(&fd, 1); /* takes fd */
    add_arg(s, g_variant_new_handle(0));
    add_text(s, "prompt", prompt != NULL ? prompt : "");
    start(self, tag, s, cancellable, callback, user_data);
}

static void fail_early(NpullmClient *self, gpointer tag, GError *error, GAsyncReadyCallback callback,
                       gpointer user_data)
{
    GTask *task = g_task_new(self, NULL, callback, user_data);
    g_task_set_source_tag(task, tag);
    g_task_return_error(task, error);
    g_object_unref(task);
}

/* A stream that is not a descriptor is copied into a pipe by a thread;
 * SIGPIPE is blocked there, so a service that stops reading early gives
 * EPIPE instead of killing the program. */
static void pump_in_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    GInputStream *in = source;
    int fd = GPOINTER_TO_INT(data);
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    gboolean broken = FALSE;
    char buf[16384];
    for (;;) {
        gssize n = g_input_stream_read(in, buf, sizeof buf, NULL, NULL);
        if (n <= 0)
            break;
        for (gssize off = 0; off < n && !broken;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                broken = TRUE;
                break;
            }
            off += w;
        }
        if (broken)
            break;
    }
    close(fd);
    if (broken) {
        /* consume the SIGPIPE that EPIPE left pending for this thread */
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) > 0) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    g_task_return_boolean(task, TRUE);
}

/* Takes nothing; returns a descriptor the caller owns, or -1. */
static int descriptor_for_stream(GInputStream *stream, GError **error)
{
    if (G_IS_FILE_DESCRIPTOR_BASED(stream)) {
        int fd = fcntl(g_file_descriptor_based_get_fd(G_FILE_DESCRIPTOR_BASED(stream)), F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "image: %s", g_strerror(errno));
        return fd;
    }
    int pipe_fds[2];
    if (!g_unix_open_pipe(pipe_fds, FD_CLOEXEC, error))
        return -1;
    GTask *pump = g_task_new(stream, NULL, NULL, NULL);
    g_task_set_task_data(pump, GINT_TO_POINTER(pipe_fds[1]), NULL);
    g_task_run_in_thread(pump, pump_in_thread);
    g_object_unref(pump);
    return pipe_fds[0];
}

/**
 * npullm_client_describe_image_stream_async:
 * @self: the client
 * @image: the encoded image (PNG, JPEG, WebP); a stream on a descriptor
 *   is passed as it is, any other is copied into a pipe
 * @prompt: (nullable): the question, %NULL or "" for a description
 * @options: (nullable): options, %NULL for the service's defaults
 * @cancellable: (nullable): cancels the request, also once it runs
 * @callback: (scope async): called when the request was created
 * @user_data: data for @callback
 *
 * Asks a vision model about an image, passed to the service as a file
 * descriptor.
 *
 * Since: 1.0
 */
void npullm_client_describe_image_stream_async(NpullmClient *self, GInputStream *image, const char *prompt,
                                               NpullmOptions *options, GCancellable *cancellable,
                                               GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && G_IS_INPUT_STREAM(image));
    GError *error = NULL;
    int fd = descriptor_for_stream(image, &error);
    if (fd < 0) {
        fail_early(self, npullm_client_describe_image_stream_async, error, callback, user_data);
        return;
    }
    start_describe(self, npullm_client_describe_image_stream_async, fd, prompt, options, cancellable, callback,
                   user_data);
}

/**
 * npullm_client_describe_image_stream_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_describe_image_stream_async().
 *
 * Returns: (transfer full) (nullable): the running request, or %NULL with
 *   @error set
 *
 * Since: 1.0
 */
NpullmRequest *npullm_client_describe_image_stream_finish(NpullmClient *self, GAsyncResult *result,
                                                          GError **error)
{
    return request_finish(self, result, npullm_client_describe_image_stream_async, error);
}

/**
 * npullm_client_describe_image_fd_async:
 * @self: the client
 * @fd: a readable descriptor of a regular file or a pipe (duplicated; the
 *   caller keeps its own)
 * @prompt: (nullable): the question, %NULL or "" for a description
 * @options: (nullable): options, %NULL for the service's defaults
 * @cancellable: (nullable): cancels the request, also once it runs
 * @callback: (scope async): called when the request was created
 * @user_data: data for @callback
 *
 * Like npullm_client_describe_image_stream_async() for a descriptor.
 *
 * Since: 1.0
 */
void npullm_client_describe_image_fd_async(NpullmClient *self, int fd, const char *prompt, NpullmOptions *options,
                                           GCancellable *cancellable, GAsyncReadyCallback callback,
                                           gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self));
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (copy < 0) {
        int e = errno;
        fail_early(self, npullm_client_describe_image_fd_async,
                   g_error_new(G_IO_ERROR, g_io_error_from_errno(e), "image: %s", g_strerror(e)), callback,
                   user_data);
        return;
    }
    start_describe(self, npullm_client_describe_image_fd_async, copy, prompt, options, cancellable, callback,
                   user_data);
}

/**
 * npullm_client_describe_image_fd_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_describe_image_fd_async().
 *
 * Returns: (transfer full) (nullable): the running request, or %NULL with
 *   @error set
 *
 * Since: 1.0
 */
NpullmRequest *npullm_client_describe_image_fd_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return request_finish(self, result, npullm_client_describe_image_fd_async, error);
}

typedef struct {
    gchar *prompt;
    NpullmOptions *options;
    GCancellable *cancellable;
} DescribeFileData;

static void describe_file_data_free(DescribeFileData *f)
{
    g_free(f->prompt);
    g_clear_object(&f->options);
    g_clear_object(&f->cancellable);
    g_free(f);
}

static void describe_started_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    g_autoptr(GTask) task = data;
    GError *error = NULL;
    /* the inner task's request goes out through this one */
    NpullmRequest *request = g_task_propagate_pointer(G_TASK(res), &error);
    if (request == NULL)
        g_task_return_error(task, error);
    else
        g_task_return_pointer(task, request, g_object_unref);
}

static void file_read_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    NpullmClient *self = g_task_get_source_object(task);
    DescribeFileData *f = g_task_get_task_data(task);
    GError *error = NULL;
    g_autoptr(GFileInputStream) stream = g_file_read_finish(G_FILE(source), res, &error);
    int fd = stream != NULL ? descriptor_for_stream(G_INPUT_STREAM(stream), &error) : -1;
    if (fd < 0) {
        g_task_return_error(task, error);
        g_object_unref(task);
        return;
    }
    start_describe(self, npullm_client_describe_image_async, fd, f->prompt, f->options, f->cancellable,
                   describe_started_cb, task);
}

/**
 * npullm_client_describe_image_async:
 * @self: the client
 * @image: the image file, opened here and passed as a descriptor
 * @prompt: (nullable): the question, %NULL or "" for a description
 * @options: (nullable): options, %NULL for the service's defaults
 * @cancellable: (nullable): cancels the request, also once it runs
 * @callback: (scope async): called when the request was created
 * @user_data: data for @callback
 *
 * Like npullm_client_describe_image_stream_async() for a file.
 *
 * Since: 1.0
 */
void npullm_client_describe_image_async(NpullmClient *self, GFile *image, const char *prompt,
                                        NpullmOptions *options, GCancellable *cancellable,
                                        GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && G_IS_FILE(image));
    GTask *task = g_task_new(self, cancellable, callback, user_data);
    g_task_set_source_tag(task, npullm_client_describe_image_async);
    DescribeFileData *f = g_new0(DescribeFileData, 1);
    f->prompt = g_strdup(prompt);
    f->options = options != NULL ? g_object_ref(options) : NULL;
    f->cancellable = cancellable != NULL ? g_object_ref(cancellable) : NULL;
    g_task_set_task_data(task, f, (GDestroyNotify)describe_file_data_free);
    g_file_read_async(image, G_PRIORITY_DEFAULT, cancellable, file_read_cb, task);
}

/**
 * npullm_client_describe_image_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_describe_image_async().
 *
 * Returns: (transfer full) (nullable): the running request, or %NULL with
 *   @error set
 *
 * Since: 1.0
 */
NpullmRequest *npullm_client_describe_image_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), NULL);
    NpullmRequest *request = g_task_propagate_pointer(G_TASK(result), error);
    if (request != NULL)
        _npullm_request_deliver(request);
    return request;
}

/* ---- complete: the whole text ------------------------------------------------ */

static void complete_finished_cb(NpullmRequest *request, const char *reason, GVariant *stats, gpointer data)
{
    GTask *task = data;
    GError *error = NULL;
    g_signal_handlers_disconnect_by_data(request, task);
    if (npullm_request_propagate_error(request, &error))
        g_task_return_pointer(task, g_strdup(npullm_request_get_text(request)), g_free);
    else
        g_task_return_error(task, error);
    g_object_unref(task);
}

static void complete_started_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    GTask *task = data;
    GError *error = NULL;
    g_autoptr(NpullmRequest) request = npullm_client_generate_finish(NPULLM_CLIENT(source), res, &error);
    if (request == NULL) {
        g_task_return_error(task, error);
        g_object_unref(task);
        return;
    }
    /* the task keeps the request alive (and running) until it finishes */
    g_task_set_task_data(task, g_object_ref(request), g_object_unref);
    g_signal_connect(request, "finished", G_CALLBACK(complete_finished_cb), task);
}

/**
 * npullm_client_complete_async:
 * @self: the client
 * @prompt: one user turn
 * @options: (nullable): options, %NULL for the service's defaults
 * @cancellable: (nullable): cancels the generation
 * @callback: (scope async): called with the whole text
 * @user_data: data for @callback
 *
 * Generates and gives the whole text at the end.
 *
 * Since: 1.0
 */
void npullm_client_complete_async(NpullmClient *self, const char *prompt, NpullmOptions *options,
                                  GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && prompt != NULL);
    GTask *task = g_task_new(self, cancellable, callback, user_data);
    g_task_set_source_tag(task, npullm_client_complete_async);
    npullm_client_generate_async(self, prompt, options, cancellable, complete_started_cb, task);
}

/**
 * npullm_client_complete_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_complete_async().
 *
 * Returns: (transfer full) (nullable): the generated text, or %NULL with
 *   @error set (%NPULLM_ERROR_CANCELLED when cancelled)
 *
 * Since: 1.0
 */
char *npullm_client_complete_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), NULL);
    return g_task_propagate_pointer(G_TASK(result), error);
}
