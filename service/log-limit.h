/* A bound on how often one kind of journal line is written, so that a
 * user cannot flood the journal with lines they cause (e.g. a request
 * dropped per disconnecting client): at most burst lines per period; the
 * first line written after some were left out says how many. */
#ifndef NPD_LOG_LIMIT_H
#define NPD_LOG_LIMIT_H

#include <glib.h>

typedef struct {
    gint64 window_start; /* monotonic µs */
    guint written;       /* in this window */
    guint left_out;      /* since the last line written */
} NpdLogLimit;

/* Whether a line may be written now; when it may, *left_out is how many
 * were left out before it (and the count starts again). */
gboolean npd_log_limit_allow(NpdLogLimit *l, guint burst, gint64 period_us, guint *left_out);

#endif
