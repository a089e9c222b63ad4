/* The requests of npullmd: the registry from a request's id and node to
 * the request, its lifecycle (made and submitted in one step, its state
 * as the worker reports it, finished, destroyed), and the numbers of
 * running and queued requests, kept as the requests change state (the
 * queue limits and the ActiveRequests/QueuedRequests properties read them
 * without walking the table). The requests' D-Bus objects are
 * request-objects.c. Main context only. */
#ifndef NPD_REQUESTS_H
#define NPD_REQUESTS_H

#include <gio/gio.h>

#include "engine-worker.h"
#include "idle.h"

typedef struct NpdDaemon NpdDaemon;
typedef struct NpdClient NpdClient;
typedef struct NpdRequests NpdRequests;

/* One generation, seen from the bus. */
typedef struct NpdRequest {
    NpdDaemon *daemon;
    NpdRequests *owner;
    guint64 id;
    NpdClient *client;   /* owner; holds a reference */
    gchar *node;         /* child name under NPD_REQUEST_ROOT, NULL for Complete */
    gchar *path;
    gchar *model;
    const char *method;  /* the Manager method that made it (static), for the usage record */
    NpdJobState state;   /* changed through npd_requests_set_state */
    guint queue_position;
    GDBusMethodInvocation *complete; /* Complete: the call to answer at the end */
    GString *complete_text;
    GString *complete_thinking; /* Complete: the thinking, returned as info["thinking"] */
    guint linger_id;     /* finished: removal timer */
    guint idle_token;    /* held until finished */
    /* Complete-style calls of a job kind (Embed): the reply built from the
     * finished event; NULL: Complete's (text, info) */
    GVariant *(*reply)(struct NpdRequest *r, const NpdEvent *ev);
} NpdRequest;

NpdRequests *npd_requests_new(NpdDaemon *d, NpdWorker *worker, NpdIdle *idle);
/* Runs whenever the numbers of active (loading or running) or queued
 * requests changed, with them (the Manager announces them); not while the
 * registry is freed. */
typedef void (*NpdRequestsChanged)(guint active, guint queued, gpointer data);
void npd_requests_set_changed_func(NpdRequests *reqs, NpdRequestsChanged func, gpointer data);
/* Destroys every request first. */
void npd_requests_free(NpdRequests *reqs);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdRequests, npd_requests_free)

/* Makes the request of client for job (a node of its own unless node is
 * given; none for Complete, whose call complete answers at the end), gives
 * the job the request's id, announces the new counts and hands the job to
 * the worker. The request takes the caller's reference to client and its
 * idle token (held until the request finishes): those of the call that
 * becomes the request (npd_pending_call_submit). */
NpdRequest *npd_requests_submit(NpdRequests *reqs, NpdClient *client, guint idle_token, const char *node,
                                GDBusMethodInvocation *complete, NpdJob *job);
NpdRequest *npd_requests_lookup(NpdRequests *reqs, guint64 id);
NpdRequest *npd_requests_lookup_node(NpdRequests *reqs, const char *node);
/* Unfinished requests: loading or running, and queued. The registry keeps
 * them as requests change state; the pointer stays valid as long as reqs,
 * so a reader (admission) takes it once and reads the numbers live. */
typedef struct {
    guint active;
    guint queued;
} NpdRequestCounts;
const NpdRequestCounts *npd_requests_counts(const NpdRequests *reqs);
/* Calls func for every request, finished ones included. */
void npd_requests_foreach(NpdRequests *reqs, void (*func)(NpdRequest *r, gpointer data), gpointer data);

/* The state the worker reported (FINISHED: npd_request_mark_finished). */
void npd_request_set_state(NpdRequest *r, NpdJobState state, guint queue_position);
gboolean npd_request_is_finished(const NpdRequest *r);
void npd_request_mark_finished(NpdRequest *r);
void npd_request_cancel(NpdRequest *r);
/* Removes a request now (cancelling it in the worker when unfinished). */
void npd_request_destroy(NpdRequest *r);

/* One event of an unfinished request, its state already kept: the
 * object's signals (unicast to the owner), or Complete's reply
 * (request-objects.c). */
void npd_request_objects_handle_event(NpdRequest *r, const NpdEvent *ev);

#endif
