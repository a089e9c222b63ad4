/* NpullmConversation: the messages of a chat. NpullmClient.chat_async
 * appends the assistant's reply and grows it as the tokens arrive, so the
 * next turn is one add_message away. */
#include "npullm-conversation-private.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <string.h>
#include <unistd.h>

#include "npullm-error.h"
#include "npullm-protocol.h"

typedef struct {
    gchar *role;
    GString *content;
    GArray *image_fds; /* int, owned; NULL without images */
    gchar *tool_calls;   /* assistant: its calls (a JSON array), or NULL */
    gchar *tool_call_id; /* tool: the call answered, or NULL */
    gchar *name;         /* tool: the function's name, or NULL */
} Message;

/**
 * NpullmConversation:
 *
 * The messages of a chat, each with a role (system, user or assistant).
 *
 * Since: 1.0
 */
struct _NpullmConversation {
    GObject parent;
    GPtrArray *messages; /* Message* */
};

enum { PROP_0, PROP_N_MESSAGES, N_PROPS };
static GParamSpec *props[N_PROPS];
enum { SIGNAL_CHANGED, N_SIGNALS };
static guint signals[N_SIGNALS];

G_DEFINE_FINAL_TYPE(NpullmConversation, npullm_conversation, G_TYPE_OBJECT)

static void message_free(Message *m)
{
    g_free(m->role);
    g_string_free(m->content, TRUE);
    g_free(m->tool_calls);
    g_free(m->tool_call_id);
    g_free(m->name);
    for (guint i = 0; m->image_fds != NULL && i < m->image_fds->len; i++)
        close(g_array_index(m->image_fds, int, i));
    if (m->image_fds != NULL)
        g_array_unref(m->image_fds);
    g_free(m);
}

static void npullm_conversation_get_property(GObject *object, guint id, GValue *value, GParamSpec *pspec)
{
    NpullmConversation *self = NPULLM_CONVERSATION(object);
    switch (id) {
    case PROP_N_MESSAGES:
        g_value_set_uint(value, self->messages->len);
        break;
    default:
        G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    }
}

static void npullm_conversation_finalize(GObject *object)
{
    g_ptr_array_unref(NPULLM_CONVERSATION(object)->messages);
    G_OBJECT_CLASS(npullm_conversation_parent_class)->finalize(object);
}

static void npullm_conversation_class_init(NpullmConversationClass *klass)
{
    GObjectClass *object_class = G_OBJECT_CLASS(klass);
    object_class->get_property = npullm_conversation_get_property;
    object_class->finalize = npullm_conversation_finalize;
    /**
     * NpullmConversation:n-messages:
     *
     * How many messages the conversation holds.
     *
     * Since: 1.0
     */
    props[PROP_N_MESSAGES] = g_param_spec_uint("n-messages", NULL, NULL, 0, G_MAXUINT, 0,
                                               G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
    g_object_class_install_properties(object_class, N_PROPS, props);
    /**
     * NpullmConversation::changed:
     * @self: the conversation
     * @index: the message that was added or grew
     *
     * A message was added, or the streamed reply at @index grew.
     *
     * Since: 1.0
     */
    signals[SIGNAL_CHANGED] = g_signal_new("changed", G_TYPE_FROM_CLASS(klass), G_SIGNAL_RUN_LAST, 0, NULL, NULL,
                                           NULL, G_TYPE_NONE, 1, G_TYPE_UINT);
}

static void npullm_conversation_init(NpullmConversation *self)
{
    self->messages = g_ptr_array_new_with_free_func((GDestroyNotify)message_free);
}

/**
 * npullm_conversation_new:
 *
 * An empty conversation.
 *
 * Returns: (transfer full): the conversation
 *
 * Since: 1.0
 */
NpullmConversation *npullm_conversation_new(void)
{
    return g_object_new(NPULLM_TYPE_CONVERSATION, NULL);
}

/**
 * npullm_conversation_add_message:
 * @self: the conversation
 * @role: "system", "user" or "assistant"
 * @content: the text
 *
 * Appends a message.
 *
 * Since: 1.0
 */
void npullm_conversation_add_message(NpullmConversation *self, const char *role, const char *content)
{
    g_return_if_fail(NPULLM_IS_CONVERSATION(self));
    g_return_if_fail(role != NULL && content != NULL);
    Message *m = g_new0(Message, 1);
    m->role = g_strdup(role);
    m->content = g_string_new(content);
    g_ptr_array_add(self->messages, m);
    g_object_notify_by_pspec(G_OBJECT(self), props[PROP_N_MESSAGES]);
    g_signal_emit(self, signals[SIGNAL_CHANGED], 0, self->messages->len - 1);
}

/**
 * npullm_conversation_add_tool_calls:
 * @self: the conversation
 * @content: the assistant's text besides the calls (may be "")
 * @tool_calls: the calls it made, a JSON array as OpenAI writes them:
 *   `[{"id", "type": "function", "function": {"name", "arguments"}}]`
 *
 * Appends an assistant message that made tool calls (what
 * #NpullmRequest::tool-call reported), so that the next turn shows the
 * model its calls.
 *
 * Since: 1.0
 */
void npullm_conversation_add_tool_calls(NpullmConversation *self, const char *content, const char *tool_calls)
{
    g_return_if_fail(NPULLM_IS_CONVERSATION(self));
    g_return_if_fail(tool_calls != NULL);
    npullm_conversation_add_message(self, "assistant", content != NULL ? content : "");
    Message *m = self->messages->pdata[self->messages->len - 1];
    m->tool_calls = g_strdup(tool_calls);
}

/**
 * npullm_conversation_add_tool_result:
 * @self: the conversation
 * @tool_call_id: the id of the call this answers
 * @name: the function's name
 * @content: the result
 *
 * Appends a tool message: a function's result for the model.
 *
 * Since: 1.0
 */
void npullm_conversation_add_tool_result(NpullmConversation *self, const char *tool_call_id, const char *name,
                                         const char *content)
{
    g_return_if_fail(NPULLM_IS_CONVERSATION(self));
    g_return_if_fail(content != NULL);
    npullm_conversation_add_message(self, "tool", content);
    Message *m = self->messages->pdata[self->messages->len - 1];
    m->tool_call_id = g_strdup(tool_call_id);
    m->name = g_strdup(name);
}

/**
 * npullm_conversation_get_n_messages:
 * @self: the conversation
 *
 * Counts the messages.
 *
 * Returns: how many messages it holds
 *
 * Since: 1.0
 */
guint npullm_conversation_get_n_messages(NpullmConversation *self)
{
    g_return_val_if_fail(NPULLM_IS_CONVERSATION(self), 0);
    return self->messages->len;
}

static Message *message_at(NpullmConversation *self, guint index)
{
    return index < self->messages->len ? self->messages->pdata[index] : NULL;
}

/**
 * npullm_conversation_get_role:
 * @self: the conversation
 * @index: a message index
 *
 * Gets the role of a message.
 *
 * Returns: (transfer none) (nullable): the role of message @index, %NULL
 *   when there is no such message
 *
 * Since: 1.0
 */
const char *npullm_conversation_get_role(NpullmConversation *self, guint index)
{
    g_return_val_if_fail(NPULLM_IS_CONVERSATION(self), NULL);
    Message *m = message_at(self, index);
    return m != NULL ? m->role : NULL;
}

/**
 * npullm_conversation_get_content:
 * @self: the conversation
 * @index: a message index
 *
 * Gets the text of a message.
 *
 * Returns: (transfer none) (nullable): the text of message @index, %NULL
 *   when there is no such message
 *
 * Since: 1.0
 */
const char *npullm_conversation_get_content(NpullmConversation *self, guint index)
{
    g_return_val_if_fail(NPULLM_IS_CONVERSATION(self), NULL);
    Message *m = message_at(self, index);
    return m != NULL ? m->content->str : NULL;
}

/**
 * npullm_conversation_clear:
 * @self: the conversation
 *
 * Removes every message.
 *
 * Since: 1.0
 */
void npullm_conversation_clear(NpullmConversation *self)
{
    g_return_if_fail(NPULLM_IS_CONVERSATION(self));
    g_ptr_array_set_size(self->messages, 0);
    g_object_notify_by_pspec(G_OBJECT(self), props[PROP_N_MESSAGES]);
}

/**
 * npullm_conversation_add_image_fd:
 * @self: the conversation
 * @fd: a readable descriptor of an image file (PNG, JPEG or WebP) or a
 *   pipe (duplicated; the caller keeps its own)
 * @error: return location for an error
 *
 * Shows an image with the last message, which must be a user message, as
 * npullm_client_describe_image_fd_async() does for one turn. The
 * conversation keeps the image with that message and sends it on every
 * turn; the service reuses what it computed for it (a regular file is
 * read whole each turn; a pipe can be read once only). At
 * most 8 images in a conversation; the model needs a vision projector.
 *
 * Returns: %TRUE, or %FALSE with @error set (%G_IO_ERROR_INVALID_ARGUMENT
 *   when the last message is not a user message or the conversation holds
 *   8 images already; the errno of duplicating @fd)
 *
 * Since: 1.0
 */
gboolean npullm_conversation_add_image_fd(NpullmConversation *self, int fd, GError **error)
{
    g_return_val_if_fail(NPULLM_IS_CONVERSATION(self), FALSE);
    Message *last = self->messages->len > 0 ? self->messages->pdata[self->messages->len - 1] : NULL;
    if (last == NULL || strcmp(last->role, "user") != 0) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                            "image: the last message of the conversation is not a user message");
        return FALSE;
    }
    guint total = 0;
    for (guint i = 0; i < self->messages->len; i++)
        total += npullm_conversation_get_n_images(self, i);
    if (total >= NPP_MAX_CHAT_IMAGES) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "image: a conversation holds at most %u images",
                    NPP_MAX_CHAT_IMAGES);
        return FALSE;
    }
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (copy < 0) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "image: %s", g_strerror(e));
        return FALSE;
    }
    if (last->image_fds == NULL)
        last->image_fds = g_array_new(FALSE, FALSE, sizeof(int));
    g_array_append_val(last->image_fds, copy);
    g_signal_emit(self, signals[SIGNAL_CHANGED], 0, self->messages->len - 1);
    return TRUE;
}

/**
 * npullm_conversation_get_n_images:
 * @self: the conversation
 * @index: a message index
 *
 * Counts the images shown with a message.
 *
 * Returns: how many images message @index carries (0 when there is no
 *   such message)
 *
 * Since: 1.0
 */
guint npullm_conversation_get_n_images(NpullmConversation *self, guint index)
{
    g_return_val_if_fail(NPULLM_IS_CONVERSATION(self), 0);
    Message *m = message_at(self, index);
    return m != NULL && m->image_fds != NULL ? m->image_fds->len : 0;
}

gboolean _npullm_conversation_check(NpullmConversation *self, GError **error)
{
    for (guint i = 0; i < self->messages->len; i++) {
        Message *m = self->messages->pdata[i];
        if (!g_utf8_validate(m->role, -1, NULL) || !g_utf8_validate_len(m->content->str, m->content->len, NULL)) {
            g_set_error(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "message %u is not valid UTF-8", i);
            return FALSE;
        }
    }
    return TRUE;
}

/* The images go with every turn: the service reads a regular file whole
 * each time (from a description of its own or with positional reads,
 * never from this one's offset). */
GVariant *_npullm_conversation_to_variant(NpullmConversation *self, GUnixFDList **fds)
{
    *fds = NULL;
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE("aa{sv}"));
    for (guint i = 0; i < self->messages->len; i++) {
        Message *m = self->messages->pdata[i];
        g_variant_builder_open(&b, G_VARIANT_TYPE_VARDICT);
        g_variant_builder_add(&b, "{sv}", "role", g_variant_new_string(m->role));
        g_variant_builder_add(&b, "{sv}", "content", g_variant_new_string(m->content->str));
        const char *tool_fields[][2] = {{"tool_calls", m->tool_calls}, {"tool_call_id", m->tool_call_id},
                                        {"name", m->name}};
        for (gsize k = 0; k < G_N_ELEMENTS(tool_fields); k++)
            if (tool_fields[k][1] != NULL)
                g_variant_builder_add(&b, "{sv}", tool_fields[k][0], g_variant_new_string(tool_fields[k][1]));
        if (m->image_fds != NULL && m->image_fds->len > 0) {
            GVariantBuilder h;
            g_variant_builder_init(&h, G_VARIANT_TYPE("ah"));
            for (guint k = 0; k < m->image_fds->len; k++) {
                if (*fds == NULL)
                    *fds = g_unix_fd_list_new();
                /* appending duplicates; a failure (EMFILE) leaves the
                 * handle naming nothing, which the service refuses */
                gint idx = g_unix_fd_list_append(*fds, g_array_index(m->image_fds, int, k), NULL);
                g_variant_builder_add(&h, "h", idx >= 0 ? idx : G_MAXINT32);
            }
            g_variant_builder_add(&b, "{sv}", "images", g_variant_builder_end(&h));
        }
        g_variant_builder_close(&b);
    }
    return g_variant_builder_end(&b);
}

guint _npullm_conversation_begin_reply(NpullmConversation *self)
{
    npullm_conversation_add_message(self, "assistant", "");
    return self->messages->len - 1;
}

void _npullm_conversation_grow_reply(NpullmConversation *self, guint index, const char *text)
{
    Message *m = message_at(self, index);
    if (m == NULL)
        return; /* cleared meanwhile */
    g_string_append(m->content, text);
    g_signal_emit(self, signals[SIGNAL_CHANGED], 0, index);
}
