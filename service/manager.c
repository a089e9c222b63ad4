/* org.npullm.Manager: validates each call, asks polkit (asynchronously),
 * applies the queue limits and hands the work to the engine worker. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixfdlist.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image-input.h"
#include "model-install.h"

#ifndef NPD_VERSION
#define NPD_VERSION "unknown"
#endif

typedef enum {
    OP_GENERATE,
    OP_CHAT,
    OP_DESCRIBE_IMAGE,
    OP_COMPLETE,
    OP_LOAD,
    OP_UNLOAD,
    OP_SET_IDLE_TIMEOUT,
} Operation;

/* A call waiting for polkit. */
typedef struct {
    NpdDaemon *daemon;
    NpdClient *client; /* reference */
    GDBusMethodInvocation *invocation;
    Operation op;
    NpdRequestOptions opts;
    GPtrArray *messages; /* NpdChatMessage*, chat operations */
    gchar *prompt;       /* raw prompt */
    gchar *model_name;
    gchar *model_path;
    guint idle_timeout;
    int image_fd;  /* DescribeImage: the caller's descriptor until read, else -1 */
    GBytes *image; /* DescribeImage: the encoded image, checked */
} PendingCall;

/* DescribeImage: how long the image descriptor may take to reach its end
 * (a pipe whose writer stalls). */
#define IMAGE_READ_TIMEOUT_S 30
/* DescribeImage with an empty prompt. */
#define DEFAULT_IMAGE_PROMPT "Describe this image."

static void pending_free(PendingCall *p)
{
    p->client->pending_calls--;
    npd_client_release_if_idle(p->daemon, p->client);
    npd_client_unref(p->client);
    npd_request_options_clear(&p->opts);
    if (p->messages != NULL)
        g_ptr_array_unref(p->messages);
    g_free(p->prompt);
    g_free(p->model_name);
    g_free(p->model_path);
    if (p->image_fd >= 0)
        close(p->image_fd);
    if (p->image != NULL)
        g_bytes_unref(p->image);
    g_free(p);
}

static PendingCall *pending_new(void)
{
    PendingCall *p = g_new0(PendingCall, 1);
    p->image_fd = -1;
    return p;
}

static const char *default_model_name(NpdDaemon *d)
{
    if (d->cfg->default_model != NULL && d->cfg->default_model[0] != '\0')
        return d->cfg->default_model;
    const NpdModelEntry *e = npd_model_catalog_default(d->catalog);
    return e != NULL ? e->name : NULL;
}

static gboolean model_is_loaded(NpdDaemon *d, const char *name)
{
    return d->loaded_models != NULL && g_strv_contains((const gchar *const *)d->loaded_models, name);
}

/* ---- request submission ------------------------------------------------ */

static gboolean check_capacity(NpdDaemon *d, NpdClient *c, GError **error)
{
    guint active = 0, queued = 0;
    npd_requests_count(d, &active, &queued);
    if (active + queued >= d->cfg->max_running + d->cfg->max_queued) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "the queue is full (%u running, %u waiting)", active,
                    queued);
        return FALSE;
    }
    if (c->outstanding >= d->cfg->max_per_client) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "too many unfinished requests from this client (limit %u)",
                    d->cfg->max_per_client);
        return FALSE;
    }
    return TRUE;
}

static void submit_request(PendingCall *p)
{
    NpdDaemon *d = p->daemon;
    g_autoptr(GError) error = NULL;
    if (!check_capacity(d, p->client, &error)) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        return;
    }
    g_autofree gchar *node = NULL;
    if (p->opts.handle_token != NULL) {
        node = npd_request_node_for_token(p->client->name, p->opts.handle_token);
        if (g_hash_table_contains(d->request_nodes, node)) {
            g_dbus_method_invocation_return_error_literal(p->invocation, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                                                          "handle_token: already in use by another request");
            return;
        }
    }
    gboolean complete = p->op == OP_COMPLETE;
    NpdRequest *r = npd_request_new(d, p->client, node, p->model_name, complete ? p->invocation : NULL);

    NpdJob *job = g_new0(NpdJob, 1);
    job->id = r->id;
    job->model_name = g_strdup(p->model_name);
    job->model_path = g_strdup(p->model_path);
    job->raw = p->opts.raw;
    job->prompt = g_steal_pointer(&p->prompt);
    job->messages = g_steal_pointer(&p->messages);
    job->sampling = p->opts.sampling;
    if (!p->opts.seed_given)
        job->sampling.seed = ((guint64)g_random_int() << 32) | g_random_int();
    job->max_tokens = p->opts.max_tokens;
    job->stop = g_steal_pointer(&p->opts.stop);
    job->priority = p->opts.priority;
    job->image = g_steal_pointer(&p->image);
    g_debug("request %" G_GUINT64_FORMAT " from %s: model %s, %s", r->id, p->client->name, p->model_name,
            r->path ? r->path : "Complete");
    npd_worker_submit(d->worker, job);

    if (!complete)
        g_dbus_method_invocation_return_value(p->invocation, g_variant_new("(o)", r->path));
    npd_manager_announce(d, FALSE);
    npd_daemon_activity_changed(d);
}

static void emit_idle_timeout_changed(NpdDaemon *d)
{
    GVariantBuilder changed;
    g_variant_builder_init(&changed, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&changed, "{sv}", "IdleTimeout", g_variant_new_uint32(d->idle_timeout));
    g_dbus_connection_emit_signal(d->bus, NULL, NPD_MANAGER_PATH, "org.freedesktop.DBus.Properties",
                                  "PropertiesChanged",
                                  g_variant_new("(sa{sv}as)", NPD_MANAGER_IFACE, &changed, NULL), NULL);
}

static void image_read_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    PendingCall *p = data;
    GError *error = NULL;
    p->image = npd_image_input_read_finish(res, &error);
    if (p->image == NULL) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        g_error_free(error);
    } else if (p->client->gone) {
        g_dbus_method_invocation_return_error_literal(p->invocation, NPD_ERROR, NPD_ERROR_CANCELLED,
                                                      "caller disconnected");
    } else {
        submit_request(p);
    }
    pending_free(p);
}

/* Reads and checks the image off the main loop, then submits. */
static void read_image(PendingCall *p)
{
    int fd = p->image_fd;
    p->image_fd = -1;
    npd_image_input_read_async(fd, p->daemon->cfg->max_image_bytes, IMAGE_READ_TIMEOUT_S, NULL, image_read_cb, p);
}

static void authorized_cb(GError *error, gpointer data)
{
    PendingCall *p = data;
    NpdDaemon *d = p->daemon;
    if (error != NULL) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
    } else if (p->client->gone) {
        /* The caller left while polkit was thinking: nothing to run. */
        g_dbus_method_invocation_return_error_literal(p->invocation, NPD_ERROR, NPD_ERROR_CANCELLED,
                                                      "caller disconnected");
    } else {
        switch (p->op) {
        case OP_GENERATE:
        case OP_CHAT:
        case OP_COMPLETE:
            submit_request(p);
            break;
        case OP_DESCRIBE_IMAGE:
            /* Answered once the image is read and checked. */
            read_image(p);
            return;
        case OP_LOAD:
            /* Answered from npd_manager_handle_command_done. */
            npd_worker_load(d->worker, p->model_name, p->model_path, p->invocation);
            break;
        case OP_UNLOAD:
            npd_worker_unload(d->worker, p->model_name, p->invocation);
            break;
        case OP_SET_IDLE_TIMEOUT:
            d->idle_timeout = p->idle_timeout;
            npd_worker_set_idle_timeout(d->worker, p->idle_timeout);
            g_message("IdleTimeout set to %u s by %s", p->idle_timeout, p->client->name);
            g_dbus_method_invocation_return_value(p->invocation, NULL);
            emit_idle_timeout_changed(d);
            break;
        }
    }
    pending_free(p);
}

/* Takes ownership of the invocation on every path. */
static void authorize_then(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, const char *action)
{
    p->daemon = d;
    p->invocation = inv;
    p->client = npd_client_ref(npd_client_get(d, g_dbus_method_invocation_get_sender(inv)));
    if (p->client->pending_calls >= d->cfg->max_per_client) {
        p->client->pending_calls++;
        g_dbus_method_invocation_return_error_literal(inv, NPD_ERROR, NPD_ERROR_BUSY,
                                                      "too many calls from this client waiting for authorization");
        pending_free(p);
        return;
    }
    p->client->pending_calls++;
    npd_authorizer_check(d->authorizer, inv, action, authorized_cb, p);
}

/* Resolves the model (option or default) and checks max_tokens against
 * its context length. */
static gboolean resolve_model(NpdDaemon *d, PendingCall *p, GError **error)
{
    const char *name = p->opts.model != NULL ? p->opts.model : default_model_name(d);
    if (name == NULL) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_NO_SUCH_MODEL, "no usable models are installed");
        return FALSE;
    }
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, name, error);
    if (e == NULL)
        return FALSE;
    guint32 ctx = e->context_length != 0 ? MIN(e->context_length, d->cfg->max_context) : d->cfg->max_context;
    if (p->opts.max_tokens >= ctx) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "max_tokens: %u does not fit the context of %u tokens of model '%s'", p->opts.max_tokens, ctx,
                    e->name);
        return FALSE;
    }
    p->model_name = g_strdup(e->name);
    p->model_path = g_strdup(e->path);
    return TRUE;
}

static gboolean check_prompt(NpdDaemon *d, const char *prompt, gsize len, GError **error)
{
    if (len > d->cfg->max_prompt_bytes) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "prompt: %zu bytes exceeds the limit of %zu",
                    len, d->cfg->max_prompt_bytes);
        return FALSE;
    }
    return TRUE;
}

static NpdChatMessage *chat_message_new(const char *role, const char *content)
{
    NpdChatMessage *m = g_new0(NpdChatMessage, 1);
    m->role = g_strdup(role);
    m->content = g_strdup(content);
    return m;
}

/* Generate and Complete: one user turn (or a raw prompt). */
static gboolean prepare_single_turn(NpdDaemon *d, PendingCall *p, GVariant *params, NpdCallKind kind,
                                    GError **error)
{
    const char *prompt = NULL;
    gsize len = 0;
    g_autoptr(GVariant) options = NULL;
    g_autoptr(GVariant) prompt_v = g_variant_get_child_value(params, 0);
    prompt = g_variant_get_string(prompt_v, &len);
    options = g_variant_get_child_value(params, 1);
    if (!check_prompt(d, prompt, len, error) || !npd_request_options_parse(options, kind, d->cfg, &p->opts, error))
        return FALSE;
    if (!resolve_model(d, p, error))
        return FALSE;
    if (p->opts.raw) {
        p->prompt = g_strdup(prompt);
        return TRUE;
    }
    p->messages = g_ptr_array_new_with_free_func((GDestroyNotify)npd_chat_message_free);
    if (p->opts.system != NULL)
        g_ptr_array_add(p->messages, chat_message_new("system", p->opts.system));
    g_ptr_array_add(p->messages, chat_message_new("user", prompt));
    return TRUE;
}

static gboolean prepare_chat(NpdDaemon *d, PendingCall *p, GVariant *params, GError **error)
{
    g_autoptr(GVariant) messages = g_variant_get_child_value(params, 0);
    g_autoptr(GVariant) options = g_variant_get_child_value(params, 1);
    if (!npd_request_options_parse(options, NPD_CALL_CHAT, d->cfg, &p->opts, error))
        return FALSE;
    p->messages = npd_chat_messages_parse(messages, d->cfg, error);
    if (p->messages == NULL)
        return FALSE;
    if (p->opts.system != NULL) {
        const NpdChatMessage *first = p->messages->pdata[0];
        if (strcmp(first->role, "system") == 0) {
            g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                                "system: the conversation already starts with a system message");
            return FALSE;
        }
        g_ptr_array_insert(p->messages, 0, chat_message_new("system", p->opts.system));
    }
    return resolve_model(d, p, error);
}

/* The image must come as a readable regular file of sane size or a pipe;
 * the daemon never opens a path itself. Keeps the descriptor in p. */
static gboolean check_image_fd(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                               GError **error)
{
    gint32 index = 0;
    g_variant_get_child(params, 0, "h", &index);
    GUnixFDList *fds = g_dbus_message_get_unix_fd_list(g_dbus_method_invocation_get_message(inv));
    if (fds == NULL || index < 0 || index >= g_unix_fd_list_get_length(fds)) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                            "image: no file descriptor was passed with the call");
        return FALSE;
    }
    g_autoptr(GError) local = NULL;
    int fd = g_unix_fd_list_get(fds, index, &local);
    if (fd < 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: %s", local->message);
        return FALSE;
    }
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    gboolean ok = FALSE;
    if (fstat(fd, &st) != 0 || flags < 0)
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: unusable descriptor: %s",
                    g_strerror(errno));
    else if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: not a regular file or a pipe");
    else if ((flags & O_ACCMODE) == O_WRONLY)
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: descriptor is not readable");
    else if (S_ISREG(st.st_mode) && (st.st_size <= 0 || (guint64)st.st_size > d->cfg->max_image_bytes))
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: %lld bytes, expected 1 to %zu",
                    (long long)st.st_size, d->cfg->max_image_bytes);
    else
        ok = TRUE;
    if (ok)
        p->image_fd = fd;
    else
        close(fd);
    return ok;
}

/* The model must have a vision projector beside it (NAME.mmproj.gguf). */
static gboolean check_vision(NpdDaemon *d, PendingCall *p, GError **error)
{
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, p->model_name, error);
    if (e == NULL)
        return FALSE;
    if (!e->vision) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                    "model '%s' has no vision projector (none of its folder matches it)", e->name);
        return FALSE;
    }
    return TRUE;
}

/* One user turn: the image, then the prompt (a default one when empty). */
static gboolean prepare_describe_image(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p,
                                       GVariant *params, GError **error)
{
    gsize len = 0;
    g_autoptr(GVariant) prompt_v = g_variant_get_child_value(params, 1);
    g_autoptr(GVariant) options = g_variant_get_child_value(params, 2);
    const char *prompt = g_variant_get_string(prompt_v, &len);
    if (!check_image_fd(d, inv, p, params, error) || !check_prompt(d, prompt, len, error) ||
        !npd_request_options_parse(options, NPD_CALL_DESCRIBE_IMAGE, d->cfg, &p->opts, error) ||
        !resolve_model(d, p, error) || !check_vision(d, p, error))
        return FALSE;
    p->messages = g_ptr_array_new_with_free_func((GDestroyNotify)npd_chat_message_free);
    if (p->opts.system != NULL)
        g_ptr_array_add(p->messages, chat_message_new("system", p->opts.system));
    g_ptr_array_add(p->messages, chat_message_new("user", len > 0 ? prompt : DEFAULT_IMAGE_PROMPT));
    return TRUE;
}

/* ---- other methods ------------------------------------------------------ */

static GVariant *list_models(NpdDaemon *d)
{
    g_autoptr(GPtrArray) models = npd_model_catalog_list(d->catalog);
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE("aa{sv}"));
    for (guint i = 0; i < models->len; i++) {
        const NpdModelEntry *e = models->pdata[i];
        g_variant_builder_open(&b, G_VARIANT_TYPE_VARDICT);
        g_variant_builder_add(&b, "{sv}", "name", g_variant_new_string(e->name));
        g_autofree gchar *arch = g_utf8_make_valid(e->architecture, -1);
        g_autofree gchar *quant = g_utf8_make_valid(e->quantization, -1);
        g_variant_builder_add(&b, "{sv}", "architecture", g_variant_new_string(arch));
        g_variant_builder_add(&b, "{sv}", "parameters", g_variant_new_uint64(e->parameters));
        g_variant_builder_add(&b, "{sv}", "quantization", g_variant_new_string(quant));
        g_variant_builder_add(&b, "{sv}", "context_length", g_variant_new_uint32(e->context_length));
        g_variant_builder_add(&b, "{sv}", "vision", g_variant_new_boolean(e->vision));
        g_variant_builder_add(&b, "{sv}", "loaded", g_variant_new_boolean(model_is_loaded(d, e->name)));
        g_variant_builder_add(&b, "{sv}", "file_size", g_variant_new_uint64(e->file_size));
        g_variant_builder_add(&b, "{sv}", "supported", g_variant_new_boolean(e->supported));
        g_variant_builder_add(&b, "{sv}", "reason", g_variant_new_string(e->reason));
        g_variant_builder_close(&b);
    }
    return g_variant_new("(aa{sv})", &b);
}

static gboolean prepare_model_op(NpdDaemon *d, PendingCall *p, GVariant *params, GError **error)
{
    const char *name = NULL;
    g_variant_get(params, "(&s)", &name);
    if (!npd_model_name_valid(name)) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "name: not a valid model name");
        return FALSE;
    }
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, name, error);
    if (e == NULL && !(p->op == OP_UNLOAD && model_is_loaded(d, name)))
        return FALSE;
    g_clear_error(error);
    p->model_name = g_strdup(name);
    p->model_path = e != NULL ? g_strdup(e->path) : NULL;
    return TRUE;
}

static GVariant *manager_property(NpdDaemon *d, const char *prop)
{
    if (g_strcmp0(prop, "Version") == 0)
        return g_variant_new_string(NPD_VERSION);
    if (g_strcmp0(prop, "Device") == 0)
        return g_variant_new_string(d->device);
    if (g_strcmp0(prop, "DeviceStatus") == 0)
        return g_variant_new_string(d->device_status);
    if (g_strcmp0(prop, "DefaultModel") == 0) {
        const char *name = default_model_name(d);
        return g_variant_new_string(name != NULL ? name : "");
    }
    if (g_strcmp0(prop, "LoadedModels") == 0) {
        const gchar *const empty[] = {NULL};
        return g_variant_new_strv(d->loaded_models ? (const gchar *const *)d->loaded_models : empty, -1);
    }
    guint active = 0, queued = 0;
    npd_requests_count(d, &active, &queued);
    if (g_strcmp0(prop, "ActiveRequests") == 0)
        return g_variant_new_uint32(active);
    if (g_strcmp0(prop, "QueuedRequests") == 0)
        return g_variant_new_uint32(queued);
    if (g_strcmp0(prop, "IdleTimeout") == 0)
        return g_variant_new_uint32(d->idle_timeout);
    return NULL;
}

static void handle_set_property(NpdDaemon *d, GDBusMethodInvocation *inv, GVariant *params)
{
    const char *iface = NULL, *prop = NULL;
    g_autoptr(GVariant) value = NULL;
    g_variant_get(params, "(&s&sv)", &iface, &prop, &value);
    if (g_strcmp0(prop, "IdleTimeout") != 0) {
        g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_PROPERTY_READ_ONLY,
                                              "property %s is read-only", prop);
        return;
    }
    if (!g_variant_is_of_type(value, G_VARIANT_TYPE_UINT32) || g_variant_get_uint32(value) > G_MAXINT32) {
        g_dbus_method_invocation_return_error_literal(inv, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                                                      "IdleTimeout: expected a uint32 number of seconds");
        return;
    }
    PendingCall *p = pending_new();
    p->op = OP_SET_IDLE_TIMEOUT;
    p->idle_timeout = g_variant_get_uint32(value);
    authorize_then(d, inv, p, NPD_ACTION_MANAGE);
}

static void manager_method_call(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                                const char *method, GVariant *params, GDBusMethodInvocation *inv, gpointer data)
{
    NpdDaemon *d = data;
    if (g_strcmp0(iface, "org.freedesktop.DBus.Properties") == 0) {
        if (g_strcmp0(method, "Set") == 0)
            handle_set_property(d, inv, params);
        else
            g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD, "no method %s",
                                                  method);
        return;
    }
    if (g_strcmp0(method, "ListModels") == 0) {
        g_dbus_method_invocation_return_value(inv, list_models(d));
        return;
    }
    if (npd_model_install_handle(d, method, inv, params))
        return;

    g_autoptr(GError) error = NULL;
    PendingCall *p = pending_new();
    gboolean ok = FALSE;
    const char *action = NPD_ACTION_GENERATE;
    if (g_strcmp0(method, "Generate") == 0) {
        p->op = OP_GENERATE;
        ok = prepare_single_turn(d, p, params, NPD_CALL_GENERATE, &error);
    } else if (g_strcmp0(method, "Complete") == 0) {
        p->op = OP_COMPLETE;
        ok = prepare_single_turn(d, p, params, NPD_CALL_COMPLETE, &error);
    } else if (g_strcmp0(method, "Chat") == 0) {
        p->op = OP_CHAT;
        ok = prepare_chat(d, p, params, &error);
    } else if (g_strcmp0(method, "DescribeImage") == 0) {
        p->op = OP_DESCRIBE_IMAGE;
        action = NPD_ACTION_DESCRIBE_IMAGE;
        ok = prepare_describe_image(d, inv, p, params, &error);
    } else if (g_strcmp0(method, "LoadModel") == 0 || g_strcmp0(method, "UnloadModel") == 0) {
        p->op = method[0] == 'L' ? OP_LOAD : OP_UNLOAD;
        action = NPD_ACTION_MANAGE;
        ok = prepare_model_op(d, p, params, &error);
    } else {
        g_set_error(&error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD, "no method %s", method);
    }
    if (!ok) {
        g_dbus_method_invocation_return_gerror(inv, error);
        /* pending_free expects a counted client */
        npd_request_options_clear(&p->opts);
        if (p->messages != NULL)
            g_ptr_array_unref(p->messages);
        g_free(p->prompt);
        g_free(p->model_name);
        g_free(p->model_path);
        if (p->image_fd >= 0)
            close(p->image_fd);
        g_free(p);
        return;
    }
    authorize_then(d, inv, p, action);
}

static GVariant *manager_get_property(GDBusConnection *bus, const char *sender, const char *path,
                                      const char *iface, const char *prop, GError **error, gpointer data)
{
    GVariant *v = manager_property(data, prop);
    if (v == NULL)
        g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
    return v;
}

/* set_property is NULL so that Properties.Set reaches method_call, where
 * the polkit check can run asynchronously. */
static const GDBusInterfaceVTable manager_vtable = {
    .method_call = manager_method_call,
    .get_property = manager_get_property,
    .set_property = NULL,
};

void npd_manager_handle_command_done(NpdDaemon *d, const NpdEvent *ev)
{
    GDBusMethodInvocation *inv = ev->tag;
    if (ev->error != NULL)
        g_dbus_method_invocation_return_gerror(inv, ev->error);
    else
        g_dbus_method_invocation_return_value(inv, NULL);
}

void npd_manager_announce(NpdDaemon *d, gboolean models_changed)
{
    guint active = 0, queued = 0;
    npd_requests_count(d, &active, &queued);
    GVariantBuilder changed;
    g_variant_builder_init(&changed, G_VARIANT_TYPE_VARDICT);
    gboolean any = FALSE;
    if (active != d->announced_active) {
        g_variant_builder_add(&changed, "{sv}", "ActiveRequests", g_variant_new_uint32(active));
        d->announced_active = active;
        any = TRUE;
    }
    if (queued != d->announced_queued) {
        g_variant_builder_add(&changed, "{sv}", "QueuedRequests", g_variant_new_uint32(queued));
        d->announced_queued = queued;
        any = TRUE;
    }
    if (models_changed) {
        g_variant_builder_add(&changed, "{sv}", "LoadedModels", manager_property(d, "LoadedModels"));
        any = TRUE;
    }
    if (!any) {
        g_variant_builder_clear(&changed);
        return;
    }
    g_dbus_connection_emit_signal(d->bus, NULL, NPD_MANAGER_PATH, "org.freedesktop.DBus.Properties",
                                  "PropertiesChanged",
                                  g_variant_new("(sa{sv}as)", NPD_MANAGER_IFACE, &changed, NULL), NULL);
}

gboolean npd_manager_register(NpdDaemon *d, GError **error)
{
    d->manager_reg_id = g_dbus_connection_register_object(d->bus, NPD_MANAGER_PATH, d->manager_info,
                                                          &manager_vtable, d, NULL, error);
    return d->manager_reg_id != 0;
}
