#include "rerank-call.h"

#include <stdlib.h>
#include <string.h>

#include "embed-call.h"
#include "rerank-job.h"

/* The model option, else the first reranker; it must be one. */
static const NpdModelEntry *reranker(NpdDaemon *d, const char *name, GError **error)
{
    if (name == NULL) {
        const NpdModelEntry *e = npd_model_catalog_default_reranker(d->catalog);
        if (e == NULL)
            g_set_error_literal(error, NPD_ERROR, NPD_ERROR_NO_SUCH_MODEL, "no rerankers are installed");
        return e;
    }
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, name, error);
    if (e != NULL && !e->rerank) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                    "model '%s' is not a reranker: %s", e->name,
                    e->embedding ? "it makes embeddings (use Embed)" : "it generates text (use Generate or Chat)");
        return NULL;
    }
    return e;
}

gboolean npd_rerank_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                            GError **error)
{
    const char *query = NULL;
    gsize qlen = 0;
    g_autoptr(GVariant) q = g_variant_get_child_value(params, 0);
    g_autoptr(GVariant) docs = g_variant_get_child_value(params, 1);
    g_autoptr(GVariant) options = g_variant_get_child_value(params, 2);
    query = g_variant_get_string(q, &qlen);
    if (qlen == 0 || qlen > NPP_MAX_EMBED_TEXT_BYTES) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "query: %s", qlen ? "longer than 1 MiB" : "empty");
        return FALSE;
    }
    if (!npd_check_texts(docs, "documents", TRUE, error) ||
        !npd_request_options_parse(options, NPD_CALL_RERANK, d->cfg, &p->opts, error))
        return FALSE;
    const NpdModelEntry *e = reranker(d, p->opts.model, error);
    if (e == NULL)
        return FALSE;
    p->model_name = g_strdup(e->name);
    p->model_path = g_strdup(e->path);
    guint n = (guint)g_variant_n_children(docs);
    NpdRerankJob *j = npd_rerank_job_new(g_strdup(query), g_variant_dup_strv(docs, NULL), n, p->opts.truncate);
    j->top_n = p->opts.top_n;
    p->op = j;
    p->op_free = (GDestroyNotify)npd_rerank_job_free;
    return TRUE;
}

typedef struct {
    guint index;
    double score;
} Ranked;

static gint by_score(gconstpointer a, gconstpointer b)
{
    const Ranked *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index; /* ties: the documents' order */
}

/* The finished job's results, best first, cut to top_n. */
static GVariant *rerank_reply(NpdRequest *r, const NpdEvent *ev)
{
    const NpdRerankJob *j = ev->result;
    g_autofree Ranked *ranked = g_new(Ranked, j->steps.n);
    for (guint i = 0; i < j->steps.n; i++)
        ranked[i] = (Ranked){i, j->scores[i]};
    qsort(ranked, j->steps.n, sizeof *ranked, by_score);
    guint top = j->top_n != 0 && j->top_n < j->steps.n ? j->top_n : j->steps.n;
    GVariantBuilder res, info;
    g_variant_builder_init(&res, G_VARIANT_TYPE("a(ud)"));
    for (guint i = 0; i < top; i++)
        g_variant_builder_add(&res, "(ud)", ranked[i].index, ranked[i].score);
    g_variant_builder_init(&info, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&info, "{sv}", "model", g_variant_new_string(r->model));
    g_variant_builder_add(&info, "{sv}", "documents", g_variant_new_uint32(j->steps.n));
    g_variant_builder_add(&info, "{sv}", "prompt_tokens", g_variant_new_uint32(ev->stats.prompt_tokens));
    g_variant_builder_add(&info, "{sv}", "truncated", g_variant_new_uint32((guint32)j->steps.n_truncated));
    g_variant_builder_add(&info, "{sv}", "passes", g_variant_new_uint32((guint32)j->steps.n_passes));
    g_variant_builder_add(&info, "{sv}", "total_time_ms", g_variant_new_double(ev->stats.total_time_ms));
    g_variant_builder_add(&info, "{sv}", "device", g_variant_new_string(r->daemon->device->device));
    return g_variant_new("(a(ud)a{sv})", &res, &info);
}

gboolean npd_rerank_run(NpdPendingCall *p)
{
    return npd_job_call_run(p, &npd_rerank_job_kind, rerank_reply, ((NpdRerankJob *)p->op)->steps.n);
}
