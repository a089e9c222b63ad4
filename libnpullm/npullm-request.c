/* NpullmRequest: one generation streamed from npullmd. It listens on its
 * object path for signals from the daemon's unique name only (so a signal
 * forged by another connection is ignored), accumulates the text, and
 * cancels the request when cancelled, when its GCancellable fires or when
 * it is disposed unfinished. */
#include "npullm-request-private.h"

#include <string.h>

#include "npullm-conversation-private.h"
#include "npullm-error.h"
#include "npullm-protocol.h"

/**
 * NpullmRequest:
 *
 * One generation in npullmd: #NpullmRequest::token signals stream its text,
 * #NpullmRequest::finished ends it. A running request keeps itself alive
 * until it has emitted #NpullmRequest::finished, whoever else still holds
 * it: it stops early only through npullm_request_cancel(), the
 * #GCancellable given when it was made, or its #NpullmClient going away.
 *
 * Since: 1.0
 */
struct _NpullmRequest {
    GObject parent;
    GDBusConnection *bus;
    gchar *daemon;
    gchar *path;
    guint subscription;
    GMainContext *context;

    NpullmRequestState state;
    guint queue_position;
    GString *text;
    gchar *finish_reason;
    GVariant *stats;

    gboolean started;          /* the creating call returned the path */
    gboolean held;             /* holds itself from started until finished is emitted */
    gboolean cancel_requested; /* cancel() before started */
    /* Until delivered, signals are held back (the caller cannot have
     * connected yet); pending_from is where the undelivered text starts. */
    gboolean live;
    gsize pending_from;
    GString *thinking;          /* the model's thinking (Thinking signals) */
    gsize thinking_pending_from; /* as pending_from, for thinking */
    GPtrArray *tool_calls;       /* GVariant (sss) of the ToolCall signals */
    guint tool_calls_emitted;    /* as pending_from, for tool calls */

    NpullmConversation *conversation;
    guint reply_index;

    GCancellable *cancellable;
    gulong cancelled_id;
};

GType npullm_request_state_get_type(void)
{
    static gsize type = 0;
    static const GEnumValue values[] = {
        {NPULLM_REQUEST_STATE_QUEUED, "NPULLM_REQUEST_STATE_QUEUED", "queued"},
        {NPULLM_REQUEST_STATE_LOADING, "NPULLM_REQUEST_STATE_LOADING", "loading"},
        {NPULLM_REQUEST_STATE_RUNNING, "NPULLM_REQUEST_STATE_RUNNING", "running"},
        {NPULLM_REQUEST_STATE_FINISHED, "NPULLM_REQUEST_STATE_FINISHED", "finished"},
        {0, NULL, NULL},
    };
    if (g_once_init_enter(&type))
        g_once_init_leave(&type, g_enum_register_static(g_intern_static_string("NpullmRequestState"), values));
    return (GType)type;
}

G_DEFINE_FINAL_TYPE(NpullmRequest, npullm_request, G_TYPE_OBJECT)

enum { PROP_0, PROP_STATE, PROP_QUEUE_POSITION, PROP_TEXT, PROP_FINISH_REASON, PROP_OBJECT_PATH, N_PROPS };
static GParamSpec *props[N_PROPS];
enum { SIGNAL_TOKEN, SIGNAL_FINISHED, SIGNAL_THINKING, SIGNAL_TOOL_CALL, N_SIGNALS };
static guint signals[N_SIGNALS];

static void unsubscribe(NpullmRequest *self)
{
    if (self->subscription != 0)
        g_dbus_connection_signal_unsubscribe(self->bus, self->subscription);
    self->subscription = 0;
    if (self->cancelled_id != 0)
        g_cancellable_disconnect(self->cancellable, self->cancelled_id);
    self->cancelled_id = 0;
}

static void send_cancel(NpullmRequest *self)
{
    /* fire and forget: a request that already finished answers with an
     * error nobody needs */
    g_dbus_connection_call(self->bus, self->daemon, self->path, NPP_REQUEST_IFACE, "Cancel", NULL, NULL,
                           G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, NULL, NULL);
}

static void emit_tool_call(NpullmRequest *self, GVariant *call)
{
    const char *id = NULL, *name = NULL, *arguments = NULL;
    g_variant_get(call, "(&s&s&s)", &id, &name, &arguments);
    g_signal_emit(self, signals[SIGNAL_TOOL_CALL], 0, id, name, arguments);
}

static void emit_pending(NpullmRequest *self)
{
    if (self->thinking_pending_from < self->thinking->len) {
        const char *piece = self->thinking->str + self->thinking_pending_from;
        self->thinking_pending_from = self->thinking->len;
        g_signal_emit(self, signals[SIGNAL_THINKING], 0, piece);
    }
    if (self->pending_from < self->text->len) {
        const char *piece = self->text->str + self->pending_from;
        self->pending_from = self->text->len;
        g_signal_emit(self, signals[SIGNAL_TOKEN], 0, piece);
        g_object_notify_by_pspec(G_OBJECT(self), props[PROP_TEXT]);
    }
    while (self->tool_calls_emitted < self->tool_calls->len)
        emit_tool_call(self, self->tool_calls->pdata[self->tool_calls_emitted++]);
}

/* May free self: the last thing a caller does with it. */
static void release_hold(NpullmRequest *self)
{
    if (!self->held)
        return;
    self->held = FALSE;
    g_object_unref(self);
}

static void finish(NpullmRequest *self, const char *reason, GVariant *stats)
{
    if (self->finish_reason != NULL)
        return;
    unsubscribe(self);
    self->finish_reason = g_strdup(reason);
    self->stats = g_variant_ref_sink(stats);
    self->state = NPULLM_REQUEST_STATE_FINISHED;
    if (self->live) {
        g_object_freeze_notify(G_OBJECT(self));
        g_object_notify_by_pspec(G_OBJECT(self), props[PROP_STATE]);
        g_object_notify_by_pspec(G_OBJECT(self), props[PROP_FINISH_REASON]);
        g_object_thaw_notify(G_OBJECT(self));
        g_signal_emit(self, signals[SIGNAL_FINISHED], 0, self->finish_reason, self->stats);
    }
    /* not yet delivered: whoever delivers it holds it and tells it then */
    release_hold(self);
}

static NpullmRequestState state_from_name(const char *name)
{
    if (strcmp(name, "loading") == 0)
        return NPULLM_REQUEST_STATE_LOADING;
    if (strcmp(name, "running") == 0)
        return NPULLM_REQUEST_STATE_RUNNING;
    if (strcmp(name, "finished") == 0)
        return NPULLM_REQUEST_STATE_FINISHED;
    return NPULLM_REQUEST_STATE_QUEUED;
}

static void properties_changed(NpullmRequest *self, GVariant *params)
{
    g_autoptr(GVariant) changed = g_variant_get_child_value(params, 1);
    const char *state = NULL;
    guint32 position = 0;
    g_object_freeze_notify(G_OBJECT(self));
    /* "finished" comes with the Finished signal */
    if (g_variant_lookup(changed, "State", "&s", &state) && self->finish_reason == NULL &&
        state_from_name(state) != self->state && state_from_name(state) != NPULLM_REQUEST_STATE_FINISHED) {
        self->state = state_from_name(state);
        if (self->live)
            g_object_notify_by_pspec(G_OBJECT(self), props[PROP_STATE]);
    }
    if (g_variant_lookup(changed, "QueuePosition", "u", &position) && position != self->queue_position) {
        self->queue_position = position;
        if (self->live)
            g_object_notify_by_pspec(G_OBJECT(self), props[PROP_QUEUE_POSITION]);
    }
    g_object_thaw_notify(G_OBJECT(self));
}

static void signal_cb(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                      const char *member, GVariant *params, gpointer data)
{
    NpullmRequest *self = data;
    /* the subscription already matches the daemon's unique name; this
     * keeps it so should the match ever be widened */
    if (g_strcmp0(sender, self->daemon) != 0 || self->finish_reason != NULL)
        return;
    if (g_strcmp0(iface, NPP_REQUEST_IFACE) == 0 && g_strcmp0(member, "Token") == 0 &&
        g_variant_is_of_type(params, G_VARIANT_TYPE("(s)"))) {
        const char *text = NULL;
        g_variant_get(params, "(&s)", &text);
        g_string_append(self->text, text);
        if (self->conversation != NULL)
            _npullm_conversation_grow_reply(self->conversation, self->reply_index, text);
        if (self->live) {
            self->pending_from = self->text->len;
            g_signal_emit(self, signals[SIGNAL_TOKEN], 0, text);
            g_object_notify_by_pspec(G_OBJECT(self), props[PROP_TEXT]);
        }
    } else if (g_strcmp0(iface, NPP_REQUEST_IFACE) == 0 && g_strcmp0(member, "Thinking") == 0 &&
               g_variant_is_of_type(params, G_VARIANT_TYPE("(s)"))) {
        const char *text = NULL;
        g_variant_get(params, "(&s)", &text);
        g_string_append(self->thinking, text);
        if (self->live) {
            self->thinking_pending_from = self->thinking->len;
            g_signal_emit(self, signals[SIGNAL_THINKING], 0, text);
        }
    } else if (g_strcmp0(iface, NPP_REQUEST_IFACE) == 0 && g_strcmp0(member, "ToolCall") == 0 &&
               g_variant_is_of_type(params, G_VARIANT_TYPE("(sss)"))) {
        g_ptr_array_add(self->tool_calls, g_variant_ref(params));
        if (self->live)
            emit_tool_call(self, self->tool_calls->pdata[self->tool_calls_emitted++]);
    } else if (g_strcmp0(iface, NPP_REQUEST_IFACE) == 0 && g_strcmp0(member, "Finished") == 0 &&
               g_variant_is_of_type(params, G_VARIANT_TYPE("(sa{sv})"))) {
        const char *reason = NULL;
        GVariant *stats = NULL;
        g_variant_get(params, "(&s@a{sv})", &reason, &stats);
        finish(self, reason, stats);
        g_variant_unref(stats);
    } else if (g_strcmp0(iface, "org.freedesktop.DBus.Properties") == 0 &&
               g_strcmp0(member, "PropertiesChanged") == 0 &&
               g_variant_is_of_type(params, G_VARIANT_TYPE("(sa{sv}as)"))) {
        properties_changed(self, params);
    }
}

static void npullm_request_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    NpullmRequest *self = NPULLM_REQUEST(object);
    switch (id) {
    case PROP_STATE:
        g_value_set_enum(value, self->state);
        break;
    case PROP_QUEUE_POSITION:
        g_value_set_uint(value, self->queue_position);
        break;
    case PROP_TEXT:
        g_value_set_string(value, self->text->str);
        break;
    case PROP_FINISH_REASON:
        g_value_set_string(value, self->finish_reason);
        break;
    case PROP_OBJECT_PATH:
        g_value_set_string(value, self->path);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    }
}

static void npullm_request_dispose(GObject *object)
{
    NpullmRequest *self = NPULLM_REQUEST(object);
    /* only reached unfinished when the creating call's reply was never
     * handed on (it holds itself from then on): do not let it run on */
    if (self->started && self->finish_reason == NULL)
        send_cancel(self);
    unsubscribe(self);
    g_clear_object(&self->conversation);
    g_clear_object(&self->cancellable);
    G_OBJECT_CLASS(npullm_request_parent_class)->dispose(object);
}

static void npullm_request_finalize(GObject *object)
{
    NpullmRequest *self = NPULLM_REQUEST(object);
    g_clear_object(&self->bus);
    g_free(self->daemon);
    g_free(self->path);
    g_string_free(self->text, TRUE);
    g_string_free(self->thinking, TRUE);
    g_ptr_array_unref(self->tool_calls);
    g_free(self->finish_reason);
    g_clear_pointer(&self->stats, g_variant_unref);
    g_main_context_unref(self->context);
    G_OBJECT_CLASS(npullm_request_parent_class)->finalize(object);
}

static void npullm_request_class_init(NpullmRequestClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->get_property = npullm_request_get_property;
    object_class->dispose = npullm_request_dispose;
    object_class->finalize = npullm_request_finalize;
    GParamFlags ro = G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS;
    /**
     * NpullmRequest:state:
     *
     * Queued, loading, running or finished.
     *
     * Since: 1.0
     */
    props[PROP_STATE] = g_param_spec_enum("state", NULL, NULL, NPULLM_TYPE_REQUEST_STATE,
                                          NPULLM_REQUEST_STATE_QUEUED, ro);
    /**
     * NpullmRequest:queue-position:
     *
     * 0 when not queued, otherwise 1 for the next request to start.
     *
     * Since: 1.0
     */
    props[PROP_QUEUE_POSITION] = g_param_spec_uint("queue-position", NULL, NULL, 0, G_MAXUINT, 0, ro);
    /**
     * NpullmRequest:text:
     *
     * All the text generated so far.
     *
     * Since: 1.0
     */
    props[PROP_TEXT] = g_param_spec_string("text", NULL, NULL, "", ro);
    /**
     * NpullmRequest:finish-reason:
     *
     * %NULL until finished, then stop, length, cancelled or error.
     *
     * Since: 1.0
     */
    props[PROP_FINISH_REASON] = g_param_spec_string("finish-reason", NULL, NULL, NULL, ro);
    /**
     * NpullmRequest:object-path:
     *
     * The D-Bus object path of the request in npullmd.
     *
     * Since: 1.0
     */
    props[PROP_OBJECT_PATH] = g_param_spec_string("object-path", NULL, NULL, NULL, ro);
    g_object_class_install_properties(object_class, N_PROPS, props);

    /**
     * NpullmRequest::token:
     * @self: the request
     * @text: a piece of text, always whole UTF-8 characters
     *
     * More text. Concatenating all pieces gives #NpullmRequest:text.
     *
     * Since: 1.0
     */
    signals[SIGNAL_TOKEN] = g_signal_new("token", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                         NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
    /**
     * NpullmRequest::thinking:
     * @self: the request
     * @text: a piece of the model's thinking, always whole UTF-8 characters
     *
     * A reasoning model (Qwen 3) thinks before it answers: that text comes
     * here, not in #NpullmRequest::token or #NpullmRequest:text, so that
     * it can be shown apart or folded away. #NpullmOptions:think turns it
     * on or off where the model's template allows.
     *
     * Since: 1.0
     */
    signals[SIGNAL_THINKING] = g_signal_new("thinking", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                            NULL, NULL, G_TYPE_NONE, 1, G_TYPE_STRING);
    /**
     * NpullmRequest::tool-call:
     * @self: the request
     * @id: the call's id (the model's, or call_N)
     * @name: the function's name
     * @arguments: the arguments, a JSON object's text
     *
     * A complete tool call (a chat with #NpullmOptions:tools), as soon as
     * the model wrote it; the call is not part of #NpullmRequest:text.
     * The request then finishes with reason "tool_calls".
     *
     * Since: 1.0
     */
    signals[SIGNAL_TOOL_CALL] = g_signal_new("tool-call", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                             NULL, NULL, G_TYPE_NONE, 3, G_TYPE_STRING, G_TYPE_STRING,
                                             G_TYPE_STRING);
    /**
     * NpullmRequest::finished:
     * @self: the request
     * @reason: stop, length, cancelled, error or tool_calls
     * @stats: the a{sv} statistics (prompt_tokens, generated_tokens,
     *   tokens_per_second, model, device, ...; error and error_name on
     *   error)
     *
     * The request is done; emitted once.
     *
     * Since: 1.0
     */
    signals[SIGNAL_FINISHED] = g_signal_new("finished", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL,
                                            NULL, NULL, G_TYPE_NONE, 2, G_TYPE_STRING, G_TYPE_VARIANT);
}

static void npullm_request_init(NpullmRequest *self)
{
    self->text = g_string_new(NULL);
    self->thinking = g_string_new(NULL);
    self->tool_calls = g_ptr_array_new_with_free_func((GDestroyNotify)g_variant_unref);
    self->context = g_main_context_ref_thread_default();
}

static gboolean cancel_in_context_cb(gpointer data)
{
    npullm_request_cancel(data);
    return G_SOURCE_REMOVE;
}

static void cancellable_cancelled_cb(GCancellable *cancellable, gpointer data)
{
    NpullmRequest *self = data;
    /* may run in any thread */
    g_main_context_invoke_full(self->context, G_PRIORITY_DEFAULT, cancel_in_context_cb, g_object_ref(self),
                               g_object_unref);
}

NpullmRequest *_npullm_request_new(GDBusConnection *bus, const char *daemon, const char *path,
                                   NpullmConversation *conversation, GCancellable *cancellable)
{
    NpullmRequest *self = g_object_new(NPULLM_TYPE_REQUEST, NULL);
    self->bus = g_object_ref(bus);
    self->daemon = g_strdup(daemon);
    self->path = g_strdup(path);
    if (conversation != NULL)
        self->conversation = g_object_ref(conversation);
    self->subscription = g_dbus_connection_signal_subscribe(bus, daemon, NULL, NULL, path, NULL,
                                                            G_DBUS_SIGNAL_FLAGS_NONE, signal_cb, self, NULL);
    if (cancellable != NULL) {
        self->cancellable = g_object_ref(cancellable);
        self->cancelled_id = g_cancellable_connect(cancellable, G_CALLBACK(cancellable_cancelled_cb), self, NULL);
    }
    return self;
}

void _npullm_request_started(NpullmRequest *self)
{
    self->started = TRUE;
    if (self->finish_reason == NULL) {
        self->held = TRUE;
        g_object_ref(self);
    }
    /* the reply comes before any Token of the request */
    if (self->conversation != NULL)
        self->reply_index = _npullm_conversation_begin_reply(self->conversation);
    if (self->cancel_requested && self->finish_reason == NULL)
        send_cancel(self);
}

void _npullm_request_abandon(NpullmRequest *self)
{
    unsubscribe(self);
}

static gboolean deliver_cb(gpointer data)
{
    NpullmRequest *self = data;
    self->live = TRUE;
    /* what changed while nobody could listen, in the order it happened
     * as far as it matters: the state first, then the text */
    g_object_freeze_notify(G_OBJECT(self));
    g_object_notify_by_pspec(G_OBJECT(self), props[PROP_STATE]);
    g_object_notify_by_pspec(G_OBJECT(self), props[PROP_QUEUE_POSITION]);
    g_object_thaw_notify(G_OBJECT(self));
    emit_pending(self);
    if (self->finish_reason != NULL) {
        g_object_notify_by_pspec(G_OBJECT(self), props[PROP_FINISH_REASON]);
        g_signal_emit(self, signals[SIGNAL_FINISHED], 0, self->finish_reason, self->stats);
    }
    return G_SOURCE_REMOVE;
}

void _npullm_request_deliver(NpullmRequest *self)
{
    GSource *source = g_idle_source_new();
    g_source_set_callback(source, deliver_cb, g_object_ref(self), g_object_unref);
    g_source_attach(source, self->context);
    g_source_unref(source);
}

static GVariant *error_stats(NpullmError code, const char *message)
{
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&b, "{sv}", "error", g_variant_new_string(message));
    g_variant_builder_add(&b, "{sv}", "error_name", g_variant_new_string(npullm_error_to_dbus_name(code)));
    return g_variant_builder_end(&b);
}

void _npullm_request_daemon_gone(NpullmRequest *self, const char *daemon)
{
    if (g_strcmp0(daemon, self->daemon) == 0 && self->finish_reason == NULL)
        finish(self, "error", error_stats(NPULLM_ERROR_INTERNAL, "the service left the bus"));
}

void _npullm_request_client_gone(NpullmRequest *self)
{
    if (!self->started || self->finish_reason != NULL)
        return;
    send_cancel(self);
    finish(self, "cancelled", error_stats(NPULLM_ERROR_CANCELLED, "the client went away"));
}

gboolean _npullm_request_is_finished(NpullmRequest *self)
{
    return self->finish_reason != NULL;
}

/**
 * npullm_request_get_state:
 * @self: the request
 *
 * Gets #NpullmRequest:state.
 *
 * Returns: where the request is
 *
 * Since: 1.0
 */
NpullmRequestState npullm_request_get_state(NpullmRequest *self)
{
    g_return_val_if_fail(NPULLM_IS_REQUEST(self), NPULLM_REQUEST_STATE_FINISHED);
    return self->state;
}

/**
 * npullm_request_get_queue_position:
 * @self: the request
 *
 * Gets #NpullmRequest:queue-position.
 *
 * Returns: 0 when not queued, else 1 for the next request to start
 *
 * Since: 1.0
 */
guint npullm_request_get_queue_position(NpullmRequest *self)
{
    g_return_val_if_fail(NPULLM_IS_REQUEST(self), 0);
    return self->queue_position;
}

/**
 * npullm_request_get_text:
 * @self: the request
 *
 * Gets #NpullmRequest:text.
 *
 * Returns: (transfer none): all the text generated so far
 *
 * Since: 1.0
 */
const char *npullm_request_get_text(NpullmRequest *self)
{
    g_return_val_if_fail(NPULLM_IS_REQUEST(self), NULL);
    return self->text->str;
}

/**
 * npullm_request_get_finish_reason:
 * @self: the request
 *
 * Gets #NpullmRequest:finish-reason.
 *
 * Returns: (transfer none) (nullable): stop, length, cancelled or error;
 *   %NULL while not finished
 *
 * Since: 1.0
 */
const char *npullm_request_get_finish_reason(NpullmRequest *self)
{
    g_return_val_if_fail(NPULLM_IS_REQUEST(self), NULL);
    return self->finish_reason;
}

/**
 * npullm_request_get_stats:
 * @self: the request
 *
 * Gets #NpullmRequest:stats.
 *
 * Returns: (transfer none) (nullable): the a{sv} statistics of the
 *   finished request, %NULL while not finished
 *
 * Since: 1.0
 */
GVariant *npullm_request_get_stats(NpullmRequest *self)
{
    g_return_val_if_fail(NPULLM_IS_REQUEST(self), NULL);
    return self->stats;
}

/**
 * npullm_request_get_object_path:
 * @self: the request
 *
 * Gets #NpullmRequest:object-path.
 *
 * Returns: (transfer none): the D-Bus object path of the request
 *
 * Since: 1.0
 */
const char *npullm_request_get_object_path(NpullmRequest *self)
{
    g_return_val_if_fail(NPULLM_IS_REQUEST(self), NULL);
    return self->path;
}

/**
 * npullm_request_propagate_error:
 * @self: a finished request
 * @error: return location for its error
 *
 * For a request that finished with reason "error" or "cancelled", sets
 * @error (in the %NPULLM_ERROR domain) and returns %FALSE.
 *
 * Returns: %TRUE when the request did not fail
 *
 * Since: 1.0
 */
gboolean npullm_request_propagate_error(NpullmRequest *self, GError **error)
{
    g_return_val_if_fail(NPULLM_IS_REQUEST(self), FALSE);
    if (g_strcmp0(self->finish_reason, "cancelled") == 0) {
        g_set_error_literal(error, NPULLM_ERROR, NPULLM_ERROR_CANCELLED, "the request was cancelled");
        return FALSE;
    }
    if (g_strcmp0(self->finish_reason, "error") != 0)
        return TRUE;
    const char *name = NULL, *message = NULL;
    g_variant_lookup(self->stats, "error_name", "&s", &name);
    g_variant_lookup(self->stats, "error", "&s", &message);
    (void)NPULLM_ERROR; /* the names are registered */
    GError *e = g_dbus_error_new_for_dbus_error(name != NULL ? name : npullm_error_to_dbus_name(NPULLM_ERROR_INTERNAL),
                                                message != NULL ? message : "generation failed");
    g_dbus_error_strip_remote_error(e);
    g_propagate_error(error, e);
    return FALSE;
}

/**
 * npullm_request_cancel:
 * @self: the request
 *
 * Asks the service to stop the request; it then finishes with reason
 * "cancelled" (or its real reason, had it finished already).
 *
 * Since: 1.0
 */
void npullm_request_cancel(NpullmRequest *self)
{
    g_return_if_fail(NPULLM_IS_REQUEST(self));
    if (self->finish_reason != NULL)
        return;
    if (self->started)
        send_cancel(self);
    else
        self->cancel_requested = TRUE;
}
