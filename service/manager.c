/* org.npullm.Manager: its method and property tables, and the methods
 * that need no file of their own. A call goes its way in manager-call.c;
 * the methods that make a request are request-methods.c, AddModel and
 * RemoveModel model-install.c. */
#include "daemon.h"

#include <string.h>

#include "app-list.h"
#include "call-fds.h"
#include "embed-call.h"
#include "rerank-call.h"
#include "manager-call.h"
#include "model-install.h"
#include "request-methods.h"
#include "systemd-notify.h"

#ifndef NPD_VERSION
#define NPD_VERSION "unknown"
#endif

typedef NpdPendingCall PendingCall;

#define MANAGER_MAX_PROPERTIES 16

struct NpdManager {
    NpdDaemon *daemon;
    guint reg_id;
    guint idle_timeout; /* IdleTimeout, told to the worker */
    gchar **loaded_models;   /* LoadedModels, as the worker reported */
    guint active, queued;    /* ActiveRequests, QueuedRequests, as the requests' registry reported */
    guint models_idle_token; /* held while a model is loaded */
    /* last values announced through PropertiesChanged, per row of the
     * property table */
    GVariant *announced[MANAGER_MAX_PROPERTIES];
};

gboolean npd_manager_model_is_loaded(NpdManager *m, const char *name)
{
    return m != NULL && m->loaded_models != NULL && g_strv_contains((const gchar *const *)m->loaded_models, name);
}


/* LoadModel, UnloadModel: answered from npd_manager_handle_command_done. */
static gboolean run_load(PendingCall *p)
{
    npd_worker_load(p->daemon->worker, p->model_name, p->model_path, p->projector_path, p->invocation);
    return FALSE;
}

static gboolean run_unload(PendingCall *p)
{
    npd_worker_unload(p->daemon->worker, p->model_name, p->invocation);
    return FALSE;
}

/* ForgetCache: answered from npd_manager_handle_command_done. Only the
 * caller's own uid: nobody drops (or learns about) another user's. */
static gboolean run_forget_cache(PendingCall *p)
{
    if (p->client->uid == NPD_UID_UNKNOWN) {
        g_dbus_method_invocation_return_value(p->invocation, NULL); /* such callers are never cached */
        return FALSE;
    }
    npd_worker_forget_cache(p->daemon->worker, p->client->uid, p->invocation);
    return FALSE;
}

static gboolean run_set_idle_timeout(PendingCall *p)
{
    NpdDaemon *d = p->daemon;
    d->manager->idle_timeout = p->idle_timeout;
    npd_worker_set_idle_timeout(d->worker, p->idle_timeout);
    g_message("IdleTimeout set to %u s by %s", p->idle_timeout, p->client->name);
    g_dbus_method_invocation_return_value(p->invocation, NULL);
    npd_manager_announce(d->manager);
    return FALSE;
}

/* ---- other methods ------------------------------------------------------ */

static GVariant *list_models(NpdDaemon *d)
{
    g_autoptr(GPtrArray) models = npd_model_catalog_list(d->catalog);
    const char *configured = d->cfg->default_model != NULL && d->cfg->default_model[0] ? d->cfg->default_model : NULL;
    const char *because = "configured ([Models] Default)";
    const NpdModelEntry *def = configured == NULL ? npd_model_catalog_pick_default(models, &because) : NULL;
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
        g_variant_builder_add(&b, "{sv}", "loaded", g_variant_new_boolean(npd_manager_model_is_loaded(d->manager, e->name)));
        g_variant_builder_add(&b, "{sv}", "file_size", g_variant_new_uint64(e->file_size));
        g_variant_builder_add(&b, "{sv}", "supported", g_variant_new_boolean(e->supported));
        g_variant_builder_add(&b, "{sv}", "reason", g_variant_new_string(e->reason));
        g_variant_builder_add(&b, "{sv}", "capabilities", npd_model_capabilities(e));
        g_variant_builder_add(&b, "{sv}", "administrator", g_variant_new_boolean(e->administrators));
        if (e == def || (configured != NULL && strcmp(e->name, configured) == 0))
            g_variant_builder_add(&b, "{sv}", "default_because", g_variant_new_string(because));
        g_variant_builder_close(&b);
    }
    return g_variant_new("(aa{sv})", &b);
}

static gboolean prepare_model_op(NpdDaemon *d, PendingCall *p, GVariant *params, gboolean unload,
                                 GError **error)
{
    const char *name = NULL;
    g_variant_get(params, "(&s)", &name);
    if (!npd_model_name_valid(name)) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "name: not a valid model name");
        return FALSE;
    }
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, name, error);
    if (e == NULL && !(unload && npd_manager_model_is_loaded(d->manager, name)))
        return FALSE;
    g_clear_error(error);
    p->model_name = g_strdup(name);
    p->model_path = e != NULL ? g_strdup(e->path) : NULL;
    p->projector_path = e != NULL ? g_strdup(e->projector) : NULL;
    return TRUE;
}

static gboolean prepare_load(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                             GError **error)
{
    return prepare_model_op(d, p, params, FALSE, error);
}

static gboolean prepare_unload(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                               GError **error)
{
    return prepare_model_op(d, p, params, TRUE, error);
}

static gboolean prepare_forget_cache(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p, GVariant *params,
                                     GError **error)
{
    return TRUE; /* no arguments */
}

/* ---- the method table: method -> polkit action -> handlers -------------- */

static const NpdManagerMethod manager_methods[] = {
    {"Generate", NPD_ACTION_GENERATE, npd_generate_prepare, npd_request_method_run, NULL, TRUE},
    {"Chat", NPD_ACTION_GENERATE, npd_chat_prepare, npd_request_method_run, NULL, TRUE},
    {"Complete", NPD_ACTION_GENERATE, npd_complete_prepare, npd_request_method_run, NULL, TRUE},
    {"DescribeImage", NPD_ACTION_DESCRIBE_IMAGE, npd_describe_image_prepare, npd_request_method_run, NULL, TRUE},
    {"ListModels", NULL, NULL, NULL, list_models, FALSE},
    {"LoadModel", NPD_ACTION_MANAGE, prepare_load, run_load, NULL, FALSE},
    {"UnloadModel", NPD_ACTION_MANAGE, prepare_unload, run_unload, NULL, FALSE},
    {"ForgetCache", NPD_ACTION_GENERATE, prepare_forget_cache, run_forget_cache, NULL, FALSE},
    {"AddModel", NPD_ACTION_MANAGE, npd_model_add_prepare, npd_model_add_run, NULL, FALSE},
    {"RemoveModel", NPD_ACTION_MANAGE, npd_model_remove_prepare, npd_model_remove_run, NULL, FALSE},
    {"Embed", NPD_ACTION_EMBED, npd_embed_prepare, npd_embed_run, NULL, TRUE},
    {"Rerank", NPD_ACTION_EMBED, npd_rerank_prepare, npd_rerank_run, NULL, TRUE},
    {"ListApplications", NPD_ACTION_GENERATE, npd_list_applications_prepare, npd_list_applications_run, NULL, FALSE},
};

/* ---- the property table: property -> getter -> emits-changed ------------ */

static GVariant *get_version(NpdManager *m)
{
    return g_variant_new_string(NPD_VERSION);
}

static GVariant *get_device(NpdManager *m)
{
    NpdDaemon *d = m->daemon;
    return g_variant_new_string(d->device->device);
}

static GVariant *get_device_status(NpdManager *m)
{
    NpdDaemon *d = m->daemon;
    const char *power = npd_power_policy_describe(d->power);
    if (power[0] == '\0')
        return g_variant_new_string(d->device->status);
    return g_variant_new_take_string(g_strdup_printf("%s; power: %s", d->device->status, power));
}

static GVariant *get_power_policy(NpdManager *m)
{
    return g_variant_new_string(npd_power_policy_describe(m->daemon->power));
}

static GVariant *get_default_model(NpdManager *m)
{
    NpdDaemon *d = m->daemon;
    const char *name = npd_model_catalog_default_name(d->catalog, d->cfg->default_model);
    return g_variant_new_string(name != NULL ? name : "");
}

static GVariant *get_loaded_models(NpdManager *m)
{
    const gchar *const empty[] = {NULL};
    return g_variant_new_strv(m->loaded_models ? (const gchar *const *)m->loaded_models : empty, -1);
}

static GVariant *get_active_requests(NpdManager *m)
{
    return g_variant_new_uint32(m->active);
}

static GVariant *get_queued_requests(NpdManager *m)
{
    return g_variant_new_uint32(m->queued);
}

static GVariant *get_idle_timeout(NpdManager *m)
{
    return g_variant_new_uint32(m->idle_timeout);
}

static gboolean prepare_set_idle_timeout(NpdDaemon *d, GDBusMethodInvocation *inv, PendingCall *p,
                                         GVariant *value, GError **error)
{
    if (!g_variant_is_of_type(value, G_VARIANT_TYPE_UINT32) || g_variant_get_uint32(value) > G_MAXINT32) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                            "IdleTimeout: expected a uint32 number of seconds");
        return FALSE;
    }
    p->idle_timeout = g_variant_get_uint32(value);
    return TRUE;
}

typedef struct {
    const char *name;
    GVariant *(*get)(NpdManager *m);
    gboolean emits_changed; /* announced through PropertiesChanged (EMITS_WITH_COUNTS: see there) */
    /* writable: setting is a method call (Properties.Set) of its own */
    NpdManagerMethod set;
} ManagerProperty;

/* emits_changed of a row that changes with the requests' counts, and only
 * with them: announced when they change, without the other rows */
#define EMITS_WITH_COUNTS 2

static const ManagerProperty manager_properties[] = {
    {"Version", get_version, FALSE, {NULL}},
    {"Device", get_device, FALSE, {NULL}},
    {"DeviceStatus", get_device_status, TRUE, {NULL}},
    {"DefaultModel", get_default_model, TRUE, {NULL}},
    {"LoadedModels", get_loaded_models, TRUE, {NULL}},
    {"ActiveRequests", get_active_requests, EMITS_WITH_COUNTS, {NULL}},
    {"QueuedRequests", get_queued_requests, EMITS_WITH_COUNTS, {NULL}},
    {"IdleTimeout", get_idle_timeout, TRUE,
     {"IdleTimeout", NPD_ACTION_MANAGE, prepare_set_idle_timeout, run_set_idle_timeout, NULL, FALSE}},
    {"PowerPolicy", get_power_policy, TRUE, {NULL}},
};

G_STATIC_ASSERT(G_N_ELEMENTS(manager_properties) <= MANAGER_MAX_PROPERTIES);

static const ManagerProperty *find_property(const char *name)
{
    for (guint i = 0; i < G_N_ELEMENTS(manager_properties); i++)
        if (g_strcmp0(manager_properties[i].name, name) == 0)
            return &manager_properties[i];
    return NULL;
}

static const NpdManagerMethod *find_method(const char *name)
{
    for (guint i = 0; i < G_N_ELEMENTS(manager_methods); i++)
        if (g_strcmp0(manager_methods[i].name, name) == 0)
            return &manager_methods[i];
    return NULL;
}

/* A method's row found: the call's descriptors checked here, at the
 * door (more than it takes: refused, all closed), then on its way with
 * args (manager-call.c). */
static void dispatch(NpdDaemon *d, GDBusMethodInvocation *inv, const NpdManagerMethod *m, GVariant *params,
                     GVariant *args)
{
    g_autoptr(GError) error = NULL;
    if (!npd_call_fds_check(inv, params, &error)) {
        g_dbus_method_invocation_return_gerror(inv, error);
        return;
    }
    npd_manager_call_dispatch(d, inv, m, args);
}

static void handle_set_property(NpdDaemon *d, GDBusMethodInvocation *inv, GVariant *params)
{
    const char *iface = NULL, *name = NULL;
    g_autoptr(GVariant) value = NULL;
    g_variant_get(params, "(&s&sv)", &iface, &name, &value);
    const ManagerProperty *prop = find_property(name);
    if (prop == NULL || prop->set.name == NULL) {
        g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_PROPERTY_READ_ONLY,
                                              "property %s is read-only", name);
        return;
    }
    /* the value is the parameter the setter's prepare sees */
    dispatch(d, inv, &prop->set, params, value);
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
    const NpdManagerMethod *m = find_method(method);
    if (m == NULL) {
        g_dbus_method_invocation_return_error(inv, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD, "no method %s",
                                              method);
        return;
    }
    dispatch(d, inv, m, params, params);
}

static GVariant *manager_get_property(GDBusConnection *bus, const char *sender, const char *path,
                                      const char *iface, const char *name, GError **error, gpointer data)
{
    const ManagerProperty *prop = find_property(name);
    if (prop == NULL) {
        g_set_error(error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_PROPERTY, "no property %s", name);
        return NULL;
    }
    return prop->get(((NpdDaemon *)data)->manager);
}

/* set_property is NULL so that Properties.Set reaches method_call, where
 * the polkit check can run asynchronously. */
static const GDBusInterfaceVTable manager_vtable = {
    .method_call = manager_method_call,
    .get_property = manager_get_property,
    .set_property = NULL,
};

void npd_manager_handle_command_done(const NpdEvent *ev)
{
    GDBusMethodInvocation *inv = ev->tag;
    if (ev->error != NULL)
        g_dbus_method_invocation_return_gerror(inv, ev->error);
    else
        g_dbus_method_invocation_return_value(inv, NULL);
}

/* A loaded model keeps the daemon from idling (it unloads after its own
 * IdleTimeout). */
void npd_manager_set_loaded_models(NpdManager *m, gchar **names)
{
    NpdDaemon *d = m->daemon;
    g_strfreev(m->loaded_models);
    m->loaded_models = g_strdupv(names);
    gboolean any = m->loaded_models != NULL && m->loaded_models[0] != NULL;
    if (any && m->models_idle_token == 0)
        m->models_idle_token = npd_idle_inhibit(d->idle, "a loaded model");
    else if (!any && m->models_idle_token != 0) {
        npd_idle_uninhibit(d->idle, m->models_idle_token);
        m->models_idle_token = 0;
    }
    npd_manager_announce(m);
}

/* systemd's status line: the counts and models the Manager announces. */
void npd_manager_update_status(NpdManager *m)
{
    guint n_loaded = m->loaded_models != NULL ? g_strv_length(m->loaded_models) : 0;
    g_autofree gchar *models = n_loaded > 0 ? g_strjoinv(", ", m->loaded_models) : g_strdup("none");
    g_autofree gchar *status =
        g_strdup_printf("%u running, %u queued; loaded models: %s", m->active, m->queued, models);
    npd_notify_status(status);
}

/* PropertiesChanged for the rows that changed since last announced: all,
 * or (counts_only) those of the requests' counts. */
static void announce_rows(NpdManager *m, gboolean counts_only)
{
    NpdDaemon *d = m->daemon;
    GVariantBuilder changed;
    g_variant_builder_init(&changed, G_VARIANT_TYPE_VARDICT);
    gboolean any = FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(manager_properties); i++) {
        const ManagerProperty *prop = &manager_properties[i];
        if (!prop->emits_changed || (counts_only && prop->emits_changed != EMITS_WITH_COUNTS))
            continue;
        g_autoptr(GVariant) value = g_variant_ref_sink(prop->get(m));
        GVariant **last = &m->announced[i];
        if (*last != NULL && g_variant_equal(*last, value))
            continue;
        g_clear_pointer(last, g_variant_unref);
        *last = g_variant_ref(value);
        g_variant_builder_add(&changed, "{sv}", prop->name, value);
        any = TRUE;
    }
    if (!any) {
        g_variant_builder_clear(&changed);
        return;
    }
    npd_manager_update_status(m);
    g_dbus_connection_emit_signal(d->bus, NULL, NPD_MANAGER_PATH, "org.freedesktop.DBus.Properties",
                                  "PropertiesChanged",
                                  g_variant_new("(sa{sv}as)", NPD_MANAGER_IFACE, &changed, NULL), NULL);
}

void npd_manager_announce(NpdManager *m)
{
    if (m != NULL) /* NULL: not exported (startup failed) */
        announce_rows(m, FALSE);
}

/* A request was made, changed state or finished: only the counts can
 * have changed, and they come with the call. */
static void requests_changed_cb(guint active, guint queued, gpointer data)
{
    NpdManager *m = data;
    m->active = active;
    m->queued = queued;
    announce_rows(m, TRUE);
}

NpdManager *npd_manager_new(NpdDaemon *d, GError **error)
{
    g_autoptr(NpdManager) m = g_new0(NpdManager, 1);
    m->daemon = d;
    m->idle_timeout = d->cfg->idle_timeout;
    /* Start from the values clients read: only changes are announced. */
    for (guint i = 0; i < G_N_ELEMENTS(manager_properties); i++)
        if (manager_properties[i].emits_changed)
            m->announced[i] = g_variant_ref_sink(manager_properties[i].get(m));
    GDBusInterfaceInfo *info = g_dbus_node_info_lookup_interface(d->introspection, NPD_MANAGER_IFACE);
    m->reg_id = g_dbus_connection_register_object(d->bus, NPD_MANAGER_PATH, info, &manager_vtable, d, NULL, error);
    if (m->reg_id == 0)
        return NULL;
    npd_requests_set_changed_func(d->requests, requests_changed_cb, m);
    return g_steal_pointer(&m);
}

void npd_manager_free(NpdManager *m)
{
    if (m == NULL)
        return;
    if (m->reg_id != 0)
        g_dbus_connection_unregister_object(m->daemon->bus, m->reg_id);
    if (m->daemon->requests != NULL)
        npd_requests_set_changed_func(m->daemon->requests, NULL, NULL);
    for (guint i = 0; i < G_N_ELEMENTS(m->announced); i++)
        g_clear_pointer(&m->announced[i], g_variant_unref);
    npd_idle_uninhibit(m->daemon->idle, m->models_idle_token);
    g_strfreev(m->loaded_models);
    g_free(m);
}
