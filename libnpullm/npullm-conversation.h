#pragma once

#if !defined(__NPULLM_H_INSIDE__) && !defined(NPULLM_COMPILATION)
#error "Only <npullm.h> can be included directly."
#endif

#include <glib-object.h>

#include "npullm-export.h"

G_BEGIN_DECLS

#define NPULLM_TYPE_CONVERSATION (npullm_conversation_get_type())
NPULLM_EXPORT G_DECLARE_FINAL_TYPE(NpullmConversation, npullm_conversation, NPULLM, CONVERSATION, GObject)

NPULLM_EXPORT NpullmConversation *npullm_conversation_new(void);
NPULLM_EXPORT void npullm_conversation_add_message(NpullmConversation *self, const char *role, const char *content);
NPULLM_EXPORT void npullm_conversation_add_tool_calls(NpullmConversation *self, const char *content,
                                                      const char *tool_calls);
NPULLM_EXPORT void npullm_conversation_add_tool_result(NpullmConversation *self, const char *tool_call_id,
                                                       const char *name, const char *content);
NPULLM_EXPORT guint npullm_conversation_get_n_messages(NpullmConversation *self);
NPULLM_EXPORT const char *npullm_conversation_get_role(NpullmConversation *self, guint index);
NPULLM_EXPORT const char *npullm_conversation_get_content(NpullmConversation *self, guint index);
NPULLM_EXPORT void npullm_conversation_clear(NpullmConversation *self);
NPULLM_EXPORT gboolean npullm_conversation_add_image_fd(NpullmConversation *self, int fd, GError **error);
NPULLM_EXPORT guint npullm_conversation_get_n_images(NpullmConversation *self, guint index);

G_END_DECLS
