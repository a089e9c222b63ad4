/* The model catalog on its own (no bus): regressions of two bugs.
 *  - uaf: the default model's name, borrowed from the catalog, passed back
 *    to a lookup after the file changed (the lookup rescans and replaced
 *    the entry holding the name: valgrind showed invalid reads); run under
 *    ASan by the sanitize build.
 *  - transient: a probe that fails with EMFILE must not be cached as the
 *    file's verdict; the model appears once descriptors are free again.
 *  - ollama: manifests a store writer made hostile (a symbolic link to
 *    /dev/zero, a FIFO, a huge file, a NAME directory linked out of the
 *    store) are skipped without blocking or growing the scan (issue #34:
 *    the FIFO hung the main thread, /dev/zero grew it to GBs); an alarm
 *    turns a hang into a failure.
 *  - default: with no Default= configured, a model in a root anyone can
 *    write to ("0", listed first) is not the default while an
 *    administrator's model exists ("zeta" in a later root); without one,
 *    the first by root order (issue #34: "0:latest" in a writable store
 *    became every user's default).
 *
 *   test-model-catalog CASE MODEL.gguf */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "model-catalog.h"

static gchar *make_dir_with_model(const char *model, const char *name)
{
    gchar *dir = g_dir_make_tmp("npullm-catalog-XXXXXX", NULL);
    g_assert_nonnull(dir);
    g_autofree gchar *file = g_strconcat(name, ".gguf", NULL);
    g_autofree gchar *dst = g_build_filename(dir, file, NULL);
    g_autofree gchar *data = NULL;
    gsize len = 0;
    g_assert_true(g_file_get_contents(model, &data, &len, NULL));
    g_assert_true(g_file_set_contents(dst, data, (gssize)len, NULL));
    return dir;
}

static void remove_dir(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *f;
    while (d != NULL && (f = g_dir_read_name(d)) != NULL) {
        g_autofree gchar *p = g_build_filename(dir, f, NULL);
        g_unlink(p);
    }
    g_rmdir(dir);
}

/* A new mtime for path, as a download finishing or a copy would give. */
static void touch_later(const char *path, long seconds)
{
    struct timespec ts[2] = {{.tv_sec = 1000000000 + seconds}, {.tv_sec = 1000000000 + seconds}};
    g_assert_cmpint(utimensat(AT_FDCWD, path, ts, 0), ==, 0);
}

static int case_uaf(const char *model)
{
    g_autofree gchar *dir = make_dir_with_model(model, "alpha");
    g_autofree gchar *path = g_build_filename(dir, "alpha.gguf", NULL);
    const gchar *dirs[] = {dir, NULL};
    NpdModelCatalog *cat = npd_model_catalog_new(dirs);
    for (long round = 1; round <= 3; round++) {
        const NpdModelEntry *def = npd_model_catalog_default(cat, NULL);
        g_assert_nonnull(def);
        const char *name = def->name; /* borrowed, as manager.c's default_model_name */
        touch_later(path, round);
        g_autoptr(GError) error = NULL;
        const NpdModelEntry *e = npd_model_catalog_lookup(cat, name, &error);
        g_assert_no_error(error);
        g_assert_nonnull(e);
        g_assert_cmpstr(e->name, ==, "alpha");
        g_assert_cmpstr(name, ==, "alpha"); /* still readable */
        g_assert_true(e->supported);
        /* the main loop runs: earlier scans' entries are freed now */
        while (g_main_context_iteration(NULL, FALSE))
            ;
    }
    npd_model_catalog_free(cat);
    remove_dir(dir);
    printf("ok uaf\n");
    return 0;
}

static int case_transient(const char *model)
{
    g_autofree gchar *dir = make_dir_with_model(model, "beta");
    const gchar *dirs[] = {dir, NULL};
    NpdModelCatalog *cat = npd_model_catalog_new(dirs);

    /* every descriptor taken but one: the folder opens, the model does not */
    GArray *fds = g_array_new(FALSE, FALSE, sizeof(int));
    for (;;) {
        int fd = dup(0);
        if (fd < 0) {
            g_assert_cmpint(errno, ==, EMFILE);
            break;
        }
        g_array_append_val(fds, fd);
    }
    g_assert_cmpuint(fds->len, >, 0);
    close(g_array_index(fds, int, fds->len - 1));
    g_array_set_size(fds, fds->len - 1);
    GPtrArray *during = npd_model_catalog_list(cat);
    guint n_during = during->len;
    g_ptr_array_unref(during);
    for (guint i = 0; i < fds->len; i++)
        close(g_array_index(fds, int, i));
    g_array_unref(fds);
    g_assert_cmpuint(n_during, ==, 0);

    /* descriptors free again: the same (unchanged) file is listed */
    GPtrArray *after = npd_model_catalog_list(cat);
    g_assert_cmpuint(after->len, ==, 1);
    const NpdModelEntry *e = after->pdata[0];
    g_assert_cmpstr(e->name, ==, "beta");
    g_assert_true(e->supported);
    g_ptr_array_unref(after);
    npd_model_catalog_free(cat);
    remove_dir(dir);
    printf("ok transient\n");
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#define BLOB_HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* A manifest at library/NAME/TAG whose model layer is the test blob. */
static void write_manifest(const char *library, const char *name, const char *tag)
{
    g_autofree gchar *dir = g_build_filename(library, name, NULL);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_autofree gchar *path = g_build_filename(dir, tag, NULL);
    const char *json = "{\"schemaVersion\": 2, \"layers\": [{\"mediaType\": "
                       "\"application/vnd.ollama.image.model\", \"digest\": \"sha256:" BLOB_HEX "\"}]}";
    g_assert_true(g_file_set_contents(path, json, -1, NULL));
}

static int case_ollama(const char *model)
{
    alarm(30);
    g_autofree gchar *store = make_dir_with_model(model, "unused");
    g_autofree gchar *blobs = g_build_filename(store, "blobs", NULL);
    g_assert_cmpint(g_mkdir(blobs, 0755), ==, 0);
    g_autofree gchar *src = g_build_filename(store, "unused.gguf", NULL);
    g_autofree gchar *blob = g_build_filename(blobs, "sha256-" BLOB_HEX, NULL);
    g_assert_cmpint(g_rename(src, blob), ==, 0);
    g_autofree gchar *library = g_build_filename(store, "manifests", "registry.ollama.ai", "library", NULL);
    write_manifest(library, "good", "1b");

    g_autofree gchar *zero_dir = g_build_filename(library, "zero", NULL);
    g_assert_cmpint(g_mkdir(zero_dir, 0755), ==, 0);
    g_autofree gchar *zero = g_build_filename(zero_dir, "latest", NULL);
    g_assert_cmpint(symlink("/dev/zero", zero), ==, 0);
    g_autofree gchar *fifo_dir = g_build_filename(library, "fifo", NULL);
    g_assert_cmpint(g_mkdir(fifo_dir, 0755), ==, 0);
    g_autofree gchar *fifo = g_build_filename(fifo_dir, "latest", NULL);
    g_assert_cmpint(mkfifo(fifo, 0644), ==, 0);
    g_autofree gchar *big_dir = g_build_filename(library, "big", NULL);
    g_assert_cmpint(g_mkdir(big_dir, 0755), ==, 0);
    g_autofree gchar *big = g_build_filename(big_dir, "latest", NULL);
    int fd = open(big, O_WRONLY | O_CREAT, 0644);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, 64 << 20), ==, 0);
    close(fd);
    /* a NAME directory linked to manifests outside the store */
    g_autofree gchar *outside = g_dir_make_tmp("npullm-outside-XXXXXX", NULL);
    write_manifest(outside, "elsewhere", "latest");
    g_autofree gchar *elsewhere = g_build_filename(outside, "elsewhere", NULL);
    g_autofree gchar *linked = g_build_filename(library, "linked", NULL);
    g_assert_cmpint(symlink(elsewhere, linked), ==, 0);

    const gchar *dirs[] = {store, NULL};
    NpdModelCatalog *cat = npd_model_catalog_new(dirs);
    GPtrArray *list = npd_model_catalog_list(cat);
    g_assert_cmpuint(list->len, ==, 1);
    const NpdModelEntry *e = list->pdata[0];
    g_assert_cmpstr(e->name, ==, "good:1b");
    g_assert_true(e->supported);
    g_ptr_array_unref(list);
    npd_model_catalog_free(cat);
    remove_tree(store);
    remove_tree(outside);
    alarm(0);
    printf("ok ollama\n");
    return 0;
}

static int case_default(const char *model)
{
    g_autofree gchar *shared = make_dir_with_model(model, "0");
    g_assert_cmpint(chmod(shared, 0777), ==, 0);
    g_autofree gchar *admin = make_dir_with_model(model, "zeta");
    const gchar *dirs[] = {shared, admin, NULL};
    NpdModelCatalog *cat = npd_model_catalog_new(dirs);
    const char *because = NULL;
    const NpdModelEntry *def = npd_model_catalog_default(cat, &because);
    g_assert_nonnull(def);
    g_assert_cmpstr(def->name, ==, "zeta");
    g_assert_true(def->administrators);
    g_assert_nonnull(strstr(because, "administrator's first model"));

    /* a file anyone may rewrite is not the administrator's either */
    g_autofree gchar *zeta = g_build_filename(admin, "zeta.gguf", NULL);
    g_assert_cmpint(chmod(zeta, 0666), ==, 0);
    def = npd_model_catalog_default(cat, &because);
    g_assert_nonnull(def);
    g_assert_cmpstr(def->name, ==, "0");
    g_assert_false(def->administrators);
    g_assert_nonnull(strstr(because, "no administrator's model"));

    /* both writable: root order, then name (the admin root is second) */
    g_autofree gchar *extra = g_build_filename(admin, "a.gguf", NULL);
    g_assert_cmpint(link(zeta, extra), ==, 0);
    def = npd_model_catalog_default(cat, NULL);
    g_assert_cmpstr(def->name, ==, "0");
    npd_model_catalog_free(cat);
    remove_tree(shared);
    remove_tree(admin);
    printf("ok default\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test-model-catalog uaf|transient|ollama|default MODEL.gguf\n");
        return 2;
    }
    if (strcmp(argv[1], "uaf") == 0)
        return case_uaf(argv[2]);
    if (strcmp(argv[1], "transient") == 0)
        return case_transient(argv[2]);
    if (strcmp(argv[1], "ollama") == 0)
        return case_ollama(argv[2]);
    if (strcmp(argv[1], "default") == 0)
        return case_default(argv[2]);
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
