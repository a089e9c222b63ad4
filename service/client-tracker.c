/* Bus peers with requests: who they are (their Unix user, for the
 * per-user limits) and what happens when one disconnects (every request
 * it owns is cancelled and freed, its image reads stop). */
#include "daemon.h"

#include "log-limit.h"

/* journal lines about clients that left with unfinished requests */
#define DISCONNECT_LINES_PER_MINUTE 10

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
    g_clear_object(&c->cancellable);
    g_free(c->name);
    g_free(c);
}

/* Limits are per user: the bus daemon says whose a connection is. It is
 * asked once per client, synchronously: it is trusted, local and quick,
 * and a call must not be admitted before its user is known. */
static guint32 lookup_uid(NpdDaemon *d, const char *name)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) ret = g_dbus_connection_call_sync(
        d->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixUser",
        g_variant_new("(s)", name), G_VARIANT_TYPE("(u)"), G_DBUS_CALL_FLAGS_NONE, 5000, NULL, &error);
    if (ret == NULL) {
        g_message("cannot learn the user of %s (%s): counted as an unknown user", name, error->message);
        return NPD_UID_UNKNOWN;
    }
    guint32 uid;
    g_variant_get(ret, "(u)", &uid);
    return uid;
}

NpdClient *npd_client_get(NpdDaemon *d, const char *name)
{
    NpdClient *c = g_hash_table_lookup(d->clients, name);
    if (c == NULL) {
        c = g_new0(NpdClient, 1);
        c->refs = 1;
        c->name = g_strdup(name);
        c->uid = lookup_uid(d, name);
        c->cancellable = g_cancellable_new();
        g_hash_table_insert(d->clients, c->name, c);
    }
    return c;
}

void npd_client_release_if_idle(NpdDaemon *d, NpdClient *c)
{
    if (c->gone || c->outstanding > 0 || c->pending_calls > 0 || c->images > 0 || c->requests != NULL)
        return;
    if (g_hash_table_lookup(d->clients, c->name) == c)
        g_hash_table_remove(d->clients, c->name);
}

static void client_vanished(NpdDaemon *d, NpdClient *c)
{
    npd_client_ref(c);
    c->gone = TRUE;
    g_cancellable_cancel(c->cancellable);
    g_hash_table_remove(d->clients, c->name);
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
    NpdDaemon *d = data;
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    if (!g_variant_is_of_type(params, G_VARIANT_TYPE("(sss)")))
        return;
    g_variant_get(params, "(&s&s&s)", &name, &old_owner, &new_owner);
    if (*new_owner != '\0')
        return;
    NpdClient *c = g_hash_table_lookup(d->clients, name);
    if (c != NULL)
        client_vanished(d, c);
}

gboolean npd_clients_watch(NpdDaemon *d, GError **error)
{
    /* One subscription for all names, made before any client can call:
     * a per-client match added later could miss a disconnect that
     * happened in between. */
    d->name_owner_sub_id = g_dbus_connection_signal_subscribe(
        d->bus, "org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
        NULL, G_DBUS_SIGNAL_FLAGS_NONE, name_owner_changed_cb, d, NULL);
    return d->name_owner_sub_id != 0;
}
