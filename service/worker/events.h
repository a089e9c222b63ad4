/* The engine worker's events to the main context: posted from any
 * thread, dispatched on the main context in order, with consecutive text
 * of one request coalesced (never dropped or reordered). */
#ifndef NPD_WORKER_EVENTS_H
#define NPD_WORKER_EVENTS_H

#include "engine-worker.h"

typedef struct NpdEventChannel NpdEventChannel;

NpdEventChannel *npd_event_channel_new(GMainContext *main_context, NpdEventFunc func, gpointer user_data);
/* The events of requests (job_id != 0) go to func instead (NULL: back to
 * the channel's own). Main context only. */
void npd_event_channel_set_request_func(NpdEventChannel *ch, NpdEventFunc func, gpointer user_data);
/* Events not dispatched yet are discarded. */
void npd_event_channel_free(NpdEventChannel *ch);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdEventChannel, npd_event_channel_free)

/* Takes ev. urgent: dispatched at once (with the text before it); else
 * text waits for the text interval. */
void npd_event_channel_post(NpdEventChannel *ch, NpdEvent *ev, gboolean urgent);

void npd_event_free(NpdEvent *ev);

/* The events the worker sends, each urgent unless said otherwise. */
void npd_event_post_state(NpdEventChannel *ch, guint64 job_id, NpdJobState state, guint position);
/* urgent: the request's first text, which never waits; empty text is no event */
void npd_event_post_text(NpdEventChannel *ch, guint64 job_id, NpdEventKind kind, const npl_buf *text,
                         gboolean urgent);
void npd_event_post_tool_call(NpdEventChannel *ch, guint64 job_id, const npl_tool_call *call);
/* Takes error. job: a job kind's finished job gives its state to the
 * event (NpdEvent.result); NULL: none. */
void npd_event_post_finished(NpdEventChannel *ch, guint64 job_id, NpdFinishReason reason, const NpdJobStats *stats,
                             GError *error, NpdJob *job);
/* Takes names (NULL-terminated, sorted). */
void npd_event_post_models(NpdEventChannel *ch, gchar **names);
/* Takes error. */
void npd_event_post_command_done(NpdEventChannel *ch, gpointer tag, GError *error);

#endif
