/* sd_notify: readiness, status, stopping, and watchdog pings sent from the
 * main loop (so a wedged main loop gets the service restarted). All calls
 * are no-ops outside systemd. */
#ifndef NPD_SYSTEMD_NOTIFY_H
#define NPD_SYSTEMD_NOTIFY_H

#include <glib.h>

void npd_notify_ready(const char *status);
void npd_notify_status(const char *status);
void npd_notify_stopping(void);
/* Starts watchdog pings when the unit has WatchdogSec=; returns the
 * source id (0 when there is no watchdog). */
guint npd_notify_start_watchdog(void);

#endif
