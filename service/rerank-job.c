#include "rerank-job.h"

#include <string.h>

#include "dbus-errors.h"
#include "engine-worker.h"
#include "npullm-protocol.h"

/* About one engine pass of ordinary text per step (each document also
 * carries the query), as Embed's steps. */
#define RERANK_STEP_BYTES (8 * 1024)

NpdRerankJob *npd_rerank_job_new(gchar *query, gchar **docs, guint n, gboolean truncate)
{
    NpdRerankJob *j = g_new0(NpdRerankJob, 1);
    j->query = query;
    j->docs = docs;
    npd_text_steps_init(&j->steps, (const char *const *)docs, n, strlen(query));
    npl_rerank_options_default(&j->opts);
    j->opts.truncate = truncate;
    return j;
}

void npd_rerank_job_free(NpdRerankJob *j)
{
    if (j == NULL)
        return;
    g_free(j->query);
    g_strfreev(j->docs);
    npd_text_steps_clear(&j->steps);
    g_free(j->scores);
    g_free(j);
}

static gboolean rerank_check_model(gpointer state, npl_model *m, GError **error)
{
    NpdRerankJob *j = state;
    if (!npl_model_is_reranker(m)) {
        /* the catalog said it was one: the file changed meanwhile */
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                            "the model is not a reranker (no rank pooling with a classification head)");
        return FALSE;
    }
    j->scores = g_try_new(float, j->steps.n);
    if (j->scores == NULL) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "no memory for %u scores", j->steps.n);
        return FALSE;
    }
    return TRUE;
}

/* The next documents, up to the step's caps. A document's score does not
 * depend on how documents are grouped into calls. */
static npl_status rerank_step(gpointer state, npl_model *m, gboolean *done, npl_error *err)
{
    NpdRerankJob *j = state;
    guint first = j->steps.done, end = npd_text_steps_next(&j->steps, RERANK_STEP_BYTES);
    npl_embed_info info;
    npl_status st = npl_rerank(m, j->query, (const char *const *)j->docs + first, end - first, j->scores + first,
                               &j->opts, &info, err);
    return npd_text_steps_finish(&j->steps, end, st, &info, "documents", "rerank: ", done, err);
}

static void rerank_stats(gconstpointer state, NpdJobStats *stats)
{
    npd_text_steps_stats(&((const NpdRerankJob *)state)->steps, stats);
}

const NpdJobKind npd_rerank_job_kind = {
    .name = "rerank",
    .check_model = rerank_check_model,
    .step = rerank_step,
    .stats = rerank_stats,
    .free = (void (*)(gpointer))npd_rerank_job_free,
};
