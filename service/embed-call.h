/* org.npullm.Manager.Embed on the main thread: the arguments checked
 * against the caps (npullm-protocol.h), the model resolved to an
 * embedding model, the job handed to the worker's fair queue
 * (embed-job.c) and the vectors returned as (aad, a{sv}). Also what
 * ListModels says a model can do, and the refusal of generation on an
 * embedding model. A Rerank method would sit beside it the same way: a
 * prepare/run pair here, a job kind of its own, a reply function. */
#ifndef NPD_EMBED_CALL_H
#define NPD_EMBED_CALL_H

#include "job-kind.h"
#include "manager-call.h"

gboolean npd_embed_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                           GError **error);
gboolean npd_embed_run(NpdPendingCall *p);

/* Embed's and Rerank's run: the capacity checked, a request made with
 * reply as its answer, the job of that kind (p->op, taken) handed to the
 * worker's fair queue; n (texts) for the log. */
gboolean npd_job_call_run(NpdPendingCall *p, const NpdJobKind *kind,
                          GVariant *(*reply)(NpdRequest *r, const NpdEvent *ev), guint n);

/* 1..NPP_MAX_EMBED_TEXTS texts (non-empty unless allow_empty), each and
 * all within their byte caps; errors name them `what` (Embed's "texts",
 * Rerank's "documents"). */
gboolean npd_check_texts(GVariant *texts, const char *what, gboolean allow_empty, GError **error);

/* ListModels' "capabilities" (as): "rerank", "embedding", or "completion" and
 * "chat" (and "vision" with a projector); none when not supported. */
GVariant *npd_model_capabilities(const NpdModelEntry *e);

#endif
