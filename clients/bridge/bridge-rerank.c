/* Reranking over HTTP, answered by npullmd's Rerank, in the shape
 * llama.cpp's server serves (Jina's and Cohere's): POST /v1/rerank (and
 * its aliases there: /rerank, /reranking, /v1/reranking) with model,
 * query, documents (strings), top_n -> {model, object list, usage
 * {prompt_tokens, total_tokens}, results [{index, relevance_score}]} best
 * first. Ollama has no reranking API, so there is no /api/rerank. */
#include "bridge-rerank.h"

#include <string.h>

#include "bridge-http.h"

typedef struct {
    Bridge *bridge;
    SoupServerMessage *msg;
    gchar *model; /* as the client named it, echoed back */
    gboolean none; /* top_n 0: no results, as llama.cpp's server answers */
} RerankCall;

static void rerank_call_free(RerankCall *c)
{
    bridge_release(c->bridge);
    g_object_unref(c->msg);
    g_free(c->model);
    g_free(c);
}

static JsonNode *reply_body(const RerankCall *c, GVariant *results, GVariant *info)
{
    guint32 tokens = 0;
    g_variant_lookup(info, "prompt_tokens", "u", &tokens);
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "model");
    json_builder_add_string_value(b, bridge_info_model(c->model, info));
    json_builder_set_member_name(b, "object");
    json_builder_add_string_value(b, "list");
    bridge_json_usage(b, tokens);
    json_builder_set_member_name(b, "results");
    json_builder_begin_array(b);
    GVariantIter it;
    guint32 index;
    double score;
    g_variant_iter_init(&it, results);
    while (!c->none && g_variant_iter_next(&it, "(ud)", &index, &score)) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "index");
        json_builder_add_int_value(b, index);
        json_builder_set_member_name(b, "relevance_score");
        json_builder_add_double_value(b, score);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static void reranked_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    RerankCall *c = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) info = NULL;
    g_autoptr(GVariant) results = npullm_client_rerank_finish(NPULLM_CLIENT(source), res, &info, &error);
    if (results == NULL)
        bridge_reply_error(c->msg, BRIDGE_API_OPENAI, bridge_status_for_error(error), "%s", error->message);
    else
        bridge_reply_json(c->msg, SOUP_STATUS_OK, reply_body(c, results, info));
    soup_server_message_unpause(c->msg);
    rerank_call_free(c);
}

/* documents: an array of strings (the Jina API's {"text"} objects are not
 * what llama.cpp's server takes either). */
static GPtrArray *take_documents(JsonObject *body, GError **error)
{
    JsonArray *docs = NULL;
    if (!bridge_json_array(body, "documents", &docs, error))
        return NULL;
    if (docs == NULL) {
        g_set_error_literal(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT,
                            "\"documents\" must be an array of strings");
        return NULL;
    }
    GPtrArray *texts = g_ptr_array_new();
    for (guint i = 0; i < json_array_get_length(docs); i++) {
        JsonNode *e = json_array_get_element(docs, i);
        if (!JSON_NODE_HOLDS_VALUE(e) || json_node_get_value_type(e) != G_TYPE_STRING) {
            g_set_error(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "\"documents\"[%u] must be a string", i);
            g_ptr_array_unref(texts);
            return NULL;
        }
        g_ptr_array_add(texts, (gpointer)json_node_get_string(e));
    }
    g_ptr_array_add(texts, NULL);
    return texts;
}

/* model, query, top_n: the query in *query, the rest on @options. */
static gboolean take_options(JsonObject *body, RerankCall *c, NpullmOptions *options, guint n_docs,
                             const char **query, GError **error)
{
    const char *model = "";
    double top_n = 0;
    gboolean has_top_n = FALSE;
    if (!bridge_json_string(body, "model", &model, error) || !bridge_json_string(body, "query", query, error) ||
        !bridge_json_number(body, "top_n", &top_n, &has_top_n, error))
        return FALSE;
    if (*query == NULL) {
        g_set_error_literal(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "\"query\" must be a string");
        return FALSE;
    }
    c->model = g_strdup(model);
    bridge_option_model(options, model);
    if (!has_top_n)
        return TRUE;
    if (!bridge_option_uint(options, "top-n", top_n, G_MAXUINT32, "top_n", error))
        return FALSE;
    /* 0 answers no results and more than the documents all of them, as
     * llama.cpp's server does: neither is a top_n the service takes */
    c->none = top_n == 0;
    if (c->none || top_n >= n_docs)
        npullm_options_unset(options, "top-n");
    return TRUE;
}

static void handle_rerank(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query_args,
                          gpointer data)
{
    g_autoptr(JsonObject) body = bridge_post_body(msg, BRIDGE_API_OPENAI);
    if (body == NULL)
        return;
    g_autoptr(GError) error = NULL;
    RerankCall *c = g_new0(RerankCall, 1);
    c->bridge = data;
    c->msg = g_object_ref(msg);
    bridge_hold(c->bridge);
    g_autoptr(NpullmOptions) options = npullm_options_new();
    const char *query = NULL;
    g_autoptr(GPtrArray) docs = take_documents(body, &error);
    if (docs == NULL || !take_options(body, c, options, docs->len - 1, &query, &error)) {
        bridge_reply_error(msg, BRIDGE_API_OPENAI, SOUP_STATUS_BAD_REQUEST, "%s", error->message);
        rerank_call_free(c);
        return;
    }
    soup_server_message_pause(msg);
    npullm_client_rerank_async(c->bridge->client, query, (const char *const *)docs->pdata, options, NULL,
                               reranked_cb, c);
}

void bridge_rerank_register(Bridge *bridge)
{
    bridge_add_handler(bridge, "/v1/rerank", handle_rerank);
    bridge_add_handler(bridge, "/v1/reranking", handle_rerank);
    bridge_add_handler(bridge, "/rerank", handle_rerank);
    bridge_add_handler(bridge, "/reranking", handle_rerank);
}
