/* Ollama's model store, read-only: manifests/registry.ollama.ai/library/
 * NAME/TAG (JSON whose layers name blobs by digest) and blobs/sha256-HEX.
 * Used by the daemon's catalog and by npullm-client import-ollama. */
#ifndef NPD_OLLAMA_STORE_H
#define NPD_OLLAMA_STORE_H

#include <glib.h>

#define NPD_OLLAMA_REGISTRY "registry.ollama.ai"
#define NPD_OLLAMA_MEDIA_MODEL "application/vnd.ollama.image.model"
#define NPD_OLLAMA_MEDIA_PROJECTOR "application/vnd.ollama.image.projector"
/* Manifests are a few hundred bytes; anything far larger is not one. */
#define NPD_OLLAMA_MAX_MANIFEST (1024 * 1024)

typedef struct {
    gchar *name;      /* NAME:TAG */
    gchar *manifest;  /* path of the manifest (where the name comes from) */
    gchar *model;     /* path of the model blob */
    gchar *projector; /* path of the projector blob, or NULL */
} NpdOllamaModel;

void npd_ollama_model_free(NpdOllamaModel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(NpdOllamaModel, npd_ollama_model_free)

/* The store at dir: dir itself when it holds manifests/ and blobs/, else
 * dir/.ollama/models when that does; NULL when neither. */
gchar *npd_ollama_store_find(const char *dir);

/* The model NAME:TAG (":latest" when no tag) of the store, or NULL with a
 * G_FILE_ERROR / G_IO_ERROR saying why. */
NpdOllamaModel *npd_ollama_store_read(const char *store, const char *name_tag, GError **error);

/* Every library model of the store (NpdOllamaModel*, sorted by name), at
 * most max of them; manifests that cannot be read are skipped and
 * reported to warn (when not NULL) with their path and reason. */
typedef void (*NpdOllamaWarn)(const char *path, const char *why, gpointer data);
GPtrArray *npd_ollama_store_list(const char *store, guint max, NpdOllamaWarn warn, gpointer data);

#endif
