/* A job of the engine worker from start to finish: its model, its prompt
 * rendered on a render thread, its KV cache, sampler, output stream and
 * tool parser set up; and its end, with the statistics posted. The
 * encode, prefill and decode steps in between are steps.c. */
#include "worker-private.h"

#include <stdlib.h>
#include <string.h>

/* ---- names ------------------------------------------------------------- */

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
    g_free(job->projector_path);
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

void npd_worker_render_task_free(RenderTask *t)
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

/* Requests of a known user go through the model's KV pool: reused only
 * for that same uid, so the time to first token tells nobody what another
 * user asked. Image positions are keyed by their pixels' hash. */
static gboolean reuses_cache(const ActiveJob *aj)
{
    return aj->lm != NULL && aj->job->uid != NPD_UID_UNKNOWN;
}

void npd_worker_job_finish(NpdWorker *w, ActiveJob *aj, NpdFinishReason reason, GError *error)
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
    npd_worker_job_devices(aj, &stats);
    if (aj->t_first != 0) {
        stats.time_to_first_token_ms = (double)(aj->t_first - aj->t_submit) / 1000.0;
        if (aj->generated > 1 && aj->t_last > aj->t_first)
            stats.tokens_per_second =
                (double)(aj->generated - 1) * G_USEC_PER_SEC / (double)(aj->t_last - aj->t_first);
    }
    npd_event_post_finished(w->events, aj->job->id, reason, &stats, error, aj->job);

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

void npd_worker_job_finish_queued(NpdWorker *w, QueuedJob *qj, NpdFinishReason reason, GError *error)
{
    NpdJobStats stats = {
        .total_time_ms = (double)(g_get_monotonic_time() - qj->t_submit) / 1000.0,
        .seed = qj->job->sampling.seed,
    };
    npd_event_post_finished(w->events, qj->job->id, reason, &stats, error, NULL);
    npd_job_free(qj->job);
    g_free(qj);
}

void npd_worker_job_fail(NpdWorker *w, ActiveJob *aj, npl_status st, const char *what, const npl_error *err)
{
    GError *error = g_error_new(NPD_ERROR, error_from_status(st), "%s: %s", what, err->message);
    g_warning("request %" G_GUINT64_FORMAT ": %s", aj->job->id, error->message);
    npd_worker_job_finish(w, aj, NPD_FINISH_ERROR, error);
}

/* On a render thread: the job's prompt as tokens (with images: the runs
 * between them), and the rendered text for the thinking split. */
void npd_worker_render_prompt(gpointer data, gpointer user_data)
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
        npl_chat_options o = {.add_generation_prompt = true, .enable_thinking = t->think, .tools_in_user_message = -1,
                              .reasoning_effort = t->reasoning_effort};
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
    Command *cmd = npd_worker_command_new(CMD_RENDERED);
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
        npd_worker_job_finish(w, aj, NPD_FINISH_ERROR,
                      g_error_new(NPD_ERROR, NPD_ERROR_NOT_SUPPORTED, "tools: not supported with images"));
        return FALSE;
    }
    if (lm->vision == NULL) {
        GError *error = lm->vision_error != NULL
                            ? g_error_new_literal(NPD_ERROR, NPD_ERROR_MODEL_LOAD_FAILED, lm->vision_error)
                            : g_error_new(NPD_ERROR, NPD_ERROR_NOT_SUPPORTED, "model '%s' has no vision projector",
                                          lm->name);
        npd_worker_job_finish(w, aj, NPD_FINISH_ERROR, error);
        return FALSE;
    }
    npl_status st = npl_vision_check_model(lm->vision, lm->model, &err);
    if (st != NPL_OK) {
        npd_worker_job_fail(w, aj, st, "the vision projector", &err);
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
        const npl_vision_pixel_params *pp = &im->pixels->params;
        guint32 rows = npl_vision_pixels_n_tokens(aj->lm->vision, pp, im->pixels->pixels);
        im->n_rows = rows;
        for (guint32 r = 0; r < rows && st == NPL_OK; r++)
            st = npl_tokens_push(&aj->prompt, -1, err);
        if (st == NPL_OK)
            npl_vision_image_keys(im->pixels->pixels, npl_vision_pixels_len(pp, im->pixels->pixels),
                                  aj->prompt.ids + im->at, rows);
    }
    return st;
}

void npd_worker_job_drop_pixels(ActiveJob *aj, guint k)
{
    g_clear_pointer(&aj->job->images->pdata[k], npd_image_pixels_free);
    aj->images[k].pixels = NULL;
}

/* The images whose rows the reused prefix holds are done: the tower runs
 * for the others only. A prefix ending inside an image (its rows attend
 * to each other: all or none) is not reused. */
static gboolean skip_cached_images(ActiveJob *aj, guint32 n_ctx, npl_error *err)
{
    while (aj->next_image < aj->n_images &&
           aj->images[aj->next_image].at + aj->images[aj->next_image].n_rows <= aj->n_cached)
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
        npd_worker_job_drop_pixels(aj, k);
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

/* A job of another kind: no prompt, no sequence; npd_worker_kind_step
 * runs it. */
static void start_kind(NpdWorker *w, ActiveJob *aj)
{
    GError *error = NULL;
    if (!aj->job->kind->check_model(aj->job->kind_state, aj->lm->model, &error)) {
        npd_worker_job_finish(w, aj, NPD_FINISH_ERROR, error);
        return;
    }
    aj->phase = PHASE_KIND;
    npd_event_post_state(w->events, aj->job->id, NPD_JOB_RUNNING, 0);
}

/* Moves a queued job to the running set: loads its model if needed and
 * has its prompt rendered on a render thread (start_prompted goes on). */
void npd_worker_job_start(NpdWorker *w, QueuedJob *qj)
{
    NpdJob *job = qj->job;
    GError *error = NULL;
    LoadedModel *lm = g_hash_table_lookup(w->models, job->model_name);
    if (lm == NULL) {
        npd_event_post_state(w->events, job->id, NPD_JOB_LOADING, 0);
        lm = npd_worker_model_ensure(w, job->model_name, job->model_path, job->projector_path, &error);
        if (lm == NULL) {
            npd_worker_job_finish_queued(w, qj, NPD_FINISH_ERROR, error);
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
    t->reasoning_effort = job->reasoning_effort;
    if (job->messages != NULL) {
        t->messages_json = npd_chat_messages_json(job->messages, job->tools != NULL);
        t->tools_json = job->tools != NULL ? g_strdup(job->tools->json) : NULL;
    }
    aj->phase = PHASE_RENDER;
    g_thread_pool_push(w->renders, t, NULL);
}

ActiveJob *npd_worker_job_find(NpdWorker *w, guint64 job_id)
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
void npd_worker_job_rendered(NpdWorker *w, RenderTask *t)
{
    ActiveJob *aj = npd_worker_job_find(w, t->job_id);
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
        npd_worker_job_fail(w, aj, st, t->n_images > 0 ? "building the prompt" : "tokenizing the prompt", &t->err);
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
            npd_worker_job_fail(w, aj, st, "building the prompt", &err);
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
        npd_worker_job_finish(w, aj, NPD_FINISH_ERROR,
                      g_error_new(NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "prompt: empty after tokenization"));
        return;
    }
    if (n_prompt >= ctx_limit) {
        npd_worker_job_finish(w, aj, NPD_FINISH_ERROR,
                      g_error_new(NPD_ERROR, NPD_ERROR_CONTEXT_OVERFLOW,
                                  "the prompt has %zu tokens; the context holds %u", n_prompt, ctx_limit));
        return;
    }
    guint32 max_tokens = job->max_tokens;
    if (max_tokens == 0) {
        max_tokens = MIN(w->cfg.default_max_tokens, ctx_limit - (guint32)n_prompt);
    } else if (n_prompt + max_tokens > ctx_limit) {
        npd_worker_job_finish(w, aj, NPD_FINISH_ERROR,
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
        npd_worker_job_fail(w, aj, err.code, "allocating the KV cache", &err);
        return;
    }
    aj->sampler = npl_sampler_create(&job->sampling, info->n_vocab, &err);
    if (aj->sampler == NULL) {
        npd_worker_job_fail(w, aj, err.code, "creating the sampler", &err);
        return;
    }
    for (size_t i = 0; i < aj->prompt.n; i++)
        if (aj->prompt.ids[i] >= 0) /* not an image's key */
            npl_sampler_accept(aj->sampler, aj->prompt.ids[i]);
    if (job->grammar != NULL && !start_grammar(aj, job->grammar, &err)) {
        npd_worker_job_fail(w, aj, err.code, "constraining the output", &err);
        return;
    }
    if (job->tools != NULL && !start_tools(w, aj, &err)) {
        npd_worker_job_fail(w, aj, err.code, "tool calls", &err);
        return;
    }
    size_t n_stop = job->stop != NULL ? g_strv_length(job->stop) : 0;
    aj->stream = npl_stream_create(lm->model, (const char *const *)job->stop, n_stop, max_tokens, &err);
    if (aj->stream == NULL) {
        npd_worker_job_fail(w, aj, err.code, "creating the output stream", &err);
        return;
    }
    if (aj->tool_parser != NULL && !keep_tool_markers(aj, &err)) {
        npd_worker_job_fail(w, aj, err.code, "tool calls", &err);
        return;
    }
    aj->phase = aj->encoded_images < aj->n_images ? PHASE_ENCODE : PHASE_PREFILL;
    npd_event_post_state(w->events, job->id, NPD_JOB_RUNNING, 0);
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
    npd_event_post_text(aj->worker->events, aj->job->id, NPD_EVENT_TEXT, &aj->tool_text, TRUE);
    npl_buf_clear(&aj->tool_text);
    npd_event_post_tool_call(aj->worker->events, aj->job->id, call);
}
