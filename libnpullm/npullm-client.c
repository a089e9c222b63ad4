/* NpullmClient: the connection to npullmd. It starts the service if
 * needed, follows it across restarts (a new unique name), mirrors the
 * Manager's properties with notify, and makes requests the way the
 * protocol requires: subscribe to the request path (computed from a
 * handle_token) for signals from the daemon's unique name, then call. */
#include "npullm-client-private.h"

#include <gio/gunixfdlist.h>
#include <gio/gunixoutputstream.h>
#include <glib-unix.h>
#include <unistd.h>

#include "npullm-conversation-private.h"
#include "npullm-error-private.h"
#include "npullm-options-private.h"
#include "npullm-protocol.h"
#include "npullm-request-private.h"

/**
 * NpullmClient:
 *
 * The connection to npullmd: its properties, its models, and the requests
 * that stream generated text (#NpullmRequest).
 *
 * Since: 1.0
 */
struct _NpullmClient {
    GObject parent;
    GDBusConnection *bus;
    gchar *owner;       /* the daemon's unique name, NULL while it is away */
    GHashTable *values; /* Manager property name -> GVariant */
    guint owner_sub;
    guint props_sub;
    GList *requests;    /* NpullmRequest*, weak: unfinished ones */
    gchar **loaded_models; /* LoadedModels as a strv, for the getter */
};

static void npullm_client_initable_iface_init(GInitableIface *iface);

G_DEFINE_FINAL_TYPE_WITH_CODE(NpullmClient, npullm_client, G_TYPE_OBJECT,
                              G_IMPLEMENT_INTERFACE(G_TYPE_INITABLE, npullm_client_initable_iface_init))

enum {
    PROP_0,
    PROP_CONNECTION,
    PROP_VERSION,
    PROP_DEVICE,
    PROP_DEVICE_STATUS,
    PROP_DEFAULT_MODEL,
    PROP_LOADED_MODELS,
    PROP_ACTIVE_REQUESTS,
    PROP_QUEUED_REQUESTS,
    PROP_IDLE_TIMEOUT,
    N_PROPS
};
static GParamSpec *props[N_PROPS];

/* GObject property -> Manager property */
static const struct {
    guint id;
    const char *dbus_name;
} manager_props[] = {
    {PROP_VERSION, "Version"},
    {PROP_DEVICE, "Device"},
    {PROP_DEVICE_STATUS, "DeviceStatus"},
    {PROP_DEFAULT_MODEL, "DefaultModel"},
    {PROP_LOADED_MODELS, "LoadedModels"},
    {PROP_ACTIVE_REQUESTS, "ActiveRequests"},
    {PROP_QUEUED_REQUESTS, "QueuedRequests"},
    {PROP_IDLE_TIMEOUT, "IdleTimeout"},
};

static GVariant *cached(NpullmClient *self, guint id)
{
    for (guint i = 0; i < G_N_ELEMENTS(manager_props); i++)
        if (manager_props[i].id == id)
            return g_hash_table_lookup(self->values, manager_props[i].dbus_name);
    return NULL;
}

static const char *cached_string(NpullmClient *self, guint id)
{
    GVariant *v = cached(self, id);
    return v != NULL && g_variant_is_of_type(v, G_VARIANT_TYPE_STRING) ? g_variant_get_string(v, NULL) : "";
}

static guint cached_uint(NpullmClient *self, guint id)
{
    GVariant *v = cached(self, id);
    return v != NULL && g_variant_is_of_type(v, G_VARIANT_TYPE_UINT32) ? g_variant_get_uint32(v) : 0;
}

/* Takes the a{sv} of GetAll or PropertiesChanged; notifies what changed. */
static void update_values(NpullmClient *self, GVariant *dict)
{
    g_object_freeze_notify(G_OBJECT(self));
    for (guint i = 0; i < G_N_ELEMENTS(manager_props); i++) {
        g_autoptr(GVariant) v = g_variant_lookup_value(dict, manager_props[i].dbus_name, NULL);
        if (v == NULL)
            continue;
        GVariant *old = g_hash_table_lookup(self->values, manager_props[i].dbus_name);
        if (old != NULL && g_variant_equal(old, v))
            continue;
        g_hash_table_insert(self->values, (gpointer)manager_props[i].dbus_name, g_variant_ref(v));
        if (manager_props[i].id == PROP_LOADED_MODELS && g_variant_is_of_type(v, G_VARIANT_TYPE_STRING_ARRAY)) {
            g_strfreev(self->loaded_models);
            self->loaded_models = g_variant_dup_strv(v, NULL);
        }
        g_object_notify_by_pspec(G_OBJECT(self), props[manager_props[i].id]);
    }
    g_object_thaw_notify(G_OBJECT(self));
}

/* ---- following the daemon ------------------------------------------------ */

static void get_all_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    g_autoptr(NpullmClient) self = data;
    g_autoptr(GVariant) ret = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res, NULL);
    if (ret == NULL)
        return; /* gone again: the next owner change refreshes */
    g_autoptr(GVariant) dict = g_variant_get_child_value(ret, 0);
    update_values(self, dict);
}

static void name_owner_changed_cb(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                                  const char *member, GVariant *params, gpointer data)
{
    NpullmClient *self = data;
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    if (!g_variant_is_of_type(params, G_VARIANT_TYPE("(sss)")))
        return;
    g_variant_get(params, "(&s&s&s)", &name, &old_owner, &new_owner);
    if (g_strcmp0(name, NPP_BUS_NAME) != 0)
        return;
    if (old_owner[0] != '\0') {
        /* its requests are lost with it */
        GList *copy = g_list_copy_deep(self->requests, (GCopyFunc)(void (*)(void))g_object_ref, NULL);
        for (GList *l = copy; l != NULL; l = l->next)
            _npullm_request_daemon_gone(l->data, old_owner);
        g_list_free_full(copy, g_object_unref);
    }
    g_free(self->owner);
    self->owner = new_owner[0] != '\0' ? g_strdup(new_owner) : NULL;
    if (self->owner != NULL)
        g_dbus_connection_call(self->bus, self->owner, NPP_MANAGER_PATH, "org.freedesktop.DBus.Properties",
                               "GetAll", g_variant_new("(s)", NPP_MANAGER_IFACE), G_VARIANT_TYPE("(a{sv})"),
                               G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, get_all_cb, g_object_ref(self));
}

static void properties_changed_cb(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                                  const char *member, GVariant *params, gpointer data)
{
    NpullmClient *self = data;
    if (g_strcmp0(sender, self->owner) != 0 || !g_variant_is_of_type(params, G_VARIANT_TYPE("(sa{sv}as)")))
        return;
    const char *interface = NULL;
    g_autoptr(GVariant) changed = NULL;
    g_variant_get(params, "(&s@a{sv}as)", &interface, &changed, NULL);
    if (g_strcmp0(interface, NPP_MANAGER_IFACE) == 0)
        update_values(self, changed);
}

/* In the caller's thread: signals are delivered to its main context. */
static void watch(NpullmClient *self)
{
    self->owner_sub = g_dbus_connection_signal_subscribe(
        self->bus, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
        NPP_BUS_NAME, G_DBUS_SIGNAL_FLAGS_NONE, name_owner_changed_cb, self, NULL);
    self->props_sub = g_dbus_connection_signal_subscribe(self->bus, NULL, "org.freedesktop.DBus.Properties",
                                                         "PropertiesChanged", NPP_MANAGER_PATH, NULL,
                                                         G_DBUS_SIGNAL_FLAGS_NONE, properties_changed_cb, self, NULL);
}

/* Blocking part of construction: bus, activation, owner, properties. */
static gboolean connect_sync(NpullmClient *self, GCancellable *cancellable, GError **error)
{
    if (self->bus == NULL) {
        self->bus = g_bus_get_sync(G_BUS_TYPE_SYSTEM, cancellable, error);
        if (self->bus == NULL)
            return FALSE;
    }
    /* Peer.Ping through the well-known name starts the service */
    g_autoptr(GVariant) ping = g_dbus_connection_call_sync(self->bus, NPP_BUS_NAME, NPP_MANAGER_PATH,
                                                           "org.freedesktop.DBus.Peer", "Ping", NULL, NULL,
                                                           G_DBUS_CALL_FLAGS_NONE, -1, cancellable, error);
    if (ping == NULL)
        return FALSE;
    g_autoptr(GVariant) owner = g_dbus_connection_call_sync(
        self->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
        g_variant_new("(s)", NPP_BUS_NAME), G_VARIANT_TYPE("(s)"), G_DBUS_CALL_FLAGS_NONE, -1, cancellable, error);
    if (owner == NULL)
        return FALSE;
    g_variant_get(owner, "(s)", &self->owner);
    g_autoptr(GVariant) all = g_dbus_connection_call_sync(
        self->bus, self->owner, NPP_MANAGER_PATH, "org.freedesktop.DBus.Properties", "GetAll",
        g_variant_new("(s)", NPP_MANAGER_IFACE), G_VARIANT_TYPE("(a{sv})"), G_DBUS_CALL_FLAGS_NONE, -1, cancellable,
        error);
    if (all == NULL)
        return FALSE;
    g_autoptr(GVariant) dict = g_variant_get_child_value(all, 0);
    update_values(self, dict);
    return TRUE;
}

static gboolean npullm_client_initable_init(GInitable *initable, GCancellable *cancellable, GError **error)
{
    NpullmClient *self = NPULLM_CLIENT(initable);
    (void)NPULLM_ERROR; /* register the error names before any call */
    if (!connect_sync(self, cancellable, error))
        return FALSE;
    watch(self);
    return TRUE;
}

static void npullm_client_initable_iface_init(GInitableIface *iface)
{
    iface->init = npullm_client_initable_init;
}

static void npullm_client_set_property(GObject *object, guint id, const GValue *value, GParamSpec *pspec)
{
    NpullmClient *self = NPULLM_CLIENT(object);
    switch (id) {
    case PROP_CONNECTION:
        self->bus = g_value_dup_object(value);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    }
}

static void npullm_client_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    NpullmClient *self = NPULLM_CLIENT(object);
    switch (id) {
    case PROP_CONNECTION:
        g_value_set_object(value, self->bus);
        break;
    case PROP_LOADED_MODELS: {
        GVariant *v = cached(self, id);
        g_value_take_boxed(value, v != NULL ? g_variant_dup_strv(v, NULL) : g_new0(gchar *, 1));
        break;
    }
    case PROP_ACTIVE_REQUESTS:
    case PROP_QUEUED_REQUESTS:
    case PROP_IDLE_TIMEOUT:
        g_value_set_uint(value, cached_uint(self, id));
        break;
    case PROP_VERSION:
    case PROP_DEVICE:
    case PROP_DEVICE_STATUS:
    case PROP_DEFAULT_MODEL:
        g_value_set_string(value, cached_string(self, id));
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    }
}

static void forget_request(gpointer data, GObject *where_the_object_was)
{
    NpullmClient *self = data;
    self->requests = g_list_remove(self->requests, where_the_object_was);
}

void _npullm_client_track(NpullmClient *self, NpullmRequest *request)
{
    g_object_weak_ref(G_OBJECT(request), forget_request, self);
    self->requests = g_list_prepend(self->requests, request);
}

static void npullm_client_dispose(GObject *object)
{
    NpullmClient *self = NPULLM_CLIENT(object);
    /* the requests still running are cancelled with it */
    GList *running = g_steal_pointer(&self->requests);
    for (GList *l = running; l != NULL; l = l->next) {
        g_object_weak_unref(l->data, forget_request, self);
        g_object_ref(l->data);
    }
    for (GList *l = running; l != NULL; l = l->next)
        _npullm_request_client_gone(l->data);
    g_list_free_full(running, g_object_unref);
    if (self->owner_sub != 0)
        g_dbus_connection_signal_unsubscribe(self->bus, self->owner_sub);
    if (self->props_sub != 0)
        g_dbus_connection_signal_unsubscribe(self->bus, self->props_sub);
    self->owner_sub = self->props_sub = 0;
    G_OBJECT_CLASS(npullm_client_parent_class)->dispose(object);
}

static void npullm_client_finalize(GObject *object)
{
    NpullmClient *self = NPULLM_CLIENT(object);
    g_clear_object(&self->bus);
    g_free(self->owner);
    g_hash_table_unref(self->values);
    g_strfreev(self->loaded_models);
    G_OBJECT_CLASS(npullm_client_parent_class)->finalize(object);
}

static void npullm_client_class_init(NpullmClientClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->set_property = npullm_client_set_property;
    object_class->get_property = npullm_client_get_property;
    object_class->dispose = npullm_client_dispose;
    object_class->finalize = npullm_client_finalize;
    GParamFlags ro = G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS;
    /**
     * NpullmClient:connection:
     *
     * The bus npullmd is on; %NULL at construction means the system bus.
     *
     * Since: 1.0
     */
    props[PROP_CONNECTION] = g_param_spec_object("connection", NULL, NULL, G_TYPE_DBUS_CONNECTION,
                                                 G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
    /**
     * NpullmClient:version:
     *
     * The service's version.
     *
     * Since: 1.0
     */
    props[PROP_VERSION] = g_param_spec_string("version", NULL, NULL, "", ro);
    /**
     * NpullmClient:device:
     *
     * What the service runs models on (cpu, npu, npu-emu).
     *
     * Since: 1.0
     */
    props[PROP_DEVICE] = g_param_spec_string("device", NULL, NULL, "", ro);
    /**
     * NpullmClient:device-status:
     *
     * Why #NpullmClient:device is what it is, one line.
     *
     * Since: 1.0
     */
    props[PROP_DEVICE_STATUS] = g_param_spec_string("device-status", NULL, NULL, "", ro);
    /**
     * NpullmClient:default-model:
     *
     * The model used when #NpullmOptions:model is not set ("" when none).
     *
     * Since: 1.0
     */
    props[PROP_DEFAULT_MODEL] = g_param_spec_string("default-model", NULL, NULL, "", ro);
    /**
     * NpullmClient:loaded-models:
     *
     * The models in memory now.
     *
     * Since: 1.0
     */
    props[PROP_LOADED_MODELS] = g_param_spec_boxed("loaded-models", NULL, NULL, G_TYPE_STRV, ro);
    /**
     * NpullmClient:active-requests:
     *
     * Requests running (or loading their model) now.
     *
     * Since: 1.0
     */
    props[PROP_ACTIVE_REQUESTS] = g_param_spec_uint("active-requests", NULL, NULL, 0, G_MAXUINT, 0, ro);
    /**
     * NpullmClient:queued-requests:
     *
     * Requests waiting for a slot.
     *
     * Since: 1.0
     */
    props[PROP_QUEUED_REQUESTS] = g_param_spec_uint("queued-requests", NULL, NULL, 0, G_MAXUINT, 0, ro);
    /**
     * NpullmClient:idle-timeout:
     *
     * Seconds without requests before a model is unloaded; change it with
     * npullm_client_set_idle_timeout_async().
     *
     * Since: 1.0
     */
    props[PROP_IDLE_TIMEOUT] = g_param_spec_uint("idle-timeout", NULL, NULL, 0, G_MAXUINT, 0, ro);
    g_object_class_install_properties(object_class, N_PROPS, props);
}

static void npullm_client_init(NpullmClient *self)
{
    self->values = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_variant_unref);
}

/* ---- construction -------------------------------------------------------- */

static void new_in_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    GError *error = NULL;
    if (connect_sync(data, cancellable, &error))
        g_task_return_boolean(task, TRUE);
    else
        g_task_return_error(task, error);
}

static void new_connected_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    g_autoptr(GTask) outer = data;
    NpullmClient *self = g_task_get_task_data(outer);
    GError *error = NULL;
    if (!g_task_propagate_boolean(G_TASK(res), &error)) {
        g_task_return_error(outer, error);
        return;
    }
    watch(self);
    g_task_return_pointer(outer, g_object_ref(self), g_object_unref);
}

/**
 * npullm_client_new_async:
 * @connection: (nullable): the bus of npullmd, %NULL for the system bus
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the client is ready
 * @user_data: data for @callback
 *
 * Connects to npullmd, starting it through D-Bus activation when needed.
 * Finish with npullm_client_new_finish().
 *
 * Since: 1.0
 */
void npullm_client_new_async(GDBusConnection *connection, GCancellable *cancellable, GAsyncReadyCallback callback,
                             gpointer user_data)
{
    (void)NPULLM_ERROR;
    NpullmClient *self = g_object_new(NPULLM_TYPE_CLIENT, "connection", connection, NULL);
    GTask *outer = g_task_new(NULL, cancellable, callback, user_data);
    g_task_set_source_tag(outer, npullm_client_new_async);
    g_task_set_task_data(outer, self, g_object_unref);
    GTask *inner = g_task_new(NULL, cancellable, new_connected_cb, outer);
    g_task_set_task_data(inner, g_object_ref(self), g_object_unref);
    g_task_run_in_thread(inner, new_in_thread);
    g_object_unref(inner);
}

/**
 * npullm_client_new_finish:
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_new_async().
 *
 * Returns: (transfer full) (nullable): the client, or %NULL with @error set
 *
 * Since: 1.0
 */
NpullmClient *npullm_client_new_finish(GAsyncResult *result, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, NULL), NULL);
    return g_task_propagate_pointer(G_TASK(result), error);
}

/**
 * npullm_client_new_sync:
 * @connection: (nullable): the bus of npullmd, %NULL for the system bus
 * @cancellable: (nullable): a #GCancellable
 * @error: return location for an error
 *
 * Like npullm_client_new_async(), blocking.
 *
 * Returns: (transfer full) (nullable): the client, or %NULL with @error set
 *
 * Since: 1.0
 */
NpullmClient *npullm_client_new_sync(GDBusConnection *connection, GCancellable *cancellable, GError **error)
{
    return g_initable_new(NPULLM_TYPE_CLIENT, cancellable, error, "connection", connection, NULL);
}

/* ---- properties ------------------------------------------------------------ */

/**
 * npullm_client_get_connection:
 * @self: the client
 *
 * Gets the bus connection of the client.
 *
 * Returns: (transfer none): the bus connection
 *
 * Since: 1.0
 */
GDBusConnection *npullm_client_get_connection(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), NULL);
    return self->bus;
}

/**
 * npullm_client_get_version:
 * @self: the client
 *
 * Gets #NpullmClient:version.
 *
 * Returns: (transfer none): #NpullmClient:version
 *
 * Since: 1.0
 */
const char *npullm_client_get_version(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), NULL);
    return cached_string(self, PROP_VERSION);
}

/**
 * npullm_client_get_device:
 * @self: the client
 *
 * Gets #NpullmClient:device.
 *
 * Returns: (transfer none): #NpullmClient:device
 *
 * Since: 1.0
 */
const char *npullm_client_get_device(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), NULL);
    return cached_string(self, PROP_DEVICE);
}

/**
 * npullm_client_get_device_status:
 * @self: the client
 *
 * Gets #NpullmClient:device-status.
 *
 * Returns: (transfer none): #NpullmClient:device-status
 *
 * Since: 1.0
 */
const char *npullm_client_get_device_status(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), NULL);
    return cached_string(self, PROP_DEVICE_STATUS);
}

/**
 * npullm_client_get_default_model:
 * @self: the client
 *
 * Gets #NpullmClient:default-model.
 *
 * Returns: (transfer none): #NpullmClient:default-model
 *
 * Since: 1.0
 */
const char *npullm_client_get_default_model(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), NULL);
    return cached_string(self, PROP_DEFAULT_MODEL);
}

/**
 * npullm_client_get_loaded_models:
 * @self: the client
 *
 * Gets #NpullmClient:loaded-models.
 *
 * Returns: (transfer none) (array zero-terminated=1) (nullable):
 *   #NpullmClient:loaded-models
 *
 * Since: 1.0
 */
const char *const *npullm_client_get_loaded_models(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), NULL);
    return (const char *const *)self->loaded_models;
}

/**
 * npullm_client_get_active_requests:
 * @self: the client
 *
 * Gets #NpullmClient:active-requests.
 *
 * Returns: #NpullmClient:active-requests
 *
 * Since: 1.0
 */
guint npullm_client_get_active_requests(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), 0);
    return cached_uint(self, PROP_ACTIVE_REQUESTS);
}

/**
 * npullm_client_get_queued_requests:
 * @self: the client
 *
 * Gets #NpullmClient:queued-requests.
 *
 * Returns: #NpullmClient:queued-requests
 *
 * Since: 1.0
 */
guint npullm_client_get_queued_requests(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), 0);
    return cached_uint(self, PROP_QUEUED_REQUESTS);
}

/**
 * npullm_client_get_idle_timeout:
 * @self: the client
 *
 * Gets #NpullmClient:idle-timeout.
 *
 * Returns: #NpullmClient:idle-timeout
 *
 * Since: 1.0
 */
guint npullm_client_get_idle_timeout(NpullmClient *self)
{
    g_return_val_if_fail(NPULLM_IS_CLIENT(self), 0);
    return cached_uint(self, PROP_IDLE_TIMEOUT);
}

/* ---- simple calls ------------------------------------------------------------ */

static void manager_call_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    g_autoptr(GTask) task = data;
    GError *error = NULL;
    GVariant *ret = g_dbus_connection_call_finish(G_DBUS_CONNECTION(source), res, &error);
    if (ret == NULL) {
        _npullm_error_strip_remote(error);
        g_task_return_error(task, error);
        return;
    }
    g_task_return_pointer(task, ret, (GDestroyNotify)g_variant_unref);
}

/* Calls through the well-known name (so that it starts the service);
 * these calls create no objects whose signals must be followed. */
static void manager_call_with_flags(NpullmClient *self, gpointer tag, const char *iface, const char *method,
                                    GVariant *params, const GVariantType *reply, GDBusCallFlags flags,
                                    GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    GTask *task = g_task_new(self, cancellable, callback, user_data);
    g_task_set_source_tag(task, tag);
    g_dbus_connection_call(self->bus, NPP_BUS_NAME, NPP_MANAGER_PATH, iface, method, params, reply, flags, G_MAXINT,
                           cancellable, manager_call_cb, task);
}

/* What the user asked for may ask them to authenticate. */
static void manager_call(NpullmClient *self, gpointer tag, const char *iface, const char *method, GVariant *params,
                         const GVariantType *reply, GCancellable *cancellable, GAsyncReadyCallback callback,
                         gpointer user_data)
{
    manager_call_with_flags(self, tag, iface, method, params, reply, G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION,
                            cancellable, callback, user_data);
}

void _npullm_client_manager_call(NpullmClient *self, gpointer tag, const char *method, GVariant *params,
                                 const GVariantType *reply, GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data)
{
    manager_call(self, tag, NPP_MANAGER_IFACE, method, params, reply, cancellable, callback, user_data);
}

/* A call naming a model: a name that is not UTF-8 cannot be sent. */
static void model_call(NpullmClient *self, gpointer tag, const char *method, const char *name,
                       GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    if (!g_utf8_validate(name, -1, NULL)) {
        GTask *task = g_task_new(self, cancellable, callback, user_data);
        g_task_set_source_tag(task, tag);
        g_task_return_new_error(task, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "the model name is not valid UTF-8");
        g_object_unref(task);
        return;
    }
    manager_call(self, tag, NPP_MANAGER_IFACE, method, g_variant_new("(s)", name), NULL, cancellable, callback,
                 user_data);
}

/* The aa{sv} of a (aa{sv}) reply. */
static GVariant *list_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), NULL);
    g_autoptr(GVariant) ret = g_task_propagate_pointer(G_TASK(result), error);
    return ret != NULL ? g_variant_get_child_value(ret, 0) : NULL;
}

static gboolean manager_call_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), FALSE);
    g_autoptr(GVariant) ret = g_task_propagate_pointer(G_TASK(result), error);
    return ret != NULL;
}

/**
 * npullm_client_list_models_async:
 * @self: the client
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called with the result
 * @user_data: data for @callback
 *
 * Lists the installed models.
 *
 * Since: 1.0
 */
void npullm_client_list_models_async(NpullmClient *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                                     gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self));
    manager_call(self, npullm_client_list_models_async, NPP_MANAGER_IFACE, "ListModels", NULL,
                 G_VARIANT_TYPE("(aa{sv})"), cancellable, callback, user_data);
}

/**
 * npullm_client_list_models_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_list_models_async().
 *
 * Returns: (transfer full) (nullable): an aa{sv} with one dictionary per
 *   model (name, architecture, parameters, quantization, context_length,
 *   vision, loaded, file_size), or %NULL with @error set
 *
 * Since: 1.0
 */
GVariant *npullm_client_list_models_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return list_finish(self, result, error);
}

/**
 * npullm_client_list_applications_async:
 * @self: the client
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called with the result
 * @user_data: data for @callback
 *
 * Lists the applications of the caller's own Unix user that have requests
 * running or queued (the Manager's ListApplications). Never asks the user
 * to authenticate: panels call it when the request counts change, without
 * the user having asked.
 *
 * Since: 1.0
 */
void npullm_client_list_applications_async(NpullmClient *self, GCancellable *cancellable,
                                           GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self));
    manager_call_with_flags(self, npullm_client_list_applications_async, NPP_MANAGER_IFACE, "ListApplications", NULL,
                            G_VARIANT_TYPE("(aa{sv})"), G_DBUS_CALL_FLAGS_NONE, cancellable, callback, user_data);
}

/**
 * npullm_client_list_applications_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_list_applications_async().
 *
 * Returns: (transfer full) (nullable): an aa{sv} with one dictionary per
 *   application (app_id, display_name when known, source, running,
 *   queued), or %NULL with @error set
 *
 * Since: 1.0
 */
GVariant *npullm_client_list_applications_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return list_finish(self, result, error);
}

/**
 * npullm_client_load_model_async:
 * @self: the client
 * @name: a model name
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when loaded
 * @user_data: data for @callback
 *
 * Loads a model now (needs the org.npullm.manage polkit action; the user
 * may be asked to authenticate).
 *
 * Since: 1.0
 */
void npullm_client_load_model_async(NpullmClient *self, const char *name, GCancellable *cancellable,
                                    GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && name != NULL);
    model_call(self, npullm_client_load_model_async, "LoadModel", name, cancellable, callback, user_data);
}

/**
 * npullm_client_load_model_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_load_model_async().
 *
 * Returns: %TRUE when loaded
 *
 * Since: 1.0
 */
gboolean npullm_client_load_model_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return manager_call_finish(self, result, error);
}

/**
 * npullm_client_unload_model_async:
 * @self: the client
 * @name: a model name
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when unloaded
 * @user_data: data for @callback
 *
 * Unloads a model (needs the org.npullm.manage polkit action).
 *
 * Since: 1.0
 */
void npullm_client_unload_model_async(NpullmClient *self, const char *name, GCancellable *cancellable,
                                      GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && name != NULL);
    model_call(self, npullm_client_unload_model_async, "UnloadModel", name, cancellable, callback, user_data);
}

/**
 * npullm_client_unload_model_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_unload_model_async().
 *
 * Returns: %TRUE when unloaded
 *
 * Since: 1.0
 */
gboolean npullm_client_unload_model_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return manager_call_finish(self, result, error);
}

/**
 * npullm_client_forget_cache_async:
 * @self: the client
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when the caches are dropped
 * @user_data: data for @callback
 *
 * Drops the KV caches the service keeps for prefix reuse of the calling
 * user's requests (ForgetCache; needs the org.npullm.generate polkit
 * action). Later requests prefill their whole prompt again.
 *
 * Since: 1.0
 */
void npullm_client_forget_cache_async(NpullmClient *self, GCancellable *cancellable, GAsyncReadyCallback callback,
                                      gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self));
    manager_call(self, npullm_client_forget_cache_async, NPP_MANAGER_IFACE, "ForgetCache", NULL, NULL,
                 cancellable, callback, user_data);
}

/**
 * npullm_client_forget_cache_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_forget_cache_async().
 *
 * Returns: %TRUE when the caches are dropped
 *
 * Since: 1.0
 */
gboolean npullm_client_forget_cache_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return manager_call_finish(self, result, error);
}

/**
 * npullm_client_set_idle_timeout_async:
 * @self: the client
 * @seconds: seconds without requests before a model is unloaded
 * @cancellable: (nullable): a #GCancellable
 * @callback: (scope async): called when set
 * @user_data: data for @callback
 *
 * Sets #NpullmClient:idle-timeout (needs the org.npullm.manage polkit
 * action).
 *
 * Since: 1.0
 */
void npullm_client_set_idle_timeout_async(NpullmClient *self, guint seconds, GCancellable *cancellable,
                                          GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self));
    manager_call(self, npullm_client_set_idle_timeout_async, "org.freedesktop.DBus.Properties", "Set",
                 g_variant_new("(ssv)", NPP_MANAGER_IFACE, "IdleTimeout", g_variant_new_uint32(seconds)), NULL,
                 cancellable, callback, user_data);
}

/**
 * npullm_client_set_idle_timeout_finish:
 * @self: the client
 * @result: the result given to the callback
 * @error: return location for an error
 *
 * Finishes npullm_client_set_idle_timeout_async().
 *
 * Returns: %TRUE when set
 *
 * Since: 1.0
 */
gboolean npullm_client_set_idle_timeout_finish(NpullmClient *self, GAsyncResult *result, GError **error)
{
    return manager_call_finish(self, result, error);
}
