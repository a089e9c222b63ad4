#pragma once

#include "bridge.h"

typedef struct BridgeJob BridgeJob;

/* How an API writes a request's output: a piece per token while
 * streaming, then the end (the whole answer when not streaming). */
typedef struct {
    const char *stream_content_type;
    void (*token)(BridgeJob *job, const char *text, GString *out);
    void (*finished)(BridgeJob *job, const char *reason, GVariant *stats, GString *out);
    /* a piece of thinking while streaming; NULL: none */
    void (*thinking)(BridgeJob *job, const char *text, GString *out);
    /* a tool call while streaming (id, name, arguments JSON); NULL: none */
    void (*tool_call)(BridgeJob *job, guint index, const char *id, const char *name, const char *arguments,
                      GString *out);
    /* a failure after a stream has begun */
    void (*stream_error)(BridgeJob *job, const char *message, GString *out);
} BridgeFormat;

struct BridgeJob {
    Bridge *bridge;
    BridgeApi api;
    const BridgeFormat *format;
    SoupServerMessage *msg;
    gboolean stream;
    gboolean streaming; /* the headers of the stream are out */
    gboolean gone;      /* the client disconnected */
    gulong disconnected_id;
    GSource *hangup_watch;  /* notices a client that closes while nothing is written */
    NpullmRequest *request;
    char *model;        /* as the client named it, echoed back */
    gint64 created;     /* unix seconds */
    gint64 start_us;    /* monotonic, for durations */
    gboolean retried;   /* NAME:latest tried as NAME */

    /* what to run */
    NpullmOptions *options;
    char *prompt;
    NpullmConversation *conversation;
    GBytes *image;            /* a prompt's image (generate) */
    GPtrArray *message_images; /* GBytes*: the message being read's images */

    GPtrArray *tool_calls; /* gchar** {id, name, arguments}: the request's calls */
    GString *thinking;     /* the request's thinking (Thinking signals) */

    gpointer data;      /* per-API state */
    GDestroyNotify data_free;
};

BridgeJob *bridge_job_new(Bridge *bridge, SoupServerMessage *msg, BridgeApi api, const BridgeFormat *format,
                          gboolean stream, const char *model);
/* Starts the request: a conversation, else an image with the prompt, else
 * the prompt. The job answers the message and frees itself. */
void bridge_job_start(BridgeJob *job);

/* "tool_calls": the job's calls [first, first + n) in its API's shape:
 * OpenAI [{"index", "id", "type": "function", "function": {"name",
 * "arguments": "<JSON text>"}}], Ollama [{"function": {"index", "name",
 * "arguments": {..}}}]. */
void bridge_job_add_tool_calls(BridgeJob *job, JsonBuilder *b, guint first, guint n);

/* The Finished stats' members (0 when absent). */
guint bridge_stats_uint(GVariant *stats, const char *key);
double bridge_stats_double(GVariant *stats, const char *key);

/* Frees a job that was not started (or whose reply is already set). */
void bridge_job_discard(BridgeJob *job);

/* Answers 400 with the error's message and frees the job (if any). */
void bridge_job_reject(BridgeJob *job, SoupServerMessage *msg, BridgeApi api, GError *error);

/* The text of one message in the API's format; its images are appended
 * to job->message_images. */
typedef gboolean (*BridgeMessageContent)(BridgeJob *job, JsonObject *message, GString *text, GError **error);

/* The body's "messages" as the job's conversation, each message with
 * its images (Chat takes them per message: a follow-up question about an
 * image reuses what the service computed for it). */
gboolean bridge_job_take_messages(BridgeJob *job, JsonObject *body, BridgeMessageContent content, GError **error);
