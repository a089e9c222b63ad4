#pragma once

#if !defined(__NPULLM_H_INSIDE__) && !defined(NPULLM_COMPILATION)
#error "Only <npullm.h> can be included directly."
#endif

#include <gio/gio.h>

#include "npullm-conversation.h"
#include "npullm-export.h"
#include "npullm-options.h"
#include "npullm-request.h"

G_BEGIN_DECLS

#define NPULLM_TYPE_CLIENT (npullm_client_get_type())
NPULLM_EXPORT G_DECLARE_FINAL_TYPE(NpullmClient, npullm_client, NPULLM, CLIENT, GObject)

NPULLM_EXPORT void npullm_client_new_async(GDBusConnection *connection, GCancellable *cancellable,
                                           GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT NpullmClient *npullm_client_new_finish(GAsyncResult *result, GError **error);
NPULLM_EXPORT NpullmClient *npullm_client_new_sync(GDBusConnection *connection, GCancellable *cancellable,
                                                   GError **error);

NPULLM_EXPORT GDBusConnection *npullm_client_get_connection(NpullmClient *self);
NPULLM_EXPORT const char *npullm_client_get_version(NpullmClient *self);
NPULLM_EXPORT const char *npullm_client_get_device(NpullmClient *self);
NPULLM_EXPORT const char *npullm_client_get_device_status(NpullmClient *self);
NPULLM_EXPORT const char *npullm_client_get_default_model(NpullmClient *self);
NPULLM_EXPORT const char *const *npullm_client_get_loaded_models(NpullmClient *self);
NPULLM_EXPORT guint npullm_client_get_active_requests(NpullmClient *self);
NPULLM_EXPORT guint npullm_client_get_queued_requests(NpullmClient *self);
NPULLM_EXPORT guint npullm_client_get_idle_timeout(NpullmClient *self);

NPULLM_EXPORT void npullm_client_list_models_async(NpullmClient *self, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT GVariant *npullm_client_list_models_finish(NpullmClient *self, GAsyncResult *result, GError **error);
NPULLM_EXPORT void npullm_client_list_applications_async(NpullmClient *self, GCancellable *cancellable,
                                                         GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT GVariant *npullm_client_list_applications_finish(NpullmClient *self, GAsyncResult *result,
                                                               GError **error);
NPULLM_EXPORT void npullm_client_load_model_async(NpullmClient *self, const char *name, GCancellable *cancellable,
                                                  GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT gboolean npullm_client_load_model_finish(NpullmClient *self, GAsyncResult *result, GError **error);
NPULLM_EXPORT void npullm_client_unload_model_async(NpullmClient *self, const char *name,
                                                    GCancellable *cancellable, GAsyncReadyCallback callback,
                                                    gpointer user_data);
NPULLM_EXPORT gboolean npullm_client_unload_model_finish(NpullmClient *self, GAsyncResult *result, GError **error);
NPULLM_EXPORT void npullm_client_forget_cache_async(NpullmClient *self, GCancellable *cancellable,
                                                   GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT gboolean npullm_client_forget_cache_finish(NpullmClient *self, GAsyncResult *result, GError **error);
NPULLM_EXPORT void npullm_client_set_idle_timeout_async(NpullmClient *self, guint seconds,
                                                        GCancellable *cancellable, GAsyncReadyCallback callback,
                                                        gpointer user_data);
NPULLM_EXPORT gboolean npullm_client_set_idle_timeout_finish(NpullmClient *self, GAsyncResult *result,
                                                             GError **error);

NPULLM_EXPORT void npullm_client_generate_async(NpullmClient *self, const char *prompt, NpullmOptions *options,
                                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                                gpointer user_data);
NPULLM_EXPORT void npullm_client_chat_async(NpullmClient *self, NpullmConversation *conversation,
                                            NpullmOptions *options, GCancellable *cancellable,
                                            GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT void npullm_client_describe_image_async(NpullmClient *self, GFile *image, const char *prompt,
                                                      NpullmOptions *options, GCancellable *cancellable,
                                                      GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT void npullm_client_describe_image_stream_async(NpullmClient *self, GInputStream *image,
                                                             const char *prompt, NpullmOptions *options,
                                                             GCancellable *cancellable,
                                                             GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT void npullm_client_describe_image_fd_async(NpullmClient *self, int fd, const char *prompt,
                                                         NpullmOptions *options, GCancellable *cancellable,
                                                         GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT NpullmRequest *npullm_client_generate_finish(NpullmClient *self, GAsyncResult *result, GError **error);
NPULLM_EXPORT NpullmRequest *npullm_client_chat_finish(NpullmClient *self, GAsyncResult *result, GError **error);
NPULLM_EXPORT NpullmRequest *npullm_client_describe_image_finish(NpullmClient *self, GAsyncResult *result, GError **error);
NPULLM_EXPORT NpullmRequest *npullm_client_describe_image_stream_finish(NpullmClient *self, GAsyncResult *result, GError **error);
NPULLM_EXPORT NpullmRequest *npullm_client_describe_image_fd_finish(NpullmClient *self, GAsyncResult *result, GError **error);

NPULLM_EXPORT void npullm_client_complete_async(NpullmClient *self, const char *prompt, NpullmOptions *options,
                                                GCancellable *cancellable, GAsyncReadyCallback callback,
                                                gpointer user_data);
NPULLM_EXPORT char *npullm_client_complete_finish(NpullmClient *self, GAsyncResult *result, GError **error);

NPULLM_EXPORT void npullm_client_embed_async(NpullmClient *self, const char *const *texts, NpullmOptions *options,
                                             GCancellable *cancellable, GAsyncReadyCallback callback,
                                             gpointer user_data);
NPULLM_EXPORT GVariant *npullm_client_embed_finish(NpullmClient *self, GAsyncResult *result, GVariant **info,
                                                   GError **error);

NPULLM_EXPORT void npullm_client_rerank_async(NpullmClient *self, const char *query, const char *const *documents,
                                              NpullmOptions *options, GCancellable *cancellable,
                                              GAsyncReadyCallback callback, gpointer user_data);
NPULLM_EXPORT GVariant *npullm_client_rerank_finish(NpullmClient *self, GAsyncResult *result, GVariant **info,
                                                    GError **error);

G_END_DECLS
