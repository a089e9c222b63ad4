/* service/image-input.c on its own: the three ways it reads a caller's
 * descriptor give the same preprocessed image, and none moves the
 * caller's file offset:
 *   - a regular file the daemon may open: reopened (its own description),
 *   - a regular file it may not open (after dropping to nobody, a root
 *     0600 file): pread() on the caller's description,
 *   - a pipe: spliced into a private pipe.
 * The budget holds the three tensors until they are freed, then is back
 * to zero.
 *
 *   test-image-input MMPROJ IMAGE      (root, else skipped: exit 77) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image-input.h"

static const char *mmproj, *image;
static NpdImageBudget *budget;

typedef struct {
    GMainLoop *loop;
    NpdImagePixels *px;
    GError *error;
} Result;

static void done(GObject *source, GAsyncResult *res, gpointer data)
{
    Result *r = data;
    r->px = npd_image_input_read_finish(res, &r->error);
    g_main_loop_quit(r->loop);
}

/* Reads fd (taken) through image-input; the pixels or NULL. */
static NpdImagePixels *read_fd(int fd, const char *what)
{
    GError *error = NULL;
    NpdImageSource *src = npd_image_source_new(fd, 1 << 20, &error);
    if (src == NULL) {
        fprintf(stderr, "%s: %s\n", what, error->message);
        exit(1);
    }
    Result r = {.loop = g_main_loop_new(NULL, FALSE)};
    npd_image_input_read_async(src, mmproj, budget, 10, NULL, done, &r);
    g_main_loop_run(r.loop);
    g_main_loop_unref(r.loop);
    if (r.px == NULL) {
        fprintf(stderr, "%s: %s\n", what, r.error->message);
        exit(1);
    }
    return r.px;
}

static void same(const NpdImagePixels *a, const NpdImagePixels *b, const char *what)
{
    size_t n = npl_vision_pixel_count(&a->params);
    if (memcmp(&a->params, &b->params, sizeof a->params) != 0 || memcmp(a->pixels, b->pixels, n * sizeof(float))) {
        fprintf(stderr, "%s: different pixels\n", what);
        exit(1);
    }
}

/* fd's description at offset 5; image-input gets a duplicate (same
 * description); the offset must still be 5 afterwards. */
static NpdImagePixels *read_keeping_offset(int fd, const char *what)
{
    if (lseek(fd, 5, SEEK_SET) != 5) {
        perror("lseek");
        exit(2);
    }
    NpdImagePixels *px = read_fd(dup(fd), what);
    if (lseek(fd, 0, SEEK_CUR) != 5) {
        fprintf(stderr, "%s: the caller's offset moved\n", what);
        exit(1);
    }
    return px;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test-image-input MMPROJ IMAGE\n");
        return 2;
    }
    if (getuid() != 0) {
        fprintf(stderr, "not root: cannot test the file the daemon may not open\n");
        return 77;
    }
    mmproj = argv[1];
    image = argv[2];
    budget = npd_image_budget_new(2, 256 << 20);

    int fd = open(image, O_RDONLY);
    NpdImagePixels *reopened = read_keeping_offset(fd, "reopened");
    close(fd);

    /* a root-only copy, opened before dropping to nobody */
    gchar *data = NULL;
    gsize size = 0;
    g_autofree gchar *tmp = g_build_filename(g_get_tmp_dir(), "npullm-image-input-XXXXXX", NULL);
    int tfd = g_mkstemp_full(tmp, O_RDWR, 0600);
    if (tfd < 0 || !g_file_get_contents(image, &data, &size, NULL) || write(tfd, data, size) != (gssize)size) {
        perror("copy");
        return 2;
    }
    g_free(data);
    unlink(tmp);
    int pipefd[2];
    if (pipe(pipefd) != 0 || size > 60000) {
        perror("pipe");
        return 2;
    }
    if (setgid(65534) != 0 || setuid(65534) != 0) {
        perror("setuid");
        return 2;
    }
    /* Changing uid leaves the process not dumpable (fs.suid_dumpable, which
     * systemd-coredump sets to 2): LeakSanitizer could not attach to its
     * threads at exit. */
    if (prctl(PR_SET_DUMPABLE, 1) != 0) {
        perror("prctl");
        return 2;
    }
    g_autofree gchar *self = g_strdup_printf("/proc/self/fd/%d", tfd);
    if (open(self, O_RDONLY) >= 0 || errno != EACCES) {
        fprintf(stderr, "nobody could reopen a root 0600 file?\n");
        return 1;
    }
    NpdImagePixels *pread_px = read_keeping_offset(tfd, "pread");
    same(reopened, pread_px, "pread");

    /* the pipe: small enough to fit its buffer, written before reading */
    g_file_get_contents(image, &data, &size, NULL);
    if (write(pipefd[1], data, size) != (gssize)size) {
        perror("write");
        return 2;
    }
    g_free(data);
    close(pipefd[1]);
    NpdImagePixels *piped = read_fd(pipefd[0], "pipe");
    same(reopened, piped, "pipe");

    /* the tensors the three still hold stay charged, the rest is back */
    guint images;
    guint64 bytes;
    guint64 held = 3 * npl_vision_pixel_count(&reopened->params) * sizeof(float);
    npd_image_budget_usage(budget, &images, &bytes);
    if (images != 0 || bytes != held) {
        fprintf(stderr, "budget holds %u images, %" G_GUINT64_FORMAT " bytes, not the %" G_GUINT64_FORMAT
                " of the three tensors\n", images, bytes, held);
        return 1;
    }
    npd_image_pixels_free(reopened);
    npd_image_pixels_free(pread_px);
    npd_image_pixels_free(piped);
    npd_image_budget_usage(budget, &images, &bytes);
    if (images != 0 || bytes != 0) {
        fprintf(stderr, "budget not back to zero: %u images, %" G_GUINT64_FORMAT " bytes\n", images, bytes);
        return 1;
    }
    close(tfd);
    npd_image_budget_free(budget);
    printf("reopened, pread and pipe reads agree; offsets kept\n");
    return 0;
}
