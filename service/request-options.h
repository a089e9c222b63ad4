/* Validation of the a{sv} options and chat messages that clients pass to
 * org.npullm.Manager. Every problem is an NPD_ERROR_INVALID_ARGUMENT whose
 * message starts with the offending key. */
#ifndef NPD_REQUEST_OPTIONS_H
#define NPD_REQUEST_OPTIONS_H

#include <glib.h>

#include "daemon-config.h"
#include "grammar.h"
#include "npullm.h"
#include "npullm-protocol.h"
#include "tool-options.h"

typedef enum {
    NPD_PRIORITY_INTERACTIVE = 0,
    NPD_PRIORITY_BACKGROUND = 1,
} NpdPriority;

/* Which method the options come with (some keys apply to only some);
 * the same order as NppCall. */
typedef enum {
    NPD_CALL_GENERATE,
    NPD_CALL_CHAT,
    NPD_CALL_DESCRIBE_IMAGE,
    NPD_CALL_COMPLETE,
    NPD_CALL_EMBED,
    NPD_CALL_RERANK,
} NpdCallKind;

#define NPD_MAX_STOP_STRINGS NPP_MAX_STOP_STRINGS
#define NPD_MAX_STOP_BYTES NPP_MAX_STOP_BYTES
#define NPD_MAX_HANDLE_TOKEN NPP_MAX_HANDLE_TOKEN
#define NPD_MAX_MODEL_NAME NPP_MAX_MODEL_NAME

typedef struct {
    gchar *model;           /* NULL: the default model */
    guint32 max_tokens;     /* 0: not given */
    npl_sampler_params sampling;
    gboolean seed_given;
    gchar **stop;           /* NULL-terminated, may be NULL */
    gchar *system;
    gboolean raw;
    NpdPriority priority;
    gchar *handle_token;
    gint think; /* -1: the template's default, else 0 or 1 (enable_thinking) */
    const char *reasoning_effort; /* static "low", "medium" or "high"; NULL: the template's default */
    npl_grammar *grammar; /* format: compiled ("json" or a JSON Schema), NULL: free text */
    gchar *format_schema; /* format: a JSON Schema not compiled yet (schema-compile.c) */
    NpdTools *tools;      /* NULL: none offered */
    gchar *tool_choice;   /* auto, none, required or a tool's name; NULL: auto */
    guint32 dimensions;   /* Embed: 0 all */
    gboolean truncate;    /* Embed, Rerank: cut over-long texts (default TRUE) */
    gboolean parallel_tool_calls; /* FALSE: a forced tool_choice makes one call */
    guint32 top_n;        /* Rerank: 0 all */
} NpdRequestOptions;

gboolean npd_request_options_parse(GVariant *options, NpdCallKind kind, const NpdConfig *cfg,
                                   NpdRequestOptions *out, GError **error);
void npd_request_options_clear(NpdRequestOptions *opts);

/* One chat turn after validation. */
typedef struct {
    gchar *role;
    gchar *content;
    guint n_images; /* images shown before the content (user messages) */
    gchar *tool_calls;   /* assistant: the calls it made (a JSON array), or NULL */
    gchar *tool_call_id; /* tool: the call this is the result of, or NULL */
    gchar *name;         /* tool: the function's name, or NULL */
} NpdChatMessage;

/* Validates aa{sv} messages: 1..MaxMessages entries, keys "role" (system,
 * user, assistant or tool), "content" and, on user messages, "images" (ah),
 * on assistant messages "tool_calls" (s, a JSON array), on tool messages
 * "tool_call_id" and "name" (s) only, total content plus system_bytes (the system option) within
 * MaxPromptBytes, NPP_MAX_CHAT_IMAGES images in all. Returns a GPtrArray
 * of NpdChatMessage (owned); the image handles, in order, are appended to
 * handles (gint32). */
GPtrArray *npd_chat_messages_parse(GVariant *messages, gsize system_bytes, const NpdConfig *cfg, GArray *handles,
                                   GError **error);
void npd_chat_message_free(NpdChatMessage *m);

#endif
