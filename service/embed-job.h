/* Embed's job on the engine worker (a job kind, job-kind.h): the texts,
 * embedded a step at a time (at most NPP_EMBED_STEP_TEXTS texts and
 * EMBED_STEP_BYTES of text per step, one npl_embed call), then the
 * vectors handed back with the finished event. */
#ifndef NPD_EMBED_JOB_H
#define NPD_EMBED_JOB_H

#include <glib.h>

#include "job-kind.h"
#include "text-steps.h"

typedef struct {
    gchar **texts; /* steps.n, owned */
    npl_embed_options opts;
    /* advanced by the steps on the engine thread */
    NpdTextSteps steps; /* lens: the texts' bytes */
    guint32 dim;    /* values per vector (set by check_model) */
    float *vectors; /* steps.n * dim */
    const char *pooling; /* the model's (a static string) */
} NpdEmbedJob;

extern const NpdJobKind npd_embed_job_kind;

/* Takes texts (a NULL-terminated array of n strings). */
NpdEmbedJob *npd_embed_job_new(gchar **texts, guint n, guint32 dimensions, gboolean truncate);
void npd_embed_job_free(NpdEmbedJob *j);

#endif
