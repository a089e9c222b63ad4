/* Ollama's HTTP API: /api/version, tags, show, ps, generate, chat
 * (NDJSON streams), and its error shape for everything else. */
#include "bridge-effort.h"
#include "bridge-http.h"
#include "bridge-job.h"
#include "bridge-models.h"
#include "bridge-options.h"

/* The Ollama API level these endpoints follow (clients check it). */
#define OLLAMA_API_VERSION "0.9.0"

static const BridgeOptionMap ollama_options[] = {
    {"num_predict", "max-tokens", BRIDGE_OPTION_LIMIT},
    {"temperature", "temperature", BRIDGE_OPTION_DOUBLE},
    {"top_p", "top-p", BRIDGE_OPTION_DOUBLE},
    {"top_k", "top-k", BRIDGE_OPTION_UINT},
    {"min_p", "min-p", BRIDGE_OPTION_DOUBLE},
    {"repeat_penalty", "repeat-penalty", BRIDGE_OPTION_DOUBLE},
    {"seed", "seed", BRIDGE_OPTION_SEED},
    {"stop", "stop", BRIDGE_OPTION_STOP},
};

typedef struct {
    gboolean chat;
} OllamaJob;

static void add_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

static void add_str(JsonBuilder *b, const char *key, const char *v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_string_value(b, v);
}

static void append_json(GString *out, JsonBuilder *b)
{
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = json_to_string(root, FALSE);
    g_string_append(out, text);
    g_string_append_c(out, '\n');
}

/* model, created_at and the text (and thinking, and tool calls [first,
 * first + n)), as every line of a stream starts */
static JsonBuilder *begin_line_full(BridgeJob *job, const char *text, const char *thinking, guint first_call,
                                    guint n_calls)
{
    OllamaJob *o = job->data;
    JsonBuilder *b = json_builder_new();
    json_builder_begin_object(b);
    add_str(b, "model", job->model);
    g_autofree char *now = bridge_now_rfc3339();
    add_str(b, "created_at", now);
    if (o->chat) {
        json_builder_set_member_name(b, "message");
        json_builder_begin_object(b);
        add_str(b, "role", "assistant");
        add_str(b, "content", text);
        if (thinking != NULL && *thinking != '\0')
            add_str(b, "thinking", thinking);
        if (n_calls > 0)
            bridge_job_add_tool_calls(job, b, first_call, n_calls);
        json_builder_end_object(b);
    } else {
        add_str(b, "response", text);
        if (thinking != NULL && *thinking != '\0')
            add_str(b, "thinking", thinking);
    }
    return b;
}

static JsonBuilder *begin_line(BridgeJob *job, const char *text)
{
    return begin_line_full(job, text, NULL, 0, 0);
}

/* a line of a stream before the last */
static void ollama_line(JsonBuilder *b, GString *out)
{
    json_builder_set_member_name(b, "done");
    json_builder_add_boolean_value(b, FALSE);
    json_builder_end_object(b);
    append_json(out, b);
}

static void ollama_thinking(BridgeJob *job, const char *text, GString *out)
{
    g_autoptr(JsonBuilder) b = begin_line_full(job, "", text, 0, 0);
    ollama_line(b, out);
}

static void ollama_tool_call(BridgeJob *job, guint index, const char *id, const char *name, const char *arguments,
                             GString *out)
{
    (void)id, (void)name, (void)arguments;
    g_autoptr(JsonBuilder) b = begin_line_full(job, "", NULL, index, 1);
    ollama_line(b, out);
}

static void ollama_token(BridgeJob *job, const char *text, GString *out)
{
    g_autoptr(JsonBuilder) b = begin_line(job, text);
    ollama_line(b, out);
}

static void ollama_finished(BridgeJob *job, const char *reason, GVariant *stats, GString *out)
{
    g_autoptr(JsonBuilder) b = job->stream ? begin_line(job, "")
                                           : begin_line_full(job, npullm_request_get_text(job->request),
                                                             job->thinking->str, 0, job->tool_calls->len);
    json_builder_set_member_name(b, "done");
    json_builder_add_boolean_value(b, TRUE);
    /* Ollama ends a turn with calls as "stop" */
    add_str(b, "done_reason", g_strcmp0(reason, "tool_calls") == 0 ? "stop" : reason);
    double total_ms = bridge_stats_double(stats, "total_time_ms");
    double first_ms = bridge_stats_double(stats, "time_to_first_token_ms");
    gint64 wall_ns = (g_get_monotonic_time() - job->start_us) * 1000;
    gint64 load_ns = wall_ns - (gint64)(total_ms * 1e6);
    add_int(b, "total_duration", wall_ns);
    add_int(b, "load_duration", load_ns > 0 ? load_ns : 0);
    add_int(b, "prompt_eval_count", bridge_stats_uint(stats, "prompt_tokens"));
    add_int(b, "prompt_eval_duration", (gint64)(first_ms * 1e6));
    add_int(b, "eval_count", bridge_stats_uint(stats, "generated_tokens"));
    add_int(b, "eval_duration", (gint64)((total_ms - first_ms) * 1e6));
    json_builder_end_object(b);
    append_json(out, b);
}

static void ollama_stream_error(BridgeJob *job, const char *message, GString *out)
{
    g_autofree char *text = bridge_error_json(BRIDGE_API_OLLAMA, message);
    g_string_append(out, text);
    g_string_append_c(out, '\n');
}

static const BridgeFormat ollama_format = {
    .stream_content_type = "application/x-ndjson",
    .token = ollama_token,
    .finished = ollama_finished,
    .tool_call = ollama_tool_call,
    .thinking = ollama_thinking,
    .stream_error = ollama_stream_error,
};

/* ---- model listing ---- */

static void add_details(JsonBuilder *b, GVariant *m)
{
    const char *arch = "", *quant = "";
    guint64 params = 0;
    g_variant_lookup(m, "architecture", "&s", &arch);
    g_variant_lookup(m, "quantization", "&s", &quant);
    g_variant_lookup(m, "parameters", "t", &params);
    json_builder_set_member_name(b, "details");
    json_builder_begin_object(b);
    add_str(b, "parent_model", "");
    add_str(b, "format", "gguf");
    add_str(b, "family", arch);
    json_builder_set_member_name(b, "families");
    json_builder_begin_array(b);
    json_builder_add_string_value(b, arch);
    json_builder_end_array(b);
    g_autofree char *size = params >= 1000000000 ? g_strdup_printf("%.1fB", params / 1e9)
                                                 : g_strdup_printf("%.2fM", params / 1e6);
    add_str(b, "parameter_size", size);
    add_str(b, "quantization_level", quant);
    json_builder_end_object(b);
}

static void add_model(JsonBuilder *b, GVariant *m)
{
    const char *name = "";
    guint64 size = 0;
    g_variant_lookup(m, "name", "&s", &name);
    g_variant_lookup(m, "file_size", "t", &size);
    g_autofree char *shown = bridge_models_ollama_name(name);
    g_autofree char *digest = g_compute_checksum_for_string(G_CHECKSUM_SHA256, name, -1);
    json_builder_begin_object(b);
    add_str(b, "name", shown);
    add_str(b, "model", shown);
    add_str(b, "modified_at", "1970-01-01T00:00:00Z");
    add_int(b, "size", (gint64)size);
    add_str(b, "digest", digest);
    add_details(b, m);
    bridge_models_add_capabilities(b, m);
}

static gboolean usable(GVariant *m)
{
    gboolean supported = FALSE;
    g_variant_lookup(m, "supported", "b", &supported);
    return supported;
}

static void models_reply(Bridge *bridge, SoupServerMessage *msg, GVariant *models, gpointer data)
{
    gboolean loaded_only = GPOINTER_TO_INT(data);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "models");
    json_builder_begin_array(b);
    for (gsize i = 0; i < g_variant_n_children(models); i++) {
        g_autoptr(GVariant) m = g_variant_get_child_value(models, i);
        gboolean loaded = FALSE;
        g_variant_lookup(m, "loaded", "b", &loaded);
        if (!usable(m) || (loaded_only && !loaded))
            continue;
        add_model(b, m);
        if (loaded_only) {
            add_str(b, "expires_at", "1970-01-01T00:00:00Z");
            add_int(b, "size_vram", 0);
        }
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    bridge_reply_json(msg, SOUP_STATUS_OK, json_builder_get_root(b));
}

static void show_reply(Bridge *bridge, SoupServerMessage *msg, GVariant *models, gpointer data)
{
    const char *name = data;
    g_autoptr(GVariant) m = bridge_models_find(models, name);
    if (m == NULL) {
        bridge_reply_error(msg, BRIDGE_API_OLLAMA, SOUP_STATUS_NOT_FOUND, "model '%s' not found", name);
        return;
    }
    if (!usable(m)) {
        const char *why = "";
        g_variant_lookup(m, "reason", "&s", &why);
        bridge_reply_error(msg, BRIDGE_API_OLLAMA, SOUP_STATUS_BAD_REQUEST, "model '%s' is not supported: %s", name,
                           why);
        return;
    }
    const char *arch = "";
    guint64 params = 0;
    guint32 ctx = 0;
    g_variant_lookup(m, "architecture", "&s", &arch);
    g_variant_lookup(m, "parameters", "t", &params);
    g_variant_lookup(m, "context_length", "u", &ctx);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    add_str(b, "license", "");
    add_str(b, "modelfile", "");
    add_str(b, "parameters", "");
    add_str(b, "template", "");
    add_str(b, "modified_at", "1970-01-01T00:00:00Z");
    add_details(b, m);
    json_builder_set_member_name(b, "model_info");
    json_builder_begin_object(b);
    add_str(b, "general.architecture", arch);
    add_int(b, "general.parameter_count", (gint64)params);
    g_autofree char *ctx_key = g_strdup_printf("%s.context_length", arch);
    add_int(b, ctx_key, ctx);
    json_builder_end_object(b);
    bridge_models_add_capabilities(b, m);
    json_builder_end_object(b);
    bridge_reply_json(msg, SOUP_STATUS_OK, json_builder_get_root(b));
}

/* ---- handlers ---- */

static void handle_version(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                           gpointer data)
{
    if (!bridge_require_method(msg, BRIDGE_API_OLLAMA, "GET"))
        return;
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    add_str(b, "version", OLLAMA_API_VERSION);
    json_builder_end_object(b);
    bridge_reply_json(msg, SOUP_STATUS_OK, json_builder_get_root(b));
}

static void handle_tags(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                        gpointer data)
{
    if (bridge_require_method(msg, BRIDGE_API_OLLAMA, "GET"))
        bridge_models_fetch(data, msg, BRIDGE_API_OLLAMA, models_reply, GINT_TO_POINTER(FALSE), NULL);
}

static void handle_ps(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                      gpointer data)
{
    if (bridge_require_method(msg, BRIDGE_API_OLLAMA, "GET"))
        bridge_models_fetch(data, msg, BRIDGE_API_OLLAMA, models_reply, GINT_TO_POINTER(TRUE), NULL);
}

static void handle_show(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                        gpointer data)
{
    g_autoptr(JsonObject) body = bridge_post_body(msg, BRIDGE_API_OLLAMA);
    if (body == NULL)
        return;
    g_autoptr(GError) error = NULL;
    const char *model = NULL, *name = NULL;
    if (!bridge_json_string(body, "model", &model, &error) || !bridge_json_string(body, "name", &name, &error)) {
        bridge_reply_error(msg, BRIDGE_API_OLLAMA, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
        return;
    }
    if (model == NULL)
        model = name;
    if (model == NULL || *model == '\0') {
        bridge_reply_error(msg, BRIDGE_API_OLLAMA, SOUP_STATUS_BAD_REQUEST, "\"model\" is required");
        return;
    }
    bridge_models_fetch(data, msg, BRIDGE_API_OLLAMA, show_reply, g_strdup(model), g_free);
}

/* The common members of generate and chat: model, stream, options,
 * format ("json" or a JSON Schema), keep_alive (accepted: the idle timeout is
 * the administrator's). */
static BridgeJob *parse_common(Bridge *bridge, SoupServerMessage *msg, JsonObject *body, gboolean chat,
                               GError **error)
{
    const char *model = NULL;
    gboolean stream = TRUE;
    JsonObject *options = NULL;
    JsonNode *format_node = json_object_get_member(body, "format");
    if (!bridge_json_string(body, "model", &model, error) || !bridge_json_bool(body, "stream", &stream, error) ||
        !bridge_json_object(body, "options", &options, error))
        return NULL;
    BridgeJob *job = bridge_job_new(bridge, msg, BRIDGE_API_OLLAMA, &ollama_format, stream, model);
    OllamaJob *o = g_new0(OllamaJob, 1);
    o->chat = chat;
    job->data = o;
    job->data_free = g_free;
    /* a bad option leaves *error set: the caller rejects the job */
    if (options != NULL &&
        !bridge_options_apply(options, ollama_options, G_N_ELEMENTS(ollama_options), job->options, error))
        return job;
    if (!bridge_option_ollama_think(job->options, json_object_get_member(body, "think"), error))
        return job;
    if (bridge_option_format(job->options, format_node, error) && chat)
        bridge_option_tools(job->options, body, error);
    return job;
}


/* The images of an "images" array (base64 strings), appended to out. */
static gboolean decode_images(JsonArray *images, GPtrArray *out, GError **error)
{
    for (guint i = 0; images != NULL && i < json_array_get_length(images); i++) {
        JsonNode *n = json_array_get_element(images, i);
        if (json_node_get_value_type(n) != G_TYPE_STRING) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "\"images\" must be base64 strings");
            return FALSE;
        }
        GBytes *image = bridge_decode_image(json_node_get_string(n), error);
        if (image == NULL)
            return FALSE;
        g_ptr_array_add(out, image);
    }
    return TRUE;
}

/* /api/generate: one prompt, so at most one image (DescribeImage). */
static gboolean take_images(JsonArray *images, GBytes **image, GError **error)
{
    if (images == NULL || json_array_get_length(images) == 0)
        return TRUE;
    if (json_array_get_length(images) > 1) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                    "/api/generate takes one image (use /api/chat for more)");
        return FALSE;
    }
    g_autoptr(GPtrArray) one = g_ptr_array_new_with_free_func((GDestroyNotify)g_bytes_unref);
    if (!decode_images(images, one, error))
        return FALSE;
    *image = g_bytes_ref(one->pdata[0]);
    return TRUE;
}

typedef struct {
    BridgeJob *job;
    gboolean unload;
    char *name;
    gboolean retried;
} LoadCall;

static void load_call(LoadCall *c);

static void loaded_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    LoadCall *c = data;
    BridgeJob *job = c->job;
    g_autoptr(GError) error = NULL;
    gboolean ok = c->unload ? npullm_client_unload_model_finish(NPULLM_CLIENT(source), res, &error)
                            : npullm_client_load_model_finish(NPULLM_CLIENT(source), res, &error);
    if (!ok && !c->retried && g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NO_SUCH_MODEL) &&
        g_str_has_suffix(c->name, ":latest")) {
        /* NAME:latest is also the model NAME (the tag Ollama clients add) */
        c->retried = TRUE;
        c->name[strlen(c->name) - strlen(":latest")] = '\0';
        load_call(c);
        return;
    }
    if (!ok) {
        bridge_reply_error(job->msg, BRIDGE_API_OLLAMA, bridge_status_for_error(error), "%s", error->message);
    } else {
        g_autoptr(JsonBuilder) b = begin_line(job, "");
        json_builder_set_member_name(b, "done");
        json_builder_add_boolean_value(b, TRUE);
        add_str(b, "done_reason", c->unload ? "unload" : "load");
        json_builder_end_object(b);
        bridge_reply_json(job->msg, SOUP_STATUS_OK, json_builder_get_root(b));
    }
    soup_server_message_unpause(job->msg);
    bridge_job_discard(job);
    g_free(c->name);
    g_free(c);
}

static void load_call(LoadCall *c)
{
    if (c->unload)
        npullm_client_unload_model_async(c->job->bridge->client, c->name, NULL, loaded_cb, c);
    else
        npullm_client_load_model_async(c->job->bridge->client, c->name, NULL, loaded_cb, c);
}

/* Ollama's way to load a model (an empty prompt) and, with keep_alive 0,
 * to unload it. */
static void load_or_unload(BridgeJob *job, JsonObject *body)
{
    LoadCall *c = g_new0(LoadCall, 1);
    c->job = job;
    JsonNode *keep = json_object_get_member(body, "keep_alive");
    if (keep != NULL && !JSON_NODE_HOLDS_NULL(keep)) {
        GType t = json_node_get_value_type(keep);
        c->unload = ((t == G_TYPE_INT64 || t == G_TYPE_DOUBLE) && json_node_get_double(keep) == 0) ||
                    (t == G_TYPE_STRING && (g_strcmp0(json_node_get_string(keep), "0") == 0 ||
                                            g_strcmp0(json_node_get_string(keep), "0s") == 0));
    }
    const char *name = *job->model != '\0' ? job->model : npullm_client_get_default_model(job->bridge->client);
    c->name = g_strdup(name != NULL ? name : "");
    soup_server_message_pause(job->msg);
    load_call(c);
}

static void handle_generate(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                            gpointer data)
{
    g_autoptr(JsonObject) body = bridge_post_body(msg, BRIDGE_API_OLLAMA);
    if (body == NULL)
        return;
    GError *error = NULL;
    BridgeJob *job = parse_common(data, msg, body, FALSE, &error);
    if (job == NULL || error != NULL) {
        bridge_job_reject(job, msg, BRIDGE_API_OLLAMA, error);
        return;
    }
    const char *prompt = "", *system = NULL, *suffix = NULL;
    gboolean raw = FALSE;
    JsonArray *images = NULL;
    if (!bridge_json_string(body, "prompt", &prompt, &error) || !bridge_json_string(body, "system", &system, &error) ||
        !bridge_json_bool(body, "raw", &raw, &error) || !bridge_json_string(body, "suffix", &suffix, &error) ||
        !bridge_json_array(body, "images", &images, &error) || !take_images(images, &job->image, &error)) {
        bridge_job_reject(job, msg, BRIDGE_API_OLLAMA, error);
        return;
    }
    if (suffix != NULL && *suffix != '\0') {
        bridge_job_reject(job, msg, BRIDGE_API_OLLAMA, g_error_new(G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "\"suffix\" (fill-in-the-middle) is not supported by npullm"));
        return;
    }
    if (*prompt == '\0' && job->image == NULL) {
        load_or_unload(job, body);
        return;
    }
    if (system != NULL)
        g_object_set(job->options, "system", system, NULL);
    if (raw)
        g_object_set(job->options, "raw", TRUE, NULL);
    job->prompt = g_strdup(prompt);
    bridge_job_start(job);
}

/* Ollama's message: "content" and base64 "images". */
static gboolean message_content(BridgeJob *job, JsonObject *m, GString *text, GError **error)
{
    const char *content = NULL;
    JsonArray *images = NULL;
    if (!bridge_json_string(m, "content", &content, error) || !bridge_json_array(m, "images", &images, error) ||
        !decode_images(images, job->message_images, error))
        return FALSE;
    if (content != NULL)
        g_string_append(text, content);
    return TRUE;
}

static void handle_chat(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                        gpointer data)
{
    g_autoptr(JsonObject) body = bridge_post_body(msg, BRIDGE_API_OLLAMA);
    if (body == NULL)
        return;
    GError *error = NULL;
    BridgeJob *job = parse_common(data, msg, body, TRUE, &error);
    if (job == NULL || error != NULL) {
        bridge_job_reject(job, msg, BRIDGE_API_OLLAMA, error);
        return;
    }
    if (!bridge_job_take_messages(job, body, message_content, &error)) {
        bridge_job_reject(job, msg, BRIDGE_API_OLLAMA, error);
        return;
    }
    bridge_job_start(job);
}

static void handle_other(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                         gpointer data)
{
    static const char *const not_served[] = {"/api/pull", "/api/push", "/api/create", "/api/copy", "/api/delete",
                                             "/api/blobs"};
    for (gsize i = 0; i < G_N_ELEMENTS(not_served); i++)
        if (g_str_has_prefix(path, not_served[i])) {
            bridge_reply_error(msg, BRIDGE_API_OLLAMA, SOUP_STATUS_NOT_IMPLEMENTED,
                               "npullm-bridge does not serve %s: manage models with npullm-client",
                               not_served[i]);
            return;
        }
    bridge_reply_error(msg, BRIDGE_API_OLLAMA, SOUP_STATUS_NOT_FOUND, "no such endpoint: %s", path);
}

void bridge_ollama_register(Bridge *bridge)
{
    bridge_add_handler(bridge, "/api", handle_other);
    bridge_add_handler(bridge, "/api/version", handle_version);
    bridge_add_handler(bridge, "/api/tags", handle_tags);
    bridge_add_handler(bridge, "/api/ps", handle_ps);
    bridge_add_handler(bridge, "/api/show", handle_show);
    bridge_add_handler(bridge, "/api/generate", handle_generate);
    bridge_add_handler(bridge, "/api/chat", handle_chat);
}
