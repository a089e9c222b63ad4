#include "systemd-notify.h"

#include <systemd/sd-daemon.h>

static void notify(const char *state)
{
    int r = sd_notify(0, state);
    if (r < 0)
        g_debug("sd_notify(%s) failed: %s", state, g_strerror(-r));
}

void npd_notify_ready(const char *status)
{
    g_autofree gchar *msg = g_strdup_printf("READY=1\nSTATUS=%s", status);
    notify(msg);
}

void npd_notify_status(const char *status)
{
    g_autofree gchar *msg = g_strdup_printf("STATUS=%s", status);
    notify(msg);
}

void npd_notify_stopping(void)
{
    notify("STOPPING=1");
}

static gboolean watchdog_ping(gpointer data)
{
    notify("WATCHDOG=1");
    return G_SOURCE_CONTINUE;
}

guint npd_notify_start_watchdog(void)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
        return 0;
    guint interval_ms = (guint)MAX(usec / 2000, 100);
    g_debug("watchdog enabled: pinging every %u ms", interval_ms);
    return g_timeout_add(interval_ms, watchdog_ping, NULL);
}
