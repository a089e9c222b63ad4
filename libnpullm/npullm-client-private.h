#pragma once

#include "npullm-client.h"

/* Unfinished requests are told when the daemon leaves the bus. */
void _npullm_client_track(NpullmClient *self, NpullmRequest *request);

/* A Manager call through the well-known name, answered with its reply
 * (a GVariant for g_task_propagate_pointer) or its error, stripped. */
void _npullm_client_manager_call(NpullmClient *self, gpointer tag, const char *method, GVariant *params,
                                 const GVariantType *reply, GCancellable *cancellable, GAsyncReadyCallback callback,
                                 gpointer user_data);
