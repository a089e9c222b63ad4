/* One HTTP request answered by one npullmd request: started through
 * libnpullm, streamed or collected, cancelled when the client goes. */
#include "bridge-job.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bridge-accept.h"
#include "bridge-http.h"

static void job_free(BridgeJob *job)
{
    if (job->hangup_watch != NULL) {
        g_source_destroy(job->hangup_watch);
        g_source_unref(job->hangup_watch);
    }
    if (job->disconnected_id != 0)
        g_signal_handler_disconnect(job->msg, job->disconnected_id);
    if (job->request != NULL) {
        g_signal_handlers_disconnect_by_data(job->request, job);
        /* a request runs on until it finishes or is cancelled */
        npullm_request_cancel(job->request);
    }
    g_clear_object(&job->request);
    g_clear_object(&job->options);
    g_clear_object(&job->conversation);
    g_clear_pointer(&job->image, g_bytes_unref);
    g_clear_pointer(&job->message_images, g_ptr_array_unref);
    g_clear_pointer(&job->tool_calls, g_ptr_array_unref);
    g_string_free(job->thinking, TRUE);
    g_free(job->prompt);
    g_free(job->model);
    if (job->data_free != NULL)
        job->data_free(job->data);
    bridge_release(job->bridge);
    g_object_unref(job->msg);
    g_free(job);
}

static void on_disconnected(SoupServerMessage *msg, BridgeJob *job)
{
    job->gone = TRUE; /* a request not in yet is cancelled by started_cb */
    if (job->request != NULL)
        npullm_request_cancel(job->request);
}

/* libsoup reads nothing from a paused message's connection, so a client
 * that closes it while waiting for a whole answer (or for its first
 * token) would go unnoticed until the end: peek at the socket instead. */
static gboolean on_socket_event(GSocket *socket, GIOCondition condition, gpointer data)
{
    BridgeJob *job = data;
    char c;
    ssize_t n = recv(g_socket_get_fd(socket), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return G_SOURCE_CONTINUE;
    g_clear_pointer(&job->hangup_watch, g_source_unref);
    if (n > 0)
        return G_SOURCE_REMOVE; /* a pipelined next request: the client is there */
    if (job->gone)
        return G_SOURCE_REMOVE;
    g_autoptr(SoupServerMessage) msg = g_object_ref(job->msg);
    if (!job->streaming)
        soup_server_message_set_status(msg, SOUP_STATUS_BAD_REQUEST, NULL);
    on_disconnected(msg, job); /* may end the job */
    /* let libsoup write, find the connection closed and drop it */
    soup_server_message_unpause(msg);
    return G_SOURCE_REMOVE;
}

static void watch_hangup(BridgeJob *job)
{
    GSocket *socket = bridge_accept_socket_of(job->bridge, job->msg);
    if (socket == NULL)
        return;
    job->hangup_watch = g_socket_create_source(socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
    g_source_set_callback(job->hangup_watch, G_SOURCE_FUNC(on_socket_event), job, NULL);
    g_source_attach(job->hangup_watch, NULL);
}

BridgeJob *bridge_job_new(Bridge *bridge, SoupServerMessage *msg, BridgeApi api, const BridgeFormat *format,
                          gboolean stream, const char *model)
{
    BridgeJob *job = g_new0(BridgeJob, 1);
    job->bridge = bridge;
    job->api = api;
    job->format = format;
    job->msg = g_object_ref(msg);
    job->stream = stream;
    job->tool_calls = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    job->thinking = g_string_new(NULL);
    job->model = g_strdup(model != NULL ? model : "");
    job->created = g_get_real_time() / G_USEC_PER_SEC;
    job->start_us = g_get_monotonic_time();
    job->options = npullm_options_new();
    bridge_option_model(job->options, model);
    job->disconnected_id = g_signal_connect(msg, "disconnected", G_CALLBACK(on_disconnected), job);
    bridge_hold(bridge);
    return job;
}

static void write_out(BridgeJob *job, GString *out, gboolean last)
{
    SoupMessageBody *body = soup_server_message_get_response_body(job->msg);
    if (out->len > 0)
        soup_message_body_append(body, SOUP_MEMORY_COPY, out->str, out->len);
    if (last)
        soup_message_body_complete(body);
    soup_server_message_unpause(job->msg);
}

static void begin_stream(BridgeJob *job)
{
    soup_server_message_set_status(job->msg, SOUP_STATUS_OK, NULL);
    SoupMessageHeaders *h = soup_server_message_get_response_headers(job->msg);
    soup_message_headers_set_encoding(h, SOUP_ENCODING_CHUNKED);
    soup_message_headers_set_content_type(h, job->format->stream_content_type, NULL);
    soup_message_headers_replace(h, "Cache-Control", "no-cache");
    soup_message_body_set_accumulate(soup_server_message_get_response_body(job->msg), FALSE);
    job->streaming = TRUE;
    soup_server_message_unpause(job->msg);
}

static void on_token(NpullmRequest *request, const char *text, BridgeJob *job)
{
    if (!job->stream || job->gone)
        return;
    /* the headers wait for the first token: an error before it (a prompt
     * that does not fit, a model that does not load) gets its own status */
    if (!job->streaming)
        begin_stream(job);
    g_autoptr(GString) out = g_string_new(NULL);
    job->format->token(job, text, out);
    write_out(job, out, FALSE);
}

void bridge_job_add_tool_calls(BridgeJob *job, JsonBuilder *b, guint first, guint n)
{
    gboolean openai = job->api == BRIDGE_API_OPENAI;
    json_builder_set_member_name(b, "tool_calls");
    json_builder_begin_array(b);
    for (guint i = first; i < first + n && i < job->tool_calls->len; i++) {
        gchar **call = job->tool_calls->pdata[i];
        json_builder_begin_object(b);
        if (openai) {
            const char *members[][2] = {{"id", call[0]}, {"type", "function"}};
            json_builder_set_member_name(b, "index");
            json_builder_add_int_value(b, i);
            for (gsize k = 0; k < G_N_ELEMENTS(members); k++) {
                json_builder_set_member_name(b, members[k][0]);
                json_builder_add_string_value(b, members[k][1]);
            }
        }
        json_builder_set_member_name(b, "function");
        json_builder_begin_object(b);
        if (!openai) {
            json_builder_set_member_name(b, "index");
            json_builder_add_int_value(b, i);
        }
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, call[1]);
        json_builder_set_member_name(b, "arguments");
        JsonNode *args = openai ? NULL : json_from_string(call[2], NULL);
        if (args != NULL)
            json_builder_add_value(b, args);
        else
            json_builder_add_string_value(b, call[2]);
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

static void on_thinking(NpullmRequest *request, const char *text, BridgeJob *job)
{
    g_string_append(job->thinking, text);
    if (!job->stream || job->gone || job->format->thinking == NULL)
        return;
    if (!job->streaming)
        begin_stream(job);
    g_autoptr(GString) out = g_string_new(NULL);
    job->format->thinking(job, text, out);
    write_out(job, out, FALSE);
}

static void on_tool_call(NpullmRequest *request, const char *id, const char *name, const char *arguments,
                         BridgeJob *job)
{
    const char *call[] = {id, name, arguments, NULL};
    g_ptr_array_add(job->tool_calls, g_strdupv((gchar **)call));
    if (!job->stream || job->gone || job->format->tool_call == NULL)
        return;
    if (!job->streaming)
        begin_stream(job);
    g_autoptr(GString) out = g_string_new(NULL);
    job->format->tool_call(job, job->tool_calls->len - 1, id, name, arguments, out);
    write_out(job, out, FALSE);
}

static void on_finished(NpullmRequest *request, const char *reason, GVariant *stats, BridgeJob *job)
{
    g_debug("%s finished: %s%s", npullm_request_get_object_path(request), reason,
            job->gone ? " (the client disconnected)" : "");
    if (job->gone) {
        job_free(job);
        return;
    }
    g_autoptr(GString) out = g_string_new(NULL);
    if (g_strcmp0(reason, "error") == 0 || g_strcmp0(reason, "cancelled") == 0) {
        const char *message = "the request was cancelled";
        const char *name = NULL;
        g_variant_lookup(stats, "error", "&s", &message);
        g_variant_lookup(stats, "error_name", "&s", &name);
        if (job->streaming) {
            job->format->stream_error(job, message, out);
            write_out(job, out, TRUE);
        } else {
            bridge_reply_error(job->msg, job->api, bridge_status_for_error_name(name), "%s", message);
            soup_server_message_unpause(job->msg);
        }
        job_free(job);
        return;
    }
    if (job->stream && !job->streaming)
        begin_stream(job);
    job->format->finished(job, reason, stats, out);
    if (job->streaming) {
        write_out(job, out, TRUE);
    } else {
        soup_server_message_set_status(job->msg, SOUP_STATUS_OK, NULL);
        soup_server_message_set_response(job->msg, "application/json; charset=utf-8", SOUP_MEMORY_COPY, out->str,
                                         out->len);
        soup_server_message_unpause(job->msg);
    }
    job_free(job);
}

static void start_request(BridgeJob *job);

static void started_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    BridgeJob *job = data;
    NpullmClient *client = NPULLM_CLIENT(source);
    g_autoptr(GError) error = NULL;
    NpullmRequest *request;
    if (job->conversation != NULL)
        request = npullm_client_chat_finish(client, res, &error);
    else if (job->image != NULL)
        request = npullm_client_describe_image_fd_finish(client, res, &error);
    else
        request = npullm_client_generate_finish(client, res, &error);
    if (request == NULL) {
        g_autofree char *model = NULL;
        g_object_get(job->options, "model", &model, NULL);
        if (!job->gone && !job->retried && g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NO_SUCH_MODEL) &&
            model != NULL && g_str_has_suffix(model, ":latest")) {
            /* Ollama clients add the default tag to names that have none */
            job->retried = TRUE;
            model[strlen(model) - strlen(":latest")] = '\0';
            g_object_set(job->options, "model", model, NULL);
            start_request(job);
            return;
        }
        if (!job->gone) {
            bridge_reply_error(job->msg, job->api, bridge_status_for_error(error), "%s", error->message);
            soup_server_message_unpause(job->msg);
        }
        job_free(job);
        return;
    }
    job->request = request;
    if (job->gone && npullm_request_get_state(request) == NPULLM_REQUEST_STATE_FINISHED) {
        job_free(job);
        return;
    }
    g_signal_connect(request, "token", G_CALLBACK(on_token), job);
    g_signal_connect(request, "finished", G_CALLBACK(on_finished), job);
    g_signal_connect(request, "tool-call", G_CALLBACK(on_tool_call), job);
    g_signal_connect(request, "thinking", G_CALLBACK(on_thinking), job);
    if (job->gone) {
        /* the client left before the request was in: its Finished ends the job */
        npullm_request_cancel(request);
        return;
    }
}

static int image_memfd(GBytes *image, GError **error)
{
    int fd = memfd_create("npullm-bridge-image", MFD_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "memfd_create: %s", g_strerror(e));
        return -1;
    }
    gsize len = 0;
    const guint8 *p = g_bytes_get_data(image, &len);
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "writing the image: %s", g_strerror(e));
            return -1;
        }
        p += n;
        len -= (gsize)n;
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

static void start_request(BridgeJob *job)
{
    NpullmClient *client = job->bridge->client;
    if (job->conversation != NULL) {
        npullm_client_chat_async(client, job->conversation, job->options, NULL, started_cb, job);
    } else if (job->image != NULL) {
        g_autoptr(GError) error = NULL;
        int fd = image_memfd(job->image, &error);
        if (fd < 0) {
            bridge_reply_error(job->msg, job->api, SOUP_STATUS_INTERNAL_SERVER_ERROR, "%s", error->message);
            soup_server_message_unpause(job->msg);
            job_free(job);
            return;
        }
        npullm_client_describe_image_fd_async(client, fd, job->prompt, job->options, NULL, started_cb,
                                              job);
        close(fd); /* the library holds its own copy */
    } else {
        npullm_client_generate_async(client, job->prompt, job->options, NULL, started_cb, job);
    }
}

void bridge_job_start(BridgeJob *job)
{
    soup_server_message_pause(job->msg);
    watch_hangup(job);
    start_request(job);
}

guint bridge_stats_uint(GVariant *stats, const char *key)
{
    guint32 v = 0;
    if (stats != NULL)
        g_variant_lookup(stats, key, "u", &v);
    return v;
}

double bridge_stats_double(GVariant *stats, const char *key)
{
    double v = 0;
    if (stats != NULL)
        g_variant_lookup(stats, key, "d", &v);
    return v;
}

void bridge_job_discard(BridgeJob *job)
{
    job_free(job);
}

void bridge_job_reject(BridgeJob *job, SoupServerMessage *msg, BridgeApi api, GError *error)
{
    bridge_reply_error(msg, api, SOUP_STATUS_BAD_REQUEST, "%s", error != NULL ? error->message : "invalid request");
    g_clear_error(&error);
    if (job != NULL)
        job_free(job);
}

static gboolean invalid(GError **error, const char *message)
{
    g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, message);
    return FALSE;
}

/* A message with its tool fields: an assistant's "tool_calls" (passed on
 * as JSON: OpenAI's arguments are text, Ollama's an object; templates
 * take both), a tool result's "tool_call_id" and "name" (Ollama:
 * "tool_name"). */
static gboolean add_message(BridgeJob *job, JsonObject *m, const char *role, const char *text, GError **error)
{
    JsonArray *calls = NULL;
    if (!bridge_json_array(m, "tool_calls", &calls, error))
        return FALSE;
    if (calls != NULL && json_array_get_length(calls) > 0 && strcmp(role, "assistant") == 0) {
        g_autofree char *json = json_to_string(json_object_get_member(m, "tool_calls"), FALSE);
        npullm_conversation_add_tool_calls(job->conversation, text, json);
        return TRUE;
    }
    if (strcmp(role, "tool") != 0) {
        npullm_conversation_add_message(job->conversation, role, text);
        return TRUE;
    }
    const char *id = NULL, *name = NULL, *tool_name = NULL;
    if (!bridge_json_string(m, "tool_call_id", &id, error) || !bridge_json_string(m, "name", &name, error) ||
        !bridge_json_string(m, "tool_name", &tool_name, error))
        return FALSE;
    npullm_conversation_add_tool_result(job->conversation, id, name != NULL ? name : tool_name, text);
    return TRUE;
}

gboolean bridge_job_take_messages(BridgeJob *job, JsonObject *body, BridgeMessageContent content, GError **error)
{
    JsonArray *messages = NULL;
    if (!bridge_json_array(body, "messages", &messages, error))
        return FALSE;
    if (messages == NULL || json_array_get_length(messages) == 0)
        return invalid(error, "\"messages\" must be a non-empty array");
    job->conversation = npullm_conversation_new();
    job->message_images = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    for (guint i = 0; i < json_array_get_length(messages); i++) {
        JsonNode *n = json_array_get_element(messages, i);
        const char *role = NULL;
        if (!JSON_NODE_HOLDS_OBJECT(n))
            return invalid(error, "each message must be an object");
        JsonObject *m = json_node_get_object(n);
        g_autoptr(GString) text = g_string_new(NULL);
        g_ptr_array_set_size(job->message_images, 0);
        if (!bridge_json_string(m, "role", &role, error) || !content(job, m, text, error))
            return FALSE;
        if (g_strcmp0(role, "developer") == 0) /* OpenAI's newer name */
            role = "system";
        if (g_strcmp0(role, "system") != 0 && g_strcmp0(role, "user") != 0 && g_strcmp0(role, "assistant") != 0 &&
            g_strcmp0(role, "tool") != 0)
            return invalid(error, "a message's \"role\" must be system, user, assistant or tool");
        if (!add_message(job, m, role, text->str, error))
            return FALSE;
        for (guint k = 0; k < job->message_images->len; k++) {
            int fd = image_memfd(job->message_images->pdata[k], error);
            gboolean ok = fd >= 0 && npullm_conversation_add_image_fd(job->conversation, fd, error);
            if (fd >= 0)
                close(fd); /* the conversation holds its own copy */
            if (!ok)
                return FALSE;
        }
    }
    g_clear_pointer(&job->message_images, g_ptr_array_unref);
    return TRUE;
}
