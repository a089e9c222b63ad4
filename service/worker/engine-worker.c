/* The engine worker's thread: its commands, the scheduling loop, the
 * sharing of the running slots, and the public API (engine-worker.h).
 * Its parts: events.c (the channel to the main context), fair-queue.c
 * (who waits in which order), models.c, job.c and steps.c. */
#include "worker-private.h"

Command *npd_worker_command_new(CommandKind kind)
{
    Command *cmd = g_new0(Command, 1);
    cmd->kind = kind;
    return cmd;
}

static void command_free(Command *cmd)
{
    if (cmd->rendered != NULL)
        npd_worker_render_task_free(cmd->rendered);
    npd_job_free(cmd->job);
    g_free(cmd->name);
    g_free(cmd->path);
    g_free(cmd->projector);
    g_free(cmd);
}

typedef struct {
    NpdWorker *w;
    guint pos;
} PositionWalk;

static void post_position(gpointer item, gpointer data)
{
    QueuedJob *qj = item;
    PositionWalk *at = data;
    at->pos++;
    if (qj->reported_position != at->pos) {
        qj->reported_position = at->pos;
        npd_event_post_state(at->w->events, qj->job->id, NPD_JOB_QUEUED, at->pos);
    }
}

/* Each queued job's QueuePosition, when it changed. */
static void post_queue_positions(NpdWorker *w)
{
    PositionWalk at = {w, 0};
    npd_fair_queue_foreach(w->queue, post_position, &at);
}

/* ---- sharing the running slots ----------------------------------------
 *
 * The queue's round-robin only decides who starts next; once one user's
 * requests fill every slot, another user's would wait for one of them to
 * end. So a request that must wait for a slot may park a running request
 * of the user holding the most slots, if that user holds at least two
 * more than the waiting request's user: the parked request keeps its KV
 * cache, sampler and stream untouched and resumes later exactly where it
 * stopped (greedy output unchanged, nothing recomputed). Parking never
 * takes a slot from a more urgent class. A free slot goes to whichever of
 * the oldest parked request and the queue's head belongs to the user
 * running fewer requests (the parked one on a tie: it came first); so the
 * slots end up shared with at most one between users, and a new user's
 * request starts within one scheduling step. */

static guint running_of(NpdWorker *w, guint32 uid)
{
    guint n = 0;
    for (guint i = 0; i < w->running->len; i++)
        n += ((ActiveJob *)w->running->pdata[i])->job->uid == uid;
    return n;
}

/* The request to park so that a request of (uid, priority) gets a slot,
 * or NULL: the longest running request of the user with the most slots,
 * among requests not more urgent than the waiting one. */
static ActiveJob *park_victim(NpdWorker *w, guint32 uid, NpdPriority priority)
{
    guint mine = running_of(w, uid);
    ActiveJob *victim = NULL;
    guint victim_slots = 0;
    for (guint i = 0; i < w->running->len; i++) {
        ActiveJob *aj = w->running->pdata[i];
        if (aj->job->uid == uid || aj->job->priority < priority)
            continue;
        guint slots = running_of(w, aj->job->uid);
        if (slots < mine + 2)
            continue;
        if (victim == NULL || slots > victim_slots || (slots == victim_slots && aj->admit_order < victim->admit_order)) {
            victim = aj;
            victim_slots = slots;
        }
    }
    return victim;
}

/* TRUE when the parked request should have the next slot before the
 * queue's head. */
static gboolean resumes_first(NpdWorker *w, const ActiveJob *parked, const QueuedJob *head)
{
    if (head == NULL)
        return TRUE;
    if (parked->job->priority != head->job->priority)
        return parked->job->priority < head->job->priority;
    return running_of(w, parked->job->uid) <= running_of(w, head->job->uid);
}

static void admit_jobs(NpdWorker *w)
{
    gboolean changed = FALSE;
    for (;;) {
        QueuedJob *head = npd_fair_queue_peek(w->queue);
        if (head != NULL && !npd_worker_may_start(w, head->job))
            head = NULL; /* paused by the power policy: it waits */
        ActiveJob *parked = w->parked->len > 0 ? w->parked->pdata[0] : NULL;
        if (head == NULL && parked == NULL)
            break;
        gboolean resume = parked != NULL && resumes_first(w, parked, head);
        if (w->running->len >= w->cfg.max_running) {
            const NpdJob *next = resume ? parked->job : head->job;
            ActiveJob *victim = park_victim(w, next->uid, next->priority);
            if (victim == NULL)
                break;
            g_ptr_array_remove(w->running, victim);
            g_ptr_array_add(w->parked, victim);
            g_debug("request %" G_GUINT64_FORMAT " of uid %u parked for a request of uid %u", victim->job->id,
                    victim->job->uid, next->uid);
        }
        if (resume) {
            g_ptr_array_remove_index(w->parked, 0);
            g_ptr_array_add(w->running, parked);
        } else {
            npd_worker_job_start(w, npd_fair_queue_pop(w->queue));
            changed = TRUE;
        }
    }
    if (changed)
        post_queue_positions(w);
}

/* ---- commands ---------------------------------------------------------- */

static gboolean has_id(gconstpointer item, gconstpointer id)
{
    return ((const QueuedJob *)item)->job->id == *(const guint64 *)id;
}

static void cancel_job(NpdWorker *w, guint64 job_id)
{
    QueuedJob *qj = npd_fair_queue_find(w->queue, has_id, &job_id);
    if (qj != NULL) {
        npd_fair_queue_remove(w->queue, qj);
        npd_worker_job_finish_queued(w, qj, NPD_FINISH_CANCELLED, NULL);
        post_queue_positions(w);
        return;
    }
    ActiveJob *aj = npd_worker_job_find(w, job_id);
    if (aj != NULL)
        npd_worker_job_finish(w, aj, NPD_FINISH_CANCELLED, NULL);
}

/* FALSE when the worker must stop. */
static gboolean handle_command(NpdWorker *w, Command *cmd)
{
    GError *error = NULL;
    gboolean go_on = TRUE;
    switch (cmd->kind) {
    case CMD_SUBMIT: {
        QueuedJob *qj = g_new0(QueuedJob, 1);
        qj->job = g_steal_pointer(&cmd->job);
        qj->t_submit = cmd->t_submit;
        npd_fair_queue_push(w->queue, qj, qj->job->uid,
                            qj->job->priority == NPD_PRIORITY_BACKGROUND ? NPD_FAIR_BACKGROUND : NPD_FAIR_INTERACTIVE);
        post_queue_positions(w);
        break;
    }
    case CMD_RENDERED:
        npd_worker_job_rendered(w, cmd->rendered);
        break;
    case CMD_CANCEL:
        cancel_job(w, cmd->job_id);
        break;
    case CMD_LOAD: {
        LoadedModel *lm = npd_worker_model_ensure(w, cmd->name, cmd->path, cmd->projector, &error);
        if (lm != NULL)
            lm->last_used = g_get_monotonic_time();
        npd_event_post_command_done(w->events, cmd->tag, error);
        break;
    }
    case CMD_UNLOAD:
        npd_worker_model_unload(w, cmd->name, cmd->tag);
        break;
    case CMD_SET_IDLE:
        w->cfg.idle_timeout = cmd->seconds;
        break;
    case CMD_FORGET_CACHE:
        npd_worker_models_forget_cache(w, cmd->uid);
        npd_event_post_command_done(w->events, cmd->tag, NULL);
        break;
    case CMD_POWER:
    case CMD_SUSPEND:
    case CMD_RESUME:
        npd_worker_pause_command(w, cmd);
        break;
    case CMD_QUIT:
        go_on = FALSE;
        break;
    }
    command_free(cmd);
    return go_on;
}

/* Whether a scheduling step has something to do; else the worker waits
 * for a command (a render's result is one). */
static gboolean has_work(NpdWorker *w)
{
    if (w->suspended)
        return FALSE;
    for (guint i = 0; i < w->running->len; i++)
        if (((ActiveJob *)w->running->pdata[i])->phase != PHASE_RENDER)
            return TRUE;
    QueuedJob *head = npd_fair_queue_peek(w->queue);
    gboolean startable = head != NULL && npd_worker_may_start(w, head->job);
    return w->running->len < w->cfg.max_running && (w->parked->len > 0 || startable);
}

static gpointer worker_main(gpointer data)
{
    NpdWorker *w = data;
    for (;;) {
        Command *cmd;
        if (has_work(w)) {
            cmd = g_async_queue_try_pop(w->commands);
        } else {
            gint64 due = w->suspended ? -1 : npd_worker_models_next_unload(w);
            if (due < 0) {
                cmd = g_async_queue_pop(w->commands);
            } else {
                gint64 wait = due - g_get_monotonic_time();
                cmd = wait > 0 ? g_async_queue_timeout_pop(w->commands, (guint64)wait)
                               : g_async_queue_try_pop(w->commands);
            }
        }
        gboolean go_on = TRUE;
        while (cmd != NULL && go_on) {
            go_on = handle_command(w, cmd);
            cmd = go_on ? g_async_queue_try_pop(w->commands) : NULL;
        }
        if (!go_on)
            break;
        if (w->suspended)
            continue; /* asleep: commands only */
        admit_jobs(w);
        npd_worker_encode_step(w);
        npd_worker_prefill_step(w);
        npd_worker_kind_step(w);
        npd_worker_decode_step(w);
        npd_worker_models_unload_idle(w);
    }
    QueuedJob *qj;
    while ((qj = npd_fair_queue_pop(w->queue)) != NULL)
        npd_worker_job_finish_queued(w, qj, NPD_FINISH_CANCELLED, NULL);
    while (w->running->len > 0)
        npd_worker_job_finish(w, w->running->pdata[0], NPD_FINISH_CANCELLED, NULL);
    while (w->parked->len > 0)
        npd_worker_job_finish(w, w->parked->pdata[0], NPD_FINISH_CANCELLED, NULL);
    /* renders still going use their models: wait for them (each ends
     * within its template's deadline); their results are dropped */
    g_thread_pool_free(g_steal_pointer(&w->renders), FALSE, TRUE);
    g_hash_table_remove_all(w->models);
    return NULL;
}

/* ---- public ------------------------------------------------------------ */

NpdWorker *npd_worker_new(const NpdWorkerConfig *cfg, GMainContext *main_context, NpdEventFunc func,
                          gpointer user_data)
{
    NpdWorker *w = g_new0(NpdWorker, 1);
    w->cfg = *cfg;
    if (w->cfg.max_running == 0)
        w->cfg.max_running = 1;
    if (w->cfg.prefill_chunk == 0)
        w->cfg.prefill_chunk = 64;
    w->commands = g_async_queue_new();
    w->events = npd_event_channel_new(main_context, func, user_data);
    w->queue = npd_fair_queue_new();
    w->running = g_ptr_array_new();
    w->parked = g_ptr_array_new();
    w->models = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)npd_worker_model_free);
    /* one render per running slot at once, and two more for renders of
     * cancelled jobs still finishing: a new job's render never waits
     * behind a slow template's (unless cancelled ones pile up) */
    w->renders = g_thread_pool_new(npd_worker_render_prompt, w, (gint)w->cfg.max_running + 2, FALSE, NULL);
    w->thread = g_thread_new("npullm-engine", worker_main, w);
    return w;
}

void npd_worker_free(NpdWorker *w)
{
    if (w == NULL)
        return;
    Command *cmd = npd_worker_command_new(CMD_QUIT);
    g_async_queue_push(w->commands, cmd);
    g_thread_join(w->thread);
    while ((cmd = g_async_queue_try_pop(w->commands)) != NULL)
        command_free(cmd);
    g_async_queue_unref(w->commands);
    npd_event_channel_free(w->events);
    npd_fair_queue_free(w->queue);

    g_ptr_array_unref(w->running);
    g_ptr_array_unref(w->parked);
    g_hash_table_destroy(w->models);
    g_free(w);
}

void npd_worker_set_request_func(NpdWorker *w, NpdEventFunc func, gpointer user_data)
{
    npd_event_channel_set_request_func(w->events, func, user_data);
}

void npd_worker_submit(NpdWorker *w, NpdJob *job)
{
    Command *cmd = npd_worker_command_new(CMD_SUBMIT);
    cmd->job = job;
    cmd->t_submit = g_get_monotonic_time();
    g_async_queue_push(w->commands, cmd);
}

void npd_worker_cancel(NpdWorker *w, guint64 job_id)
{
    Command *cmd = npd_worker_command_new(CMD_CANCEL);
    cmd->job_id = job_id;
    g_async_queue_push(w->commands, cmd);
}

void npd_worker_load(NpdWorker *w, const char *name, const char *path, const char *projector, gpointer tag)
{
    Command *cmd = npd_worker_command_new(CMD_LOAD);
    cmd->name = g_strdup(name);
    cmd->path = g_strdup(path);
    cmd->projector = g_strdup(projector);
    cmd->tag = tag;
    g_async_queue_push(w->commands, cmd);
}

void npd_worker_unload(NpdWorker *w, const char *name, gpointer tag)
{
    Command *cmd = npd_worker_command_new(CMD_UNLOAD);
    cmd->name = g_strdup(name);
    cmd->tag = tag;
    g_async_queue_push(w->commands, cmd);
}

void npd_worker_set_idle_timeout(NpdWorker *w, guint seconds)
{
    Command *cmd = npd_worker_command_new(CMD_SET_IDLE);
    cmd->seconds = seconds;
    g_async_queue_push(w->commands, cmd);
}

void npd_worker_forget_cache(NpdWorker *w, guint32 uid, gpointer tag)
{
    Command *cmd = npd_worker_command_new(CMD_FORGET_CACHE);
    cmd->uid = uid;
    cmd->tag = tag;
    g_async_queue_push(w->commands, cmd);
}
