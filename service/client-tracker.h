/* Bus peers that have called npullmd (client-tracker.c): who each is
 * (its Unix user, for the per-user limits), what it has in flight, and
 * what happens when one leaves the bus (every request it owns is
 * cancelled and freed, its image reads stop). Main context only. */
#ifndef NPD_CLIENT_TRACKER_H
#define NPD_CLIENT_TRACKER_H

#include <gio/gio.h>

typedef struct NpdClients NpdClients;
typedef struct NpdAppIdentity NpdAppIdentity;

/* What one Unix user has in flight, over all of its connections: kept as
 * its clients' counts change (each change is made on the client and on
 * its user together), so that admission reads it without a walk. Shared
 * by the user's clients; lives while one of them does. */
typedef struct NpdUserUsage {
    guint32 uid;
    guint clients;     /* NpdClient records pointing here */
    guint requests;    /* unfinished requests */
    guint calls;       /* calls waiting for polkit or their image */
    guint images;      /* images being read and decoded */
    guint connections; /* clients known to the daemon (not gone) */
} NpdUserUsage;

/* A bus peer that has called us; lives while it has requests or calls in
 * progress, or until its name vanishes. */
typedef struct NpdClient {
    gint refs;
    NpdClients *owner;
    gchar *name;
    guint32 uid;         /* its Unix user (NPD_UID_UNKNOWN when the bus would not say) */
    NpdUserUsage *user;  /* its user's counts: each count below changes there too */
    NpdAppIdentity *app; /* the application it is (app-identity.h) */
    gboolean gone;       /* its unique name vanished from the bus */
    guint outstanding;   /* requests not finished yet */
    guint pending_calls; /* calls waiting for polkit (or their image) */
    guint images;        /* images being read and decoded for it */
    GCancellable *cancellable; /* cancelled when it leaves: its image reads stop */
    GList *requests;     /* NpdRequest*, including finished ones kept for reading */
} NpdClient;

/* Watches bus (one subscription for all names, made before any client
 * can call: a per-client match added later could miss a disconnect that
 * happened in between). */
NpdClients *npd_clients_new(GDBusConnection *bus);
void npd_clients_free(NpdClients *clients);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdClients, npd_clients_free)

/* The client of name, made on its first call, with a reference for the
 * caller (npd_client_unref). */
NpdClient *npd_clients_get(NpdClients *clients, const char *name);
/* Borrowed, NULL when name has not called (or has nothing left). */
NpdClient *npd_clients_lookup(NpdClients *clients, const char *name);

NpdClient *npd_client_ref(NpdClient *c);
void npd_client_unref(NpdClient *c);
/* Drops the tracker's entry when the client has nothing left. */
void npd_client_release_if_idle(NpdClient *c);

#endif
