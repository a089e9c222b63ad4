/* NpullmClient's Embed: texts in, one vector per text out, in one call
 * (no request object: the reply carries the vectors). */
#include "npullm-client-private.h"
#include "npullm-error.h"
#include "npullm-options-private.h"
#include "npullm-protocol.h"

/* D-Bus strings are UTF-8: a text that is not is refused before sending. */
static gboolean texts_valid(const char *const *texts, GError **error)
{
    for (guint i = 0; texts[i] != NULL; i++)
        if (!g_utf8_validate(texts[i], -1, NULL)) {
            g_set_error(error, NPULLM_ERROR, NPULLM_ERROR_INVALID_ARGUMENT, "texts[%u] is not valid UTF-8", i);
            return FALSE;
        }
    return TRUE;
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
    if (!texts_valid(texts, &error) || !_npullm_options_check(options, &error)) {
        GTask *task = g_task_new(self, cancellable, callback, user_data);
        g_task_set_source_tag(task, npullm_client_embed_async);
        g_task_return_error(task, error);
        g_object_unref(task);
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
    g_return_val_if_fail(g_task_is_valid(result, self), NULL);
    g_autoptr(GVariant) ret = g_task_propagate_pointer(G_TASK(result), error);
    if (ret == NULL)
        return NULL;
    if (info != NULL)
        *info = g_variant_get_child_value(ret, 1);
    return g_variant_get_child_value(ret, 0);
}
