#include "ollama-store.h"

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIGEST_PREFIX "sha256:"
#define DIGEST_HEX 64

void npd_ollama_model_free(NpdOllamaModel *m)
{
    if (m == NULL)
        return;
    g_free(m->name);
    g_free(m->manifest);
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

/* The directory name below dirfd, never through a symbolic link. */
static int open_dir_at(int dirfd, const char *name)
{
    return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* manifests/registry.ollama.ai/library of the store, opened without
 * following a symbolic link below the store itself, or -1 (errno set). */
static int open_library(const char *store)
{
    static const char *const below[] = {"manifests", NPD_OLLAMA_REGISTRY, "library"};
    int fd = open(store, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (guint i = 0; fd >= 0 && i < G_N_ELEMENTS(below); i++) {
        int next = open_dir_at(fd, below[i]);
        int saved = errno;
        close(fd);
        errno = saved;
        fd = next;
    }
    return fd;
}

/* The manifest name below dirfd, read on the caller's thread without ever
 * blocking on or being fed by what a store writer can put there: never
 * through a symbolic link (/dev/zero), O_NONBLOCK so a FIFO does not hang
 * the open, regular files only, at most NPD_OLLAMA_MAX_MANIFEST bytes. */
static gchar *read_manifest_at(int dirfd, const char *name, const char *path, gsize *len, GError **error)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s", path,
                    e == ELOOP ? "a symbolic link, not followed" : g_strerror(e));
        return NULL;
    }
    struct stat st;
    const char *bad = fstat(fd, &st) != 0        ? g_strerror(errno)
                      : !S_ISREG(st.st_mode)     ? "not a regular file"
                      : st.st_size > NPD_OLLAMA_MAX_MANIFEST ? "too large for a manifest"
                                                             : NULL;
    g_autofree gchar *text = NULL;
    gsize got = 0;
    if (bad == NULL) {
        /* one byte more than the cap tells a file that grew since fstat */
        text = g_malloc((gsize)st.st_size + 2);
        gsize want = (gsize)st.st_size + 1;
        while (bad == NULL && got < want) {
            ssize_t n = read(fd, text + got, want - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                bad = g_strerror(errno);
            else if (n == 0)
                break;
            else
                got += (gsize)n;
        }
        if (bad == NULL && got > (gsize)st.st_size)
            bad = "changed while being read";
    }
    close(fd);
    if (bad != NULL) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: %s", path, bad);
        return NULL;
    }
    text[got] = '\0';
    *len = got;
    return g_steal_pointer(&text);
}

static NpdOllamaModel *parse_manifest(const char *store, int dirfd, const char *file, const char *path,
                                      const char *name, GError **error)
{
    gsize len = 0;
    g_autofree gchar *text = read_manifest_at(dirfd, file, path, &len, error);
    if (text == NULL)
        return NULL;
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
    m->manifest = g_strdup(path);
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
    int library = open_library(store);
    int dir = library >= 0 ? open_dir_at(library, parts[0]) : -1;
    int saved = errno;
    if (library >= 0)
        close(library);
    if (dir < 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved), "%s: %s", path,
                    saved == ELOOP || saved == ENOTDIR ? "not a directory of manifests" : g_strerror(saved));
        return NULL;
    }
    NpdOllamaModel *m = parse_manifest(store, dir, tag, path, name, error);
    close(dir);
    return m;
}

static gint compare_str_ptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names in the directory dirfd (not consumed), sorted; at most
 * MAX_ENTRIES of them, a bound on what one directory can cost a scan. */
#define MAX_ENTRIES 65536
static GPtrArray *sorted_entries(int dirfd)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL && fd >= 0)
        close(fd);
    struct dirent *e;
    while (d != NULL && out->len < MAX_ENTRIES && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            g_ptr_array_add(out, g_strdup(e->d_name));
    if (d != NULL)
        closedir(d);
    g_ptr_array_sort(out, compare_str_ptr);
    return out;
}

GPtrArray *npd_ollama_store_list(const char *store, guint max, NpdOllamaWarn warn, gpointer data)
{
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)npd_ollama_model_free);
    g_autofree gchar *library = g_build_filename(store, "manifests", NPD_OLLAMA_REGISTRY, "library", NULL);
    int libfd = open_library(store);
    if (libfd < 0)
        return out;
    g_autoptr(GPtrArray) names = sorted_entries(libfd);
    for (guint i = 0; i < names->len && out->len < max; i++) {
        const char *name = names->pdata[i];
        if (!component_valid(name))
            continue;
        g_autofree gchar *dir = g_build_filename(library, name, NULL);
        int dirfd = open_dir_at(libfd, name);
        if (dirfd < 0) {
            if (warn != NULL)
                warn(dir, errno == ELOOP || errno == ENOTDIR ? "not a directory of manifests, skipped"
                                                             : g_strerror(errno),
                     data);
            continue;
        }
        g_autoptr(GPtrArray) tags = sorted_entries(dirfd);
        for (guint j = 0; j < tags->len && out->len < max; j++) {
            const char *tag = tags->pdata[j];
            if (!component_valid(tag))
                continue;
            g_autofree gchar *path = g_build_filename(dir, tag, NULL);
            g_autofree gchar *name_tag = g_strdup_printf("%s:%s", name, tag);
            g_autoptr(GError) error = NULL;
            NpdOllamaModel *m = parse_manifest(store, dirfd, tag, path, name_tag, &error);
            if (m != NULL)
                g_ptr_array_add(out, m);
            else if (warn != NULL)
                warn(path, error->message, data);
        }
        close(dirfd);
    }
    close(libfd);
    return out;
}
