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
#include "usage-journal.h"

#define NPD_INTERFACE_RESOURCE "/org/npullm/dbus/org.npullm.xml"

static void daemon_quit(NpdDaemon *d, int status)
{
    if (status != 0)
        d->exit_status = status;
    g_main_loop_quit(d->loop);
}

/* --exit-on-idle: nothing held the idle tracker for that long. */
static void idle_timeout_cb(gpointer data)
{
    NpdDaemon *d = data;
    g_message("idle for %u s, exiting (D-Bus activation restarts npullmd on demand)", d->cfg->exit_on_idle);
    daemon_quit(d, 0);
}

/* systemd's status line for the service. */
static void update_status(NpdDaemon *d)
{
    guint n_loaded = d->loaded_models != NULL ? g_strv_length(d->loaded_models) : 0;
    g_autofree gchar *models = n_loaded > 0 ? g_strjoinv(", ", d->loaded_models) : g_strdup("none");
    g_autofree gchar *status = g_strdup_printf("%u running, %u queued; loaded models: %s",
                                               npd_requests_active(d->requests), npd_requests_queued(d->requests),
                                               models);
    npd_notify_status(status);
}

/* A loaded model keeps the daemon from idling (it unloads after its own
 * IdleTimeout). */
static void set_loaded_models(NpdDaemon *d, gchar **names)
{
    g_strfreev(d->loaded_models);
    d->loaded_models = g_strdupv(names);
    gboolean any = d->loaded_models != NULL && d->loaded_models[0] != NULL;
    if (any && d->models_idle_token == 0)
        d->models_idle_token = npd_idle_inhibit(d->idle, "a loaded model");
    else if (!any && d->models_idle_token != 0) {
        npd_idle_uninhibit(d->idle, d->models_idle_token);
        d->models_idle_token = 0;
    }
}

static void on_worker_event(const NpdEvent *ev, gpointer data)
{
    NpdDaemon *d = data;
    switch (ev->kind) {
    case NPD_EVENT_MODELS:
        set_loaded_models(d, ev->loaded_models);
        npd_manager_announce(d->manager);
        break;
    case NPD_EVENT_COMMAND_DONE:
        if (!npd_sleep_handle_done(d->sleep, ev->tag))
            npd_manager_handle_command_done(ev);
        break;
    case NPD_EVENT_STATE:
    case NPD_EVENT_TEXT:
    case NPD_EVENT_THINKING:
    case NPD_EVENT_TOOL_CALL:
    case NPD_EVENT_FINISHED:
        if (ev->kind == NPD_EVENT_FINISHED)
            npd_usage_journal_record_event(d->requests, ev);
        npd_request_objects_handle_event(d, ev);
        if (ev->kind == NPD_EVENT_TEXT || ev->kind == NPD_EVENT_THINKING || ev->kind == NPD_EVENT_TOOL_CALL)
            return;
        npd_manager_announce(d->manager);
        break;
    }
    update_status(d);
}

/* The catalog's list changed (found on a rescan): clients refresh theirs. */
static void models_changed_cb(gpointer data)
{
    NpdDaemon *d = data;
    g_dbus_connection_emit_signal(d->bus, NULL, NPD_MANAGER_PATH, NPD_MANAGER_IFACE, "ModelsChanged", NULL, NULL);
}

static void name_acquired_cb(GDBusConnection *bus, const char *name, gpointer data)
{
    NpdDaemon *d = data;
    d->name_acquired = TRUE;
    g_message("serving %s on the %s bus (device %s)", name, d->cfg->session_bus ? "session" : "system",
              d->device);
    npd_notify_ready("ready");
    update_status(d);
}

static void name_lost_cb(GDBusConnection *bus, const char *name, gpointer data)
{
    NpdDaemon *d = data;
    if (bus == NULL || g_dbus_connection_is_closed(bus))
        g_warning("lost the bus connection");
    else if (!d->name_acquired)
        g_warning("cannot own %s: another npullmd runs, or the bus policy does not allow this user to own it",
                  name);
    else
        g_warning("lost the name %s", name);
    daemon_quit(d, 1);
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

/* Decides once what --device means here (auto runs NPU discovery); an
 * unusable explicit npu is a startup error, auto falling back to the CPU
 * is one log line naming the reason. */
static gboolean resolve_device(NpdDaemon *d)
{
    npl_device_plan plan;
    npl_error err;
    npl_error_clear(&err);
    if (npl_device_resolve(npd_device_request(d->cfg->device), &plan, &err) != NPL_OK) {
        g_printerr("npullmd: %s\n", err.message);
        return FALSE;
    }
    d->device = g_strdup(plan.device);
    d->device_status = g_strdup(plan.reason);
    d->device_load_as = plan.load_as;
    if (d->cfg->device == NPD_DEVICE_AUTO && g_strcmp0(plan.load_as, "cpu") == 0)
        g_message("device auto: using the CPU: %s", plan.reason);
    else
        g_message("device %s: %s", plan.device, plan.reason);
    return TRUE;
}

static gboolean load_interfaces(NpdDaemon *d, GError **error)
{
    g_autoptr(GBytes) xml = g_resources_lookup_data(NPD_INTERFACE_RESOURCE, G_RESOURCE_LOOKUP_FLAGS_NONE, error);
    if (xml == NULL)
        return FALSE;
    d->introspection = g_dbus_node_info_new_for_xml(g_bytes_get_data(xml, NULL), error);
    if (d->introspection == NULL)
        return FALSE;
    d->manager_info = g_dbus_node_info_lookup_interface(d->introspection, NPD_MANAGER_IFACE);
    d->request_info = g_dbus_node_info_lookup_interface(d->introspection, NPD_REQUEST_IFACE);
    if (d->manager_info == NULL || d->request_info == NULL) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "interface XML lacks the npullm interfaces");
        return FALSE;
    }
    return TRUE;
}

static int run(NpdDaemon *d)
{
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
    g_signal_connect(d->bus, "closed", G_CALLBACK(bus_closed_cb), d);

    d->loop = g_main_loop_new(NULL, FALSE);
    d->catalog = npd_model_catalog_new((const gchar *const *)d->cfg->model_dirs);
    npd_model_catalog_set_changed_func(d->catalog, models_changed_cb, d);
    npd_model_install_sweep(d);
    d->idle = npd_idle_new(d->cfg->exit_on_idle, idle_timeout_cb, d);
    d->authorizer = npd_authorizer_new(!d->cfg->session_bus, d->cfg->auth_timeout);
    d->image_budget = npd_image_budget_new(d->cfg->max_images_in_flight, d->cfg->max_image_memory);
    /* systemd may list several directories, colon-separated: the first. */
    const gchar *cache_env = g_getenv("CACHE_DIRECTORY");
    d->npu_cache_dir = cache_env != NULL && cache_env[0] == '/' ? g_strndup(cache_env, strcspn(cache_env, ":"))
                                                              : g_strdup("");
    NpdWorkerConfig wcfg = {
        .device = d->device_load_as,
        .npu_cache_dir = d->npu_cache_dir,
        .weight_cache_dir = d->cfg->weight_cache ? d->npu_cache_dir : "",
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
    d->admission = npd_admission_new(d->cfg, d->clients, d->requests, d->image_budget);

    d->power = npd_power_policy_new(d);
    d->sleep = npd_sleep_new(d);
    if (!npd_request_objects_register(d, &error) || (d->manager = npd_manager_new(d, &error)) == NULL) {
        g_printerr("npullmd: cannot export objects: %s\n", error->message);
        d->exit_status = 1;
    } else {
        if (d->cfg->session_bus)
            g_message("session bus: callers are this user's own programs, polkit is not consulted");
        d->own_name_id = g_bus_own_name_on_connection(d->bus, NPD_BUS_NAME, G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE,
                                                      name_acquired_cb, name_lost_cb, d, NULL);
        guint sigterm = g_unix_signal_add(SIGTERM, signal_cb, d);
        guint sigint = g_unix_signal_add(SIGINT, signal_cb, d);
        guint watchdog = npd_notify_start_watchdog();
        update_status(d);
        npd_idle_start(d->idle);

        g_main_loop_run(d->loop);

        npd_notify_stopping();
        g_source_remove(sigterm);
        g_source_remove(sigint);
        if (watchdog != 0)
            g_source_remove(watchdog);
        g_bus_unown_name(d->own_name_id);
    }

    npd_requests_free(d->requests);
    d->requests = NULL;
    g_clear_pointer(&d->manager, npd_manager_free);
    if (d->request_subtree_id != 0)
        g_dbus_connection_unregister_subtree(d->bus, d->request_subtree_id);
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
    g_strfreev(d->loaded_models);
    g_main_loop_unref(d->loop);
    g_object_unref(d->bus);
    g_dbus_node_info_unref(d->introspection);
    return d->exit_status;
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

    NpdDaemon d = {.cfg = &cfg};
    if (!resolve_device(&d)) {
        npd_config_clear(&cfg);
        return 2;
    }
    int status = run(&d);
    g_free(d.device);
    g_free(d.device_status);
    g_free(d.npu_cache_dir);
    npd_config_clear(&cfg);
    return status;
}
