#pragma once

#if !defined(__NPULLM_H_INSIDE__) && !defined(NPULLM_COMPILATION)
#error "Only <npullm.h> can be included directly."
#endif

#include <gio/gio.h>

#include "npullm-export.h"

G_BEGIN_DECLS

/**
 * NpullmRequestState:
 * @NPULLM_REQUEST_STATE_QUEUED: waiting for a free slot
 * @NPULLM_REQUEST_STATE_LOADING: its model is being loaded
 * @NPULLM_REQUEST_STATE_RUNNING: generating
 * @NPULLM_REQUEST_STATE_FINISHED: done (see #NpullmRequest:finish-reason)
 *
 * Where a request is, as the service reports it.
 *
 * Since: 1.0
 */
typedef enum {
    NPULLM_REQUEST_STATE_QUEUED,
    NPULLM_REQUEST_STATE_LOADING,
    NPULLM_REQUEST_STATE_RUNNING,
    NPULLM_REQUEST_STATE_FINISHED,
} NpullmRequestState;

NPULLM_EXPORT GType npullm_request_state_get_type(void);
#define NPULLM_TYPE_REQUEST_STATE (npullm_request_state_get_type())

#define NPULLM_TYPE_REQUEST (npullm_request_get_type())
NPULLM_EXPORT G_DECLARE_FINAL_TYPE(NpullmRequest, npullm_request, NPULLM, REQUEST, GObject)

NPULLM_EXPORT NpullmRequestState npullm_request_get_state(NpullmRequest *self);
NPULLM_EXPORT guint npullm_request_get_queue_position(NpullmRequest *self);
NPULLM_EXPORT const char *npullm_request_get_text(NpullmRequest *self);
NPULLM_EXPORT const char *npullm_request_get_finish_reason(NpullmRequest *self);
NPULLM_EXPORT GVariant *npullm_request_get_stats(NpullmRequest *self);
NPULLM_EXPORT const char *npullm_request_get_object_path(NpullmRequest *self);
NPULLM_EXPORT gboolean npullm_request_propagate_error(NpullmRequest *self, GError **error);
NPULLM_EXPORT void npullm_request_cancel(NpullmRequest *self);

G_END_DECLS
