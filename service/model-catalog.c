#include "model-catalog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dbus-errors.h"
#include "npullm.h"
#include "npullm-protocol.h"
#include "ollama-store.h"

#define MODEL_SUFFIX ".gguf"
#define MMPROJ_SUFFIX ".mmproj.gguf"

/* What npl_model_probe said about one file version. */
typedef struct {
    guint64 size;
    gint64 mtime;
    guint64 ino;
    gboolean readable;   /* FALSE: not a GGUF file (message in error) */
    gchar *error;
    npl_model_facts facts;
} Probe;

struct NpdModelCatalog {
    gchar **dirs;
    GHashTable *probes;   /* path -> Probe* */
    GHashTable *reported; /* "path\nmessage" already logged */
    GPtrArray *entries;   /* NpdModelEntry*, sorted: the latest scan */
    GPtrArray *retired;   /* earlier scans' arrays, freed when the main loop runs */
    guint retire_id;
    gboolean scanned;
    NpdModelCatalogChanged changed;
    gpointer changed_data;
};

static void probe_free(Probe *p)
{
    g_free(p->error);
    g_free(p);
}

static void entry_free(NpdModelEntry *e)
{
    g_free(e->name);
    g_free(e->path);
    g_free(e->projector);
    g_free(e->architecture);
    g_free(e->quantization);
    g_free(e->reason);
    g_free(e);
}

NpdModelCatalog *npd_model_catalog_new(const gchar *const *dirs)
{
    NpdModelCatalog *cat = g_new0(NpdModelCatalog, 1);
    cat->dirs = g_strdupv((gchar **)dirs);
    cat->probes = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)probe_free);
    cat->reported = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    cat->entries = g_ptr_array_new_with_free_func((GDestroyNotify)entry_free);
    cat->retired = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    return cat;
}

void npd_model_catalog_free(NpdModelCatalog *cat)
{
    if (cat == NULL)
        return;
    if (cat->retire_id != 0)
        g_source_remove(cat->retire_id);
    g_strfreev(cat->dirs);
    g_hash_table_destroy(cat->probes);
    g_hash_table_destroy(cat->reported);
    g_ptr_array_unref(cat->entries);
    g_ptr_array_unref(cat->retired);
    g_free(cat);
}

void npd_model_catalog_set_changed_func(NpdModelCatalog *cat, NpdModelCatalogChanged func, gpointer user_data)
{
    cat->changed = func;
    cat->changed_data = user_data;
}

/* Logs a problem with a file once, not on every scan. */
static void report_once(NpdModelCatalog *cat, const char *path, const char *why)
{
    gchar *key = g_strconcat(path, "\n", why, NULL);
    if (!g_hash_table_add(cat->reported, key))
        return;
    g_warning("model catalog: %s: %s", path, why);
}

/* ---- probing ------------------------------------------------------------ */

/* The facts of the file at path (st from stat), cached per version; NULL
 * when it cannot be read now (logged, retried on the next scan). */
static const Probe *probe_get(NpdModelCatalog *cat, const char *path, const struct stat *st)
{
    gint64 mtime = (gint64)st->st_mtim.tv_sec * G_USEC_PER_SEC + st->st_mtim.tv_nsec / 1000;
    Probe *p = g_hash_table_lookup(cat->probes, path);
    if (p != NULL && p->size == (guint64)st->st_size && p->mtime == mtime && p->ino == (guint64)st->st_ino)
        return p;
    npl_error err;
    npl_error_clear(&err);
    Probe *fresh = g_new0(Probe, 1);
    fresh->size = (guint64)st->st_size;
    fresh->mtime = mtime;
    fresh->ino = (guint64)st->st_ino;
    npl_status status = npl_model_probe(path, &fresh->facts, &err);
    if (status == NPL_ERR_IO || status == NPL_ERR_NOMEM || status == NPL_ERR_INTERNAL) {
        /* EMFILE, ENOMEM, EAGAIN, a file being replaced...: not a verdict
         * on the file; keep what we knew and try again next time */
        report_once(cat, path, err.message);
        probe_free(fresh);
        return NULL;
    }
    fresh->readable = status == NPL_OK;
    if (!fresh->readable) {
        /* said to any caller of ListModels: without the path */
        const char *msg = err.message;
        if (g_str_has_prefix(msg, path) && g_str_has_prefix(msg + strlen(path), ": "))
            msg += strlen(path) + 2;
        fresh->error = g_strdup_printf("not a usable GGUF file: %s", msg);
        report_once(cat, path, err.message);
    } else if (!fresh->facts.supported) {
        g_message("model catalog: %s: not usable: %s", path, fresh->facts.reason);
    }
    g_hash_table_replace(cat->probes, g_strdup(path), fresh);
    return fresh;
}

/* ---- scanning ----------------------------------------------------------- */

typedef struct {
    NpdModelCatalog *cat;
    GPtrArray *entries;  /* new NpdModelEntry* */
    GHashTable *names;   /* names taken */
    guint files;         /* looked at, against NPD_CATALOG_MAX_FILES */
    guint root;          /* index of the root being scanned */
} Scan;

/* A model file waiting for its folder's projectors. */
typedef struct {
    gchar *name;
    gchar *origin; /* the folder entry */
    gchar *path;   /* resolved */
    const Probe *probe;
} Candidate;

typedef struct {
    gchar *path;
    const Probe *probe;
} Projector;

static void candidate_free(Candidate *c)
{
    g_free(c->name);
    g_free(c->origin);
    g_free(c->path);
    g_free(c);
}

static void projector_free(Projector *p)
{
    g_free(p->path);
    g_free(p);
}

gboolean npd_model_projector_fits(const npl_model_facts *model, const npl_model_facts *proj)
{
    const char *arch = npl_projector_text_arch(proj->projector_type);
    return proj->is_projector && proj->supported && model->embedding_length != 0 && arch != NULL &&
           strcmp(arch, model->architecture) == 0 &&
           proj->embedding_length == model->embedding_length;
}

/* Whether only root or the daemon's own user can change path: it and
 * every directory above it owned by one of them and writable by no one
 * else. A sticky directory above (/tmp) is fine: others cannot rename or
 * replace what they do not own there. */
static gboolean only_administrators_change(const char *path)
{
    g_autofree gchar *p = g_canonicalize_filename(path, NULL);
    for (gboolean leaf = TRUE;; leaf = FALSE) {
        struct stat st;
        if (lstat(p, &st) != 0 || (st.st_uid != 0 && st.st_uid != geteuid()))
            return FALSE;
        gboolean sticky_dir = !leaf && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
        if (!S_ISLNK(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_dir)
            return FALSE;
        if (strcmp(p, "/") == 0)
            return TRUE;
        gchar *up = g_path_get_dirname(p);
        g_free(p);
        p = up;
    }
}

/* origin: where the name comes from (the folder entry, the manifest);
 * path: the file itself, resolved. */
static void add_entry(Scan *s, const char *name, const char *origin, const char *path, const Probe *p,
                      const char *projector)
{
    if (!g_hash_table_add(s->names, g_strdup(name))) {
        g_message("model catalog: %s: a model named '%s' was found earlier, this one is not listed", path, name);
        return;
    }
    NpdModelEntry *e = g_new0(NpdModelEntry, 1);
    e->name = g_strdup(name);
    e->path = g_strdup(path);
    e->projector = g_strdup(projector);
    e->vision = projector != NULL;
    e->architecture = g_utf8_make_valid(p->facts.architecture[0] ? p->facts.architecture : "unknown", -1);
    e->quantization = g_utf8_make_valid(p->facts.quantization, -1);
    e->parameters = p->facts.n_params;
    e->context_length = p->facts.context_length;
    e->supported = p->readable && p->facts.supported;
    e->reason = g_utf8_make_valid(p->readable ? p->facts.reason : p->error, -1);
    e->embedding = e->supported && p->facts.embedding;
    e->rerank = e->embedding && p->facts.rerank;
    e->file_size = p->size;
    e->root = s->root;
    e->administrators = only_administrators_change(origin) && only_administrators_change(path);
    g_ptr_array_add(s->entries, e);
}

gboolean npd_model_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > NPP_MAX_MODEL_NAME || name[0] == '.')
        return FALSE;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!(g_ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '+' || (c == ':' && i > 0)))
            return FALSE;
    }
    return TRUE;
}

/* NAME.mmproj.gguf (npullm's convention), mmproj-*.gguf (llama.cpp's and
 * Hugging Face downloads'): a file that says it is a projector is never
 * listed as a model, whatever it holds. */
static gboolean named_as_projector(const char *file)
{
    return g_str_has_suffix(file, MMPROJ_SUFFIX) || g_str_has_prefix(file, "mmproj");
}

gboolean npd_model_name_is_projectors(const char *name)
{
    g_autofree gchar *file = g_strconcat(name, MODEL_SUFFIX, NULL);
    return named_as_projector(file);
}

/* The model NAME for FILE = "NAME.gguf", or NULL (reported) when NAME is
 * not a valid model name. */
static gchar *name_of_file(Scan *s, const char *path, const char *file)
{
    gchar *name = g_strndup(file, strlen(file) - strlen(MODEL_SUFFIX));
    if (npd_model_name_valid(name))
        return name;
    report_once(s->cat, path,
                "the file name is not a valid model name (letters, digits, '.', '_', '-', '+', ':'), not listed");
    g_free(name);
    return NULL;
}

/* path when it is inside root (both resolved), else NULL (reported). */
static gchar *resolve_inside(Scan *s, const char *path, const char *real_root)
{
    char *real = realpath(path, NULL);
    if (real == NULL)
        return NULL;
    gsize n = strlen(real_root);
    if (strcmp(real, real_root) == 0 || (strncmp(real, real_root, n) == 0 && real[n] == '/')) {
        gchar *out = g_strdup(real);
        free(real);
        return out;
    }
    report_once(s->cat, path, "a symbolic link leading out of the model directory, not followed");
    free(real);
    return NULL;
}

static void pair_and_add(Scan *s, GPtrArray *models, GPtrArray *projectors)
{
    for (guint i = 0; i < models->len; i++) {
        Candidate *c = models->pdata[i];
        const char *chosen = NULL;
        g_autofree gchar *own = g_strconcat(c->name, MMPROJ_SUFFIX, NULL);
        for (guint j = 0; j < projectors->len; j++) {
            Projector *p = projectors->pdata[j];
            if (!npd_model_projector_fits(&c->probe->facts, &p->probe->facts))
                continue;
            /* NAME.mmproj.gguf first, else the first by file name */
            if (chosen == NULL || g_str_has_suffix(p->path, own))
                chosen = p->path;
        }
        add_entry(s, c->name, c->origin, c->path, c->probe, chosen);
    }
}

static gint compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void scan_folder(Scan *s, const char *dir, const char *real_root, guint depth)
{
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);
    /* open while its files are probed: one pass over the folder */
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *f;
    while (d != NULL && (f = g_dir_read_name(d)) != NULL)
        if (f[0] != '.')
            g_ptr_array_add(files, g_strdup(f));
    g_ptr_array_sort(files, compare_names);
    g_autoptr(GPtrArray) models = g_ptr_array_new_with_free_func((GDestroyNotify)candidate_free);
    g_autoptr(GPtrArray) projectors = g_ptr_array_new_with_free_func((GDestroyNotify)projector_free);
    g_autoptr(GPtrArray) subdirs = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < files->len && s->files < NPD_CATALOG_MAX_FILES; i++) {
        const char *file = files->pdata[i];
        g_autofree gchar *path = g_build_filename(dir, file, NULL);
        g_autofree gchar *real = resolve_inside(s, path, real_root);
        struct stat st;
        if (real == NULL || stat(real, &st) != 0)
            continue;
        s->files++;
        if (S_ISDIR(st.st_mode)) {
            if (depth + 1 < NPD_CATALOG_MAX_DEPTH)
                g_ptr_array_add(subdirs, g_steal_pointer(&path));
            continue;
        }
        if (!S_ISREG(st.st_mode) || !g_str_has_suffix(file, MODEL_SUFFIX))
            continue;
        const Probe *p = probe_get(s->cat, real, &st);
        if (p == NULL)
            continue;
        if (p->readable && p->facts.is_projector) {
            Projector *pj = g_new0(Projector, 1);
            pj->path = g_steal_pointer(&real);
            pj->probe = p;
            g_ptr_array_add(projectors, pj);
            continue;
        }
        if (named_as_projector(file)) {
            report_once(s->cat, path, "named as a vision projector but is not one, not listed");
            continue;
        }
        gchar *name = name_of_file(s, path, file);
        if (name == NULL)
            continue;
        Candidate *c = g_new0(Candidate, 1);
        c->name = name;
        c->origin = g_steal_pointer(&path);
        c->path = g_steal_pointer(&real);
        c->probe = p;
        g_ptr_array_add(models, c);
    }
    pair_and_add(s, models, projectors);
    for (guint i = 0; i < subdirs->len; i++)
        scan_folder(s, subdirs->pdata[i], real_root, depth + 1);
}

static void warn_manifest(const char *path, const char *why, gpointer cat)
{
    report_once(cat, path, why);
}

static void scan_ollama(Scan *s, const char *store)
{
    g_autofree gchar *real_root = realpath(store, NULL);
    if (real_root == NULL)
        return;
    g_autoptr(GPtrArray) models =
        npd_ollama_store_list(store, NPD_CATALOG_MAX_FILES - s->files, warn_manifest, s->cat);
    for (guint i = 0; i < models->len; i++) {
        NpdOllamaModel *m = models->pdata[i];
        s->files++;
        g_autofree gchar *model = resolve_inside(s, m->model, real_root);
        struct stat st;
        if (model == NULL || stat(model, &st) != 0 || !S_ISREG(st.st_mode)) {
            report_once(s->cat, m->model, "the model blob of a manifest is missing");
            continue;
        }
        const Probe *p = probe_get(s->cat, model, &st);
        if (p == NULL)
            continue;
        if (!npd_model_name_valid(m->name)) {
            report_once(s->cat, m->model, "the Ollama name is not a valid model name, not listed");
            continue;
        }
        g_autofree gchar *projector = m->projector != NULL ? resolve_inside(s, m->projector, real_root) : NULL;
        const Probe *pp = NULL;
        if (projector != NULL && stat(projector, &st) == 0 && S_ISREG(st.st_mode))
            pp = probe_get(s->cat, projector, &st);
        gboolean fits = pp != NULL && pp->readable && npd_model_projector_fits(&p->facts, &pp->facts);
        if (projector != NULL && !fits) {
            report_once(s->cat, projector, "the projector layer does not fit its model, images are not offered");
            g_clear_pointer(&projector, g_free);
        }
        add_entry(s, m->name, m->manifest, model, p, projector);
    }
}

static gint compare_entries(gconstpointer a, gconstpointer b)
{
    const NpdModelEntry *ea = *(const NpdModelEntry *const *)a;
    const NpdModelEntry *eb = *(const NpdModelEntry *const *)b;
    return strcmp(ea->name, eb->name);
}

static gboolean entries_equal(GPtrArray *a, GPtrArray *b)
{
    if (a->len != b->len)
        return FALSE;
    for (guint i = 0; i < a->len; i++) {
        const NpdModelEntry *x = a->pdata[i], *y = b->pdata[i];
        if (strcmp(x->name, y->name) != 0 || strcmp(x->path, y->path) != 0 ||
            g_strcmp0(x->projector, y->projector) != 0 || x->supported != y->supported ||
            x->embedding != y->embedding || x->rerank != y->rerank || x->file_size != y->file_size)
            return FALSE;
    }
    return TRUE;
}

static gboolean free_retired(gpointer data)
{
    NpdModelCatalog *cat = data;
    g_ptr_array_set_size(cat->retired, 0);
    cat->retire_id = 0;
    return G_SOURCE_REMOVE;
}

static void scan(NpdModelCatalog *cat)
{
    Scan s = {cat, g_ptr_array_new_with_free_func((GDestroyNotify)entry_free),
              g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL), 0, 0};
    for (gchar **dir = cat->dirs; dir != NULL && *dir != NULL; dir++, s.root++) {
        if (**dir == '\0' || !g_file_test(*dir, G_FILE_TEST_IS_DIR))
            continue;
        g_autofree gchar *store = npd_ollama_store_find(*dir);
        if (store != NULL) {
            scan_ollama(&s, store);
            continue;
        }
        char *real_root = realpath(*dir, NULL);
        if (real_root != NULL)
            scan_folder(&s, *dir, real_root, 0);
        free(real_root);
    }
    if (s.files >= NPD_CATALOG_MAX_FILES)
        report_once(cat, cat->dirs[0] ? cat->dirs[0] : "", "more files than a scan looks at, some are not listed");
    g_hash_table_destroy(s.names);
    g_ptr_array_sort(s.entries, compare_entries);
    gboolean changed = cat->scanned && !entries_equal(cat->entries, s.entries);
    /* borrowed entries of the previous scan stay valid until the main
     * loop runs again (a caller may still hold one, e.g. a name) */
    g_ptr_array_add(cat->retired, cat->entries);
    if (cat->retire_id == 0)
        cat->retire_id = g_idle_add(free_retired, cat);
    cat->entries = s.entries;
    cat->scanned = TRUE;
    if (changed && cat->changed != NULL)
        cat->changed(cat->changed_data);
}

void npd_model_catalog_rescan(NpdModelCatalog *cat)
{
    scan(cat);
}

GPtrArray *npd_model_catalog_list(NpdModelCatalog *cat)
{
    scan(cat);
    GPtrArray *out = g_ptr_array_sized_new(cat->entries->len);
    for (guint i = 0; i < cat->entries->len; i++)
        g_ptr_array_add(out, cat->entries->pdata[i]);
    return out;
}

/* Whether a is a better default than b (NULL): the administrator's
 * first, then the earlier root, then (entries are sorted) the name. */
static gboolean better_default(const NpdModelEntry *a, const NpdModelEntry *b)
{
    if (b == NULL)
        return TRUE;
    if (a->administrators != b->administrators)
        return a->administrators;
    return a->root < b->root;
}

static const NpdModelEntry *pick_best(GPtrArray *entries, gboolean embedding, gboolean rerank)
{
    const NpdModelEntry *best = NULL;
    for (guint i = 0; i < entries->len; i++) {
        const NpdModelEntry *e = entries->pdata[i];
        if (e->supported && e->embedding == embedding && e->rerank == rerank && better_default(e, best))
            best = e;
    }
    return best;
}

const NpdModelEntry *npd_model_catalog_default_embedding(NpdModelCatalog *cat)
{
    scan(cat);
    return pick_best(cat->entries, TRUE, FALSE);
}

const NpdModelEntry *npd_model_catalog_default_reranker(NpdModelCatalog *cat)
{
    scan(cat);
    return pick_best(cat->entries, TRUE, TRUE);
}

const NpdModelEntry *npd_model_catalog_pick_default(GPtrArray *entries, const char **because)
{
    const NpdModelEntry *best = pick_best(entries, FALSE, FALSE);
    if (because != NULL)
        *because = best == NULL ? ""
                   : best->administrators
                       ? "the administrator's first model (by directory order, then name)"
                       : "no administrator's model: the first model by directory order, then name";
    return best;
}

const NpdModelEntry *npd_model_catalog_default(NpdModelCatalog *cat, const char **because)
{
    scan(cat);
    return npd_model_catalog_pick_default(cat->entries, because);
}

gboolean npd_model_check_generates(const NpdModelEntry *e, GError **error)
{
    if (!e->embedding)
        return TRUE;
    g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                "model '%s' is an embedding model: it makes vectors, not text (use Embed)", e->name);
    return FALSE;
}

const char *npd_model_catalog_default_name(NpdModelCatalog *cat, const char *configured)
{
    if (configured != NULL && configured[0] != '\0')
        return configured;
    const NpdModelEntry *e = npd_model_catalog_default(cat, NULL);
    return e != NULL ? e->name : NULL;
}

const NpdModelEntry *npd_model_catalog_lookup(NpdModelCatalog *cat, const char *name, GError **error)
{
    /* name may point into an entry of the previous scan: copy it first */
    g_autofree gchar *wanted = g_strndup(name, NPP_MAX_MODEL_NAME + 1);
    if (npd_model_name_valid(wanted)) {
        scan(cat);
        for (guint i = 0; i < cat->entries->len; i++) {
            const NpdModelEntry *e = cat->entries->pdata[i];
            if (strcmp(e->name, wanted) != 0)
                continue;
            if (e->supported)
                return e;
            g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED, "model '%s' cannot be used: %s", e->name,
                        e->reason);
            return NULL;
        }
    }
    g_set_error(error, NPD_ERROR, NPD_ERROR_NO_SUCH_MODEL, "no model named '%.*s'", NPP_MAX_MODEL_NAME, wanted);
    return NULL;
}
