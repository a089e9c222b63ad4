/* npullmd's main-thread state, shared by the Manager interface, the
 * request objects and client tracking. Everything here is touched only on
 * the main context; the engine lives behind NpdWorker. */
#ifndef NPD_DAEMON_H
#define NPD_DAEMON_H

#include <gio/gio.h>

#include "admission.h"
#include "authorization.h"
#include "daemon-config.h"
#include "engine-worker.h"
#include "idle.h"
#include "image-budget.h"
#include "model-catalog.h"
#include "request-options.h"
#include "requests.h"
#include "npullm-protocol.h"

#define NPD_BUS_NAME NPP_BUS_NAME
#define NPD_MANAGER_PATH NPP_MANAGER_PATH
#define NPD_MANAGER_IFACE NPP_MANAGER_IFACE
#define NPD_REQUEST_IFACE NPP_REQUEST_IFACE
#define NPD_REQUEST_ROOT NPP_REQUEST_ROOT

#define NPD_MANAGER_MAX_PROPERTIES 32

/* A bus peer that has called us; lives while it has requests or calls in
 * progress, or until its name vanishes. */
struct NpdClient {
    gint refs;
    gchar *name;
    guint32 uid;         /* its Unix user (NPD_UID_UNKNOWN when the bus would not say) */
    gboolean gone;       /* its unique name vanished from the bus */
    guint outstanding;   /* requests not finished yet */
    guint pending_calls; /* calls waiting for polkit (or their image) */
    guint images;        /* images being read and decoded for it */
    GCancellable *cancellable; /* cancelled when it leaves: its image reads stop */
    GList *requests;     /* NpdRequest*, including finished ones kept for reading */
};

struct NpdDaemon {
    NpdConfig *cfg;
    /* What --device resolved to at startup (npl_device_resolve): the
     * Device and DeviceStatus properties, and what models load on. */
    gchar *device;
    gchar *device_status;
    const char *device_load_as;
    /* Where an NPU device (and, with [Engine] WeightCache, the CPU) keeps
     * its repacked weights between loads: systemd's CacheDirectory=
     * ($CACHE_DIRECTORY), else "" (none; the daemon never writes beside
     * the models). Never from a client. */
    gchar *npu_cache_dir;
    GMainLoop *loop;
    GDBusConnection *bus;
    GDBusNodeInfo *introspection;
    GDBusInterfaceInfo *manager_info;
    GDBusInterfaceInfo *request_info;
    guint manager_reg_id;
    guint request_subtree_id;
    guint name_owner_sub_id;
    guint own_name_id;
    gboolean name_acquired;
    int exit_status;

    NpdModelCatalog *catalog;
    NpdWorker *worker;
    NpdAuthorizer *authorizer;
    NpdImageBudget *image_budget;
    NpdIdle *idle;
    NpdRequests *requests;
    NpdAdmission *admission;

    GHashTable *clients;       /* unique name -> NpdClient* (ref) */
    gchar **loaded_models;
    guint models_idle_token;   /* held while a model is loaded */
    guint idle_timeout;

    /* last values announced through PropertiesChanged, per row of
     * manager.c's property table */
    GVariant *announced[NPD_MANAGER_MAX_PROPERTIES];
};

/* ---- clients (client-tracker.c) ---- */
NpdClient *npd_client_get(NpdDaemon *d, const char *name); /* borrowed, created on demand */
NpdClient *npd_client_ref(NpdClient *c);
void npd_client_unref(NpdClient *c);
/* Drops the daemon's entry when the client has nothing left. */
void npd_client_release_if_idle(NpdDaemon *d, NpdClient *c);
gboolean npd_clients_watch(NpdDaemon *d, GError **error);

/* ---- request objects (request-objects.c) ---- */
gboolean npd_request_objects_register(NpdDaemon *d, GError **error);
void npd_request_objects_handle_event(NpdDaemon *d, const NpdEvent *ev);

/* ---- manager (manager.c) ---- */
gboolean npd_manager_register(NpdDaemon *d, GError **error);
/* Unexports the Manager and drops what it kept. */
void npd_manager_unregister(NpdDaemon *d);
void npd_manager_handle_command_done(NpdDaemon *d, const NpdEvent *ev);
/* Emits PropertiesChanged for what changed since the last call. */
void npd_manager_announce(NpdDaemon *d);

#endif
