/* Bus peers with requests (client-tracker.h). */
#include "client-tracker.h"

#include "app-identity.h"
#include "requests.h"

#include "log-limit.h"

/* journal lines about clients that left with unfinished requests */
#define DISCONNECT_LINES_PER_MINUTE 10

struct NpdClients {
    GDBusConnection *bus;
    GHashTable *by_name; /* unique name -> NpdClient* (ref) */
    GHashTable *by_uid;  /* uid -> NpdUserUsage*, freed with its last client */
    guint name_owner_sub_id;
};

static NpdUserUsage *user_get(NpdClients *clients, guint32 uid)
{
    NpdUserUsage *u = g_hash_table_lookup(clients->by_uid, GUINT_TO_POINTER(uid));
    if (u == NULL) {
        u = g_new0(NpdUserUsage, 1);
        u->uid = uid;
        g_hash_table_insert(clients->by_uid, GUINT_TO_POINTER(uid), u);
    }
    u->clients++;
    return u;
}

static void user_release(NpdClients *clients, NpdUserUsage *u)
{
    if (--u->clients == 0)
        g_hash_table_remove(clients->by_uid, GUINT_TO_POINTER(u->uid)); /* frees u */
}

NpdClient *npd_client_ref(NpdClient *c)
{
    g_atomic_int_inc(&c->refs);
    return c;
}

void npd_client_unref(NpdClient *c)
{
    if (c == NULL || !g_atomic_int_dec_and_test(&c->refs))
        return;
    g_list_free(c->requests);
    user_release(c->owner, c->user);
    g_clear_object(&c->cancellable);
    npd_app_identity_free(c->app);
    g_free(c->name);
    g_free(c);
}

/* Limits are per user: the bus daemon says whose a connection is. It is
 * asked once per client, synchronously: it is trusted, local and quick,
 * and a call must not be admitted before its user is known. */
static guint32 lookup_uid(NpdClients *clients, const char *name)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) ret = g_dbus_connection_call_sync(
        clients->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixUser",
        g_variant_new("(s)", name), G_VARIANT_TYPE("(u)"), G_DBUS_CALL_FLAGS_NONE, 5000, NULL, &error);
    if (ret == NULL) {
        g_message("cannot learn the user of %s (%s): counted as an unknown user", name, error->message);
        return NPD_UID_UNKNOWN;
    }
    guint32 uid;
    g_variant_get(ret, "(u)", &uid);
    return uid;
}

NpdClient *npd_clients_get(NpdClients *clients, const char *name)
{
    NpdClient *c = g_hash_table_lookup(clients->by_name, name);
    if (c != NULL)
        return npd_client_ref(c);
    c = g_new0(NpdClient, 1);
    c->refs = 2; /* the table's and the caller's */
    c->owner = clients;
    c->name = g_strdup(name);
    c->uid = lookup_uid(clients, name);
    c->user = user_get(clients, c->uid);
    c->user->connections++;
    c->app = npd_app_identity_lookup(clients->bus, name, c->uid);
    c->cancellable = g_cancellable_new();
    g_hash_table_insert(clients->by_name, c->name, c);
    return c;
}

NpdClient *npd_clients_lookup(NpdClients *clients, const char *name)
{
    return g_hash_table_lookup(clients->by_name, name);
}

void npd_client_release_if_idle(NpdClient *c)
{
    if (c->gone || c->outstanding > 0 || c->pending_calls > 0 || c->images > 0 || c->requests != NULL)
        return;
    if (g_hash_table_lookup(c->owner->by_name, c->name) == c) {
        c->user->connections--;
        g_hash_table_remove(c->owner->by_name, c->name);
    }
}

static void client_vanished(NpdClients *clients, NpdClient *c)
{
    npd_client_ref(c);
    c->gone = TRUE;
    g_cancellable_cancel(c->cancellable);
    c->user->connections--;
    g_hash_table_remove(clients->by_name, c->name);
    guint n = g_list_length(c->requests);
    /* one line per disconnect would let a user flood the journal */
    static NpdLogLimit disconnects;
    guint left_out = 0;
    if (c->outstanding > 0 &&
        npd_log_limit_allow(&disconnects, DISCONNECT_LINES_PER_MINUTE, 60 * G_USEC_PER_SEC, &left_out)) {
        g_autofree gchar *note = left_out > 0 ? g_strdup_printf(" (%u such lines left out before)", left_out) : NULL;
        g_message("client %s disconnected; cancelling its %u unfinished requests%s", c->name, c->outstanding,
                  note != NULL ? note : "");
    }
    /* npd_request_destroy unlinks each request from c->requests. */
    while (c->requests != NULL && n-- > 0)
        npd_request_destroy(c->requests->data);
    npd_client_unref(c);
}

static void name_owner_changed_cb(GDBusConnection *bus, const char *sender, const char *path,
                                  const char *iface, const char *signal, GVariant *params, gpointer data)
{
    NpdClients *clients = data;
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    if (!g_variant_is_of_type(params, G_VARIANT_TYPE("(sss)")))
        return;
    g_variant_get(params, "(&s&s&s)", &name, &old_owner, &new_owner);
    if (*new_owner != '\0')
        return;
    NpdClient *c = g_hash_table_lookup(clients->by_name, name);
    if (c != NULL)
        client_vanished(clients, c);
}

NpdClients *npd_clients_new(GDBusConnection *bus)
{
    NpdClients *clients = g_new0(NpdClients, 1);
    clients->bus = g_object_ref(bus);
    clients->by_name = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)npd_client_unref);
    clients->by_uid = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    clients->name_owner_sub_id = g_dbus_connection_signal_subscribe(
        bus, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus", NULL,
        G_DBUS_SIGNAL_FLAGS_NONE, name_owner_changed_cb, clients, NULL);
    return clients;
}

void npd_clients_free(NpdClients *clients)
{
    if (clients == NULL)
        return;
    g_dbus_connection_signal_unsubscribe(clients->bus, clients->name_owner_sub_id);
    g_hash_table_destroy(clients->by_name); /* its clients give their users back */
    g_hash_table_destroy(clients->by_uid);
    g_object_unref(clients->bus);
    g_free(clients);
}
