/* The models npullmd can serve, found in the configured roots:
 *  - plain folders, searched recursively (NPD_CATALOG_MAX_DEPTH levels,
 *    which covers LM Studio's publisher/repo/FILE.gguf): a model is named
 *    after its file without ".gguf";
 *  - Ollama stores (a root holding manifests/ and blobs/, or .ollama/models
 *    below it): manifests/registry.ollama.ai/library/NAME/TAG names the
 *    model NAME:TAG, its model layer is the GGUF blob and its projector
 *    layer, when there is one, the vision projector.
 * Vision projectors (general.architecture "clip") are never models: one in
 * the same folder is paired with a model by metadata (projector type =
 * architecture, projection width = embedding width). Symlinks are
 * followed only when they stay inside their root.
 *
 * Facts come from npl_model_probe (metadata and the loader's checks, never
 * weights) and are cached per file (size, mtime, inode); only a file's
 * definite verdicts are cached, a transient failure (EMFILE, ENOMEM...) is
 * retried on the next scan. Every call rescans the roots.
 *
 * Main thread only. Entries returned are
 * owned by the catalog and stay valid until the main loop runs again. */
#ifndef NPD_MODEL_CATALOG_H
#define NPD_MODEL_CATALOG_H

#include <glib.h>

#include "npullm.h"

#define NPD_CATALOG_MAX_DEPTH 4
/* Files looked at per scan: a bound on what an unprivileged ListModels
 * can make the daemon do. */
#define NPD_CATALOG_MAX_FILES 4096

typedef struct {
    gchar *name;
    gchar *path;         /* the GGUF file (for Ollama, its blob) */
    gchar *projector;    /* the paired vision projector, or NULL */
    gchar *architecture;
    guint64 parameters;
    gchar *quantization;
    guint32 context_length;
    gboolean vision;     /* projector != NULL */
    gboolean supported;  /* this engine can run it */
    gchar *reason;       /* why not, "" when supported */
    gboolean embedding;  /* supported, and makes embeddings (Embed), not text */
    gboolean rerank;     /* an embedding model that is a reranker (Rerank, not Embed) */
    guint64 file_size;
    guint root;              /* index of its root in the configured list */
    gboolean administrators; /* only root or the daemon's user can change it */
} NpdModelEntry;

typedef struct NpdModelCatalog NpdModelCatalog;

/* Called after a scan whose list differs from the previous one's. */
typedef void (*NpdModelCatalogChanged)(gpointer user_data);

NpdModelCatalog *npd_model_catalog_new(const gchar *const *dirs);
void npd_model_catalog_free(NpdModelCatalog *cat);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdModelCatalog, npd_model_catalog_free)
void npd_model_catalog_set_changed_func(NpdModelCatalog *cat, NpdModelCatalogChanged func, gpointer user_data);

/* All models, supported or not, sorted by name; the first root wins for
 * duplicate names. The array is the caller's, its entries the catalog's. */
GPtrArray *npd_model_catalog_list(NpdModelCatalog *cat);

/* Model names: [A-Za-z0-9._+-] and ':' (Ollama's NAME:TAG), not starting
 * with '.' or ':', at most NPP_MAX_MODEL_NAME bytes, never a path. The
 * catalog's rule: it lists no file under another name, and every name a
 * client passes is checked against it. */
gboolean npd_model_name_valid(const char *name);

/* Whether NAME.gguf would be taken for a vision projector's file
 * (NAME ending in ".mmproj" or starting with "mmproj"), never listed as a
 * model: AddModel refuses such names. */
gboolean npd_model_name_is_projectors(const char *name);

/* Scans the roots now (ModelsChanged when the list changed). */
void npd_model_catalog_rescan(NpdModelCatalog *cat);

/* The default model when none is configured, or NULL: the supported
 * text model (not an embedding model) that sorts first by (administrator's first, root order, name).
 * A model is the administrator's when its file, the path its name comes
 * from (the folder entry or the Ollama manifest) and every directory above
 * them are owned by root or the daemon's user and writable by no one else
 * (sticky directories such as /tmp excepted above), so a user who can only
 * write to a shared store cannot make every user's default. because, when
 * not NULL, gets the rule that chose it (a static string). */
const NpdModelEntry *npd_model_catalog_default(NpdModelCatalog *cat, const char **because);

/* Generate, Chat, Complete, DescribeImage on an embedding model:
 * NPD_ERROR_NOT_SUPPORTED saying why. */
gboolean npd_model_check_generates(const NpdModelEntry *e, GError **error);

/* The model of a request without the model option: configured ([Models]
 * Default) when set, else the catalog's default; NULL when no usable
 * model is installed. */
const char *npd_model_catalog_default_name(NpdModelCatalog *cat, const char *configured);

/* The same choice among entries of npd_model_catalog_list, without a scan. */
const NpdModelEntry *npd_model_catalog_pick_default(GPtrArray *entries, const char **because);

/* The default for Embed: the supported embedding model that sorts first
 * by the same rule, or NULL. */
const NpdModelEntry *npd_model_catalog_default_embedding(NpdModelCatalog *cat);
/* The same for Rerank: the first reranker, or NULL. */
const NpdModelEntry *npd_model_catalog_default_reranker(NpdModelCatalog *cat);

/* The entry for name, or NULL with NPD_ERROR_NO_SUCH_MODEL, or with
 * NPD_ERROR_NOT_SUPPORTED and the reason when the engine cannot run it. */
const NpdModelEntry *npd_model_catalog_lookup(NpdModelCatalog *cat, const char *name, GError **error);

/* Whether the catalog pairs projector proj with model: a supported
 * projector whose type is the model's architecture and whose width is the
 * model's embedding length. */
gboolean npd_model_projector_fits(const npl_model_facts *model, const npl_model_facts *proj);

#endif
