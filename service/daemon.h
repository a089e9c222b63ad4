/* npullmd's main-thread state, shared by the Manager interface, the
 * request objects and client tracking. Everything here is touched only on
 * the main context; the engine lives behind NpdWorker. */
#ifndef NPD_DAEMON_H
#define NPD_DAEMON_H

#include <gio/gio.h>

#include "admission.h"
#include "authorization.h"
#include "client-tracker.h"
#include "daemon-config.h"
#include "device-plan.h"
#include "engine-worker.h"
#include "idle.h"
#include "image-budget.h"
#include "model-catalog.h"
#include "request-options.h"
#include "requests.h"
#include "npullm-protocol.h"
#include "power-policy.h"
#include "sleep-inhibit.h"

#define NPD_BUS_NAME NPP_BUS_NAME
#define NPD_MANAGER_PATH NPP_MANAGER_PATH
#define NPD_MANAGER_IFACE NPP_MANAGER_IFACE
#define NPD_REQUEST_IFACE NPP_REQUEST_IFACE
#define NPD_REQUEST_ROOT NPP_REQUEST_ROOT

typedef struct NpdManager NpdManager;

struct NpdDaemon {
    NpdConfig *cfg;
    NpdDevicePlan *device; /* what --device resolved to at startup */
    GDBusConnection *bus;
    GDBusNodeInfo *introspection; /* the interfaces, looked up by their owners */

    NpdModelCatalog *catalog;
    NpdWorker *worker;
    NpdAuthorizer *authorizer;
    NpdImageBudget *image_budget;
    NpdIdle *idle;
    NpdRequests *requests;
    NpdAdmission *admission;

    NpdClients *clients;
    NpdManager *manager;
    NpdPowerPolicy *power; /* power-policy.c */
    NpdSleep *sleep;       /* sleep-inhibit.c */
};

/* ---- request objects (request-objects.c) ---- */
/* The subtree's registration id (for g_dbus_connection_unregister_subtree),
 * 0 with error when it cannot. */
guint npd_request_objects_register(NpdDaemon *d, GError **error);

/* ---- manager (manager.c) ---- */
/* Exports org.npullm.Manager (NULL with error when it cannot), announcing
 * the requests' counts as they change (d->requests exists already). */
NpdManager *npd_manager_new(NpdDaemon *d, GError **error);
/* Unexports it and drops what it kept. */
void npd_manager_free(NpdManager *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdManager, npd_manager_free)
/* LoadModel, UnloadModel, ForgetCache: the worker's answer. */
void npd_manager_handle_command_done(const NpdEvent *ev);
/* Emits PropertiesChanged for what changed since the last call. */
void npd_manager_announce(NpdManager *m);
/* LoadedModels, as the worker reported them (and announced). */
void npd_manager_set_loaded_models(NpdManager *m, gchar **names);
/* systemd's status line (running and queued requests, loaded models);
 * also written whenever the Manager announces a change. */
void npd_manager_update_status(NpdManager *m);
gboolean npd_manager_model_is_loaded(NpdManager *m, const char *name);

#endif
