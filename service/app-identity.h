/* Which application a bus peer is (app-identity.c): learned once per
 * connection from the process the bus daemon says it is, through a pidfd
 * of that process, never from anything the client names. In order:
 *   flatpak  the [Application] name of the peer's /.flatpak-info, read
 *            through /proc/PID/root (set up by Flatpak outside the sandbox)
 *   systemd  the unit of the peer's cgroup as desktops launch apps:
 *            app[-LAUNCHER]-ID-N.scope or app[-LAUNCHER]-ID[@N].service
 *   exe      the basename of its executable
 * What each source can be made to say is docs/desktop.md. Main context. */
#ifndef NPD_APP_IDENTITY_H
#define NPD_APP_IDENTITY_H

#include <gio/gio.h>

typedef struct NpdAppIdentity {
    gchar *id;           /* never NULL ("" when nothing could be learned) */
    gchar *display_name; /* from its .desktop file, NULL when unknown */
    const char *source;  /* "flatpak", "systemd", "exe" or "unknown" */
} NpdAppIdentity;

/* Asks the bus daemon for name's process (its pidfd when the daemon
 * hands one out, else its pid) and reads what the process is; the pid's
 * owner must be uid. Never fails: an unknown peer is source "unknown". */
NpdAppIdentity *npd_app_identity_lookup(GDBusConnection *bus, const char *name, guint32 uid);
void npd_app_identity_free(NpdAppIdentity *app);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdAppIdentity, npd_app_identity_free)

/* The parts, for tests: the app id in a systemd unit name, or NULL. */
gchar *npd_app_id_from_unit(const char *unit);
/* The app id in a /proc/PID/cgroup text (unified line first, then the
 * name=systemd one), or NULL. */
gchar *npd_app_id_from_cgroup(const char *cgroup_text);

#endif
