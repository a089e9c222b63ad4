#include "embed-call.h"

#include <string.h>

#include "embed-job.h"

GVariant *npd_model_capabilities(const NpdModelEntry *e)
{
    const char *caps[4] = {NULL};
    guint n = 0;
    if (e->rerank) {
        caps[n++] = "rerank";
    } else if (e->embedding) {
        caps[n++] = "embedding";
    } else if (e->supported) {
        caps[n++] = "completion";
        caps[n++] = "chat";
        if (e->vision)
            caps[n++] = "vision";
    }
    return g_variant_new_strv(caps, n);
}

gboolean npd_check_texts(GVariant *texts, const char *what, gboolean allow_empty, GError **error)
{
    gsize n = g_variant_n_children(texts), total = 0;
    if (n == 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: the list is empty", what);
        return FALSE;
    }
    if (n > NPP_MAX_EMBED_TEXTS) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "%s: %zu texts exceed the limit of %d per call", what, n, NPP_MAX_EMBED_TEXTS);
        return FALSE;
    }
    for (gsize i = 0; i < n; i++) {
        gsize len = 0;
        g_autoptr(GVariant) t = g_variant_get_child_value(texts, i);
        g_variant_get_string(t, &len);
        if (len == 0 && !allow_empty) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s[%zu]: empty text", what, i);
            return FALSE;
        }
        if (len > NPP_MAX_EMBED_TEXT_BYTES) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "%s[%zu]: %zu bytes exceed the limit of %d per text", what, i, len, NPP_MAX_EMBED_TEXT_BYTES);
            return FALSE;
        }
        total += len;
    }
    if (total > NPP_MAX_EMBED_BYTES) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "%s: %zu bytes in all exceed the limit of %d per call", what, total, NPP_MAX_EMBED_BYTES);
        return FALSE;
    }
    return TRUE;
}

/* The model option, else the first embedding model; it must make
 * embeddings. */
static const NpdModelEntry *embedding_model(NpdDaemon *d, const char *name, GError **error)
{
    if (name == NULL) {
        const NpdModelEntry *e = npd_model_catalog_default_embedding(d->catalog);
        if (e == NULL)
            g_set_error_literal(error, NPD_ERROR, NPD_ERROR_NO_SUCH_MODEL, "no embedding models are installed");
        return e;
    }
    const NpdModelEntry *e = npd_model_catalog_lookup(d->catalog, name, error);
    if (e != NULL && !e->embedding) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                    "model '%s' is not an embedding model: it generates text (use Generate or Chat)", e->name);
        return NULL;
    }
    if (e != NULL && e->rerank) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                    "model '%s' is a reranker: it scores documents against a query, not vectors (use Rerank)",
                    e->name);
        return NULL;
    }
    return e;
}

gboolean npd_embed_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                           GError **error)
{
    g_autoptr(GVariant) texts = g_variant_get_child_value(params, 0);
    g_autoptr(GVariant) options = g_variant_get_child_value(params, 1);
    if (!npd_check_texts(texts, "texts", FALSE, error) || !npd_request_options_parse(options, NPD_CALL_EMBED, d->cfg, &p->opts, error))
        return FALSE;
    const NpdModelEntry *e = embedding_model(d, p->opts.model, error);
    if (e == NULL)
        return FALSE;
    p->model_name = g_strdup(e->name);
    p->model_path = g_strdup(e->path);
    guint n = (guint)g_variant_n_children(texts);
    p->op = npd_embed_job_new(g_variant_dup_strv(texts, NULL), n, p->opts.dimensions, p->opts.truncate);
    p->op_free = (GDestroyNotify)npd_embed_job_free;
    return TRUE;
}

/* The finished job's vectors and what it took. */
static GVariant *embed_reply(NpdRequest *r, const NpdEvent *ev)
{
    const NpdEmbedJob *j = ev->result;
    GVariantBuilder vecs, info;
    g_variant_builder_init(&vecs, G_VARIANT_TYPE("aad"));
    g_autofree double *row = g_new(double, j->dim);
    for (guint i = 0; i < j->steps.n; i++) {
        for (guint32 k = 0; k < j->dim; k++)
            row[k] = j->vectors[(gsize)i * j->dim + k];
        g_variant_builder_add_value(&vecs, g_variant_new_fixed_array(G_VARIANT_TYPE_DOUBLE, row, j->dim, sizeof *row));
    }
    g_variant_builder_init(&info, G_VARIANT_TYPE_VARDICT);
    g_variant_builder_add(&info, "{sv}", "model", g_variant_new_string(r->model));
    g_variant_builder_add(&info, "{sv}", "dimensions", g_variant_new_uint32(j->dim));
    g_variant_builder_add(&info, "{sv}", "pooling", g_variant_new_string(j->pooling != NULL ? j->pooling : ""));
    g_variant_builder_add(&info, "{sv}", "prompt_tokens", g_variant_new_uint32(ev->stats.prompt_tokens));
    g_variant_builder_add(&info, "{sv}", "truncated", g_variant_new_uint32((guint32)j->steps.n_truncated));
    g_variant_builder_add(&info, "{sv}", "passes", g_variant_new_uint32((guint32)j->steps.n_passes));
    g_variant_builder_add(&info, "{sv}", "total_time_ms", g_variant_new_double(ev->stats.total_time_ms));
    g_variant_builder_add(&info, "{sv}", "device", g_variant_new_string(r->daemon->device->device));
    return g_variant_new("(aada{sv})", &vecs, &info);
}

/* Admitted like the other requests (the same queue, client and user
 * limits; the request holds an idle token until it finishes). */
gboolean npd_job_call_run(NpdPendingCall *p, const NpdJobKind *kind,
                          GVariant *(*reply)(NpdRequest *r, const NpdEvent *ev), guint n)
{
    g_autoptr(GError) error = NULL;
    NpdJob *job = g_new0(NpdJob, 1);
    job->model_name = g_strdup(p->model_name);
    job->model_path = g_strdup(p->model_path);
    job->priority = p->opts.priority;
    job->uid = p->client->uid;
    job->kind = kind;
    job->kind_state = g_steal_pointer(&p->op);
    NpdRequest *r = npd_pending_call_submit(p, NULL, p->invocation, job, &error);
    if (r == NULL) {
        g_dbus_method_invocation_return_gerror(p->invocation, error);
        return FALSE;
    }
    /* before any event: the worker's reach the main context later */
    r->reply = reply;
    g_debug("%s request %" G_GUINT64_FORMAT " from %s: model %s, %u texts", kind->name, r->id, r->client->name,
            p->model_name, n);
    return FALSE;
}

gboolean npd_embed_run(NpdPendingCall *p)
{
    return npd_job_call_run(p, &npd_embed_job_kind, embed_reply, ((NpdEmbedJob *)p->op)->steps.n);
}
