/* ListApplications (app-list.h). */
#include "app-list.h"

#include "app-identity.h"

typedef struct {
    const NpdAppIdentity *app; /* the first client seen with this id */
    guint running, queued;
} AppUse;

typedef struct {
    guint32 uid;
    GHashTable *apps; /* id -> AppUse* */
    GPtrArray *order; /* AppUse*, first seen first */
} Tally;

static void count_request(NpdRequest *r, gpointer data)
{
    Tally *t = data;
    /* another user's applications are nobody else's business */
    if (r->client->uid != t->uid || npd_request_is_finished(r))
        return;
    const NpdAppIdentity *app = r->client->app;
    AppUse *use = g_hash_table_lookup(t->apps, app->id);
    if (use == NULL) {
        use = g_new0(AppUse, 1);
        use->app = app;
        g_hash_table_insert(t->apps, app->id, use);
        g_ptr_array_add(t->order, use);
    }
    if (r->state == NPD_JOB_QUEUED)
        use->queued++;
    else
        use->running++;
}

static GVariant *applications_of(NpdDaemon *d, guint32 uid)
{
    Tally t = {uid, g_hash_table_new(g_str_hash, g_str_equal), g_ptr_array_new_with_free_func(g_free)};
    if (uid != NPD_UID_UNKNOWN)
        npd_requests_foreach(d->requests, count_request, &t);
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE("aa{sv}"));
    for (guint i = 0; i < t.order->len; i++) {
        const AppUse *use = t.order->pdata[i];
        g_variant_builder_open(&b, G_VARIANT_TYPE_VARDICT);
        g_variant_builder_add(&b, "{sv}", "app_id", g_variant_new_string(use->app->id));
        if (use->app->display_name != NULL)
            g_variant_builder_add(&b, "{sv}", "display_name", g_variant_new_string(use->app->display_name));
        g_variant_builder_add(&b, "{sv}", "source", g_variant_new_string(use->app->source));
        g_variant_builder_add(&b, "{sv}", "running", g_variant_new_uint32(use->running));
        g_variant_builder_add(&b, "{sv}", "queued", g_variant_new_uint32(use->queued));
        g_variant_builder_close(&b);
    }
    g_hash_table_destroy(t.apps);
    g_ptr_array_unref(t.order);
    return g_variant_new("(aa{sv})", &b);
}

gboolean npd_list_applications_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p,
                                       GVariant *params, GError **error)
{
    return TRUE; /* no arguments */
}

gboolean npd_list_applications_run(NpdPendingCall *p)
{
    g_dbus_method_invocation_return_value(p->invocation, applications_of(p->daemon, p->client->uid));
    return FALSE;
}
