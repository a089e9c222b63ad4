/* NpullmClient's Embed and Rerank: texts in, one vector (or score) per
 * text out, in one call (no request object: the reply carries them). */
#include "npullm-client-private.h"
#include "npullm-error.h"
#include "npullm-options-private.h"
#include "npullm-protocol.h"

/* D-Bus strings are UTF-8: a text that is not is refused before sending. */
static gboolean texts_valid(const char *const *texts, const char *what, GError **error)
{
    for (guint i = 0; texts[i] != NULL; i++)
        if (!g_utf8_validate(texts[i], -1, NULL)) {
            g_set_error(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "%s[%u] is not valid UTF-8", what, i);
            return FALSE;
        }
    return TRUE;
}

/* Bad arguments fail the call through its callback, as the service's
 * errors do. */
static void return_error(NpullmClient *self, gpointer tag, GError *error, GCancellable *cancellable,
                         GAsyncReadyCallback callback, gpointer user_data)
{
    GTask *task = g_task_new(self, cancellable, callback, user_data);
    g_task_set_source_tag(task, tag);
    g_task_return_error(task, error);
    g_object_unref(task);
}

/* The reply (value, info): the value, and the info when asked for. */
static GVariant *reply_finish(NpullmClient *self, GAsyncResult *result, GVariant **info, GError **error)
{
    g_return_val_if_fail(g_task_is_valid(result, self), NULL);
    g_autoptr(GVariant) ret = g_task_propagate_pointer(G_TASK(result), error);
    if (ret == NULL)
        return NULL;
    if (info != NULL)
        *info = g_variant_get_child_value(ret, 1);
    return g_variant_get_child_value(ret, 0);
}

/**
 * npullm_client_embed_async:
 * @self: the client
 * @texts: (array zero-terminated=1) (element-type utf8): the texts, at
 *   least one, none empty
 * @options: (nullable): options (#NpullmOptions:model,
 *   #NpullmOptions:dimensions, #NpullmOptions:truncate,
 *   #NpullmOptions:priority), %NULL for the service's defaults
 * @cancellable: (nullable): stops waiting for the vectors
 * @callback: (scope async): called with the vectors
 * @user_data: data for @callback
 *
 * Computes one embedding vector per text with an embedding model (the
 * org.npullm.embed polkit action). The service queues the call fairly
 * with the generation requests; #NpullmOptions:priority "background"
 * suits indexers. A model that generates text fails with
 * %NPULLM_ERROR_NOT_SUPPORTED.
 *
 * Since: 1.0
 */
void npullm_client_embed_async(NpullmClient *self, const char *const *texts, NpullmOptions *options,
                               GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && texts != NULL);
    GError *error = NULL;
    if (!texts_valid(texts, "texts", &error) || !_npullm_options_check(options, &error)) {
        return_error(self, npullm_client_embed_async, error, cancellable, callback, user_data);
        return;
    }
    GVariant *params = g_variant_new("(^as@a{sv})", texts, _npullm_options_to_variant(options, NULL));
    _npullm_client_manager_call(self, npullm_client_embed_async, "Embed", params, G_VARIANT_TYPE("(aada{sv})"),
                                cancellable, callback, user_data);
}

/**
 * npullm_client_embed_finish:
 * @self: the client
 * @result: the result given to the callback
 * @info: (out) (optional) (transfer full): an a{sv}: model, dimensions,
 *   pooling, prompt_tokens, truncated, passes, total_time_ms, device
 * @error: return location for an error
 *
 * Finishes npullm_client_embed_async().
 *
 * Returns: (transfer full) (nullable): an aad, one L2-normalised vector
 *   per text in the order given, or %NULL with @error set
 *
 * Since: 1.0
 */
GVariant *npullm_client_embed_finish(NpullmClient *self, GAsyncResult *result, GVariant **info, GError **error)
{
    return reply_finish(self, result, info, error);
}

/**
 * npullm_client_rerank_async:
 * @self: the client
 * @query: the query, not empty
 * @documents: (array zero-terminated=1) (element-type utf8): the
 *   documents to score against @query, at least one (empty ones score
 *   too)
 * @options: (nullable): options (#NpullmOptions:model,
 *   #NpullmOptions:top-n, #NpullmOptions:truncate,
 *   #NpullmOptions:priority), %NULL for the service's defaults
 * @cancellable: (nullable): stops waiting for the scores
 * @callback: (scope async): called with the scores
 * @user_data: data for @callback
 *
 * Scores how well each document answers @query with a reranker (a
 * cross-encoder such as bge-reranker; the org.npullm.embed polkit
 * action). Queued fairly like npullm_client_embed_async(). A model that
 * is not a reranker fails with %NPULLM_ERROR_NOT_SUPPORTED.
 *
 * Since: 1.0
 */
void npullm_client_rerank_async(NpullmClient *self, const char *query, const char *const *documents,
                                NpullmOptions *options, GCancellable *cancellable, GAsyncReadyCallback callback,
                                gpointer user_data)
{
    g_return_if_fail(NPULLM_IS_CLIENT(self) && query != NULL && documents != NULL);
    GError *error = NULL;
    const char *const query_only[] = {query, NULL};
    if (!texts_valid(query_only, "query", &error) || !texts_valid(documents, "documents", &error) ||
        !_npullm_options_check(options, &error)) {
        return_error(self, npullm_client_rerank_async, error, cancellable, callback, user_data);
        return;
    }
    GVariant *params = g_variant_new("(s^as@a{sv})", query, documents, _npullm_options_to_variant(options, NULL));
    _npullm_client_manager_call(self, npullm_client_rerank_async, "Rerank", params, G_VARIANT_TYPE("(a(ud)a{sv})"),
                                cancellable, callback, user_data);
}

/**
 * npullm_client_rerank_finish:
 * @self: the client
 * @result: the result given to the callback
 * @info: (out) (optional) (transfer full): an a{sv}: model, documents,
 *   prompt_tokens, truncated, passes, total_time_ms, device
 * @error: return location for an error
 *
 * Finishes npullm_client_rerank_async().
 *
 * Returns: (transfer full) (nullable): an a(ud), (document index, score)
 *   best first (ties in the documents' order), cut to
 *   #NpullmOptions:top-n, or %NULL with @error set
 *
 * Since: 1.0
 */
GVariant *npullm_client_rerank_finish(NpullmClient *self, GAsyncResult *result, GVariant **info, GError **error)
{
    return reply_finish(self, result, info, error);
}
