/* The model list of npullmd as the APIs show it, and name lookup. */
#include "bridge-models.h"

#include "bridge-http.h"

typedef struct {
    Bridge *bridge;
    SoupServerMessage *msg;
    BridgeApi api;
    BridgeModelsReady ready;
    gpointer data;
    GDestroyNotify data_free;
} Fetch;

static void listed_cb(GObject *source, GAsyncResult *res, gpointer user_data)
{
    Fetch *f = user_data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) models = npullm_client_list_models_finish(NPULLM_CLIENT(source), res, &error);
    if (models == NULL)
        bridge_reply_error(f->msg, f->api, bridge_status_for_error(error), "%s", error->message);
    else
        f->ready(f->bridge, f->msg, models, f->data);
    soup_server_message_unpause(f->msg);
    if (f->data_free != NULL)
        f->data_free(f->data);
    bridge_release(f->bridge);
    g_object_unref(f->msg);
    g_free(f);
}

void bridge_models_fetch(Bridge *bridge, SoupServerMessage *msg, BridgeApi api, BridgeModelsReady ready,
                         gpointer data, GDestroyNotify data_free)
{
    Fetch *f = g_new0(Fetch, 1);
    f->bridge = bridge;
    f->msg = g_object_ref(msg);
    f->api = api;
    f->ready = ready;
    f->data = data;
    f->data_free = data_free;
    bridge_hold(bridge);
    soup_server_message_pause(msg);
    npullm_client_list_models_async(bridge->client, NULL, listed_cb, f);
}

static GVariant *find_exact(GVariant *models, const char *name)
{
    for (gsize i = 0; i < g_variant_n_children(models); i++) {
        g_autoptr(GVariant) m = g_variant_get_child_value(models, i);
        const char *n = NULL;
        if (g_variant_lookup(m, "name", "&s", &n) && g_strcmp0(n, name) == 0)
            return g_steal_pointer(&m);
    }
    return NULL;
}

GVariant *bridge_models_find(GVariant *models, const char *name)
{
    GVariant *m = find_exact(models, name);
    if (m == NULL && g_str_has_suffix(name, ":latest")) {
        g_autofree char *bare = g_strndup(name, strlen(name) - strlen(":latest"));
        m = find_exact(models, bare);
    }
    return m;
}

char *bridge_models_ollama_name(const char *name)
{
    return strchr(name, ':') != NULL ? g_strdup(name) : g_strconcat(name, ":latest", NULL);
}

void bridge_models_add_capabilities(JsonBuilder *b, GVariant *model)
{
    g_autofree const char **caps = NULL;
    gboolean listed = g_variant_lookup(model, "capabilities", "^a&s", &caps);
    gboolean embedding = listed && g_strv_contains((const gchar *const *)caps, "embedding");
    /* Ollama has no word for a reranker: ListModels' own, not "completion" */
    gboolean rerank = listed && g_strv_contains((const gchar *const *)caps, "rerank");
    gboolean vision = FALSE;
    g_variant_lookup(model, "vision", "b", &vision);
    json_builder_set_member_name(b, "capabilities");
    json_builder_begin_array(b);
    json_builder_add_string_value(b, embedding ? "embedding" : rerank ? "rerank" : "completion");
    if (vision && !embedding && !rerank)
        json_builder_add_string_value(b, "vision");
    json_builder_end_array(b);
}
