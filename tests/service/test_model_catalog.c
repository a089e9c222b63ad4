/* The model catalog on its own (no bus): regressions of two bugs.
 *  - uaf: the default model's name, borrowed from the catalog, passed back
 *    to a lookup after the file changed (the lookup rescans and replaced
 *    the entry holding the name: valgrind showed invalid reads); run under
 *    ASan by the sanitize build.
 *  - transient: a probe that fails with EMFILE must not be cached as the
 *    file's verdict; the model appears once descriptors are free again.
 *
 *   test-model-catalog CASE MODEL.gguf */
#include <errno.h>
#include <fcntl.h>
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
        const NpdModelEntry *def = npd_model_catalog_default(cat);
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

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test-model-catalog uaf|transient MODEL.gguf\n");
        return 2;
    }
    if (strcmp(argv[1], "uaf") == 0)
        return case_uaf(argv[2]);
    if (strcmp(argv[1], "transient") == 0)
        return case_transient(argv[2]);
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
