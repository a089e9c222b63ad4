/* org.npullm.Manager.Rerank on the main thread: the arguments checked
 * against Embed's caps (npullm-protocol.h), the model resolved to a
 * reranker, the job handed to the worker's fair queue (rerank-job.c) and
 * the results returned as (a(ud), a{sv}), best first. */
#ifndef NPD_RERANK_CALL_H
#define NPD_RERANK_CALL_H

#include "manager-call.h"

gboolean npd_rerank_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                            GError **error);
gboolean npd_rerank_run(NpdPendingCall *p);

#endif
