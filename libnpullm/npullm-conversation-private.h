#pragma once

#include "npullm-conversation.h"

#include <gio/gunixfdlist.h>

/* aa{sv} for Chat (floating); *fds (NULL without images) holds copies of
 * the images' descriptors the "images" handles name. */
GVariant *_npullm_conversation_to_variant(NpullmConversation *self, GUnixFDList **fds);
/* FALSE with an InvalidArgument error when a message is not UTF-8. */
gboolean _npullm_conversation_check(NpullmConversation *self, GError **error);
/* Appends an empty assistant message for a reply; returns its index. */
guint _npullm_conversation_begin_reply(NpullmConversation *self);
void _npullm_conversation_grow_reply(NpullmConversation *self, guint index, const char *text);
