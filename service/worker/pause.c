/* The engine worker under the power policy and across sleep: how many
 * threads compute, whether background jobs start, and scheduling stopped
 * while the machine sleeps (worker-private.h). Everything here happens
 * between scheduling steps, so no request is dropped or disturbed: a
 * running job computes the same output with fewer threads, and a
 * suspended one continues where it stopped. */
#include "worker-private.h"

#include <malloc.h>

static void apply_threads(NpdWorker *w)
{
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, w->models);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        npl_model_set_threads(((LoadedModel *)value)->model, (int)w->active_threads);
        npd_worker_apply_decode_device(w, value);
    }
}

/* The KV caches kept for prefix reuse, of every loaded model (running
 * jobs' sequences are their own, not the pool's: they stay). */
static void drop_kv_pools(NpdWorker *w)
{
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, w->models);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        LoadedModel *lm = value;
        npl_error err;
        npl_error_clear(&err);
        npl_kv_pool *fresh = npl_kv_pool_create(lm->model, w->cfg.kv_cache_bytes, &err);
        if (fresh == NULL)
            continue; /* kept: the running jobs give theirs back to it */
        npl_kv_pool_free(lm->kv_pool);
        lm->kv_pool = fresh;
    }
}

void npd_worker_pause_command(NpdWorker *w, const Command *cmd)
{
    switch (cmd->kind) {
    case CMD_POWER:
        w->active_threads = cmd->threads;
        w->background_paused = cmd->background_paused;
        w->cpu_decode = cmd->cpu_decode;
        apply_threads(w);
        break;
    case CMD_SUSPEND:
        /* the step before this command was the last until resumed */
        w->suspended = TRUE;
        drop_kv_pools(w);
        if (cmd->unload)
            npd_worker_models_unload_unused(w);
        malloc_trim(0);
        npd_event_post_command_done(w->events, cmd->tag, NULL);
        break;
    case CMD_RESUME:
        w->suspended = FALSE;
        break;
    default:
        g_assert_not_reached();
    }
}

gboolean npd_worker_may_start(NpdWorker *w, const NpdJob *job)
{
    return !(w->background_paused && job->priority == NPD_PRIORITY_BACKGROUND);
}

void npd_worker_set_power(NpdWorker *w, guint threads, gboolean background_paused, gboolean cpu_decode)
{
    Command *cmd = npd_worker_command_new(CMD_POWER);
    cmd->threads = threads;
    cmd->background_paused = background_paused;
    cmd->cpu_decode = cpu_decode;
    g_async_queue_push(w->commands, cmd);
}

void npd_worker_suspend(NpdWorker *w, gboolean unload, gpointer tag)
{
    Command *cmd = npd_worker_command_new(CMD_SUSPEND);
    cmd->unload = unload;
    cmd->tag = tag;
    g_async_queue_push(w->commands, cmd);
}

void npd_worker_resume(NpdWorker *w)
{
    Command *cmd = npd_worker_command_new(CMD_RESUME);
    g_async_queue_push(w->commands, cmd);
}
