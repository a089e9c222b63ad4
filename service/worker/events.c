/* The coalescing event channel (events.h). */
#include "events.h"

struct NpdEventChannel {
    GMainContext *main_context;
    NpdEventFunc func;
    gpointer user_data;
    NpdEventFunc request_func; /* events of a request (job_id != 0); NULL: func */
    gpointer request_data;
    GMutex lock;
    GQueue events;
    GSource *dispatch_source;
    gboolean dispatch_later; /* dispatch_source is the text interval's timer */
    gint64 last_dispatch;    /* monotonic usec */
};

void npd_event_free(NpdEvent *ev)
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

static gboolean dispatch_events(gpointer data)
{
    NpdEventChannel *ch = data;
    GQueue batch = G_QUEUE_INIT;
    g_mutex_lock(&ch->lock);
    batch = ch->events;
    g_queue_init(&ch->events);
    /* a timer replaced (npd_event_channel_post) while it was being dispatched
     * leaves its successor tracked */
    if (ch->dispatch_source == g_main_current_source())
        g_clear_pointer(&ch->dispatch_source, g_source_unref);
    ch->last_dispatch = g_get_monotonic_time();
    g_mutex_unlock(&ch->lock);

    NpdEvent *ev;
    while ((ev = g_queue_pop_head(&batch)) != NULL) {
        if (ev->job_id != 0 && ch->request_func != NULL)
            ch->request_func(ev, ch->request_data);
        else
            ch->func(ev, ch->user_data);
        npd_event_free(ev);
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

static void attach_dispatch(NpdEventChannel *ch, gint64 delay_us)
{
    ch->dispatch_later = delay_us > 0;
    ch->dispatch_source = ch->dispatch_later ? g_timeout_source_new((guint)((delay_us + 999) / 1000))
                                           : g_idle_source_new();
    g_source_set_priority(ch->dispatch_source, G_PRIORITY_DEFAULT);
    g_source_set_callback(ch->dispatch_source, dispatch_events, ch, NULL);
    g_source_attach(ch->dispatch_source, ch->main_context);
}

void npd_event_channel_post(NpdEventChannel *ch, NpdEvent *ev, gboolean urgent)
{
    g_mutex_lock(&ch->lock);
    NpdEvent *tail = g_queue_peek_tail(&ch->events);
    if ((ev->kind == NPD_EVENT_TEXT || ev->kind == NPD_EVENT_THINKING) && tail != NULL && tail->kind == ev->kind &&
        tail->job_id == ev->job_id) {
        g_string_append_len(tail->text, ev->text->str, (gssize)ev->text->len);
        npd_event_free(ev);
    } else {
        g_queue_push_tail(&ch->events, ev);
    }
    if (ch->dispatch_source != NULL && ch->dispatch_later && urgent) {
        g_source_destroy(ch->dispatch_source);
        g_clear_pointer(&ch->dispatch_source, g_source_unref);
    }
    if (ch->dispatch_source == NULL) {
        gint64 wait = urgent ? 0 : ch->last_dispatch + TEXT_INTERVAL_US - g_get_monotonic_time();
        attach_dispatch(ch, wait);
    }
    g_mutex_unlock(&ch->lock);
}

NpdEventChannel *npd_event_channel_new(GMainContext *main_context, NpdEventFunc func, gpointer user_data)
{
    NpdEventChannel *ch = g_new0(NpdEventChannel, 1);
    ch->main_context = g_main_context_ref(main_context);
    ch->func = func;
    ch->user_data = user_data;
    g_mutex_init(&ch->lock);
    g_queue_init(&ch->events);
    return ch;
}

void npd_event_channel_set_request_func(NpdEventChannel *ch, NpdEventFunc func, gpointer user_data)
{
    ch->request_func = func;
    ch->request_data = user_data;
}

void npd_event_channel_free(NpdEventChannel *ch)
{
    if (ch == NULL)
        return;
    g_mutex_lock(&ch->lock);
    if (ch->dispatch_source != NULL) {
        g_source_destroy(ch->dispatch_source);
        g_clear_pointer(&ch->dispatch_source, g_source_unref);
    }
    g_queue_clear_full(&ch->events, (GDestroyNotify)npd_event_free);
    g_mutex_unlock(&ch->lock);
    g_mutex_clear(&ch->lock);
    g_main_context_unref(ch->main_context);
    g_free(ch);
}

/* ---- the worker's events ------------------------------------------------ */

static NpdEvent *event_new(NpdEventKind kind, guint64 job_id)
{
    NpdEvent *ev = g_new0(NpdEvent, 1);
    ev->kind = kind;
    ev->job_id = job_id;
    return ev;
}

void npd_event_post_state(NpdEventChannel *ch, guint64 job_id, NpdJobState state, guint position)
{
    NpdEvent *ev = event_new(NPD_EVENT_STATE, job_id);
    ev->state = state;
    ev->queue_position = position;
    npd_event_channel_post(ch, ev, TRUE);
}

void npd_event_post_text(NpdEventChannel *ch, guint64 job_id, NpdEventKind kind, const npl_buf *text,
                         gboolean urgent)
{
    if (text->len == 0)
        return;
    NpdEvent *ev = event_new(kind, job_id);
    ev->text = g_string_new_len(text->data, (gssize)text->len);
    npd_event_channel_post(ch, ev, urgent);
}

void npd_event_post_tool_call(NpdEventChannel *ch, guint64 job_id, const npl_tool_call *call)
{
    NpdEvent *ev = event_new(NPD_EVENT_TOOL_CALL, job_id);
    ev->tool_call = g_new0(gchar *, 4);
    ev->tool_call[0] = g_strdup(call->id);
    ev->tool_call[1] = g_strdup(call->name);
    ev->tool_call[2] = g_strdup(call->arguments);
    npd_event_channel_post(ch, ev, TRUE);
}

void npd_event_post_finished(NpdEventChannel *ch, guint64 job_id, NpdFinishReason reason, const NpdJobStats *stats,
                             GError *error, NpdJob *job)
{
    NpdEvent *ev = event_new(NPD_EVENT_FINISHED, job_id);
    ev->reason = reason;
    ev->stats = *stats;
    ev->error = error;
    if (job != NULL && job->kind != NULL && reason == NPD_FINISH_STOP) {
        job->kind->stats(job->kind_state, &ev->stats);
        ev->result = g_steal_pointer(&job->kind_state);
        ev->result_free = job->kind->free;
    }
    npd_event_channel_post(ch, ev, TRUE);
}

void npd_event_post_models(NpdEventChannel *ch, gchar **names)
{
    NpdEvent *ev = event_new(NPD_EVENT_MODELS, 0);
    ev->loaded_models = names;
    npd_event_channel_post(ch, ev, TRUE);
}

void npd_event_post_command_done(NpdEventChannel *ch, gpointer tag, GError *error)
{
    NpdEvent *ev = event_new(NPD_EVENT_COMMAND_DONE, 0);
    ev->tag = tag;
    ev->error = error;
    npd_event_channel_post(ch, ev, TRUE);
}
