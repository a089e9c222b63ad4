/* Embeddings over HTTP, answered by npullmd's Embed:
 *  - Ollama /api/embed: input (a string or an array of strings), model,
 *    truncate, dimensions, keep_alive (accepted: npullmd's IdleTimeout
 *    decides) -> {model, embeddings, total_duration, load_duration,
 *    prompt_eval_count};
 *  - Ollama /api/embeddings (legacy): prompt -> {embedding};
 *  - OpenAI /v1/embeddings: input (a string or an array of strings),
 *    model, dimensions, encoding_format float or base64 (little-endian
 *    float32), user -> {object list, data [{object embedding, index,
 *    embedding}], model, usage}. */
#include "bridge-embed.h"

#include <string.h>

#include "bridge-http.h"

typedef enum {
    EMBED_OLLAMA,        /* /api/embed */
    EMBED_OLLAMA_LEGACY, /* /api/embeddings */
    EMBED_OPENAI,        /* /v1/embeddings */
} EmbedEndpoint;

typedef struct {
    Bridge *bridge;
    SoupServerMessage *msg;
    EmbedEndpoint endpoint;
    gchar *model; /* as the client named it, echoed back */
    gboolean base64;
    GStrv texts;
    NpullmOptions *options;
    gboolean retried; /* NAME:latest asked again as NAME */
} EmbedCall;

static BridgeApi api_of(EmbedEndpoint e)
{
    return e == EMBED_OPENAI ? BRIDGE_API_OPENAI : BRIDGE_API_OLLAMA;
}

/* A vector as JSON numbers, or (OpenAI's base64) its float32 bytes. */
static void add_vector(JsonBuilder *b, GVariant *row, gboolean base64)
{
    gsize n = 0;
    const double *v = g_variant_get_fixed_array(row, &n, sizeof(double));
    if (base64) {
        g_autofree guint32 *le = g_new(guint32, MAX(n, 1));
        for (gsize k = 0; k < n; k++) {
            float f = (float)v[k];
            guint32 bits;
            memcpy(&bits, &f, sizeof bits);
            le[k] = GUINT32_TO_LE(bits);
        }
        g_autofree gchar *text = g_base64_encode((const guchar *)le, n * sizeof(guint32));
        json_builder_add_string_value(b, text);
        return;
    }
    json_builder_begin_array(b);
    for (gsize k = 0; k < n; k++)
        json_builder_add_double_value(b, (double)(float)v[k]);
    json_builder_end_array(b);
}

static void add_int(JsonBuilder *b, const char *key, gint64 v)
{
    json_builder_set_member_name(b, key);
    json_builder_add_int_value(b, v);
}

static void openai_body(JsonBuilder *b, const EmbedCall *c, GVariant *vectors, guint32 tokens)
{
    json_builder_set_member_name(b, "object");
    json_builder_add_string_value(b, "list");
    json_builder_set_member_name(b, "data");
    json_builder_begin_array(b);
    for (gsize i = 0; i < g_variant_n_children(vectors); i++) {
        g_autoptr(GVariant) row = g_variant_get_child_value(vectors, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "object");
        json_builder_add_string_value(b, "embedding");
        add_int(b, "index", (gint64)i);
        json_builder_set_member_name(b, "embedding");
        add_vector(b, row, c->base64);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    bridge_json_usage(b, tokens);
}

static void ollama_body(JsonBuilder *b, const EmbedCall *c, GVariant *vectors, guint32 tokens, double ms)
{
    if (c->endpoint == EMBED_OLLAMA_LEGACY) {
        g_autoptr(GVariant) row = g_variant_get_child_value(vectors, 0);
        json_builder_set_member_name(b, "embedding");
        add_vector(b, row, FALSE);
        return;
    }
    json_builder_set_member_name(b, "embeddings");
    json_builder_begin_array(b);
    for (gsize i = 0; i < g_variant_n_children(vectors); i++) {
        g_autoptr(GVariant) row = g_variant_get_child_value(vectors, i);
        add_vector(b, row, FALSE);
    }
    json_builder_end_array(b);
    add_int(b, "total_duration", (gint64)(ms * 1e6));
    add_int(b, "load_duration", 0);
    add_int(b, "prompt_eval_count", tokens);
}

static void embed_call_free(EmbedCall *c)
{
    bridge_release(c->bridge);
    g_object_unref(c->msg);
    g_free(c->model);
    g_strfreev(c->texts);
    g_clear_object(&c->options);
    g_free(c);
}

static void embedded_cb(GObject *source, GAsyncResult *res, gpointer data);

static void embed_start(EmbedCall *c)
{
    npullm_client_embed_async(c->bridge->client, (const char *const *)c->texts, c->options, NULL, embedded_cb, c);
}

/* Ollama clients add the default tag to names that have none: NAME:latest
 * that is no model is asked again as NAME (as for generation). */
static gboolean retry_untagged(EmbedCall *c, const GError *error)
{
    if (c->retried || !g_error_matches(error, NPULLM_ERROR, NPULLM_ERROR_NO_SUCH_MODEL) ||
        !g_str_has_suffix(c->model, ":latest"))
        return FALSE;
    c->retried = TRUE;
    g_autofree gchar *bare = g_strndup(c->model, strlen(c->model) - strlen(":latest"));
    g_object_set(c->options, "model", bare, NULL);
    embed_start(c);
    return TRUE;
}

static void embedded_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    EmbedCall *c = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GVariant) vectors = npullm_client_embed_finish(NPULLM_CLIENT(source), res, &info, &error);
    if (vectors == NULL && retry_untagged(c, error))
        return;
    if (vectors == NULL) {
        bridge_reply_error(c->msg, api_of(c->endpoint), bridge_status_for_error(error), "%s", error->message);
    } else {
        guint32 tokens = 0;
        double ms = 0;
        g_variant_lookup(info, "prompt_tokens", "u", &tokens);
        g_variant_lookup(info, "total_time_ms", "d", &ms);
        g_autoptr(JsonBuilder) b = json_builder_new();
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "model");
        json_builder_add_string_value(b, bridge_info_model(c->model, info));
        if (c->endpoint == EMBED_OPENAI)
            openai_body(b, c, vectors, tokens);
        else
            ollama_body(b, c, vectors, tokens, ms);
        json_builder_end_object(b);
        bridge_reply_json(c->msg, SOUP_STATUS_OK, json_builder_get_root(b));
    }
    soup_server_message_unpause(c->msg);
    embed_call_free(c);
}

/* input (or the legacy prompt): a string or an array of strings. */
static GPtrArray *take_texts(JsonObject *body, const char *key, gboolean array_ok, GError **error)
{
    JsonNode *in = json_object_get_member(body, key);
    GPtrArray *texts = g_ptr_array_new();
    if (in != NULL && JSON_NODE_HOLDS_VALUE(in) && json_node_get_value_type(in) == G_TYPE_STRING) {
        g_ptr_array_add(texts, (gpointer)json_node_get_string(in));
    } else if (in != NULL && array_ok && JSON_NODE_HOLDS_ARRAY(in)) {
        JsonArray *a = json_node_get_array(in);
        for (guint i = 0; i < json_array_get_length(a); i++) {
            JsonNode *e = json_array_get_element(a, i);
            if (!JSON_NODE_HOLDS_VALUE(e) || json_node_get_value_type(e) != G_TYPE_STRING) {
                g_set_error(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT,
                            "\"%s\"[%u] must be a string (token arrays are not accepted)", key, i);
                g_ptr_array_unref(texts);
                return NULL;
            }
            g_ptr_array_add(texts, (gpointer)json_node_get_string(e));
        }
    } else {
        g_set_error(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "\"%s\" must be a string%s", key,
                    array_ok ? " or an array of strings" : "");
        g_ptr_array_unref(texts);
        return NULL;
    }
    g_ptr_array_add(texts, NULL);
    return texts;
}

/* model, dimensions, truncate, encoding_format, keep_alive onto options. */
static gboolean take_options(JsonObject *body, EmbedCall *c, NpullmOptions *options, GError **error)
{
    const char *model = "", *format = "float";
    gboolean truncate = TRUE;
    double dims = 0;
    gboolean has_dims = FALSE;
    if (!bridge_json_string(body, "model", &model, error) ||
        !bridge_json_number(body, "dimensions", &dims, &has_dims, error) ||
        !bridge_json_bool(body, "truncate", &truncate, error) ||
        !bridge_json_string(body, "encoding_format", &format, error))
        return FALSE;
    if (has_dims && !bridge_option_uint(options, "dimensions", dims, G_MAXUINT32, "dimensions", error))
        return FALSE;
    if (g_strcmp0(format, "float") != 0 && g_strcmp0(format, "base64") != 0) {
        g_set_error(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT,
                    "\"encoding_format\" must be \"float\" or \"base64\"");
        return FALSE;
    }
    c->base64 = g_strcmp0(format, "base64") == 0;
    c->model = g_strdup(model);
    bridge_option_model(options, model);
    if (!truncate)
        g_object_set(options, "truncate", FALSE, NULL);
    return TRUE;
}

static void handle_embed(SoupServerMessage *msg, Bridge *bridge, EmbedEndpoint endpoint)
{
    BridgeApi api = api_of(endpoint);
    g_autoptr(JsonObject) body = bridge_post_body(msg, api);
    if (body == NULL)
        return;
    g_autoptr(GError) error = NULL;
    EmbedCall *c = g_new0(EmbedCall, 1);
    c->bridge = bridge;
    c->msg = g_object_ref(msg);
    c->endpoint = endpoint;
    bridge_hold(bridge);
    c->options = npullm_options_new();
    const char *key = endpoint == EMBED_OLLAMA_LEGACY ? "prompt" : "input";
    g_autoptr(GPtrArray) texts = take_texts(body, key, endpoint != EMBED_OLLAMA_LEGACY, &error);
    if (texts == NULL || !take_options(body, c, c->options, &error)) {
        bridge_reply_error(msg, api, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
        embed_call_free(c);
        return;
    }
    c->texts = g_strdupv((gchar **)texts->pdata);
    soup_server_message_pause(msg);
    embed_start(c);
}

static void handle_ollama(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                          gpointer data)
{
    handle_embed(msg, data, EMBED_OLLAMA);
}

static void handle_ollama_legacy(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                                 gpointer data)
{
    handle_embed(msg, data, EMBED_OLLAMA_LEGACY);
}

static void handle_openai(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
                          gpointer data)
{
    handle_embed(msg, data, EMBED_OPENAI);
}

void bridge_embed_register(Bridge *bridge)
{
    bridge_add_handler(bridge, "/api/embed", handle_ollama);
    bridge_add_handler(bridge, "/api/embeddings", handle_ollama_legacy);
    bridge_add_handler(bridge, "/v1/embeddings", handle_openai);
}
