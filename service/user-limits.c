/* Per-user limits: the totals of one Unix user over all of its
 * connections (a user opening more connections gets no bigger share), and
 * the image slots of the global image budget. */
#include "daemon.h"

#include <string.h>

typedef struct {
    guint requests;    /* unfinished requests */
    guint calls;       /* calls waiting for polkit or their image */
    guint images;      /* images being read and decoded */
    guint connections; /* clients known to the daemon */
} UserUsage;

static void user_usage(NpdDaemon *d, guint32 uid, UserUsage *u)
{
    memset(u, 0, sizeof *u);
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, d->clients);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        const NpdClient *c = value;
        if (c->uid != uid)
            continue;
        u->requests += c->outstanding;
        u->calls += c->pending_calls;
        u->images += c->images;
        u->connections++;
    }
}

static gboolean busy(GError **error, const char *what, guint used, guint limit, guint connections)
{
    g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "too many %s from this user (%u of %u, over %u connection%s)", what,
                used, limit, connections, connections == 1 ? "" : "s");
    return FALSE;
}

gboolean npd_user_admit_call(NpdDaemon *d, NpdClient *c, GError **error)
{
    UserUsage u;
    user_usage(d, c->uid, &u);
    if (u.calls >= d->cfg->max_calls_per_user)
        return busy(error, "calls waiting for authorization", u.calls, d->cfg->max_calls_per_user, u.connections);
    return TRUE;
}

gboolean npd_user_admit_request(NpdDaemon *d, NpdClient *c, GError **error)
{
    UserUsage u;
    user_usage(d, c->uid, &u);
    if (u.requests >= d->cfg->max_per_user)
        return busy(error, "unfinished requests", u.requests, d->cfg->max_per_user, u.connections);
    return TRUE;
}

gboolean npd_user_admit_image(NpdDaemon *d, NpdClient *c, GError **error)
{
    UserUsage u;
    user_usage(d, c->uid, &u);
    if (u.images >= d->cfg->max_images_per_user)
        return busy(error, "images being read", u.images, d->cfg->max_images_per_user, u.connections);
    if (!npd_image_budget_take_slot(d->image_budget, error))
        return FALSE;
    c->images++;
    return TRUE;
}

void npd_user_release_image(NpdDaemon *d, NpdClient *c)
{
    g_return_if_fail(c->images > 0);
    c->images--;
    npd_image_budget_give_slot(d->image_budget);
}
