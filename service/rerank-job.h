/* Rerank's job on the engine worker (a job kind, job-kind.h): the
 * documents scored against the query a step at a time (at most
 * NPP_EMBED_STEP_TEXTS documents and about a pass of text per step, one
 * npl_rerank call), the scores handed back with the finished event. */
#ifndef NPD_RERANK_JOB_H
#define NPD_RERANK_JOB_H

#include <glib.h>

#include "job-kind.h"
#include "text-steps.h"

typedef struct {
    gchar *query;
    gchar **docs; /* steps.n, owned */
    npl_rerank_options opts;
    guint top_n; /* the reply's: 0 all (the job scores every document) */
    /* advanced by the steps on the engine thread */
    NpdTextSteps steps; /* each document with the query */
    float *scores; /* steps.n, in the documents' order */
} NpdRerankJob;

extern const NpdJobKind npd_rerank_job_kind;

/* Takes query and docs (a NULL-terminated array of n strings). */
NpdRerankJob *npd_rerank_job_new(gchar *query, gchar **docs, guint n, gboolean truncate);
void npd_rerank_job_free(NpdRerankJob *j);

#endif
