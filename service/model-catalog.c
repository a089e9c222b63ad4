#include "model-catalog.h"

#include <string.h>
#include <sys/stat.h>

#include "dbus-errors.h"
#include "ggml_types.h"
#include "gguf.h"
#include "request-options.h"

#define MODEL_SUFFIX ".gguf"
#define MMPROJ_SUFFIX ".mmproj.gguf"

struct NpdModelCatalog {
    gchar **dirs;
    GHashTable *by_path; /* path -> NpdModelEntry* (owned) */
};

static void entry_free(NpdModelEntry *e)
{
    if (e == NULL)
        return;
    g_free(e->name);
    g_free(e->path);
    g_free(e->architecture);
    g_free(e->quantization);
    g_free(e);
}

NpdModelCatalog *npd_model_catalog_new(const gchar *const *dirs)
{
    NpdModelCatalog *cat = g_new0(NpdModelCatalog, 1);
    cat->dirs = g_strdupv((gchar **)dirs);
    cat->by_path = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)entry_free);
    return cat;
}

void npd_model_catalog_free(NpdModelCatalog *cat)
{
    if (cat == NULL)
        return;
    g_strfreev(cat->dirs);
    g_hash_table_destroy(cat->by_path);
    g_free(cat);
}

static gchar *str_or(const npl_gguf *g, const char *key, const char *fallback)
{
    npl_str s;
    if (npl_gguf_get_str(g, key, &s))
        return g_strndup(s.ptr, (gsize)s.len);
    return g_strdup(fallback);
}

/* Weight type holding the most bytes, as the model's quantization. */
static const char *dominant_type(const npl_gguf *g, guint64 *n_params)
{
    guint64 bytes[64] = {0};
    size_t n = npl_gguf_n_tensors(g);
    *n_params = 0;
    for (size_t i = 0; i < n; i++) {
        const npl_gguf_tensor *t = npl_gguf_tensor_at(g, i);
        *n_params += npl_gguf_tensor_nelements(t);
        if (t->n_dims >= 2 && t->type < G_N_ELEMENTS(bytes))
            bytes[t->type] += t->size;
    }
    size_t best = 0;
    for (size_t i = 1; i < G_N_ELEMENTS(bytes); i++)
        if (bytes[i] > bytes[best])
            best = i;
    if (bytes[best] == 0)
        return "unknown";
    const npl_type_traits *tr = npl_type_traits_get((uint32_t)best);
    return tr != NULL && tr->name != NULL ? tr->name : "unknown";
}

static NpdModelEntry *entry_read(const char *name, const char *path, const struct stat *st)
{
    npl_error err;
    npl_error_clear(&err);
    NpdModelEntry *e = g_new0(NpdModelEntry, 1);
    e->name = g_strdup(name);
    e->path = g_strdup(path);
    e->file_size = (guint64)st->st_size;
    e->mtime = (gint64)st->st_mtim.tv_sec * G_USEC_PER_SEC + st->st_mtim.tv_nsec / 1000;
    npl_gguf *g = npl_gguf_open(path, &err);
    if (g == NULL) {
        g_warning("skipping model %s: %s", path, err.message);
        return e;
    }
    e->usable = TRUE;
    e->architecture = str_or(g, "general.architecture", "unknown");
    e->quantization = g_strdup(dominant_type(g, &e->parameters));
    g_autofree gchar *ctx_key = g_strdup_printf("%s.context_length", e->architecture);
    uint32_t ctx = 0;
    e->context_length = npl_gguf_get_u32(g, ctx_key, &ctx) ? ctx : 0;
    npl_gguf_close(g);

    g_autofree gchar *dir = g_path_get_dirname(path);
    g_autofree gchar *mmproj_name = g_strconcat(name, MMPROJ_SUFFIX, NULL);
    g_autofree gchar *mmproj = g_build_filename(dir, mmproj_name, NULL);
    e->vision = g_file_test(mmproj, G_FILE_TEST_IS_REGULAR);
    return e;
}

/* Cached entry for path, re-read when the file changed; NULL when the
 * file is missing or unusable. */
static const NpdModelEntry *entry_get(NpdModelCatalog *cat, const char *name, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        g_hash_table_remove(cat->by_path, path);
        return NULL;
    }
    gint64 mtime = (gint64)st.st_mtim.tv_sec * G_USEC_PER_SEC + st.st_mtim.tv_nsec / 1000;
    NpdModelEntry *e = g_hash_table_lookup(cat->by_path, path);
    if (e == NULL || e->mtime != mtime || e->file_size != (guint64)st.st_size) {
        g_hash_table_remove(cat->by_path, path);
        e = entry_read(name, path, &st);
        g_hash_table_insert(cat->by_path, e->path, e);
    }
    return e->usable ? e : NULL;
}

/* NAME for "NAME.gguf" that is a model (not a projector), else NULL. */
static gchar *model_name_of(const char *file)
{
    if (!g_str_has_suffix(file, MODEL_SUFFIX) || g_str_has_suffix(file, MMPROJ_SUFFIX))
        return NULL;
    gchar *name = g_strndup(file, strlen(file) - strlen(MODEL_SUFFIX));
    if (!npd_model_name_valid(name)) {
        g_free(name);
        return NULL;
    }
    return name;
}

static gint entry_compare(gconstpointer a, gconstpointer b)
{
    const NpdModelEntry *ea = *(const NpdModelEntry *const *)a;
    const NpdModelEntry *eb = *(const NpdModelEntry *const *)b;
    return strcmp(ea->name, eb->name);
}

GPtrArray *npd_model_catalog_list(NpdModelCatalog *cat)
{
    GPtrArray *out = g_ptr_array_new();
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (gchar **dir = cat->dirs; dir != NULL && *dir != NULL; dir++) {
        if (**dir == '\0')
            continue;
        g_autoptr(GDir) d = g_dir_open(*dir, 0, NULL);
        if (d == NULL)
            continue;
        const char *file;
        while ((file = g_dir_read_name(d)) != NULL) {
            gchar *name = model_name_of(file);
            if (name == NULL)
                continue;
            if (g_hash_table_contains(seen, name)) {
                g_free(name);
                continue;
            }
            g_autofree gchar *path = g_build_filename(*dir, file, NULL);
            const NpdModelEntry *e = entry_get(cat, name, path);
            g_hash_table_add(seen, name);
            if (e != NULL)
                g_ptr_array_add(out, (gpointer)e);
        }
    }
    g_ptr_array_sort(out, entry_compare);
    return out;
}

const NpdModelEntry *npd_model_catalog_lookup(NpdModelCatalog *cat, const char *name, GError **error)
{
    if (npd_model_name_valid(name) && !g_str_has_suffix(name, ".mmproj")) {
        g_autofree gchar *file = g_strconcat(name, MODEL_SUFFIX, NULL);
        for (gchar **dir = cat->dirs; dir != NULL && *dir != NULL; dir++) {
            if (**dir == '\0')
                continue;
            g_autofree gchar *path = g_build_filename(*dir, file, NULL);
            if (!g_file_test(path, G_FILE_TEST_EXISTS))
                continue;
            const NpdModelEntry *e = entry_get(cat, name, path);
            if (e != NULL)
                return e;
            g_set_error(error, NPD_ERROR, NPD_ERROR_MODEL_LOAD_FAILED,
                        "model '%s' exists but its file is not a usable GGUF model", name);
            return NULL;
        }
    }
    g_set_error(error, NPD_ERROR, NPD_ERROR_NO_SUCH_MODEL, "no model named '%.*s'", NPD_MAX_MODEL_NAME, name);
    return NULL;
}
