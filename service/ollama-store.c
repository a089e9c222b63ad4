#include "ollama-store.h"

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <string.h>

#define DIGEST_PREFIX "sha256:"
#define DIGEST_HEX 64

void npd_ollama_model_free(NpdOllamaModel *m)
{
    if (m == NULL)
        return;
    g_free(m->name);
    g_free(m->model);
    g_free(m->projector);
    g_free(m);
}

static gboolean is_store(const char *dir)
{
    g_autofree gchar *manifests = g_build_filename(dir, "manifests", NULL);
    g_autofree gchar *blobs = g_build_filename(dir, "blobs", NULL);
    return g_file_test(manifests, G_FILE_TEST_IS_DIR) && g_file_test(blobs, G_FILE_TEST_IS_DIR);
}

gchar *npd_ollama_store_find(const char *dir)
{
    if (is_store(dir))
        return g_strdup(dir);
    g_autofree gchar *nested = g_build_filename(dir, ".ollama", "models", NULL);
    return is_store(nested) ? g_steal_pointer(&nested) : NULL;
}

/* A path component of a name or tag: no separators, no "." or "..". */
static gboolean component_valid(const char *s)
{
    if (s[0] == '\0' || s[0] == '.' || strlen(s) > 128)
        return FALSE;
    for (const char *p = s; *p; p++)
        if (!(g_ascii_isalnum(*p) || *p == '.' || *p == '_' || *p == '-'))
            return FALSE;
    return TRUE;
}

/* blobs/sha256-HEX for "sha256:HEX", or NULL. */
static gchar *blob_path(const char *store, const char *digest)
{
    if (digest == NULL || !g_str_has_prefix(digest, DIGEST_PREFIX))
        return NULL;
    const char *hex = digest + strlen(DIGEST_PREFIX);
    if (strlen(hex) != DIGEST_HEX)
        return NULL;
    for (const char *p = hex; *p; p++)
        if (!g_ascii_isxdigit(*p))
            return NULL;
    g_autofree gchar *file = g_strconcat("sha256-", hex, NULL);
    return g_build_filename(store, "blobs", file, NULL);
}

static NpdOllamaModel *parse_manifest(const char *store, const char *path, const char *name, GError **error)
{
    g_autofree gchar *text = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &text, &len, error))
        return NULL;
    if (len > NPD_OLLAMA_MAX_MANIFEST) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: too large for a manifest", path);
        return NULL;
    }
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, text, (gssize)len, error))
        return NULL;
    JsonNode *root = json_parser_get_root(parser);
    JsonObject *obj = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
    JsonNode *layers_node = obj != NULL ? json_object_get_member(obj, "layers") : NULL;
    if (layers_node == NULL || !JSON_NODE_HOLDS_ARRAY(layers_node)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: no layers array", path);
        return NULL;
    }
    g_autoptr(NpdOllamaModel) m = g_new0(NpdOllamaModel, 1);
    m->name = g_strdup(name);
    JsonArray *layers = json_node_get_array(layers_node);
    for (guint i = 0; i < json_array_get_length(layers); i++) {
        JsonNode *ln = json_array_get_element(layers, i);
        if (!JSON_NODE_HOLDS_OBJECT(ln))
            continue;
        JsonObject *layer = json_node_get_object(ln);
        const char *media = json_object_get_string_member_with_default(layer, "mediaType", "");
        const char *digest = json_object_get_string_member_with_default(layer, "digest", "");
        gchar **slot = strcmp(media, NPD_OLLAMA_MEDIA_MODEL) == 0       ? &m->model
                       : strcmp(media, NPD_OLLAMA_MEDIA_PROJECTOR) == 0 ? &m->projector
                                                                        : NULL;
        if (slot == NULL || *slot != NULL)
            continue;
        *slot = blob_path(store, digest);
        if (*slot == NULL) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: layer %u has no valid sha256 digest",
                        path, i);
            return NULL;
        }
    }
    if (m->model == NULL) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: no layer of type %s", path,
                    NPD_OLLAMA_MEDIA_MODEL);
        return NULL;
    }
    return g_steal_pointer(&m);
}

NpdOllamaModel *npd_ollama_store_read(const char *store, const char *name_tag, GError **error)
{
    g_auto(GStrv) parts = g_strsplit(name_tag, ":", 2);
    const char *tag = parts[0] != NULL && parts[1] != NULL ? parts[1] : "latest";
    if (parts[0] == NULL || !component_valid(parts[0]) || !component_valid(tag)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "'%s' is not a model name of the form NAME[:TAG] (letters, digits, '.', '_', '-')", name_tag);
        return NULL;
    }
    g_autofree gchar *path = g_build_filename(store, "manifests", NPD_OLLAMA_REGISTRY, "library", parts[0], tag, NULL);
    g_autofree gchar *name = g_strdup_printf("%s:%s", parts[0], tag);
    return parse_manifest(store, path, name, error);
}

static gint compare_str_ptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static GPtrArray *sorted_entries(const char *dir)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *e;
    while (d != NULL && (e = g_dir_read_name(d)) != NULL)
        g_ptr_array_add(out, g_strdup(e));
    g_ptr_array_sort(out, compare_str_ptr);
    return out;
}

GPtrArray *npd_ollama_store_list(const char *store, guint max, NpdOllamaWarn warn, gpointer data)
{
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)npd_ollama_model_free);
    g_autofree gchar *library = g_build_filename(store, "manifests", NPD_OLLAMA_REGISTRY, "library", NULL);
    g_autoptr(GPtrArray) names = sorted_entries(library);
    for (guint i = 0; i < names->len && out->len < max; i++) {
        const char *name = names->pdata[i];
        if (!component_valid(name))
            continue;
        g_autofree gchar *dir = g_build_filename(library, name, NULL);
        g_autoptr(GPtrArray) tags = sorted_entries(dir);
        for (guint j = 0; j < tags->len && out->len < max; j++) {
            const char *tag = tags->pdata[j];
            if (!component_valid(tag))
                continue;
            g_autofree gchar *path = g_build_filename(dir, tag, NULL);
            g_autofree gchar *name_tag = g_strdup_printf("%s:%s", name, tag);
            g_autoptr(GError) error = NULL;
            NpdOllamaModel *m = parse_manifest(store, path, name_tag, &error);
            if (m != NULL)
                g_ptr_array_add(out, m);
            else if (warn != NULL)
                warn(path, error->message, data);
        }
    }
    return out;
}
