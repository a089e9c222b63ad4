#pragma once

#include "npullm-conversation.h"

/* aa{sv} for Chat (floating). */
GVariant *_npullm_conversation_to_variant(NpullmConversation *self);
/* Appends an empty assistant message for a reply; returns its index. */
guint _npullm_conversation_begin_reply(NpullmConversation *self);
void _npullm_conversation_grow_reply(NpullmConversation *self, guint index, const char *text);
