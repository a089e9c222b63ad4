/* Sleep (sleep-inhibit.h). */
#include "sleep-inhibit.h"

#include <gio/gunixfdlist.h>
#include <unistd.h>

#include "daemon.h"

#define LOGIND_NAME "org.freedesktop.login1"
#define LOGIND_PATH "/org/freedesktop/login1"
#define LOGIND_IFACE "org.freedesktop.login1.Manager"
/* The longest the machine waits for npullmd before sleeping (logind's own
 * InhibitDelayMaxSec is longer: this bound is the daemon's promise). */
#define PREPARE_TIMEOUT_MS 2000

struct NpdSleep {
    NpdDaemon *daemon;
    guint signal_id;
    guint watch_id;
    int inhibitor;     /* the delay lock's descriptor, -1: none */
    gboolean taking;   /* Inhibit() called, not answered yet */
    gboolean sleeping; /* between PrepareForSleep(true) and (false) */
    guint preparing;   /* suspends the worker has not answered yet */
    gint64 t_prepare;
    guint timeout_id;
    GCancellable *cancellable;
};

static void release_inhibitor(NpdSleep *s)
{
    if (s->inhibitor >= 0) {
        close(s->inhibitor);
        s->inhibitor = -1;
    }
}

static void inhibit_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GUnixFDList) fds = NULL;
    g_autoptr(GVariant) ret =
        g_dbus_connection_call_with_unix_fd_list_finish(G_DBUS_CONNECTION(source), &fds, res, &error);
    if (ret == NULL && g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return; /* freed meanwhile */
    NpdSleep *s = data;
    s->taking = FALSE;
    if (ret == NULL) {
        g_message("no sleep inhibitor (requests simply pause while the machine sleeps): %s", error->message);
        return;
    }
    gint32 handle = -1;
    g_variant_get(ret, "(h)", &handle);
    int fd = fds != NULL ? g_unix_fd_list_get(fds, handle, NULL) : -1;
    if (fd < 0)
        return;
    if (s->sleeping || s->inhibitor >= 0) {
        close(fd); /* too late, or one is held already */
        return;
    }
    s->inhibitor = fd;
    g_debug("holding a delay sleep inhibitor");
}

static void take_inhibitor(NpdSleep *s)
{
    if (s->inhibitor >= 0 || s->taking || s->sleeping)
        return;
    s->taking = TRUE;
    g_dbus_connection_call_with_unix_fd_list(
        s->daemon->bus, LOGIND_NAME, LOGIND_PATH, LOGIND_IFACE, "Inhibit",
        g_variant_new("(ssss)", "sleep", "npullm", "Finishing the current step and freeing memory", "delay"),
        G_VARIANT_TYPE("(h)"), G_DBUS_CALL_FLAGS_NO_AUTO_START, 5000, NULL, s->cancellable, inhibit_cb, s);
}

/* The engine is ready for sleep, or the bound ran out: let the machine go. */
static void prepared(NpdSleep *s, const char *how)
{
    if (s->timeout_id != 0) {
        g_source_remove(s->timeout_id);
        s->timeout_id = 0;
    }
    g_message("ready for sleep (%s, %.0f ms); scheduling resumes on wake", how,
              (double)(g_get_monotonic_time() - s->t_prepare) / 1000.0);
    release_inhibitor(s);
}

static gboolean prepare_timeout_cb(gpointer data)
{
    NpdSleep *s = data;
    s->timeout_id = 0;
    prepared(s, "the engine's step outlasted the bound");
    return G_SOURCE_REMOVE;
}

static void prepare_for_sleep_cb(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                                 const char *signal, GVariant *params, gpointer data)
{
    NpdSleep *s = data;
    if (!g_variant_is_of_type(params, G_VARIANT_TYPE("(b)")))
        return;
    gboolean start = FALSE;
    g_variant_get(params, "(b)", &start);
    if (start && !s->sleeping) {
        s->sleeping = TRUE;
        s->t_prepare = g_get_monotonic_time();
        g_message("the machine prepares for sleep: stopping after the current step");
        s->preparing++;
        npd_worker_suspend(s->daemon->worker, s->daemon->cfg->power.unload_on_sleep, s);
        s->timeout_id = g_timeout_add(PREPARE_TIMEOUT_MS, prepare_timeout_cb, s);
    } else if (!start && s->sleeping) {
        s->sleeping = FALSE;
        if (s->timeout_id != 0) {
            g_source_remove(s->timeout_id);
            s->timeout_id = 0;
        }
        g_message("the machine woke up: scheduling resumes");
        npd_worker_resume(s->daemon->worker);
        take_inhibitor(s);
    }
}

gboolean npd_sleep_handle_done(NpdSleep *s, gpointer tag)
{
    if (s == NULL || tag != s)
        return FALSE;
    s->preparing--;
    if (s->preparing == 0 && s->sleeping && s->timeout_id != 0)
        prepared(s, "step finished, caches freed");
    return TRUE;
}

static void logind_appeared_cb(GDBusConnection *bus, const char *name, const char *owner, gpointer data)
{
    take_inhibitor(data);
}

static void logind_vanished_cb(GDBusConnection *bus, const char *name, gpointer data)
{
    release_inhibitor(data); /* its lock went with it */
}

NpdSleep *npd_sleep_new(NpdDaemon *d)
{
    NpdSleep *s = g_new0(NpdSleep, 1);
    s->daemon = d;
    s->inhibitor = -1;
    if (d->cfg->session_bus)
        return s; /* logind is on the system bus: a development daemon ignores sleep */
    s->cancellable = g_cancellable_new();
    s->signal_id = g_dbus_connection_signal_subscribe(d->bus, LOGIND_NAME, LOGIND_IFACE, "PrepareForSleep",
                                                      LOGIND_PATH, NULL, G_DBUS_SIGNAL_FLAGS_NONE,
                                                      prepare_for_sleep_cb, s, NULL);
    s->watch_id = g_bus_watch_name_on_connection(d->bus, LOGIND_NAME, G_BUS_NAME_WATCHER_FLAGS_NONE,
                                                 logind_appeared_cb, logind_vanished_cb, s, NULL);
    return s;
}

void npd_sleep_free(NpdSleep *s)
{
    if (s == NULL)
        return;
    if (s->cancellable != NULL) {
        g_cancellable_cancel(s->cancellable);
        g_object_unref(s->cancellable);
    }
    if (s->signal_id != 0)
        g_dbus_connection_signal_unsubscribe(s->daemon->bus, s->signal_id);
    if (s->watch_id != 0)
        g_bus_unwatch_name(s->watch_id);
    if (s->timeout_id != 0)
        g_source_remove(s->timeout_id);
    release_inhibitor(s);
    g_free(s);
}
