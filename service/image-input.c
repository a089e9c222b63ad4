#include "image-input.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dbus-errors.h"
#include "vision.h"

#define READ_CHUNK (64 * 1024)

typedef enum {
    SOURCE_OWN,    /* a regular file reopened: our own description */
    SOURCE_PREAD,  /* a regular file we may not reopen: pread() only */
    SOURCE_SPLICE, /* a pipe: spliced without blocking into a private pipe */
} SourceKind;

struct NpdImageSource {
    SourceKind kind;
    int fd;
    gsize max_bytes;
};

void npd_image_source_free(NpdImageSource *src)
{
    if (src == NULL)
        return;
    if (src->fd >= 0)
        close(src->fd);
    g_free(src);
}

static NpdImageSource *source_fail(int fd, GError **error, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static NpdImageSource *source_fail(int fd, GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree gchar *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: %s", msg);
    close(fd);
    return NULL;
}

NpdImageSource *npd_image_source_new(int fd, gsize max_bytes, GError **error)
{
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) != 0 || flags < 0)
        return source_fail(fd, error, "unusable descriptor: %s", g_strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
        return source_fail(fd, error, "not a regular file or a pipe");
    if ((flags & O_ACCMODE) == O_WRONLY)
        return source_fail(fd, error, "descriptor is not readable");
    NpdImageSource *src = g_new0(NpdImageSource, 1);
    src->max_bytes = max_bytes;
    src->fd = fd;
    if (S_ISFIFO(st.st_mode)) {
        src->kind = SOURCE_SPLICE;
        return src;
    }
    if (st.st_size <= 0 || (guint64)st.st_size > max_bytes) {
        g_free(src);
        return source_fail(fd, error, "%lld bytes, expected 1 to %zu", (long long)st.st_size, max_bytes);
    }
    g_autofree gchar *self = g_strdup_printf("/proc/self/fd/%d", fd);
    int own = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (own >= 0) {
        struct stat st2;
        /* the same file (a reopen goes through the file's current link) */
        if (fstat(own, &st2) == 0 && st2.st_dev == st.st_dev && st2.st_ino == st.st_ino) {
            close(fd);
            src->fd = own;
            src->kind = SOURCE_OWN;
            return src;
        }
        close(own);
    }
    src->kind = SOURCE_PREAD;
    return src;
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct {
    NpdImageSource *src;
    gchar *mmproj_path;
    NpdImageBudget *budget;
    guint timeout_seconds;
    gsize max_bytes;
    guint64 bytes_taken; /* from the budget: given back at the end, but for
                          * the tensor's, which the pixels keep */
    int relay[2];        /* SOURCE_SPLICE: the private pipe */
} ReadJob;

static void read_job_free(ReadJob *j)
{
    npd_image_source_free(j->src);
    for (int i = 0; i < 2; i++)
        if (j->relay[i] >= 0)
            close(j->relay[i]);
    g_warn_if_fail(j->bytes_taken == 0);
    g_free(j->mmproj_path);
    g_free(j);
}

static gboolean take_bytes(ReadJob *j, guint64 n, GError **error)
{
    if (!npd_image_budget_take_bytes(j->budget, n, error))
        return FALSE;
    j->bytes_taken += n;
    return TRUE;
}

static void give_bytes(ReadJob *j, guint64 n)
{
    n = MIN(n, j->bytes_taken);
    npd_image_budget_give_bytes(j->budget, n);
    j->bytes_taken -= n;
}

/* One non-blocking read of up to want bytes into buf: > 0 bytes, 0 at
 * the end, -1 with errno (EAGAIN: nothing yet). */
static gssize read_some(ReadJob *j, guint8 *buf, gsize want, guint64 offset)
{
    NpdImageSource *src = j->src;
    switch (src->kind) {
    case SOURCE_OWN:
        return read(src->fd, buf, want);
    case SOURCE_PREAD:
        return pread(src->fd, buf, want, (off_t)offset);
    case SOURCE_SPLICE: {
        gssize n = splice(src->fd, NULL, j->relay[1], NULL, want, SPLICE_F_NONBLOCK);
        if (n <= 0)
            return n;
        /* what splice moved is in the relay already: this never waits */
        gsize got = 0;
        while (got < (gsize)n) {
            gssize r = read(j->relay[0], buf + got, (gsize)n - got);
            if (r <= 0) {
                errno = r < 0 ? errno : EIO;
                return -1;
            }
            got += (gsize)r;
        }
        return n;
    }
    }
    errno = EINVAL;
    return -1;
}

/* Reads to the end: each wait bounded by the deadline, cancellation
 * checked every 100 ms; never blocks (see read_some). */
static GByteArray *read_all(ReadJob *j, GCancellable *cancellable, GError **error)
{
    gsize max_bytes = j->max_bytes;
    if (j->src->kind == SOURCE_SPLICE && pipe2(j->relay, O_CLOEXEC | O_NONBLOCK) != 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "image: no pipe to read through: %s", g_strerror(errno));
        return NULL;
    }
    g_autoptr(GByteArray) data = g_byte_array_new();
    gint64 deadline = g_get_monotonic_time() + (gint64)j->timeout_seconds * G_USEC_PER_SEC;
    guint8 buf[READ_CHUNK];
    for (;;) {
        if (g_cancellable_set_error_if_cancelled(cancellable, error))
            return NULL;
        gint64 left = deadline - g_get_monotonic_time();
        if (left <= 0) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "image: the descriptor did not reach its end within %u s", j->timeout_seconds);
            return NULL;
        }
        /* Never more than one byte past the cap: enough to know it is too
         * big without reading the rest of a huge file. */
        gsize want = MIN(sizeof buf, max_bytes + 1 - data->len);
        gssize n = read_some(j, buf, want, data->len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd pfd = {.fd = j->src->fd, .events = POLLIN};
            if (poll(&pfd, 1, (int)MIN(left / 1000 + 1, 100)) < 0 && errno != EINTR) {
                g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: cannot wait for data: %s",
                            g_strerror(errno));
                return NULL;
            }
            continue;
        }
        if (n < 0) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: reading the descriptor failed: %s",
                        g_strerror(errno));
            return NULL;
        }
        if (n == 0)
            break;
        if (!take_bytes(j, (guint64)n, error))
            return NULL;
        g_byte_array_append(data, buf, (guint)n);
        if (data->len > max_bytes) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: more than %" G_GSIZE_FORMAT " bytes",
                        max_bytes);
            return NULL;
        }
    }
    if (data->len == 0) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: the descriptor is empty");
        return NULL;
    }
    return g_steal_pointer(&data);
}

static GError *image_error(npl_status st, const npl_error *err)
{
    return g_error_new(NPD_ERROR, st == NPL_ERR_NOMEM ? NPD_ERROR_INTERNAL : NPD_ERROR_INVALID_ARGUMENT, "%s%s",
                       g_str_has_prefix(err->message, "image:") ? "" : "image: ", err->message);
}

/* The read bytes to the projector's input: probe, decode, preprocess,
 * each allocation taken from the budget first. */
static NpdImagePixels *decode_and_preprocess(ReadJob *j, const GByteArray *bytes, GError **error)
{
    npl_image_limits lim;
    npl_image_limits_default(&lim);
    lim.max_bytes = j->max_bytes;
    npl_error err;
    npl_error_clear(&err);
    npl_image_info info;
    npl_status st = npl_image_probe(bytes->data, bytes->len, &lim, &info, &err);
    if (st != NPL_OK) {
        g_propagate_error(error, image_error(st, &err));
        return NULL;
    }
    /* the projector only now: what is wrong with the image comes first */
    npl_vision_pixel_params params;
    const npl_vision_pixel_params *pp = &params;
    if (npl_vision_read_pixel_params(j->mmproj_path, &params, &err) != NPL_OK) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_MODEL_LOAD_FAILED, "the vision projector: %s", err.message);
        return NULL;
    }
    guint64 tensor_bytes = npl_vision_pixel_count_for(pp, info.width, info.height) * sizeof(float);
    if (tensor_bytes == 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "image: a %u x %u image is too elongated for the vision projector", info.width, info.height);
        return NULL;
    }
    guint64 need = info.decode_bytes + tensor_bytes;
    if (need + bytes->len > npd_image_budget_max_bytes(j->budget)) {
        /* not Busy: this image never fits, however long one waits */
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "image: decoding this %u x %u %s needs about %" G_GUINT64_FORMAT
                    " MiB, more than the image memory of %" G_GUINT64_FORMAT " MiB",
                    info.width, info.height, npl_image_format_name(info.format), (need + bytes->len) >> 20,
                    npd_image_budget_max_bytes(j->budget) >> 20);
        return NULL;
    }
    if (!take_bytes(j, need, error))
        return NULL;
    npl_image img;
    st = npl_image_decode(bytes->data, bytes->len, &lim, &img, &err);
    if (st != NPL_OK) {
        g_propagate_error(error, image_error(st, &err));
        return NULL;
    }
    NpdImagePixels *px = g_new0(NpdImagePixels, 1);
    px->params = *pp;
    /* the tensor's share goes with it: held until the pixels are freed */
    px->budget = j->budget;
    px->charged = tensor_bytes;
    j->bytes_taken -= tensor_bytes;
    px->pixels = g_try_malloc(tensor_bytes);
    st = px->pixels != NULL ? npl_image_preprocess(pp, &img, px->pixels, &err)
                            : npl_error_set(&err, NPL_ERR_NOMEM, "out of memory for the preprocessed image");
    npl_image_free(&img);
    if (st != NPL_OK) {
        npd_image_pixels_free(px);
        g_propagate_error(error, image_error(st, &err));
        return NULL;
    }
    return px;
}

static void read_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    ReadJob *j = data;
    GError *error = NULL;
    GByteArray *bytes = read_all(j, cancellable, &error);
    g_clear_pointer(&j->src, npd_image_source_free);
    NpdImagePixels *px = bytes != NULL ? decode_and_preprocess(j, bytes, &error) : NULL;
    if (bytes != NULL)
        g_byte_array_unref(bytes);
    give_bytes(j, j->bytes_taken);
    if (px == NULL)
        g_task_return_error(task, error);
    else
        g_task_return_pointer(task, px, (GDestroyNotify)npd_image_pixels_free);
}

void npd_image_input_read_async(NpdImageSource *src, const char *mmproj_path, NpdImageBudget *budget,
                                guint timeout_seconds, GCancellable *cancellable, GAsyncReadyCallback callback,
                                gpointer user_data)
{
    ReadJob *j = g_new0(ReadJob, 1);
    j->src = src;
    j->mmproj_path = g_strdup(mmproj_path);
    j->budget = budget;
    j->timeout_seconds = timeout_seconds;
    j->max_bytes = src->max_bytes;
    j->relay[0] = j->relay[1] = -1;
    g_autoptr(GTask) task = g_task_new(NULL, cancellable, callback, user_data);
    g_task_set_source_tag(task, npd_image_input_read_async);
    g_task_set_task_data(task, j, (GDestroyNotify)read_job_free);
    g_task_run_in_thread(task, read_thread);
}

NpdImagePixels *npd_image_input_read_finish(GAsyncResult *result, GError **error)
{
    return g_task_propagate_pointer(G_TASK(result), error);
}

void npd_image_pixels_free(NpdImagePixels *px)
{
    if (px == NULL)
        return;
    g_free(px->pixels);
    if (px->charged > 0)
        npd_image_budget_give_bytes(px->budget, px->charged);
    g_free(px);
}
