/* The models npullmd can serve: NAME.gguf files in the configured
 * directories (NAME.mmproj.gguf beside one is its vision projector, not a
 * model). Only GGUF metadata is read, never weights; results are cached
 * per file (path, size, mtime). Main thread only. */
#ifndef NPD_MODEL_CATALOG_H
#define NPD_MODEL_CATALOG_H

#include <glib.h>

typedef struct {
    gchar *name;
    gchar *path;
    gchar *architecture;
    guint64 parameters;
    gchar *quantization;
    guint32 context_length;
    gboolean vision;
    guint64 file_size;
    /* cache validation; unusable files are cached too, so that a broken
     * file is reported once, not on every scan */
    gint64 mtime;
    gboolean usable;
} NpdModelEntry;

typedef struct NpdModelCatalog NpdModelCatalog;

NpdModelCatalog *npd_model_catalog_new(const gchar *const *dirs);
void npd_model_catalog_free(NpdModelCatalog *cat);

/* All models, sorted by name; the first directory wins for duplicate
 * names. Unreadable or malformed files are logged and skipped. The array
 * holds references owned by the catalog, valid until the next call. */
GPtrArray *npd_model_catalog_list(NpdModelCatalog *cat);

/* The entry for name (owned by the catalog, valid until the next call),
 * or NULL with NPD_ERROR_NO_SUCH_MODEL. */
const NpdModelEntry *npd_model_catalog_lookup(NpdModelCatalog *cat, const char *name, GError **error);

#endif
