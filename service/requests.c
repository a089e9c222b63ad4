/* The registry and lifecycle of requests (requests.h). */
#include "requests.h"

#include "client-tracker.h"
#include "npullm-protocol.h"
#include "usage-journal.h"

struct NpdRequests {
    NpdDaemon *daemon;
    NpdWorker *worker;
    NpdIdle *idle;
    GHashTable *by_id;   /* &id -> NpdRequest* (owned) */
    GHashTable *by_node; /* node -> NpdRequest* */
    guint64 next_id;
    NpdRequestCounts counts;
    NpdRequestsChanged changed;
    gpointer changed_data;
};

static void request_event_cb(const NpdEvent *ev, gpointer data);

NpdRequests *npd_requests_new(NpdDaemon *d, NpdWorker *worker, NpdIdle *idle)
{
    NpdRequests *reqs = g_new0(NpdRequests, 1);
    reqs->daemon = d;
    reqs->worker = worker;
    reqs->idle = idle;
    reqs->by_id = g_hash_table_new(g_int64_hash, g_int64_equal);
    reqs->by_node = g_hash_table_new(g_str_hash, g_str_equal);
    npd_worker_set_request_func(worker, request_event_cb, reqs);
    return reqs;
}

void npd_requests_set_changed_func(NpdRequests *reqs, NpdRequestsChanged func, gpointer data)
{
    reqs->changed = func;
    reqs->changed_data = data;
}

void npd_requests_free(NpdRequests *reqs)
{
    if (reqs == NULL)
        return;
    reqs->changed = NULL; /* shutting down: nothing to announce */
    npd_worker_set_request_func(reqs->worker, NULL, NULL);
    g_autoptr(GList) all = g_hash_table_get_values(reqs->by_id);
    for (GList *l = all; l != NULL; l = l->next)
        npd_request_destroy(l->data);
    g_hash_table_destroy(reqs->by_node);
    g_hash_table_destroy(reqs->by_id);
    g_free(reqs);
}

/* The counters follow every change of state. */
static void count_state(NpdRequests *reqs, NpdJobState state, gint delta)
{
    if (state == NPD_JOB_QUEUED)
        reqs->counts.queued += delta;
    else if (state == NPD_JOB_LOADING || state == NPD_JOB_RUNNING)
        reqs->counts.active += delta;
}

static void counts_changed(NpdRequests *reqs)
{
    if (reqs->changed != NULL)
        reqs->changed(reqs->counts.active, reqs->counts.queued, reqs->changed_data);
}

static void request_free(NpdRequest *r)
{
    if (r->linger_id != 0)
        g_source_remove(r->linger_id);
    if (r->complete_text != NULL)
        g_string_free(r->complete_text, TRUE);
    if (r->complete_thinking != NULL)
        g_string_free(r->complete_thinking, TRUE);
    npd_client_unref(r->client);
    g_free(r->node);
    g_free(r->path);
    g_free(r->model);
    g_free(r);
}

NpdRequest *npd_requests_submit(NpdRequests *reqs, NpdClient *client, guint idle_token, const char *node,
                                GDBusMethodInvocation *complete, NpdJob *job)
{
    NpdRequest *r = g_new0(NpdRequest, 1);
    r->daemon = reqs->daemon;
    r->owner = reqs;
    r->id = ++reqs->next_id;
    r->client = client;
    r->model = g_strdup(job->model_name);
    r->state = NPD_JOB_QUEUED;
    count_state(reqs, r->state, 1);
    r->idle_token = idle_token;
    if (complete != NULL) {
        r->complete = complete;
        r->complete_text = g_string_new(NULL);
        r->complete_thinking = g_string_new(NULL);
    } else {
        r->node = node != NULL ? g_strdup(node) : g_strdup_printf("%" G_GUINT64_FORMAT, r->id);
        r->path = g_strconcat(NPP_REQUEST_ROOT "/", r->node, NULL);
        g_hash_table_insert(reqs->by_node, r->node, r);
    }
    g_hash_table_insert(reqs->by_id, &r->id, r);
    client->outstanding++;
    client->user->requests++;
    client->requests = g_list_prepend(client->requests, r);
    job->id = r->id;
    g_debug("request %" G_GUINT64_FORMAT " from %s: model %s, %s", r->id, client->name, r->model,
            r->path ? r->path : "Complete");
    counts_changed(reqs);
    npd_worker_submit(reqs->worker, job);
    return r;
}

NpdRequest *npd_requests_lookup(NpdRequests *reqs, guint64 id)
{
    return g_hash_table_lookup(reqs->by_id, &id);
}

NpdRequest *npd_requests_lookup_node(NpdRequests *reqs, const char *node)
{
    return g_hash_table_lookup(reqs->by_node, node);
}

const NpdRequestCounts *npd_requests_counts(const NpdRequests *reqs)
{
    return &reqs->counts;
}

void npd_requests_foreach(NpdRequests *reqs, void (*func)(NpdRequest *r, gpointer data), gpointer data)
{
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, reqs->by_id);
    while (g_hash_table_iter_next(&it, NULL, &value))
        func(value, data);
}

void npd_request_set_state(NpdRequest *r, NpdJobState state, guint queue_position)
{
    NpdRequests *reqs = r->owner;
    NpdRequestCounts before = reqs->counts;
    count_state(reqs, r->state, -1);
    r->state = state;
    r->queue_position = queue_position;
    count_state(reqs, r->state, 1);
    if (reqs->counts.active != before.active || reqs->counts.queued != before.queued)
        counts_changed(reqs); /* not for a new queue position */
}

/* The worker's events of one request: its state kept here, then its
 * object's signals (request-objects.c). */
static void request_event_cb(const NpdEvent *ev, gpointer data)
{
    NpdRequest *r = npd_requests_lookup(data, ev->job_id);
    if (r == NULL || npd_request_is_finished(r))
        return; /* destroyed already (client gone): the worker was told */
    if (ev->kind == NPD_EVENT_STATE) {
        if (r->state == ev->state && r->queue_position == ev->queue_position)
            return;
        npd_request_set_state(r, ev->state, ev->queue_position);
    } else if (ev->kind == NPD_EVENT_FINISHED) {
        npd_usage_journal_record(r, ev);
    }
    npd_request_objects_handle_event(r, ev);
}

gboolean npd_request_is_finished(const NpdRequest *r)
{
    return r->state == NPD_JOB_FINISHED;
}

void npd_request_cancel(NpdRequest *r)
{
    if (!npd_request_is_finished(r))
        npd_worker_cancel(r->owner->worker, r->id);
}

void npd_request_mark_finished(NpdRequest *r)
{
    if (npd_request_is_finished(r))
        return;
    npd_request_set_state(r, NPD_JOB_FINISHED, 0);
    r->client->outstanding--;
    r->client->user->requests--;
    npd_idle_uninhibit(r->owner->idle, r->idle_token);
    r->idle_token = 0;
}

void npd_request_destroy(NpdRequest *r)
{
    NpdRequests *reqs = r->owner;
    if (!npd_request_is_finished(r)) {
        npd_usage_journal_record(r, NULL);
        npd_worker_cancel(reqs->worker, r->id);
        npd_request_mark_finished(r);
    }
    if (r->complete != NULL) {
        g_dbus_method_invocation_return_error_literal(r->complete, NPD_ERROR, NPD_ERROR_CANCELLED,
                                                      "request cancelled");
        r->complete = NULL;
    }
    NpdClient *c = r->client;
    c->requests = g_list_remove(c->requests, r);
    if (r->node != NULL)
        g_hash_table_remove(reqs->by_node, r->node);
    g_hash_table_remove(reqs->by_id, &r->id);
    npd_client_ref(c);
    request_free(r);
    npd_client_release_if_idle(c);
    npd_client_unref(c);
}
