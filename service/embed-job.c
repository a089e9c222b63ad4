#include "embed-job.h"

#include <string.h>

#include "dbus-errors.h"
#include "engine-worker.h"
#include "npullm-protocol.h"

/* About one engine pass (2048 rows) of ordinary text per step: a step
 * then delays the generation streams by about a prefill chunk. */
#define EMBED_STEP_BYTES (8 * 1024)
/* The vectors go back as doubles in one reply: kept below the buses'
 * usual message limit (32 MiB). */
#define MAX_REPLY_VALUES ((gsize)3 * 1024 * 1024)

NpdEmbedJob *npd_embed_job_new(gchar **texts, guint n, guint32 dimensions, gboolean truncate)
{
    NpdEmbedJob *j = g_new0(NpdEmbedJob, 1);
    j->texts = texts;
    npd_text_steps_init(&j->steps, (const char *const *)texts, n, 0);
    npl_embed_options_default(&j->opts);
    j->opts.dimensions = dimensions;
    j->opts.truncate = truncate;
    return j;
}

void npd_embed_job_free(NpdEmbedJob *j)
{
    if (j == NULL)
        return;
    g_strfreev(j->texts);
    npd_text_steps_clear(&j->steps);
    g_free(j->vectors);
    g_free(j);
}

static gboolean embed_check_model(gpointer state, npl_model *m, GError **error)
{
    NpdEmbedJob *j = state;
    guint32 dim = npl_model_embedding_dim(m);
    if (dim == 0) {
        /* the catalog said it was one: the file changed meanwhile */
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                            "the model is not an embedding model (it generates text: use Generate or Chat)");
        return FALSE;
    }
    if (j->opts.dimensions > dim) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "dimensions: %u is more than the model's %u", j->opts.dimensions, dim);
        return FALSE;
    }
    j->dim = j->opts.dimensions != 0 ? j->opts.dimensions : dim;
    if ((gsize)j->steps.n * j->dim > MAX_REPLY_VALUES) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "texts: %u vectors of %u values exceed the reply limit of %zu values (send fewer texts)", j->steps.n,
                    j->dim, MAX_REPLY_VALUES);
        return FALSE;
    }
    j->pooling = npl_model_pooling_name(m);
    j->vectors = g_try_new(float, (gsize)j->steps.n * j->dim);
    if (j->vectors == NULL) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "no memory for %u vectors of %u values", j->steps.n, j->dim);
        return FALSE;
    }
    return TRUE;
}

/* The next texts, up to the step's caps. The engine's vectors do not
 * depend on how texts are grouped into calls. */
static npl_status embed_step(gpointer state, npl_model *m, gboolean *done, npl_error *err)
{
    NpdEmbedJob *j = state;
    guint first = j->steps.done, end = npd_text_steps_next(&j->steps, EMBED_STEP_BYTES);
    npl_embed_info info;
    npl_status st = npl_embed(m, (const char *const *)j->texts + first, j->steps.lens + first, end - first, &j->opts,
                              j->vectors + (gsize)first * j->dim, &info, err);
    return npd_text_steps_finish(&j->steps, end, st, &info, "texts", "embed: ", done, err);
}

static void embed_stats(gconstpointer state, NpdJobStats *stats)
{
    npd_text_steps_stats(&((const NpdEmbedJob *)state)->steps, stats);
}

const NpdJobKind npd_embed_job_kind = {
    .name = "embedding",
    .check_model = embed_check_model,
    .step = embed_step,
    .stats = embed_stats,
    .free = (void (*)(gpointer))npd_embed_job_free,
};
