/* The engine worker's loaded models: loaded on a job's demand or by
 * LoadModel, unloaded by UnloadModel or after IdleTimeout unused. */
#include "worker-private.h"

#include <malloc.h>
#include <string.h>

void npd_worker_model_free(LoadedModel *lm)
{
    npl_vision_free(lm->vision);
    npl_vocab_index_free(lm->vocab_index);
    g_free(lm->vision_error);
    npl_kv_pool_free(lm->kv_pool);
    npl_model_free(lm->model);
    g_free(lm->name);
    g_free(lm->path);
    g_free(lm);
}

static void post_models(NpdWorker *w)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, w->models);
    while (g_hash_table_iter_next(&it, &key, NULL))
        g_ptr_array_add(names, g_strdup(key));
    g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
    g_ptr_array_add(names, NULL);
    npd_event_post_models(w->events, (gchar **)g_ptr_array_steal(names, NULL));
}

/* The model's vision projector, when the catalog paired one with it
 * (the job or LoadModel carries its path).
 * A broken one does not stop the model from serving text: *why says what
 * image requests will be told. */
static npl_vision *load_vision(NpdWorker *w, const char *name, const char *mmproj, gchar **why)
{
    if (mmproj == NULL)
        return NULL;
    npl_vision_params vp;
    npl_vision_params_default(&vp);
    vp.n_threads = (int)w->cfg.threads;
    npl_error err;
    npl_error_clear(&err);
    npl_vision *v = npl_vision_load(mmproj, &vp, &err);
    if (v == NULL) {
        *why = g_strdup_printf("loading the vision projector of '%s' failed: %s", name, err.message);
        g_warning("%s", *why);
    }
    return v;
}

LoadedModel *npd_worker_model_ensure(NpdWorker *w, const char *name, const char *path, const char *projector,
                                     GError **error)
{
    LoadedModel *lm = g_hash_table_lookup(w->models, name);
    if (lm != NULL)
        return lm;
    npl_model_params params;
    npl_model_params_default(&params);
    params.n_threads = (int)w->cfg.threads;
    params.prefill_chunk = w->cfg.prefill_chunk;
    params.device = w->cfg.device;
    params.npu_cache_dir = w->cfg.npu_cache_dir;
    params.weight_cache_dir = w->cfg.weight_cache_dir;
    npl_error err;
    npl_error_clear(&err);
    gint64 t0 = g_get_monotonic_time();
    g_autofree gchar *vision_error = NULL;
    npl_vision *vision = load_vision(w, name, projector, &vision_error);
    /* An image's rows attend to each other, so they go through the model
     * in one forward step: its working rows must hold the largest image. */
    if (vision != NULL)
        params.block_rows = npl_vision_get_info(vision)->max_tokens;
    npl_model *model = npl_model_load(path, &params, &err);
    if (model == NULL) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_MODEL_LOAD_FAILED, "loading model '%s' failed: %s", name,
                    err.message);
        g_warning("loading model %s (%s) failed: %s", name, path, err.message);
        npl_vision_free(vision);
        return NULL;
    }
    npl_kv_pool *kv_pool = npl_kv_pool_create(model, w->cfg.kv_cache_bytes, &err);
    if (kv_pool == NULL) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_MODEL_LOAD_FAILED, "loading model '%s' failed: %s", name,
                    err.message);
        npl_model_free(model);
        npl_vision_free(vision);
        return NULL;
    }
    if (w->active_threads != 0)
        npl_model_set_threads(model, (int)w->active_threads); /* the power policy's */
    lm = g_new0(LoadedModel, 1);
    lm->name = g_strdup(name);
    lm->kv_pool = kv_pool;
    lm->path = g_strdup(path);
    lm->model = model;
    lm->vision = vision;
    lm->vision_error = g_steal_pointer(&vision_error);
    npd_worker_apply_decode_device(w, lm); /* the power policy's phase split */
    lm->last_used = g_get_monotonic_time();
    g_hash_table_insert(w->models, lm->name, lm);
    g_message("loaded model %s from %s in %.0f ms", name, path, (double)(lm->last_used - t0) / 1000.0);
    npl_weight_cache_stats wc;
    npl_model_weight_cache_stats(model, &wc);
    if (wc.note[0] != '\0')
        g_message("model %s: %s", name, wc.note);
    post_models(w);
    return lm;
}

static gboolean queued_for(gconstpointer item, gconstpointer name)
{
    return strcmp(((const QueuedJob *)item)->job->model_name, name) == 0;
}

static gboolean model_has_queued_jobs(NpdWorker *w, const LoadedModel *lm)
{
    return npd_fair_queue_find(w->queue, queued_for, lm->name) != NULL;
}

static void unload_model(NpdWorker *w, LoadedModel *lm)
{
    g_message("unloading model %s", lm->name);
    /* A weight cache still being written is finished first (it reads the
     * model's packed weights), and how it went logged. */
    if (npl_model_weight_cache_wait(lm->model)) {
        npl_weight_cache_stats wc;
        npl_model_weight_cache_stats(lm->model, &wc);
        g_message("model %s: %s", lm->name, wc.note);
    }
    g_hash_table_remove(w->models, lm->name);
    /* munmap'ed weights are gone already; this hands freed heap (KV
     * caches, scratch buffers) back to the kernel as well. */
    malloc_trim(0);
    post_models(w);
}

void npd_worker_models_unload_idle(NpdWorker *w)
{
    gint64 now = g_get_monotonic_time();
    gint64 timeout = (gint64)w->cfg.idle_timeout * G_USEC_PER_SEC;
    GHashTableIter it;
    gpointer value;
    GPtrArray *idle = NULL;
    g_hash_table_iter_init(&it, w->models);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        LoadedModel *lm = value;
        if (lm->n_jobs == 0 && now - lm->last_used >= timeout && !model_has_queued_jobs(w, lm)) {
            if (idle == NULL)
                idle = g_ptr_array_new();
            g_ptr_array_add(idle, lm);
        }
    }
    if (idle == NULL)
        return;
    for (guint i = 0; i < idle->len; i++)
        unload_model(w, idle->pdata[i]);
    g_ptr_array_unref(idle);
}

void npd_worker_models_unload_unused(NpdWorker *w)
{
    GHashTableIter it;
    gpointer value;
    g_autoptr(GPtrArray) unused = g_ptr_array_new();
    g_hash_table_iter_init(&it, w->models);
    while (g_hash_table_iter_next(&it, NULL, &value))
        if (((LoadedModel *)value)->n_jobs == 0)
            g_ptr_array_add(unused, value);
    for (guint i = 0; i < unused->len; i++)
        unload_model(w, unused->pdata[i]);
}

gint64 npd_worker_models_next_unload(NpdWorker *w)
{
    gint64 next = -1;
    gint64 timeout = (gint64)w->cfg.idle_timeout * G_USEC_PER_SEC;
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, w->models);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        LoadedModel *lm = value;
        if (lm->n_jobs != 0)
            continue;
        gint64 t = lm->last_used + timeout;
        if (next < 0 || t < next)
            next = t;
    }
    return next;
}

void npd_worker_model_unload(NpdWorker *w, const char *name, gpointer tag)
{
    LoadedModel *lm = g_hash_table_lookup(w->models, name);
    if (lm == NULL) {
        npd_event_post_command_done(w->events, tag, NULL);
        return;
    }
    if (lm->n_jobs > 0 || model_has_queued_jobs(w, lm)) {
        npd_event_post_command_done(w->events, tag,
                          g_error_new(NPD_ERROR, NPD_ERROR_BUSY, "model '%s' is in use by %u running requests",
                                      name, lm->n_jobs));
        return;
    }
    unload_model(w, lm);
    npd_event_post_command_done(w->events, tag, NULL);
}

void npd_worker_models_forget_cache(NpdWorker *w, guint32 uid)
{
    GHashTableIter it;
    gpointer value;
    size_t n = 0;
    g_hash_table_iter_init(&it, w->models);
    while (g_hash_table_iter_next(&it, NULL, &value))
        n += npl_kv_pool_forget(((LoadedModel *)value)->kv_pool, uid);
    g_message("dropped %zu cached conversation(s) of uid %u", n, uid);
    malloc_trim(0);
}

