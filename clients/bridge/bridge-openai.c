/* OpenAI's HTTP API: /v1/models, /v1/chat/completions and
 * /v1/completions (SSE streams ending in "data: [DONE]"), and its error
 * shape for everything else. */
#include "bridge-effort.h"
#include "bridge-http.h"
#include "bridge-job.h"
#include "bridge-models.h"
#include "bridge-options.h"

static const BridgeOptionMap openai_options[] = {
    {"max_tokens", "max-tokens", BRIDGE_OPTION_UINT},
    {"max_completion_tokens", "max-tokens", BRIDGE_OPTION_UINT},
    {"temperature", "temperature", BRIDGE_OPTION_DOUBLE},
    {"top_p", "top-p", BRIDGE_OPTION_DOUBLE},
    {"seed", "seed", BRIDGE_OPTION_SEED},
    {"stop", "stop", BRIDGE_OPTION_STOP},
};

typedef struct {
    gboolean chat;
    gboolean include_usage;
    gboolean role_sent;
    char *id;
} OpenaiJob;

static void openai_job_free(gpointer data)
{
    OpenaiJob *o = data;
    g_free(o->id);
    g_free(o);
}

static void add_str(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, v);
}

static void add_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

/* id, object, created, model; then "choices": [ is open */
static JsonBuilder *begin_object(BridgeJob *job, gboolean chunk)
{
    OpenaiJob *o = job->data;
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    add_str(b, "id", o->id);
    add_str(b, "object", o->chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    add_int(b, "created", job->created);
    add_str(b, "model", job->model);
    add_str(b, "system_fingerprint", "npullm");
    json_builder_set_member_name(b, "choices");
    json_builder_begin_array(b);
    return b;
}

/* one choice with its text (a delta, a message or a completion text) and
 * the tool calls [first, first + n_calls) */
static void add_choice(BridgeJob *job, JsonBuilder *b, const char *text, const char *finish_reason, gboolean delta,
                       guint first_call, guint n_calls)
{
    OpenaiJob *o = job->data;
    json_builder_begin_object(b);
    add_int(b, "index", 0);
    if (o->chat) {
        json_builder_set_member_name(b, delta ? "delta" : "message");
        json_builder_begin_object(b);
        if (!delta || !o->role_sent)
            add_str(b, "role", "assistant");
        o->role_sent = TRUE;
        if (text != NULL && (*text != '\0' || n_calls == 0)) {
            add_str(b, "content", text);
        } else if (!delta) {
            json_builder_set_member_name(b, "content");
            json_builder_add_null_value(b);
        }
        if (!delta && job->thinking->len > 0)
            add_str(b, "reasoning_content", job->thinking->str);
        if (n_calls > 0)
            bridge_job_add_tool_calls(job, b, first_call, n_calls);
        json_builder_end_object(b);
    } else {
        add_str(b, "text", text != NULL ? text : "");
    }
    json_builder_set_member_name(b, "logprobs");
    json_builder_add_null_value(b);
    json_builder_set_member_name(b, "finish_reason");
    if (finish_reason != NULL)
        json_builder_add_string_value(b, finish_reason);
    else
        json_builder_add_null_value(b);
    json_builder_end_object(b);
}

static void add_usage(JsonBuilder *b, GVariant *stats)
{
    guint prompt = bridge_stats_uint(stats, "prompt_tokens");
    guint generated = bridge_stats_uint(stats, "generated_tokens");
    json_builder_set_member_name(b, "usage");
    json_builder_begin_object(b);
    add_int(b, "prompt_tokens", prompt);
    add_int(b, "completion_tokens", generated);
    add_int(b, "total_tokens", (gint64)prompt + generated);
    json_builder_end_object(b);
}

static void append_event(GString *out, JsonBuilder *b)
{
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = json_to_string(root, FALSE);
    g_string_append_printf(out, "data: %s\n\n", text);
}

static void openai_token(BridgeJob *job, const char *text, GString *out)
{
    g_autoptr(JsonBuilder) b = begin_object(job, TRUE);
    add_choice(job, b, text, NULL, TRUE, 0, 0);
    json_builder_end_array(b);
    json_builder_end_object(b);
    append_event(out, b);
}

/* streamed thinking: a delta with reasoning_content (as DeepSeek's and
 * llama.cpp's servers send it) */
static void openai_thinking(BridgeJob *job, const char *text, GString *out)
{
    OpenaiJob *o = job->data;
    if (!o->chat)
        return;
    g_autoptr(JsonBuilder) b = begin_object(job, TRUE);
    json_builder_begin_object(b);
    add_int(b, "index", 0);
    json_builder_set_member_name(b, "delta");
    json_builder_begin_object(b);
    if (!o->role_sent)
        add_str(b, "role", "assistant");
    o->role_sent = TRUE;
    add_str(b, "reasoning_content", text);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "finish_reason");
    json_builder_add_null_value(b);
    json_builder_end_object(b);
    json_builder_end_array(b);
    json_builder_end_object(b);
    append_event(out, b);
}

/* a streamed call: one chunk with the whole call, as OpenAI sends a call
 * whose arguments are complete */
static void openai_tool_call(BridgeJob *job, guint index, const char *id, const char *name, const char *arguments,
                             GString *out)
{
    (void)id, (void)name, (void)arguments;
    g_autoptr(JsonBuilder) b = begin_object(job, TRUE);
    add_choice(job, b, NULL, NULL, TRUE, index, 1);
    json_builder_end_array(b);
    json_builder_end_object(b);
    append_event(out, b);
}

static void openai_finished(BridgeJob *job, const char *reason, GVariant *stats, GString *out)
{
    OpenaiJob *o = job->data;
    const char *finish = g_strcmp0(reason, "length") == 0       ? "length"
                         : g_strcmp0(reason, "tool_calls") == 0 ? "tool_calls"
                                                                : "stop";
    if (!job->stream) {
        g_autoptr(JsonBuilder) b = begin_object(job, FALSE);
        add_choice(job, b, npullm_request_get_text(job->request), finish, FALSE, 0, job->tool_calls->len);
        json_builder_end_array(b);
        add_usage(b, stats);
        json_builder_end_object(b);
        g_autoptr(JsonNode) root = json_builder_get_root(b);
        g_autofree char *text = json_to_string(root, FALSE);
        g_string_append(out, text);
        return;
    }
    g_autoptr(JsonBuilder) b = begin_object(job, TRUE);
    add_choice(job, b, o->chat ? NULL : "", finish, TRUE, 0, 0);
    json_builder_end_array(b);
    json_builder_end_object(b);
    append_event(out, b);
    if (o->include_usage) {
        /* the usage chunk: no choices */
        g_autoptr(JsonBuilder) u = begin_object(job, TRUE);
        json_builder_end_array(u);
        add_usage(u, stats);
        json_builder_end_object(u);
        append_event(out, u);
    }
    g_string_append(out, "data: [DONE]\n\n");
}

static void openai_stream_error(BridgeJob *job, const char *message, GString *out)
{
    g_autofree char *text = bridge_error_json(BRIDGE_API_OPENAI, message);
    g_string_append_printf(out, "data: %s\n\ndata: [DONE]\n\n", text);
}

static const BridgeFormat openai_format = {
    .stream_content_type = "text/event-stream",
    .token = openai_token,
    .finished = openai_finished,
    .tool_call = openai_tool_call,
    .thinking = openai_thinking,
    .stream_error = openai_stream_error,
};

/* ---- models ---- */

static void add_model(JsonBuilder *b, const char *name)
{
    json_builder_begin_object(b);
    add_str(b, "id", name);
    add_str(b, "object", "model");
    add_int(b, "created", 0);
    add_str(b, "owned_by", "npullm");
    json_builder_end_object(b);
}

static void models_reply(Bridge *bridge, SoupServerMessage *msg, GVariant *models, gpointer data)
{
    const char *wanted = data;
    if (wanted != NULL) {
        g_autoptr(GVariant) m = bridge_models_find(models, wanted);
        if (m == NULL) {
            bridge_reply_error(msg, BRIDGE_API_OPENAI, SOUP_STATUS_NOT_FOUND, "The model '%s' does not exist", wanted);
            return;
        }
        g_autoptr(JsonBuilder) b = json_builder_new();
        add_model(b, wanted);
        bridge_reply_json(msg, SOUP_STATUS_OK, json_builder_get_root(b));
        return;
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    add_str(b, "object", "list");
    json_builder_set_member_name(b, "data");
    json_builder_begin_array(b);
    for (gsize i = 0; i < g_variant_n_children(models); i++) {
        g_autoptr(GVariant) m = g_variant_get_child_value(models, i);
        gboolean supported = FALSE;
        const char *name = "";
        g_variant_lookup(m, "supported", "b", &supported);
        g_variant_lookup(m, "name", "&s", &name);
        if (supported)
            add_model(b, name);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    bridge_reply_json(msg, SOUP_STATUS_OK, json_builder_get_root(b));
}

static void handle_models(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                          gpointer data)
{
    if (!bridge_require_method(msg, BRIDGE_API_OPENAI, "GET"))
        return;
    const char *id = NULL;
    if (g_str_has_prefix(path, "/v1/models/") && path[strlen("/v1/models/")] != '\0')
        id = path + strlen("/v1/models/");
    bridge_models_fetch(data, msg, BRIDGE_API_OPENAI, models_reply, g_strdup(id), g_free);
}

/* ---- completions ---- */

static BridgeJob *parse_common(Bridge *bridge, SoupServerMessage *msg, JsonObject *body, gboolean chat,
                               GError **error)
{
    const char *model = NULL;
    gboolean stream = FALSE, include_usage = FALSE;
    double n = 1;
    JsonObject *stream_options = NULL;
    gboolean parallel = TRUE; /* false: a forced tool_choice makes one call (auto parses all) */
    if (!bridge_json_string(body, "model", &model, error) || !bridge_json_bool(body, "stream", &stream, error) ||
        !bridge_json_object(body, "stream_options", &stream_options, error) ||
        (stream_options != NULL && !bridge_json_bool(stream_options, "include_usage", &include_usage, error)) ||
        !bridge_json_number(body, "n", &n, NULL, error) ||
        !bridge_json_bool(body, "parallel_tool_calls", &parallel, error))
        return NULL;
    if (n != 1) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "\"n\" must be 1: npullm gives one choice");
        return NULL;
    }
    BridgeJob *job = bridge_job_new(bridge, msg, BRIDGE_API_OPENAI, &openai_format, stream, model);
    OpenaiJob *o = g_new0(OpenaiJob, 1);
    o->chat = chat;
    o->include_usage = include_usage;
    g_autofree char *uuid = g_uuid_string_random();
    o->id = g_strconcat(chat ? "chatcmpl-" : "cmpl-", uuid, NULL);
    job->data = o;
    job->data_free = openai_job_free;
    if (bridge_options_apply(body, openai_options, G_N_ELEMENTS(openai_options), job->options, error) &&
        (!chat || bridge_option_openai_effort(job->options, body, error)) &&
        bridge_option_response_format(job->options, json_object_get_member(body, "response_format"), error))
        bridge_option_tools(job->options, body, error);
    if (chat && !parallel)
        g_object_set(job->options, "parallel-tool-calls", FALSE, NULL);
    return job;
}

/* A message's content: a string, or parts of type text and image_url
 * (base64 data: URLs, shown with the message). */
static gboolean message_content(BridgeJob *job, JsonObject *m, GString *text, GError **error)
{
    JsonNode *content = json_object_get_member(m, "content");
    if (content == NULL || JSON_NODE_HOLDS_NULL(content))
        return TRUE;
    if (json_node_get_value_type(content) == G_TYPE_STRING) {
        g_string_append(text, json_node_get_string(content));
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_ARRAY(content)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "\"content\" must be a string or an array of parts");
        return FALSE;
    }
    JsonArray *parts = json_node_get_array(content);
    for (guint i = 0; i < json_array_get_length(parts); i++) {
        JsonNode *pn = json_array_get_element(parts, i);
        const char *type = NULL, *t = NULL, *url = NULL;
        JsonObject *image_url = NULL;
        if (!JSON_NODE_HOLDS_OBJECT(pn)) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "each content part must be an object");
            return FALSE;
        }
        JsonObject *p = json_node_get_object(pn);
        if (!bridge_json_string(p, "type", &type, error))
            return FALSE;
        if (g_strcmp0(type, "text") == 0) {
            if (!bridge_json_string(p, "text", &t, error))
                return FALSE;
            if (t != NULL)
                g_string_append(text, t);
        } else if (g_strcmp0(type, "image_url") == 0) {
            if (!bridge_json_object(p, "image_url", &image_url, error) ||
                (image_url != NULL && !bridge_json_string(image_url, "url", &url, error)))
                return FALSE;
            if (url == NULL || !g_str_has_prefix(url, "data:")) {
                g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                            "an image must be a base64 data: URL (npullm fetches nothing from the network)");
                return FALSE;
            }
            GBytes *image = bridge_decode_image(url, error);
            if (image == NULL)
                return FALSE;
            g_ptr_array_add(job->message_images, image);
        } else {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "content parts of type '%s' are not supported",
                        type != NULL ? type : "(none)");
            return FALSE;
        }
    }
    return TRUE;
}

static void handle_chat(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                        gpointer data)
{
    g_autoptr(JsonObject) body = bridge_post_body(msg, BRIDGE_API_OPENAI);
    if (body == NULL)
        return;
    GError *error = NULL;
    BridgeJob *job = parse_common(data, msg, body, TRUE, &error);
    if (job == NULL || error != NULL || !bridge_job_take_messages(job, body, message_content, &error)) {
        bridge_job_reject(job, msg, BRIDGE_API_OPENAI, error);
        return;
    }
    bridge_job_start(job);
}

static void handle_completions(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                               gpointer data)
{
    g_autoptr(JsonObject) body = bridge_post_body(msg, BRIDGE_API_OPENAI);
    if (body == NULL)
        return;
    GError *error = NULL;
    BridgeJob *job = parse_common(data, msg, body, FALSE, &error);
    if (job == NULL || error != NULL) {
        bridge_job_reject(job, msg, BRIDGE_API_OPENAI, error);
        return;
    }
    JsonNode *prompt = json_object_get_member(body, "prompt");
    const char *text = NULL;
    if (prompt != NULL && json_node_get_value_type(prompt) == G_TYPE_STRING) {
        text = json_node_get_string(prompt);
    } else if (prompt != NULL && JSON_NODE_HOLDS_ARRAY(prompt) && json_array_get_length(json_node_get_array(prompt)) == 1 &&
               json_node_get_value_type(json_array_get_element(json_node_get_array(prompt), 0)) == G_TYPE_STRING) {
        text = json_array_get_string_element(json_node_get_array(prompt), 0);
    }
    if (text == NULL || *text == '\0') {
        bridge_job_reject(job, msg, BRIDGE_API_OPENAI, g_error_new(G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                                     "\"prompt\" must be a non-empty string (or an array of one)"));
        return;
    }
    /* a completion continues the text as it is: no chat template */
    g_object_set(job->options, "raw", TRUE, NULL);
    job->prompt = g_strdup(text);
    bridge_job_start(job);
}

static void handle_other(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                         gpointer data)
{
    bridge_reply_error(msg, BRIDGE_API_OPENAI, SOUP_STATUS_NOT_FOUND,
                       "npullm-bridge does not serve %s (it serves /v1/models, /v1/chat/completions and "
                       "/v1/completions)",
                       path);
}

void bridge_openai_register(Bridge *bridge)
{
    bridge_add_handler(bridge, "/v1", handle_other);
    bridge_add_handler(bridge, "/v1/models", handle_models);
    bridge_add_handler(bridge, "/v1/chat/completions", handle_chat);
    bridge_add_handler(bridge, "/v1/completions", handle_completions);
}
