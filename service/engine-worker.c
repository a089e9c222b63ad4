#include "engine-worker.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "model-catalog.h"
#include "think_split.h"
#include "vision.h"

/* ---- names ------------------------------------------------------------- */

const char *npd_job_state_name(NpdJobState state)
{
    switch (state) {
    case NPD_JOB_QUEUED:
        return "queued";
    case NPD_JOB_LOADING:
        return "loading";
    case NPD_JOB_RUNNING:
        return "running";
    case NPD_JOB_FINISHED:
        return "finished";
    }
    return "finished";
}

const char *npd_finish_reason_name(NpdFinishReason reason)
{
    switch (reason) {
    case NPD_FINISH_STOP:
        return "stop";
    case NPD_FINISH_LENGTH:
        return "length";
    case NPD_FINISH_CANCELLED:
        return "cancelled";
    case NPD_FINISH_ERROR:
        return "error";
    case NPD_FINISH_TOOL_CALLS:
        return "tool_calls";
    }
    return "error";
}

void npd_job_free(NpdJob *job)
{
    if (job == NULL)
        return;
    g_free(job->model_name);
    g_free(job->model_path);
    npl_grammar_free(job->grammar);
    npd_tools_free(job->tools);
    g_free(job->tool_choice);
    g_free(job->prompt);
    if (job->messages != NULL)
        g_ptr_array_unref(job->messages);
    g_strfreev(job->stop);
    if (job->images != NULL)
        g_ptr_array_unref(job->images);
    if (job->kind_state != NULL)
        job->kind->free(job->kind_state);
    g_free(job);
}

/* ---- worker state ------------------------------------------------------ */

typedef struct {
    gchar *name;
    gchar *path;
    npl_model *model;
    npl_kv_pool *kv_pool; /* finished sequences by uid, for prefix reuse */
    npl_vision *vision;   /* its projector, when NAME.mmproj.gguf loaded */
    gchar *vision_error;  /* why not, when the file exists but did not load */
    npl_vocab_index *vocab_index; /* for grammar masks, built on first use */
    gint64 last_used; /* monotonic usec */
    guint n_jobs;     /* running jobs on this model */
} LoadedModel;

typedef struct {
    NpdJob *job;
    gint64 t_submit;
    guint reported_position; /* last QueuePosition sent, 0 = none yet */
    guint64 tag;             /* fair-queueing order (enqueue) */
} QueuedJob;

typedef enum {
    PHASE_ENCODE, /* the image through the vision tower, one stage per step */
    PHASE_PREFILL,
    PHASE_DECODE,
    PHASE_RENDER, /* the prompt being rendered and tokenized on a render thread */
    PHASE_KIND,   /* a job of another kind (job-kind.h), stepped by kind_step */
} Phase;

/* An image of a running job: where its rows go, then its rows. */
typedef struct {
    size_t at;              /* prompt position of its first row */
    NpdImagePixels *pixels; /* until copied into an encoding or found in the
                             * KV pool (job->images owns it) */
    float *rows;            /* its embedding rows, encoded, until prefilled */
} JobImage;

typedef struct {
    NpdJob *job;
    LoadedModel *lm;
    npl_seq *seq;
    npl_sampler *sampler;
    npl_grammar_matcher *matcher; /* the format option's, NULL: free text */
    npl_grammar *tool_grammar;    /* tool_choice required or a name: the call's */
    npl_tool_parser *tool_parser; /* tools offered: the answer -> text and calls */
    npl_buf tool_text;            /* the answer's text the parser passed on */
    NpdWorker *worker;            /* for the parser's callbacks */
    npl_stream *stream;
    /* every position of the prompt: token ids, and for each image's rows
     * the keys of its pixels (npl_vision_image_keys), so that the KV pool
     * reuses an image's positions like text */
    npl_tokens prompt;
    JobImage *images;
    guint n_images;
    guint next_image;     /* the first not yet prefilled */
    guint first_encoded;  /* images before it were in the reused prefix */
    guint encoded_images; /* [first_encoded, encoded_images) went through the tower */
    npl_vision_encoding *encoding; /* of image encoded_images, running */
    size_t n_prefilled;
    guint32 n_cached; /* of them, reused from the pool */
    int32_t pending; /* sampled token to append in the next decode step */
    Phase phase;
    guint64 admit_order;
    gint64 t_submit;
    gint64 t_first;
    gint64 t_last;
    guint32 generated;
    gboolean streamed; /* some text was posted */
    npl_buf text;
    npl_think_split think; /* thinking apart from the answer */
    npl_buf answer, thinking;
} ActiveJob;

/* A prompt rendered (chat template) and tokenized off the engine thread:
 * a template may take up to its render deadline, and the engine must keep
 * stepping everyone else's streams meanwhile. The task holds its own
 * references to the job's inputs, and its model's n_jobs count, until the
 * engine thread takes its result (CMD_RENDERED): a job cancelled while
 * rendering ends at once, its render finishes on its own (within the
 * template's deadline) and is dropped. Rendering only reads the model's
 * GGUF metadata and tokenizer, which serve several threads at once. */
typedef struct {
    guint64 job_id;
    LoadedModel *lm;
    gboolean raw;
    gchar *prompt;       /* raw */
    GPtrArray *messages; /* NpdChatMessage*, a reference */
    guint n_images;
    gint think;
    gchar *messages_json; /* with tools or tool messages: the conversation as JSON */
    gchar *tools_json;    /* the tools offered to the template, or NULL */
    /* the result */
    npl_status st;
    npl_error err;
    npl_tokens ids;  /* without images: the prompt */
    npl_tokens *runs; /* with images: n_images + 1 token runs between them */
    char *text;      /* the rendered prompt, for the thinking split */
} RenderTask;

static void render_task_free(RenderTask *t)
{
    g_free(t->prompt);
    g_free(t->messages_json);
    g_free(t->tools_json);
    if (t->messages != NULL)
        g_ptr_array_unref(t->messages);
    npl_tokens_free(&t->ids);
    if (t->runs != NULL)
        for (guint k = 0; k <= t->n_images; k++)
            npl_tokens_free(&t->runs[k]);
    g_free(t->runs);
    free(t->text);
    g_free(t);
}

typedef enum {
    CMD_SUBMIT,
    CMD_RENDERED,
    CMD_CANCEL,
    CMD_LOAD,
    CMD_UNLOAD,
    CMD_SET_IDLE,
    CMD_FORGET_CACHE,
    CMD_QUIT,
} CommandKind;

typedef struct {
    CommandKind kind;
    NpdJob *job;
    guint64 job_id;
    gchar *name;
    gchar *path;
    gpointer tag;
    guint seconds;
    guint32 uid;
    gint64 t_submit;
    RenderTask *rendered;
} Command;

struct NpdWorker {
    NpdWorkerConfig cfg; /* idle_timeout is changed on the worker thread only */
    GThread *thread;
    GAsyncQueue *commands;

    /* events to the main context */
    GMainContext *main_context;
    NpdEventFunc func;
    gpointer user_data;
    GMutex lock;
    GQueue events;
    GSource *dispatch_source;
    gboolean dispatch_later; /* dispatch_source is the text interval's timer */
    gint64 last_dispatch;    /* monotonic usec */

    /* worker thread only */
    GQueue queue;       /* QueuedJob*, interactive before background */
    GPtrArray *running; /* ActiveJob*, in admission order */
    GPtrArray *parked;  /* ActiveJob*, paused to share the slots, oldest first */
    GHashTable *models; /* name -> LoadedModel* */
    guint64 admit_counter;
    /* fair queueing, per class (interactive, background) */
    GHashTable *user_tags[2]; /* uid -> guint64* last tag given */
    guint64 admitted_tag[2];
    GThreadPool *renders; /* RenderTask*, answered with CMD_RENDERED */
};

static void command_free(Command *cmd)
{
    if (cmd->rendered != NULL)
        render_task_free(cmd->rendered);
    npd_job_free(cmd->job);
    g_free(cmd->name);
    g_free(cmd->path);
    g_free(cmd);
}

static void event_free(NpdEvent *ev)
{
    if (ev->text != NULL)
        g_string_free(ev->text, TRUE);
    g_clear_error(&ev->error);
    g_strfreev(ev->loaded_models);
    g_strfreev(ev->tool_call);
    if (ev->result != NULL)
        ev->result_free(ev->result);
    g_free(ev);
}

static void loaded_model_free(LoadedModel *lm)
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

/* ---- events ------------------------------------------------------------ */

static gboolean dispatch_events(gpointer data)
{
    NpdWorker *w = data;
    GQueue batch = G_QUEUE_INIT;
    g_mutex_lock(&w->lock);
    batch = w->events;
    g_queue_init(&w->events);
    /* a timer replaced (post_event_when) while it was being dispatched
     * leaves its successor tracked */
    if (w->dispatch_source == g_main_current_source())
        g_clear_pointer(&w->dispatch_source, g_source_unref);
    w->last_dispatch = g_get_monotonic_time();
    g_mutex_unlock(&w->lock);

    NpdEvent *ev;
    while ((ev = g_queue_pop_head(&batch)) != NULL) {
        w->func(ev, w->user_data);
        event_free(ev);
    }
    return G_SOURCE_REMOVE;
}

/* Queues ev for the main context. Text for the job of the previous,
 * not yet dispatched event is appended to it: this is the coalescing that
 * keeps a slow bus from piling up one signal per token. Text that is not
 * urgent (not a request's first) waits until TEXT_INTERVAL_US after the
 * last dispatch: every dispatch wakes the main loop, the bus connection's
 * thread, the bus daemon and the client, which on a machine whose cores
 * the engine's threads fill costs a decode step about 2 ms (issue #16); at
 * most 10 wakes a second cost under 2% at any decode rate. Anything else
 * (state, Finished) is dispatched at once, with the text before it. */
#define TEXT_INTERVAL_US (100 * G_TIME_SPAN_MILLISECOND)

static void attach_dispatch(NpdWorker *w, gint64 delay_us)
{
    w->dispatch_later = delay_us > 0;
    w->dispatch_source = w->dispatch_later ? g_timeout_source_new((guint)((delay_us + 999) / 1000))
                                           : g_idle_source_new();
    g_source_set_priority(w->dispatch_source, G_PRIORITY_DEFAULT);
    g_source_set_callback(w->dispatch_source, dispatch_events, w, NULL);
    g_source_attach(w->dispatch_source, w->main_context);
}

static void post_event_when(NpdWorker *w, NpdEvent *ev, gboolean urgent)
{
    g_mutex_lock(&w->lock);
    NpdEvent *tail = g_queue_peek_tail(&w->events);
    if ((ev->kind == NPD_EVENT_TEXT || ev->kind == NPD_EVENT_THINKING) && tail != NULL && tail->kind == ev->kind &&
        tail->job_id == ev->job_id) {
        g_string_append_len(tail->text, ev->text->str, (gssize)ev->text->len);
        event_free(ev);
    } else {
        g_queue_push_tail(&w->events, ev);
    }
    if (w->dispatch_source != NULL && w->dispatch_later && urgent) {
        g_source_destroy(w->dispatch_source);
        g_clear_pointer(&w->dispatch_source, g_source_unref);
    }
    if (w->dispatch_source == NULL) {
        gint64 wait = urgent ? 0 : w->last_dispatch + TEXT_INTERVAL_US - g_get_monotonic_time();
        attach_dispatch(w, wait);
    }
    g_mutex_unlock(&w->lock);
}

static void post_event(NpdWorker *w, NpdEvent *ev)
{
    post_event_when(w, ev, TRUE);
}

static void post_state(NpdWorker *w, guint64 job_id, NpdJobState state, guint position)
{
    NpdEvent *ev = g_new0(NpdEvent, 1);
    ev->kind = NPD_EVENT_STATE;
    ev->job_id = job_id;
    ev->state = state;
    ev->queue_position = position;
    post_event(w, ev);
}

/* urgent: the request's first text, which never waits */
static void post_text(NpdWorker *w, guint64 job_id, NpdEventKind kind, const npl_buf *text, gboolean urgent)
{
    if (text->len == 0)
        return;
    NpdEvent *ev = g_new0(NpdEvent, 1);
    ev->kind = kind;
    ev->job_id = job_id;
    ev->text = g_string_new_len(text->data, (gssize)text->len);
    post_event_when(w, ev, urgent);
}

static void post_models(NpdWorker *w)
{
    NpdEvent *ev = g_new0(NpdEvent, 1);
    ev->kind = NPD_EVENT_MODELS;
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, w->models);
    while (g_hash_table_iter_next(&it, &key, NULL))
        g_ptr_array_add(names, g_strdup(key));
    g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
    g_ptr_array_add(names, NULL);
    ev->loaded_models = (gchar **)g_ptr_array_steal(names, NULL);
    post_event(w, ev);
}

static void post_command_done(NpdWorker *w, gpointer tag, GError *error)
{
    NpdEvent *ev = g_new0(NpdEvent, 1);
    ev->kind = NPD_EVENT_COMMAND_DONE;
    ev->tag = tag;
    ev->error = error;
    post_event(w, ev);
}

static NpdError error_from_status(npl_status st)
{
    switch (st) {
    case NPL_ERR_CONTEXT_OVERFLOW:
        return NPD_ERROR_CONTEXT_OVERFLOW;
    case NPL_ERR_INVALID_ARG:
        return NPD_ERROR_INVALID_ARGUMENT;
    case NPL_ERR_UNSUPPORTED:
        return NPD_ERROR_NOT_SUPPORTED;
    case NPL_ERR_CANCELLED:
        return NPD_ERROR_CANCELLED;
    default:
        return NPD_ERROR_INTERNAL;
    }
}

/* ---- models ------------------------------------------------------------ */

/* The model's vision projector, when the catalog paired one with it.
 * A broken one does not stop the model from serving text: *why says what
 * image requests will be told. */
static npl_vision *load_vision(NpdWorker *w, const char *name, const char *path, gchar **why)
{
    g_autofree gchar *mmproj = npd_model_projector_for(path);
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

static LoadedModel *ensure_loaded(NpdWorker *w, const char *name, const char *path, GError **error)
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
    npl_vision *vision = load_vision(w, name, path, &vision_error);
    /* An image's rows attend to each other, so they go through the model
     * in one forward step: its chunk must hold them all. */
    if (vision != NULL)
        params.prefill_chunk = MAX(params.prefill_chunk, npl_vision_get_info(vision)->n_tokens);
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
    lm = g_new0(LoadedModel, 1);
    lm->name = g_strdup(name);
    lm->kv_pool = kv_pool;
    lm->path = g_strdup(path);
    lm->model = model;
    lm->vision = vision;
    lm->vision_error = g_steal_pointer(&vision_error);
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

static gboolean model_has_queued_jobs(NpdWorker *w, const LoadedModel *lm)
{
    for (GList *l = w->queue.head; l != NULL; l = l->next) {
        const QueuedJob *qj = l->data;
        if (strcmp(qj->job->model_name, lm->name) == 0)
            return TRUE;
    }
    return FALSE;
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

static void unload_idle_models(NpdWorker *w)
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

/* Monotonic time of the next idle unload, or -1 when none is due. */
static gint64 next_unload_time(NpdWorker *w)
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

/* ---- job lifecycle ----------------------------------------------------- */

/* job: a job kind's finished job gives its state to the event. */
static void post_finished(NpdWorker *w, guint64 job_id, NpdFinishReason reason, const NpdJobStats *stats,
                          GError *error, NpdJob *job)
{
    NpdEvent *ev = g_new0(NpdEvent, 1);
    ev->kind = NPD_EVENT_FINISHED;
    ev->job_id = job_id;
    ev->reason = reason;
    ev->stats = *stats;
    ev->error = error;
    if (job != NULL && job->kind != NULL && reason == NPD_FINISH_STOP) {
        job->kind->stats(job->kind_state, &ev->stats);
        ev->result = g_steal_pointer(&job->kind_state);
        ev->result_free = job->kind->free;
    }
    post_event(w, ev);
}

/* Requests of a known user go through the model's KV pool: reused only
 * for that same uid, so the time to first token tells nobody what another
 * user asked. Image positions are keyed by their pixels' hash. */
static gboolean reuses_cache(const ActiveJob *aj)
{
    return aj->lm != NULL && aj->job->uid != NPD_UID_UNKNOWN;
}

static void finish_active(NpdWorker *w, ActiveJob *aj, NpdFinishReason reason, GError *error)
{
    gint64 now = g_get_monotonic_time();
    NpdJobStats stats = {
        .prompt_tokens = (guint32)aj->prompt.n,
        .cached_tokens = aj->n_cached,
        .encoded_images = aj->encoded_images - MIN(aj->encoded_images, aj->first_encoded),
        .generated_tokens = aj->generated,
        .total_time_ms = (double)(now - aj->t_submit) / 1000.0,
        .seed = aj->job->sampling.seed,
    };
    if (aj->t_first != 0) {
        stats.time_to_first_token_ms = (double)(aj->t_first - aj->t_submit) / 1000.0;
        if (aj->generated > 1 && aj->t_last > aj->t_first)
            stats.tokens_per_second =
                (double)(aj->generated - 1) * G_USEC_PER_SEC / (double)(aj->t_last - aj->t_first);
    }
    post_finished(w, aj->job->id, reason, &stats, error, aj->job);

    npl_vision_encoding_free(aj->encoding);
    for (guint i = 0; i < aj->n_images; i++)
        g_free(aj->images[i].rows);
    g_free(aj->images);
    npl_stream_free(aj->stream);
    npl_sampler_free(aj->sampler);
    npl_grammar_matcher_free(aj->matcher);
    npl_grammar_free(aj->tool_grammar);
    npl_tool_parser_free(aj->tool_parser);
    npl_buf_free(&aj->tool_text);
    if (aj->seq != NULL && reuses_cache(aj))
        npl_kv_pool_release(aj->lm->kv_pool, aj->job->uid, aj->seq);
    else
        npl_seq_free(aj->seq);
    npl_tokens_free(&aj->prompt);
    npl_buf_free(&aj->text);
    npl_buf_free(&aj->answer);
    npl_buf_free(&aj->thinking);
    npl_think_split_free(&aj->think);
    if (aj->lm != NULL && aj->phase != PHASE_RENDER) { /* else its render task holds the count */
        aj->lm->n_jobs--;
        aj->lm->last_used = now;
    }
    if (!g_ptr_array_remove(w->running, aj))
        g_ptr_array_remove(w->parked, aj);
    npd_job_free(aj->job);
    g_free(aj);
}

static void finish_queued(NpdWorker *w, QueuedJob *qj, NpdFinishReason reason, GError *error)
{
    NpdJobStats stats = {
        .total_time_ms = (double)(g_get_monotonic_time() - qj->t_submit) / 1000.0,
        .seed = qj->job->sampling.seed,
    };
    post_finished(w, qj->job->id, reason, &stats, error, NULL);
    npd_job_free(qj->job);
    g_free(qj);
}

static void fail_active(NpdWorker *w, ActiveJob *aj, npl_status st, const char *what, const npl_error *err)
{
    GError *error = g_error_new(NPD_ERROR, error_from_status(st), "%s: %s", what, err->message);
    g_warning("request %" G_GUINT64_FORMAT ": %s", aj->job->id, error->message);
    finish_active(w, aj, NPD_FINISH_ERROR, error);
}

static void post_queue_positions(NpdWorker *w)
{
    guint pos = 1;
    for (GList *l = w->queue.head; l != NULL; l = l->next, pos++) {
        QueuedJob *qj = l->data;
        if (qj->reported_position != pos) {
            qj->reported_position = pos;
            post_state(w, qj->job->id, NPD_JOB_QUEUED, pos);
        }
    }
}

/* Fair queueing: each job gets a tag one past its user's previous one,
 * and never below the tag last admitted in its class; the queue is kept
 * sorted by (class, tag), FIFO among equal tags. So whatever one user
 * floods in, another user's new job waits for at most one job of each
 * other user: round-robin between users, FIFO within each. */
static void enqueue(NpdWorker *w, NpdJob *job, gint64 t_submit)
{
    QueuedJob *qj = g_new0(QueuedJob, 1);
    qj->job = job;
    qj->t_submit = t_submit;
    guint cls = job->priority == NPD_PRIORITY_BACKGROUND ? 1 : 0;
    gpointer key = GUINT_TO_POINTER(job->uid);
    guint64 last = 0;
    gpointer value;
    if (g_hash_table_lookup_extended(w->user_tags[cls], key, NULL, &value))
        last = *(guint64 *)value;
    qj->tag = MAX(last, w->admitted_tag[cls]) + 1;
    guint64 *stored = g_new(guint64, 1);
    *stored = qj->tag;
    g_hash_table_replace(w->user_tags[cls], key, stored);
    GList *l = w->queue.head;
    while (l != NULL) {
        const QueuedJob *o = l->data;
        guint ocls = o->job->priority == NPD_PRIORITY_BACKGROUND ? 1 : 0;
        if (ocls > cls || (ocls == cls && o->tag > qj->tag))
            break;
        l = l->next;
    }
    if (l == NULL)
        g_queue_push_tail(&w->queue, qj);
    else
        g_queue_insert_before(&w->queue, l, qj);
}

/* A queued job was cancelled: its user's last tag becomes that of its
 * last job still queued, so that cancelling does not push the user's next
 * job back. */
static void forget_tag(NpdWorker *w, const QueuedJob *gone)
{
    guint cls = gone->job->priority == NPD_PRIORITY_BACKGROUND ? 1 : 0;
    guint64 last = 0;
    for (GList *l = w->queue.head; l != NULL; l = l->next) {
        const QueuedJob *o = l->data;
        if (o->job->uid == gone->job->uid && (o->job->priority == NPD_PRIORITY_BACKGROUND ? 1u : 0u) == cls)
            last = MAX(last, o->tag);
    }
    gpointer key = GUINT_TO_POINTER(gone->job->uid);
    if (last <= w->admitted_tag[cls]) {
        g_hash_table_remove(w->user_tags[cls], key);
        return;
    }
    guint64 *stored = g_new(guint64, 1);
    *stored = last;
    g_hash_table_replace(w->user_tags[cls], key, stored);
}

/* The head of the queue is leaving it: its class moves on to its tag, and
 * users whose last tag is behind that are forgotten (the MAX in enqueue
 * would ignore them anyway). */
static QueuedJob *dequeue_next(NpdWorker *w)
{
    QueuedJob *qj = g_queue_pop_head(&w->queue);
    guint cls = qj->job->priority == NPD_PRIORITY_BACKGROUND ? 1 : 0;
    w->admitted_tag[cls] = MAX(w->admitted_tag[cls], qj->tag);
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, w->user_tags[cls]);
    while (g_hash_table_iter_next(&it, NULL, &value))
        if (*(guint64 *)value <= w->admitted_tag[cls])
            g_hash_table_iter_remove(&it);
    return qj;
}

/* On a render thread: the job's prompt as tokens (with images: the runs
 * between them), and the rendered text for the thinking split. */
static void render_prompt(gpointer data, gpointer user_data)
{
    RenderTask *t = data;
    NpdWorker *w = user_data;
    npl_error_clear(&t->err);
    const npl_model *model = t->lm->model;
    if (t->raw) {
        t->st = npl_tokenize(npl_model_tokenizer(model), t->prompt, strlen(t->prompt), NPL_TOKENIZE_ADD_BOS, &t->ids,
                             &t->err);
    } else {
        guint n = t->messages->len;
        npl_chat_message *msgs = g_new0(npl_chat_message, n);
        uint32_t *counts = g_new0(uint32_t, n);
        for (guint i = 0; i < n; i++) {
            const NpdChatMessage *m = t->messages->pdata[i];
            msgs[i] = (npl_chat_message){m->role, m->content};
            counts[i] = m->n_images;
        }
        npl_chat_options o = {.add_generation_prompt = true, .enable_thinking = t->think, .tools_in_user_message = -1};
        if (t->messages_json != NULL) {
            /* tools, tool calls and results: the template gets them as JSON */
            o.tools_json = t->tools_json;
            t->st = npl_chat_tokenize_json(model, t->messages_json, &o, &t->ids, &t->text, &t->err);
        } else if (t->n_images > 0) {
            t->runs = g_new0(npl_tokens, t->n_images + 1);
            t->st = npl_vision_chat_prompt_messages(model, msgs, counts, n, &o, t->runs, &t->err);
        } else {
            t->st = npl_chat_tokenize_messages(model, msgs, n, &o, &t->ids, &t->text, &t->err);
        }
        g_free(msgs);
        g_free(counts);
    }
    Command *cmd = g_new0(Command, 1);
    cmd->kind = CMD_RENDERED;
    cmd->rendered = t;
    g_async_queue_push(w->commands, cmd);
}

/* A job with images: its model's projector must fit them. FALSE when the
 * job failed (and was finished). */
static gboolean check_vision(NpdWorker *w, ActiveJob *aj)
{
    LoadedModel *lm = aj->lm;
    npl_error err;
    npl_error_clear(&err);
    g_autofree gchar *tool_json = npd_chat_messages_json(aj->job->messages, aj->job->tools != NULL);
    if (tool_json != NULL) {
        finish_active(w, aj, NPD_FINISH_ERROR,
                      g_error_new(NPD_ERROR, NPD_ERROR_NOT_SUPPORTED, "tools: not supported with images"));
        return FALSE;
    }
    if (lm->vision == NULL) {
        GError *error = lm->vision_error != NULL
                            ? g_error_new_literal(NPD_ERROR, NPD_ERROR_MODEL_LOAD_FAILED, lm->vision_error)
                            : g_error_new(NPD_ERROR, NPD_ERROR_NOT_SUPPORTED, "model '%s' has no vision projector",
                                          lm->name);
        finish_active(w, aj, NPD_FINISH_ERROR, error);
        return FALSE;
    }
    npl_status st = npl_vision_check_model(lm->vision, lm->model, &err);
    if (st != NPL_OK) {
        fail_active(w, aj, st, "the vision projector", &err);
        return FALSE;
    }
    return TRUE;
}

/* With images, the prompt becomes the rendered token runs between the
 * images with each image's keys in its rows' places. The images, decoded
 * and preprocessed when the call came in, are encoded later (those the KV
 * pool holds never are). */
static npl_status place_images(ActiveJob *aj, const RenderTask *t, npl_error *err)
{
    const NpdJob *job = aj->job;
    guint n_images = job->images->len;
    guint32 rows = npl_vision_get_info(aj->lm->vision)->n_tokens;
    aj->images = g_new0(JobImage, n_images);
    aj->n_images = n_images;
    npl_status st = NPL_OK;
    for (guint k = 0; k <= n_images && st == NPL_OK; k++) {
        for (size_t i = 0; i < t->runs[k].n && st == NPL_OK; i++)
            st = npl_tokens_push(&aj->prompt, t->runs[k].ids[i], err);
        if (k == n_images || st != NPL_OK)
            break;
        JobImage *im = &aj->images[k];
        im->at = aj->prompt.n;
        im->pixels = job->images->pdata[k];
        for (guint32 r = 0; r < rows && st == NPL_OK; r++)
            st = npl_tokens_push(&aj->prompt, -1, err);
        if (st == NPL_OK)
            npl_vision_image_keys(im->pixels->pixels, npl_vision_pixel_count(&im->pixels->params),
                                  aj->prompt.ids + im->at, rows);
    }
    return st;
}

/* The images whose rows the reused prefix holds are done: the tower runs
 * for the others only. A prefix ending inside an image (its rows attend
 * to each other: all or none) is not reused. */
/* Image k's pixels are no longer needed (its keys are in the prompt):
 * freed now, which gives their bytes back to the image budget. */
static void drop_pixels(ActiveJob *aj, guint k)
{
    g_clear_pointer(&aj->job->images->pdata[k], npd_image_pixels_free);
    aj->images[k].pixels = NULL;
}

static gboolean skip_cached_images(ActiveJob *aj, guint32 n_ctx, npl_error *err)
{
    guint32 rows = aj->n_images > 0 ? npl_vision_get_info(aj->lm->vision)->n_tokens : 0;
    while (aj->next_image < aj->n_images && aj->images[aj->next_image].at + rows <= aj->n_cached)
        aj->next_image++;
    if (aj->next_image < aj->n_images && aj->images[aj->next_image].at < aj->n_cached) {
        npl_seq_free(aj->seq);
        aj->seq = npl_seq_create(aj->lm->model, n_ctx, err);
        aj->n_cached = 0;
        aj->n_prefilled = 0;
        aj->next_image = 0;
    }
    aj->first_encoded = aj->encoded_images = aj->next_image;
    for (guint k = 0; k < aj->next_image; k++)
        drop_pixels(aj, k);
    return aj->seq != NULL;
}

/* The format option: a matcher over the model's vocabulary index (built
 * once per loaded model, on the first request that needs it) drives the
 * sampler. */
static gboolean start_grammar(ActiveJob *aj, const npl_grammar *grammar, npl_error *err)
{
    LoadedModel *lm = aj->lm;
    if (lm->vocab_index == NULL)
        lm->vocab_index = npl_vocab_index_create(npl_model_tokenizer(lm->model), err);
    if (lm->vocab_index == NULL)
        return FALSE;
    aj->matcher = npl_grammar_matcher_create(grammar, lm->vocab_index, err);
    return aj->matcher != NULL && npl_sampler_set_grammar(aj->sampler, aj->matcher, err) == NPL_OK;
}

static void post_tool_call(const npl_tool_call *call, void *data);
static void keep_tool_text(const char *text, size_t len, void *data);

/* Tools offered: a parser of the model family's calls over the answer;
 * tool_choice required or a function's name holds the output to one call
 * by a grammar (so even a weak model makes a valid one). */
static gboolean start_tools(NpdWorker *w, ActiveJob *aj, npl_error *err)
{
    aj->worker = w;
    npl_tool_family family = npl_model_tool_family(aj->lm->model);
    aj->tool_parser = npl_tool_parser_new(family, NULL, keep_tool_text, post_tool_call, aj);
    if (aj->tool_parser == NULL) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        return FALSE;
    }
    const char *choice = aj->job->tool_choice;
    if (choice == NULL || strcmp(choice, "auto") == 0)
        return TRUE;
    g_autofree gchar *text =
        npd_tools_call_grammar(aj->job->tools, strcmp(choice, "required") == 0 ? NULL : choice,
                               npl_tool_call_shape_of(family));
    aj->tool_grammar = npl_grammar_compile_text(text, strlen(text), err);
    return aj->tool_grammar != NULL && start_grammar(aj, aj->tool_grammar, err);
}

/* The family's markers that are control tokens ([TOOL_CALLS], ...) stay
 * in the text the parser reads. */
static gboolean keep_tool_markers(ActiveJob *aj, npl_error *err)
{
    const char *markers[NPL_STREAM_MAX_KEEP];
    size_t n = npl_tool_family_markers(npl_model_tool_family(aj->lm->model), markers, G_N_ELEMENTS(markers));
    return npl_stream_keep_tokens(aj->stream, markers, MIN(n, G_N_ELEMENTS(markers)), err) == NPL_OK;
}

static void start_prompted(NpdWorker *w, ActiveJob *aj);

/* A job of another kind: no prompt, no sequence; kind_step runs it. */
static void start_kind(NpdWorker *w, ActiveJob *aj)
{
    GError *error = NULL;
    if (!aj->job->kind->check_model(aj->job->kind_state, aj->lm->model, &error)) {
        finish_active(w, aj, NPD_FINISH_ERROR, error);
        return;
    }
    aj->phase = PHASE_KIND;
    post_state(w, aj->job->id, NPD_JOB_RUNNING, 0);
}

/* Moves a queued job to the running set: loads its model if needed and
 * has its prompt rendered on a render thread (start_prompted goes on). */
static void start_job(NpdWorker *w, QueuedJob *qj)
{
    NpdJob *job = qj->job;
    GError *error = NULL;
    LoadedModel *lm = g_hash_table_lookup(w->models, job->model_name);
    if (lm == NULL) {
        post_state(w, job->id, NPD_JOB_LOADING, 0);
        lm = ensure_loaded(w, job->model_name, job->model_path, &error);
        if (lm == NULL) {
            finish_queued(w, qj, NPD_FINISH_ERROR, error);
            return;
        }
    }
    ActiveJob *aj = g_new0(ActiveJob, 1);
    aj->job = job;
    aj->lm = lm;
    aj->t_submit = qj->t_submit;
    aj->admit_order = w->admit_counter++;
    lm->n_jobs++;
    g_free(qj);
    g_ptr_array_add(w->running, aj);

    if (job->kind != NULL) {
        start_kind(w, aj);
        return;
    }
    if (job->images != NULL && !check_vision(w, aj))
        return;
    RenderTask *t = g_new0(RenderTask, 1);
    t->job_id = job->id;
    t->lm = lm; /* its n_jobs count now belongs to the task */
    t->raw = job->raw;
    t->prompt = g_strdup(job->prompt);
    t->messages = job->messages != NULL ? g_ptr_array_ref(job->messages) : NULL;
    t->n_images = job->images != NULL ? job->images->len : 0;
    t->think = job->think;
    if (job->messages != NULL) {
        t->messages_json = npd_chat_messages_json(job->messages, job->tools != NULL);
        t->tools_json = job->tools != NULL ? g_strdup(job->tools->json) : NULL;
    }
    aj->phase = PHASE_RENDER;
    g_thread_pool_push(w->renders, t, NULL);
}

static ActiveJob *find_active(NpdWorker *w, guint64 job_id)
{
    for (guint i = 0; i < w->running->len + w->parked->len; i++) {
        ActiveJob *aj = i < w->running->len ? w->running->pdata[i] : w->parked->pdata[i - w->running->len];
        if (aj->job->id == job_id)
            return aj;
    }
    return NULL;
}

/* A render thread's result: the job goes on, unless it ended meanwhile
 * (cancelled): then the model's count the task held is given back. */
static void prompt_rendered(NpdWorker *w, RenderTask *t)
{
    ActiveJob *aj = find_active(w, t->job_id);
    if (aj == NULL || aj->phase != PHASE_RENDER) {
        t->lm->n_jobs--;
        t->lm->last_used = g_get_monotonic_time();
        return;
    }
    aj->phase = PHASE_PREFILL; /* the count is the job's again */
    npl_think_split_init(&aj->think, NULL);
    npl_error err;
    npl_error_clear(&err);
    npl_status st = t->st;
    if (st != NPL_OK) {
        fail_active(w, aj, st, t->n_images > 0 ? "building the prompt" : "tokenizing the prompt", &t->err);
        return;
    }
    if (t->raw) {
        aj->think.state = NPL_THINK_ANSWER; /* a raw prompt's output is all answer */
    } else if (t->n_images == 0) {
        /* a templated one may start with (or, by the template, inside) a <think> block */
        npl_think_split_free(&aj->think);
        npl_think_split_init(&aj->think, t->text);
    }
    if (t->n_images > 0) {
        st = place_images(aj, t, &err);
        if (st != NPL_OK) {
            fail_active(w, aj, st, "building the prompt", &err);
            return;
        }
    } else {
        aj->prompt = t->ids;
        memset(&t->ids, 0, sizeof t->ids);
    }
    start_prompted(w, aj);
}

/* A job whose prompt is ready: sizes its KV cache to what it can use
 * (reusing the user's cached prefix), its sampler and output stream. */
static void start_prompted(NpdWorker *w, ActiveJob *aj)
{
    const NpdJob *job = aj->job;
    LoadedModel *lm = aj->lm;
    npl_error err;
    npl_error_clear(&err);
    const npl_model_info *info = npl_model_get_info(lm->model);
    guint32 ctx_limit = info->n_ctx_train != 0 ? info->n_ctx_train : NPL_DEFAULT_CTX_MAX;
    ctx_limit = MIN(ctx_limit, w->cfg.max_context);
    size_t n_prompt = aj->prompt.n;
    if (n_prompt == 0) {
        finish_active(w, aj, NPD_FINISH_ERROR,
                      g_error_new(NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "prompt: empty after tokenization"));
        return;
    }
    if (n_prompt >= ctx_limit) {
        finish_active(w, aj, NPD_FINISH_ERROR,
                      g_error_new(NPD_ERROR, NPD_ERROR_CONTEXT_OVERFLOW,
                                  "the prompt has %zu tokens; the context holds %u", n_prompt, ctx_limit));
        return;
    }
    guint32 max_tokens = job->max_tokens;
    if (max_tokens == 0) {
        max_tokens = MIN(w->cfg.default_max_tokens, ctx_limit - (guint32)n_prompt);
    } else if (n_prompt + max_tokens > ctx_limit) {
        finish_active(w, aj, NPD_FINISH_ERROR,
                      g_error_new(NPD_ERROR, NPD_ERROR_CONTEXT_OVERFLOW,
                                  "the prompt (%zu tokens) plus max_tokens (%u) exceed the context of %u tokens",
                                  n_prompt, max_tokens, ctx_limit));
        return;
    }
    uint32_t n_ctx = (uint32_t)(n_prompt + max_tokens);
    if (reuses_cache(aj)) {
        aj->seq = npl_kv_pool_acquire(lm->kv_pool, job->uid, aj->prompt.ids, aj->prompt.n, n_ctx, &aj->n_cached,
                                      &err);
        aj->n_prefilled = aj->n_cached;
        if (aj->seq != NULL)
            skip_cached_images(aj, n_ctx, &err);
    } else {
        aj->seq = npl_seq_create(lm->model, n_ctx, &err);
    }
    if (aj->seq == NULL) {
        fail_active(w, aj, err.code, "allocating the KV cache", &err);
        return;
    }
    aj->sampler = npl_sampler_create(&job->sampling, info->n_vocab, &err);
    if (aj->sampler == NULL) {
        fail_active(w, aj, err.code, "creating the sampler", &err);
        return;
    }
    for (size_t i = 0; i < aj->prompt.n; i++)
        if (aj->prompt.ids[i] >= 0) /* not an image's key */
            npl_sampler_accept(aj->sampler, aj->prompt.ids[i]);
    if (job->grammar != NULL && !start_grammar(aj, job->grammar, &err)) {
        fail_active(w, aj, err.code, "constraining the output", &err);
        return;
    }
    if (job->tools != NULL && !start_tools(w, aj, &err)) {
        fail_active(w, aj, err.code, "tool calls", &err);
        return;
    }
    size_t n_stop = job->stop != NULL ? g_strv_length(job->stop) : 0;
    aj->stream = npl_stream_create(lm->model, (const char *const *)job->stop, n_stop, max_tokens, &err);
    if (aj->stream == NULL) {
        fail_active(w, aj, err.code, "creating the output stream", &err);
        return;
    }
    if (aj->tool_parser != NULL && !keep_tool_markers(aj, &err)) {
        fail_active(w, aj, err.code, "tool calls", &err);
        return;
    }
    aj->phase = aj->encoded_images < aj->n_images ? PHASE_ENCODE : PHASE_PREFILL;
    post_state(w, job->id, NPD_JOB_RUNNING, 0);
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
        QueuedJob *head = g_queue_peek_head(&w->queue);
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
            start_job(w, dequeue_next(w));
            changed = TRUE;
        }
    }
    if (changed)
        post_queue_positions(w);
}

/* The stream's new text (aj->text) as answer and thinking events; at the
 * end, whatever the split still holds. FALSE when the job failed. */
static gboolean post_output(NpdWorker *w, ActiveJob *aj, gboolean end)
{
    npl_error err;
    npl_error_clear(&err);
    npl_buf_clear(&aj->answer);
    npl_buf_clear(&aj->thinking);
    npl_status st = npl_think_split_push(&aj->think, aj->text.data, aj->text.len, &aj->answer, &aj->thinking, &err);
    if (st == NPL_OK && end)
        st = npl_think_split_finish(&aj->think, &aj->answer, &aj->thinking, &err);
    if (st != NPL_OK) {
        fail_active(w, aj, st, "decoding the output", &err);
        return FALSE;
    }
    gboolean first = !aj->streamed;
    aj->streamed = aj->streamed || aj->thinking.len > 0 || aj->answer.len > 0;
    post_text(w, aj->job->id, NPD_EVENT_THINKING, &aj->thinking, first);
    if (aj->tool_parser != NULL) {
        /* the answer goes through the parser: text in order with calls */
        st = npl_tool_parser_feed(aj->tool_parser, aj->answer.data, aj->answer.len, &err);
        if (st == NPL_OK && end)
            st = npl_tool_parser_finish(aj->tool_parser, &err);
        if (st != NPL_OK) {
            fail_active(w, aj, st, "parsing tool calls", &err);
            return FALSE;
        }
        post_text(w, aj->job->id, NPD_EVENT_TEXT, &aj->tool_text, first);
        npl_buf_clear(&aj->tool_text);
        return TRUE;
    }
    post_text(w, aj->job->id, NPD_EVENT_TEXT, &aj->answer, first);
    return TRUE;
}

static void keep_tool_text(const char *text, size_t len, void *data)
{
    ActiveJob *aj = data;
    npl_error err;
    npl_error_clear(&err);
    if (npl_buf_append(&aj->tool_text, text, len, &err) != NPL_OK)
        g_warning("request %" G_GUINT64_FORMAT ": %s", aj->job->id, err.message);
}

/* A complete call: the text before it first, then ToolCall. */
static void post_tool_call(const npl_tool_call *call, void *data)
{
    ActiveJob *aj = data;
    post_text(aj->worker, aj->job->id, NPD_EVENT_TEXT, &aj->tool_text, TRUE);
    npl_buf_clear(&aj->tool_text);
    NpdEvent *ev = g_new0(NpdEvent, 1);
    ev->kind = NPD_EVENT_TOOL_CALL;
    ev->job_id = aj->job->id;
    ev->tool_call = g_new0(gchar *, 4);
    ev->tool_call[0] = g_strdup(call->id);
    ev->tool_call[1] = g_strdup(call->name);
    ev->tool_call[2] = g_strdup(call->arguments);
    post_event_when(aj->worker, ev, TRUE);
}

/* Feeds a sampled token to the job's stream; finishes the job or makes
 * the token the next decode input. */
static void accept_sampled(NpdWorker *w, ActiveJob *aj, int32_t token)
{
    gint64 now = g_get_monotonic_time();
    if (aj->t_first == 0)
        aj->t_first = now;
    aj->t_last = now;
    npl_error err;
    npl_error_clear(&err);
    npl_buf_clear(&aj->text);
    npl_finish_reason reason = NPL_FINISH_STOP;
    if (token < 0) {
        /* the grammar allows no token: its output is whole, or the
         * vocabulary cannot spell what it needs */
        if (aj->matcher == NULL || !npl_grammar_matcher_is_complete(aj->matcher)) {
            npl_error_set(&err, NPL_ERR_INTERNAL, "no token of the vocabulary continues the grammar's output");
            fail_active(w, aj, NPL_ERR_INTERNAL, "sampling", &err);
            return;
        }
    } else {
        aj->generated++;
        reason = npl_stream_push(aj->stream, token, &aj->text, &err);
        if (err.code != NPL_OK) {
            fail_active(w, aj, err.code, "decoding the output", &err);
            return;
        }
        if (!post_output(w, aj, FALSE))
            return;
    }
    if (reason == NPL_FINISH_NONE) {
        aj->pending = token;
        aj->phase = PHASE_DECODE;
        return;
    }
    npl_buf_clear(&aj->text);
    npl_status st = npl_stream_finish(aj->stream, &aj->text, &err);
    if (st != NPL_OK) {
        fail_active(w, aj, st, "decoding the output", &err);
        return;
    }
    if (!post_output(w, aj, TRUE))
        return;
    if (aj->tool_parser != NULL && npl_tool_parser_calls(aj->tool_parser) > 0)
        finish_active(w, aj, NPD_FINISH_TOOL_CALLS, NULL);
    else
        finish_active(w, aj, reason == NPL_FINISH_LENGTH ? NPD_FINISH_LENGTH : NPD_FINISH_STOP, NULL);
}

static gboolean runs_before(const ActiveJob *a, const ActiveJob *b)
{
    if (a->job->priority != b->job->priority)
        return a->job->priority < b->job->priority;
    return a->admit_order < b->admit_order;
}

static ActiveJob *most_urgent(NpdWorker *w, Phase phase)
{
    ActiveJob *aj = NULL;
    for (guint i = 0; i < w->running->len; i++) {
        ActiveJob *c = w->running->pdata[i];
        if (c->phase == phase && (aj == NULL || runs_before(c, aj)))
            aj = c;
    }
    return aj;
}

/* One stage of the vision tower (patch embedding, one encoder block, or
 * the projector) for the most urgent image still being encoded: like a
 * prefill chunk, it delays other streams by one step at a time. A job's
 * images are encoded one after another; each keeps only its rows. */
static void encode_step(NpdWorker *w)
{
    ActiveJob *aj = most_urgent(w, PHASE_ENCODE);
    if (aj == NULL)
        return;
    npl_error err;
    npl_error_clear(&err);
    JobImage *im = &aj->images[aj->encoded_images];
    if (aj->encoding == NULL) {
        /* decoded and preprocessed already (image-input.c): a copy, no more */
        aj->encoding = npl_vision_encoding_create_from_pixels(aj->lm->vision, &im->pixels->params, im->pixels->pixels,
                                                              &err);
        if (aj->encoding == NULL) {
            fail_active(w, aj, err.code, "preparing the image", &err);
            return;
        }
        drop_pixels(aj, aj->encoded_images);
    }
    bool done = false;
    npl_status st = npl_vision_encoding_step(aj->encoding, &done, &err);
    if (st != NPL_OK) {
        fail_active(w, aj, st, "encoding the image", &err);
        return;
    }
    if (!done)
        return;
    const npl_vision_info *vi = npl_vision_get_info(aj->lm->vision);
    im->rows = g_memdup2(npl_vision_encoding_output(aj->encoding), (gsize)vi->n_tokens * vi->n_embd_out * sizeof(float));
    g_clear_pointer(&aj->encoding, npl_vision_encoding_free);
    if (++aj->encoded_images == aj->n_images)
        aj->phase = PHASE_PREFILL;
}

/* The next image's rows (in one step: they attend to each other), keyed
 * for the KV pool. */
static npl_status prefill_image(ActiveJob *aj, npl_error *err)
{
    JobImage *im = &aj->images[aj->next_image];
    guint32 rows = npl_vision_get_info(aj->lm->vision)->n_tokens;
    npl_status st = im->rows != NULL ? npl_prefill_embeddings(aj->lm->model, aj->seq, im->rows, rows, true, err)
                                     : npl_error_set(err, NPL_ERR_INTERNAL, "the image was not encoded");
    g_clear_pointer(&im->rows, g_free);
    if (st == NPL_OK)
        st = npl_seq_key_positions(aj->seq, (uint32_t)im->at, aj->prompt.ids + im->at, rows, err);
    if (st == NPL_OK) {
        aj->n_prefilled += rows;
        aj->next_image++;
    }
    return st;
}

/* One prefill chunk of the most urgent prompt still being fed: text up
 * to the next image, or that image's rows. */
static void prefill_step(NpdWorker *w)
{
    ActiveJob *aj = most_urgent(w, PHASE_PREFILL);
    if (aj == NULL)
        return;
    npl_error err;
    npl_error_clear(&err);
    gboolean at_image = aj->next_image < aj->n_images && aj->images[aj->next_image].at == aj->n_prefilled;
    if (at_image) {
        npl_status st = prefill_image(aj, &err);
        if (st != NPL_OK) {
            fail_active(w, aj, st, "prefill of the image", &err);
            return;
        }
    } else {
        size_t end = aj->next_image < aj->n_images ? aj->images[aj->next_image].at : aj->prompt.n;
        size_t consumed = 0;
        size_t left = end - aj->n_prefilled;
        npl_status st = npl_prefill(aj->lm->model, aj->seq, aj->prompt.ids + aj->n_prefilled, left,
                                    w->cfg.prefill_chunk, &consumed, &err);
        if (st != NPL_OK) {
            fail_active(w, aj, st, "prefill", &err);
            return;
        }
        if (consumed == 0 || consumed > left) {
            npl_error_set(&err, NPL_ERR_INTERNAL, "prefill consumed %zu of %zu tokens", consumed, left);
            fail_active(w, aj, NPL_ERR_INTERNAL, "prefill", &err);
            return;
        }
        aj->n_prefilled += consumed;
    }
    if (aj->n_prefilled < aj->prompt.n)
        return;
    const float *logits = npl_seq_logits(aj->seq);
    if (logits == NULL) {
        npl_error_set(&err, NPL_ERR_INTERNAL, "no logits after the prompt");
        fail_active(w, aj, NPL_ERR_INTERNAL, "prefill", &err);
        return;
    }
    accept_sampled(w, aj, npl_sampler_sample(aj->sampler, logits));
}

/* One step of the most urgent job of another kind (an Embed's next
 * texts): like a prefill chunk, it delays other streams by one step. */
static void kind_step(NpdWorker *w)
{
    ActiveJob *aj = most_urgent(w, PHASE_KIND);
    if (aj == NULL)
        return;
    npl_error err;
    npl_error_clear(&err);
    gboolean done = FALSE;
    npl_status st = aj->job->kind->step(aj->job->kind_state, aj->lm->model, &done, &err);
    if (st != NPL_OK)
        fail_active(w, aj, st, aj->job->kind->name, &err);
    else if (done)
        finish_active(w, aj, NPD_FINISH_STOP, NULL);
}

/* One batched decode step per loaded model for every generating job. */
static void decode_step(NpdWorker *w)
{
    guint n = w->running->len;
    if (n == 0)
        return;
    ActiveJob **batch = g_new(ActiveJob *, n);
    npl_seq **seqs = g_new(npl_seq *, n);
    int32_t *tokens = g_new(int32_t, n);
    g_autoptr(GPtrArray) models = g_ptr_array_new();
    for (guint i = 0; i < n; i++) {
        ActiveJob *aj = w->running->pdata[i];
        if (aj->phase == PHASE_DECODE && !g_ptr_array_find(models, aj->lm, NULL))
            g_ptr_array_add(models, aj->lm);
    }
    for (guint m = 0; m < models->len; m++) {
        LoadedModel *lm = models->pdata[m];
        size_t nb = 0;
        for (guint i = 0; i < w->running->len; i++) {
            ActiveJob *aj = w->running->pdata[i];
            if (aj->phase == PHASE_DECODE && aj->lm == lm) {
                batch[nb] = aj;
                seqs[nb] = aj->seq;
                tokens[nb] = aj->pending;
                nb++;
            }
        }
        npl_error err;
        npl_error_clear(&err);
        npl_status st = npl_decode(lm->model, seqs, tokens, nb, &err);
        for (size_t i = 0; i < nb; i++) {
            ActiveJob *aj = batch[i];
            if (st != NPL_OK) {
                fail_active(w, aj, st, "decode", &err);
                continue;
            }
            const float *logits = npl_seq_logits(aj->seq);
            if (logits == NULL) {
                npl_error e2;
                npl_error_set(&e2, NPL_ERR_INTERNAL, "no logits after a decode step");
                fail_active(w, aj, NPL_ERR_INTERNAL, "decode", &e2);
                continue;
            }
            accept_sampled(w, aj, npl_sampler_sample(aj->sampler, logits));
        }
    }
    g_free(batch);
    g_free(seqs);
    g_free(tokens);
}

/* ---- commands ---------------------------------------------------------- */

static void cancel_job(NpdWorker *w, guint64 job_id)
{
    for (GList *l = w->queue.head; l != NULL; l = l->next) {
        QueuedJob *qj = l->data;
        if (qj->job->id == job_id) {
            g_queue_delete_link(&w->queue, l);
            forget_tag(w, qj);
            finish_queued(w, qj, NPD_FINISH_CANCELLED, NULL);
            post_queue_positions(w);
            return;
        }
    }
    ActiveJob *aj = find_active(w, job_id);
    if (aj != NULL)
        finish_active(w, aj, NPD_FINISH_CANCELLED, NULL);
}

static void unload_command(NpdWorker *w, const char *name, gpointer tag)
{
    LoadedModel *lm = g_hash_table_lookup(w->models, name);
    if (lm == NULL) {
        post_command_done(w, tag, NULL);
        return;
    }
    if (lm->n_jobs > 0 || model_has_queued_jobs(w, lm)) {
        post_command_done(w, tag,
                          g_error_new(NPD_ERROR, NPD_ERROR_BUSY, "model '%s' is in use by %u running requests",
                                      name, lm->n_jobs));
        return;
    }
    unload_model(w, lm);
    post_command_done(w, tag, NULL);
}

/* ForgetCache: uid's cached sequences, in every loaded model. */
static void forget_cache(NpdWorker *w, guint32 uid)
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

/* FALSE when the worker must stop. */
static gboolean handle_command(NpdWorker *w, Command *cmd)
{
    GError *error = NULL;
    gboolean go_on = TRUE;
    switch (cmd->kind) {
    case CMD_SUBMIT:
        enqueue(w, g_steal_pointer(&cmd->job), cmd->t_submit);
        post_queue_positions(w);
        break;
    case CMD_RENDERED:
        prompt_rendered(w, cmd->rendered);
        break;
    case CMD_CANCEL:
        cancel_job(w, cmd->job_id);
        break;
    case CMD_LOAD: {
        LoadedModel *lm = ensure_loaded(w, cmd->name, cmd->path, &error);
        if (lm != NULL)
            lm->last_used = g_get_monotonic_time();
        post_command_done(w, cmd->tag, error);
        break;
    }
    case CMD_UNLOAD:
        unload_command(w, cmd->name, cmd->tag);
        break;
    case CMD_SET_IDLE:
        w->cfg.idle_timeout = cmd->seconds;
        break;
    case CMD_FORGET_CACHE:
        forget_cache(w, cmd->uid);
        post_command_done(w, cmd->tag, NULL);
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
    for (guint i = 0; i < w->running->len; i++)
        if (((ActiveJob *)w->running->pdata[i])->phase != PHASE_RENDER)
            return TRUE;
    return w->running->len < w->cfg.max_running && (w->parked->len > 0 || !g_queue_is_empty(&w->queue));
}

static gpointer worker_main(gpointer data)
{
    NpdWorker *w = data;
    for (;;) {
        Command *cmd;
        if (has_work(w)) {
            cmd = g_async_queue_try_pop(w->commands);
        } else {
            gint64 due = next_unload_time(w);
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
        admit_jobs(w);
        encode_step(w);
        prefill_step(w);
        kind_step(w);
        decode_step(w);
        unload_idle_models(w);
    }
    QueuedJob *qj;
    while ((qj = g_queue_pop_head(&w->queue)) != NULL)
        finish_queued(w, qj, NPD_FINISH_CANCELLED, NULL);
    while (w->running->len > 0)
        finish_active(w, w->running->pdata[0], NPD_FINISH_CANCELLED, NULL);
    while (w->parked->len > 0)
        finish_active(w, w->parked->pdata[0], NPD_FINISH_CANCELLED, NULL);
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
    w->main_context = g_main_context_ref(main_context);
    w->func = func;
    w->user_data = user_data;
    g_mutex_init(&w->lock);
    g_queue_init(&w->events);
    g_queue_init(&w->queue);
    w->running = g_ptr_array_new();
    w->parked = g_ptr_array_new();
    w->models = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)loaded_model_free);
    for (int i = 0; i < 2; i++)
        w->user_tags[i] = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    /* one render per running slot at once, and two more for renders of
     * cancelled jobs still finishing: a new job's render never waits
     * behind a slow template's (unless cancelled ones pile up) */
    w->renders = g_thread_pool_new(render_prompt, w, (gint)w->cfg.max_running + 2, FALSE, NULL);
    w->thread = g_thread_new("npullm-engine", worker_main, w);
    return w;
}

static void send_command(NpdWorker *w, Command *cmd)
{
    g_async_queue_push(w->commands, cmd);
}

void npd_worker_free(NpdWorker *w)
{
    if (w == NULL)
        return;
    Command *cmd = g_new0(Command, 1);
    cmd->kind = CMD_QUIT;
    send_command(w, cmd);
    g_thread_join(w->thread);
    while ((cmd = g_async_queue_try_pop(w->commands)) != NULL)
        command_free(cmd);
    g_async_queue_unref(w->commands);

    g_mutex_lock(&w->lock);
    if (w->dispatch_source != NULL) {
        g_source_destroy(w->dispatch_source);
        g_clear_pointer(&w->dispatch_source, g_source_unref);
    }
    g_queue_clear_full(&w->events, (GDestroyNotify)event_free);
    g_mutex_unlock(&w->lock);
    g_mutex_clear(&w->lock);

    g_ptr_array_unref(w->running);
    g_ptr_array_unref(w->parked);
    g_hash_table_destroy(w->models);
    for (int i = 0; i < 2; i++)
        g_hash_table_destroy(w->user_tags[i]);
    g_main_context_unref(w->main_context);
    g_free(w);
}

void npd_worker_submit(NpdWorker *w, NpdJob *job)
{
    Command *cmd = g_new0(Command, 1);
    cmd->kind = CMD_SUBMIT;
    cmd->job = job;
    cmd->t_submit = g_get_monotonic_time();
    send_command(w, cmd);
}

void npd_worker_cancel(NpdWorker *w, guint64 job_id)
{
    Command *cmd = g_new0(Command, 1);
    cmd->kind = CMD_CANCEL;
    cmd->job_id = job_id;
    send_command(w, cmd);
}

void npd_worker_load(NpdWorker *w, const char *name, const char *path, gpointer tag)
{
    Command *cmd = g_new0(Command, 1);
    cmd->kind = CMD_LOAD;
    cmd->name = g_strdup(name);
    cmd->path = g_strdup(path);
    cmd->tag = tag;
    send_command(w, cmd);
}

void npd_worker_unload(NpdWorker *w, const char *name, gpointer tag)
{
    Command *cmd = g_new0(Command, 1);
    cmd->kind = CMD_UNLOAD;
    cmd->name = g_strdup(name);
    cmd->tag = tag;
    send_command(w, cmd);
}

void npd_worker_set_idle_timeout(NpdWorker *w, guint seconds)
{
    Command *cmd = g_new0(Command, 1);
    cmd->kind = CMD_SET_IDLE;
    cmd->seconds = seconds;
    send_command(w, cmd);
}

void npd_worker_forget_cache(NpdWorker *w, guint32 uid, gpointer tag)
{
    Command *cmd = g_new0(Command, 1);
    cmd->kind = CMD_FORGET_CACHE;
    cmd->uid = uid;
    cmd->tag = tag;
    send_command(w, cmd);
}
