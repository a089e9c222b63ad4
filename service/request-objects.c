/* org.npullm.Request objects. They live in one D-Bus subtree so that
 * enumeration and introspection can depend on the caller: each client sees
 * only its own requests, every signal goes unicast to the owner, and only
 * the owner may call Cancel or read the properties. */
#include "daemon.h"

#include "call-fds.h"

#include <string.h>

/* Finished requests stay readable (State "finished") this long. */
#define LINGER_SECONDS 30

/* The State property's values (org.npullm.Request). */
static const char *const state_names[] = {
    [NPD_JOB_QUEUED] = "queued",
    [NPD_JOB_LOADING] = "loading",
    [NPD_JOB_RUNNING] = "running",
    [NPD_JOB_FINISHED] = "finished",
};

static const char *state_name(NpdJobState state)
{
    return (guint)state < G_N_ELEMENTS(state_names) ? state_names[state] : "finished";
}

/* ---- unicast emission ---------------------------------------------------- */

static void emit_to_owner(NpdRequest *r, const char *iface, const char *signal, GVariant *params)
{
    g_autoptr(GError) error = NULL;
    if (r->path == NULL || r->client->gone) {
        g_variant_unref(g_variant_ref_sink(params));
        return;
    }
    if (!g_dbus_connection_emit_signal(r->daemon->bus, r->client->name, r->path, iface, signal, params, &error))
        g_debug("emitting %s to %s failed: %s", signal, r->client->name, error->message);
}

static void emit_state_changed(NpdRequest *r)
{
    GVariantBuilder changed;
    g_variant_builder_init(&changed, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&changed, "{sv}", "State", g_variant_new_string(state_name(r->state)));
    g_variant_builder_add(&changed, "{sv}", "QueuePosition", g_variant_new_uint32(r->queue_position));
    emit_to_owner(r, "org.freedesktop.DBus.Properties", "PropertiesChanged",
                  g_variant_new("(sa{sv}as)", NPD_REQUEST_IFACE, &changed, NULL));
}

static gchar *valid_utf8(const char *text, gssize len)
{
    if (len < 0)
        len = (gssize)strlen(text);
    if (g_utf8_validate(text, len, NULL))
        return g_strndup(text, (gsize)len);
    return g_utf8_make_valid(text, len);
}

static GVariant *stats_variant(const NpdRequest *r, const NpdEvent *ev)
{
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&b, "{sv}", "prompt_tokens", g_variant_new_uint32(ev->stats.prompt_tokens));
    g_variant_builder_add(&b, "{sv}", "cached_tokens", g_variant_new_uint32(ev->stats.cached_tokens));
    g_variant_builder_add(&b, "{sv}", "encoded_images", g_variant_new_uint32(ev->stats.encoded_images));
    g_variant_builder_add(&b, "{sv}", "generated_tokens", g_variant_new_uint32(ev->stats.generated_tokens));
    g_variant_builder_add(&b, "{sv}", "time_to_first_token_ms",
                          g_variant_new_double(ev->stats.time_to_first_token_ms));
    g_variant_builder_add(&b, "{sv}", "tokens_per_second", g_variant_new_double(ev->stats.tokens_per_second));
    g_variant_builder_add(&b, "{sv}", "total_time_ms", g_variant_new_double(ev->stats.total_time_ms));
    g_variant_builder_add(&b, "{sv}", "device", g_variant_new_string(r->daemon->device->device));
    npd_job_stats_add_phases(&b, &ev->stats);
    g_variant_builder_add(&b, "{sv}", "model", g_variant_new_string(r->model));
    g_variant_builder_add(&b, "{sv}", "seed", g_variant_new_uint64(ev->stats.seed));
    if (ev->error != NULL) {
        g_autofree gchar *message = valid_utf8(ev->error->message, -1);
        g_variant_builder_add(&b, "{sv}", "error", g_variant_new_string(message));
        const char *name = ev->error->domain == NPD_ERROR ? npd_error_dbus_name((NpdError)ev->error->code)
                                                          : npd_error_dbus_name(NPD_ERROR_INTERNAL);
        g_variant_builder_add(&b, "{sv}", "error_name", g_variant_new_string(name));
    }
    return g_variant_builder_end(&b);
}

static gboolean linger_done_cb(gpointer data)
{
    NpdRequest *r = data;
    r->linger_id = 0;
    npd_request_destroy(r);
    return G_SOURCE_REMOVE;
}

static void request_finished(NpdRequest *r, const NpdEvent *ev)
{
    npd_request_mark_finished(r);
    if (r->complete != NULL) {
        GDBusMethodInvocation *inv = g_steal_pointer(&r->complete);
        if (ev->reason == NPD_FINISH_ERROR && ev->error != NULL) {
            g_dbus_method_invocation_return_gerror(inv, ev->error);
        } else if (ev->reason == NPD_FINISH_CANCELLED) {
            g_dbus_method_invocation_return_error_literal(inv, NPD_ERROR, NPD_ERROR_CANCELLED,
                                                          "request cancelled");
        } else if (r->reply != NULL) {
            g_dbus_method_invocation_return_value(inv, r->reply(r, ev));
        } else {
            GVariantBuilder info;
            g_variant_builder_init(&info, G_VARIANT_TYPE_VARDICT);
            g_variant_builder_add(&info, "{sv}", "reason",
                                  g_variant_new_string(npd_finish_reason_name(ev->reason)));
            g_autoptr(GVariant) stats = g_variant_ref_sink(stats_variant(r, ev));
            GVariantIter it;
            const char *key;
            GVariant *value;
            g_variant_iter_init(&it, stats);
            while (g_variant_iter_loop(&it, "{&sv}", &key, &value))
                g_variant_builder_add(&info, "{sv}", key, value);
            if (r->complete_thinking->len > 0) {
                g_autofree gchar *thinking =
                    valid_utf8(r->complete_thinking->str, (gssize)r->complete_thinking->len);
                g_variant_builder_add(&info, "{sv}", "thinking", g_variant_new_string(thinking));
            }
            g_autofree gchar *text = valid_utf8(r->complete_text->str, (gssize)r->complete_text->len);
            g_dbus_method_invocation_return_value(inv, g_variant_new("(sa{sv})", text, &info));
        }
        npd_request_destroy(r);
        return;
    }
    emit_state_changed(r);
    emit_to_owner(r, NPD_REQUEST_IFACE, "Finished",
                  g_variant_new("(s@a{sv})", npd_finish_reason_name(ev->reason), stats_variant(r, ev)));
    if (r->client->gone)
        npd_request_destroy(r);
    else
        r->linger_id = g_timeout_add_seconds(LINGER_SECONDS, linger_done_cb, r);
}

/* Output text: a unicast signal, or kept for Complete's reply. */
static void stream_text(NpdRequest *r, const NpdEvent *ev, GString *complete_buf, const char *signal)
{
    if (r->complete != NULL) {
        g_string_append_len(complete_buf, ev->text->str, (gssize)ev->text->len);
    } else {
        g_autofree gchar *text = valid_utf8(ev->text->str, (gssize)ev->text->len);
        emit_to_owner(r, NPD_REQUEST_IFACE, signal, g_variant_new("(s)", text));
    }
}

void npd_request_objects_handle_event(NpdRequest *r, const NpdEvent *ev)
{
    switch (ev->kind) {
    case NPD_EVENT_STATE:
        emit_state_changed(r);
        break;
    case NPD_EVENT_TEXT:
        stream_text(r, ev, r->complete_text, "Token");
        break;
    case NPD_EVENT_THINKING:
        stream_text(r, ev, r->complete_thinking, "Thinking");
        break;
    case NPD_EVENT_TOOL_CALL:
        if (r->complete == NULL)
            emit_to_owner(r, NPD_REQUEST_IFACE, "ToolCall",
                          g_variant_new("(sss)", ev->tool_call[0], ev->tool_call[1], ev->tool_call[2]));
        break;
    case NPD_EVENT_FINISHED:
        request_finished(r, ev);
        break;
    case NPD_EVENT_MODELS:
    case NPD_EVENT_COMMAND_DONE:
        break;
    }
}

/* ---- the subtree ----------------------------------------------------------- */

static NpdRequest *request_for(NpdDaemon *d, const char *sender, const char *node)
{
    if (node == NULL || sender == NULL)
        return NULL;
    NpdRequest *r = npd_requests_lookup_node(d->requests, node);
    if (r == NULL || strcmp(r->client->name, sender) != 0)
        return NULL;
    return r;
}

static gchar **subtree_enumerate(GDBusConnection *bus, const char *sender, const char *path, gpointer data)
{
    NpdDaemon *d = data;
    GPtrArray *nodes = g_ptr_array_new();
    NpdClient *c = sender != NULL ? npd_clients_lookup(d->clients, sender) : NULL;
    for (GList *l = c != NULL ? c->requests : NULL; l != NULL; l = l->next) {
        const NpdRequest *r = l->data;
        if (r->node != NULL)
            g_ptr_array_add(nodes, g_strdup(r->node));
    }
    g_ptr_array_add(nodes, NULL);
    return (gchar **)g_ptr_array_free(nodes, FALSE);
}

static GDBusInterfaceInfo **subtree_introspect(GDBusConnection *bus, const char *sender, const char *path,
                                               const char *node, gpointer data)
{
    NpdDaemon *d = data;
    if (request_for(d, sender, node) == NULL)
        return NULL;
    GPtrArray *infos = g_ptr_array_new();
    g_ptr_array_add(infos,
                    g_dbus_interface_info_ref(g_dbus_node_info_lookup_interface(d->introspection, NPD_REQUEST_IFACE)));
    g_ptr_array_add(infos, NULL);
    return (GDBusInterfaceInfo **)g_ptr_array_free(infos, FALSE);
}

static void request_method_call(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                                const char *method, GVariant *params, GDBusMethodInvocation *inv,
                                gpointer data)
{
    NpdDaemon *d = data;
    g_autoptr(GError) error = NULL;
    if (!npd_call_fds_check(inv, params, &error)) {
        g_dbus_method_invocation_return_gerror(inv, error);
        return;
    }
    const char *node = strrchr(path, '/') + 1;
    NpdRequest *r = request_for(d, sender, node);
    if (r == NULL) {
        g_dbus_method_invocation_return_error_literal(inv, NPD_ERROR, NPD_ERROR_NOT_AUTHORIZED,
                                                      "not the owner of this request");
        return;
    }
    if (g_strcmp0(method, "Cancel") == 0) {
        npd_request_cancel(r);
        g_dbus_method_invocation_return_value(inv, NULL);
        return;
    }
    g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD, "no method %s",
                                          method);
}

static GVariant *request_get_property(GDBusConnection *bus, const char *sender, const char *path,
                                      const char *iface, const char *prop, GError **error, gpointer data)
{
    NpdDaemon *d = data;
    const char *node = strrchr(path, '/') + 1;
    NpdRequest *r = request_for(d, sender, node);
    if (r == NULL) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_NOT_AUTHORIZED, "not the owner of this request");
        return NULL;
    }
    if (g_strcmp0(prop, "State") == 0)
        return g_variant_new_string(state_name(r->state));
    if (g_strcmp0(prop, "QueuePosition") == 0)
        return g_variant_new_uint32(r->queue_position);
    g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", prop);
    return NULL;
}

static const GDBusInterfaceVTable request_vtable = {
    .method_call = request_method_call,
    .get_property = request_get_property,
    .set_property = NULL,
};

static const GDBusInterfaceVTable *subtree_dispatch(GDBusConnection *bus, const char *sender, const char *path,
                                                    const char *iface, const char *node, gpointer *out_data,
                                                    gpointer data)
{
    NpdDaemon *d = data;
    if (request_for(d, sender, node) == NULL || g_strcmp0(iface, NPD_REQUEST_IFACE) != 0)
        return NULL;
    *out_data = d;
    return &request_vtable;
}

static const GDBusSubtreeVTable subtree_vtable = {
    .enumerate = subtree_enumerate,
    .introspect = subtree_introspect,
    .dispatch = subtree_dispatch,
};

guint npd_request_objects_register(NpdDaemon *d, GError **error)
{
    return g_dbus_connection_register_subtree(d->bus, NPD_REQUEST_ROOT, &subtree_vtable, G_DBUS_SUBTREE_FLAGS_NONE,
                                              d, NULL, error);
}
