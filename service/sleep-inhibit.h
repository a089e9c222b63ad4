/* Sleep (sleep-inhibit.c): npullmd holds a logind "delay" sleep inhibitor
 * while the machine is awake. On PrepareForSleep(true) the engine finishes
 * its current step and stops scheduling, frees the KV caches kept for
 * reuse (and, with [Power] UnloadOnSleep=true, unloads the models no
 * request uses); then, or after 2 s at the latest, the inhibitor is
 * released so that the machine sleeps. On PrepareForSleep(false)
 * scheduling resumes and the inhibitor is taken again: requests in flight
 * continue where they stopped. Main context only. */
#ifndef NPD_SLEEP_INHIBIT_H
#define NPD_SLEEP_INHIBIT_H

#include <glib.h>

typedef struct NpdDaemon NpdDaemon;
typedef struct NpdSleep NpdSleep;

/* Watches logind on d->bus (not on a session bus). */
NpdSleep *npd_sleep_new(NpdDaemon *d);
void npd_sleep_free(NpdSleep *s);
/* A worker's NPD_EVENT_COMMAND_DONE (an NpdEvent): TRUE when it was the
 * answer to this module's suspend, now handled. */
gboolean npd_sleep_handle_done(NpdSleep *s, gpointer tag);

#endif
