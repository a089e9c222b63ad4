/* Whether npullmd is idle: whatever keeps it busy (an unfinished request,
 * a call on its way, a loaded model, a model being installed) holds an
 * inhibit token while it does; once no token is held for timeout seconds
 * the timeout function runs (--exit-on-idle). The components take and
 * give back their tokens; nobody has to tell the daemon that activity
 * changed. */
#ifndef NPD_IDLE_H
#define NPD_IDLE_H

#include <glib.h>

typedef struct NpdIdle NpdIdle;
typedef void (*NpdIdleFunc)(gpointer user_data);

/* timeout 0: never idle (the tokens are still counted). */
NpdIdle *npd_idle_new(guint timeout, NpdIdleFunc on_timeout, gpointer user_data);
/* From now on the timer runs while no token is held (the daemon is
 * ready to serve: its start-up does not count as idle time). */
void npd_idle_start(NpdIdle *idle);
void npd_idle_free(NpdIdle *idle);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdIdle, npd_idle_free)

/* A token (never 0) held until npd_idle_uninhibit; reason is for the
 * debug log. */
guint npd_idle_inhibit(NpdIdle *idle, const char *reason);
/* Gives a token back; 0 is no token (nothing happens). */
void npd_idle_uninhibit(NpdIdle *idle, guint token);
/* How many tokens are held. */
guint npd_idle_inhibitors(const NpdIdle *idle);

#endif
