/* npullmd: serves local GGUF language models on D-Bus (org.npullm).
 * The main loop only dispatches: inference and model loading run on the
 * engine worker thread, authorization is asynchronous. */
#include <glib-unix.h>
#include <locale.h>
#include <signal.h>
#include <string.h>

#include "daemon.h"
#include "model-install.h"
#include "systemd-notify.h"

#define NPD_INTERFACE_RESOURCE "/org/npullm/dbus/org.npullm.xml"

/* The daemon's life: the state its components share (daemon.h), and what
 * only the start-up, the main loop's end and their callbacks touch. */
typedef struct {
    NpdDaemon d;
    GMainLoop *loop;
    guint own_name_id;
    guint request_subtree_id;
    gboolean name_acquired;
    int exit_status;
} NpdMain;

static void daemon_quit(NpdMain *m, int status)
{
    if (status != 0)
        m->exit_status = status;
    g_main_loop_quit(m->loop);
}

/* --exit-on-idle: nothing held the idle tracker for that long. */
static void idle_timeout_cb(gpointer data)
{
    NpdMain *m = data;
    g_message("idle for %u s, exiting (D-Bus activation restarts npullmd on demand)", m->d.cfg->exit_on_idle);
    daemon_quit(m, 0);
}

static void on_worker_event(const NpdEvent *ev, gpointer data)
{
    NpdDaemon *d = data;
    switch (ev->kind) {
    case NPD_EVENT_MODELS:
        npd_manager_set_loaded_models(d->manager, ev->loaded_models);
        break;
    case NPD_EVENT_COMMAND_DONE:
        if (!npd_sleep_handle_done(d->sleep, ev->tag))
            npd_manager_handle_command_done(ev);
        break;
    default:
        break; /* a request's: the requests' registry has them (requests.c) */
    }
}

/* The catalog's list changed (found on a rescan): clients refresh theirs. */
static void models_changed_cb(gpointer data)
{
    NpdDaemon *d = data;
    g_dbus_connection_emit_signal(d->bus, NULL, NPD_MANAGER_PATH, NPD_MANAGER_IFACE, "ModelsChanged", NULL, NULL);
}

static void name_acquired_cb(GDBusConnection *bus, const char *name, gpointer data)
{
    NpdMain *m = data;
    m->name_acquired = TRUE;
    g_message("serving %s on the %s bus (device %s)", name, m->d.cfg->session_bus ? "session" : "system",
              m->d.device->device);
    npd_notify_ready("ready");
    npd_manager_update_status(m->d.manager);
}

static void name_lost_cb(GDBusConnection *bus, const char *name, gpointer data)
{
    NpdMain *m = data;
    if (bus == NULL || g_dbus_connection_is_closed(bus))
        g_warning("lost the bus connection");
    else if (!m->name_acquired)
        g_warning("cannot own %s: another npullmd runs, or the bus policy does not allow this user to own it",
                  name);
    else
        g_warning("lost the name %s", name);
    daemon_quit(m, 1);
}

static void bus_closed_cb(GDBusConnection *bus, gboolean remote_peer_vanished, GError *error, gpointer data)
{
    g_warning("bus connection closed%s%s", error ? ": " : "", error ? error->message : "");
    daemon_quit(data, 1);
}

static gboolean signal_cb(gpointer data)
{
    g_message("stopping on signal");
    daemon_quit(data, 0);
    return G_SOURCE_CONTINUE; /* removed in run() */
}

static gboolean load_interfaces(NpdDaemon *d, GError **error)
{
    g_autoptr(GBytes) xml = g_resources_lookup_data(NPD_INTERFACE_RESOURCE, G_RESOURCE_LOOKUP_FLAGS_NONE, error);
    if (xml == NULL)
        return FALSE;
    d->introspection = g_dbus_node_info_new_for_xml(g_bytes_get_data(xml, NULL), error);
    if (d->introspection == NULL)
        return FALSE;
    if (g_dbus_node_info_lookup_interface(d->introspection, NPD_MANAGER_IFACE) == NULL ||
        g_dbus_node_info_lookup_interface(d->introspection, NPD_REQUEST_IFACE) == NULL) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "interface XML lacks the npullm interfaces");
        return FALSE;
    }
    return TRUE;
}

static int run(NpdMain *m)
{
    NpdDaemon *d = &m->d;
    g_autoptr(GError) error = NULL;
    if (!load_interfaces(d, &error)) {
        g_critical("D-Bus interface description: %s", error->message);
        return 1;
    }
    d->bus = g_bus_get_sync(d->cfg->session_bus ? G_BUS_TYPE_SESSION : G_BUS_TYPE_SYSTEM, NULL, &error);
    if (d->bus == NULL) {
        g_printerr("npullmd: cannot connect to the %s bus: %s\n", d->cfg->session_bus ? "session" : "system",
                   error->message);
        return 1;
    }
    g_dbus_connection_set_exit_on_close(d->bus, FALSE);
    g_signal_connect(d->bus, "closed", G_CALLBACK(bus_closed_cb), m);

    m->loop = g_main_loop_new(NULL, FALSE);
    d->catalog = npd_model_catalog_new((const gchar *const *)d->cfg->model_dirs);
    npd_model_catalog_set_changed_func(d->catalog, models_changed_cb, d);
    npd_model_install_sweep(d);
    d->idle = npd_idle_new(d->cfg->exit_on_idle, idle_timeout_cb, m);
    d->authorizer = npd_authorizer_new(!d->cfg->session_bus, d->cfg->auth_timeout);
    d->image_budget = npd_image_budget_new(d->cfg->max_images_in_flight, d->cfg->max_image_memory);
    NpdWorkerConfig wcfg = {
        .device = d->device->load_as,
        .npu_cache_dir = d->device->cache_dir,
        .weight_cache_dir = d->cfg->weight_cache ? d->device->cache_dir : "",
        .threads = d->cfg->threads,
        .prefill_chunk = d->cfg->prefill_chunk,
        .max_running = d->cfg->max_running,
        .max_context = d->cfg->max_context,
        .default_max_tokens = d->cfg->default_max_tokens,
        .idle_timeout = d->cfg->idle_timeout,
        .kv_cache_bytes = npd_kv_cache_budget(d->cfg),
    };
    d->worker = npd_worker_new(&wcfg, g_main_context_default(), on_worker_event, d);
    /* before any client can call */
    d->clients = npd_clients_new(d->bus);
    d->requests = npd_requests_new(d, d->worker, d->idle);
    d->admission = npd_admission_new(d->cfg, d->requests, d->image_budget);

    d->power = npd_power_policy_new(d);
    d->sleep = npd_sleep_new(d);
    if ((m->request_subtree_id = npd_request_objects_register(d, &error)) == 0 ||
        (d->manager = npd_manager_new(d, &error)) == NULL) {
        g_printerr("npullmd: cannot export objects: %s\n", error->message);
        m->exit_status = 1;
    } else {
        if (d->cfg->session_bus)
            g_message("session bus: callers are this user's own programs, polkit is not consulted");
        m->own_name_id = g_bus_own_name_on_connection(d->bus, NPD_BUS_NAME, G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE,
                                                      name_acquired_cb, name_lost_cb, m, NULL);
        guint sigterm = g_unix_signal_add(SIGTERM, signal_cb, m);
        guint sigint = g_unix_signal_add(SIGINT, signal_cb, m);
        guint watchdog = npd_notify_start_watchdog();
        npd_manager_update_status(d->manager);
        npd_idle_start(d->idle);

        g_main_loop_run(m->loop);

        npd_notify_stopping();
        g_source_remove(sigterm);
        g_source_remove(sigint);
        if (watchdog != 0)
            g_source_remove(watchdog);
        g_bus_unown_name(m->own_name_id);
    }

    npd_requests_free(d->requests);
    d->requests = NULL;
    g_clear_pointer(&d->manager, npd_manager_free);
    if (m->request_subtree_id != 0)
        g_dbus_connection_unregister_subtree(d->bus, m->request_subtree_id);
    npd_sleep_free(d->sleep);
    npd_power_policy_free(d->power);
    npd_worker_free(d->worker);
    npd_authorizer_free(d->authorizer);
    npd_image_budget_free(d->image_budget);
    if (!g_dbus_connection_is_closed(d->bus))
        g_dbus_connection_flush_sync(d->bus, NULL, NULL);

    npd_admission_free(d->admission);
    npd_clients_free(d->clients);
    npd_idle_free(d->idle);
    npd_model_catalog_free(d->catalog);
    g_main_loop_unref(m->loop);
    g_object_unref(d->bus);
    return m->exit_status;
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, "");
    /* A weight cache written past a file size limit (LimitFSIZE=) fails
     * with EFBIG and is skipped, instead of the signal ending the daemon. */
    signal(SIGXFSZ, SIG_IGN);
    NpdConfig cfg;
    g_autoptr(GError) error = NULL;
    if (!npd_config_load(&cfg, &argc, &argv, &error)) {
        g_printerr("npullmd: %s\n", error->message);
        npd_config_clear(&cfg);
        return 2;
    }
    if (cfg.verbose)
        g_log_set_debug_enabled(TRUE);
    /* Registers the org.npullm.Error names before any call is handled. */
    (void)NPD_ERROR;

    NpdMain m = {.d = {.cfg = &cfg}};
    m.d.device = npd_device_plan_resolve(&cfg, &error);
    if (m.d.device == NULL) {
        g_printerr("npullmd: %s\n", error->message);
        npd_config_clear(&cfg);
        return 2;
    }
    int status = run(&m);
    g_clear_pointer(&m.d.introspection, g_dbus_node_info_unref); /* also when run() stopped early */
    npd_device_plan_free(m.d.device);
    npd_config_clear(&cfg);
    return status;
}
