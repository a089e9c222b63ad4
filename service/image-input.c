#include "image-input.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "dbus-errors.h"
#include "vision.h"

#define READ_CHUNK (64 * 1024)

typedef struct {
    int fd;
    gsize max_bytes;
    guint timeout_seconds;
} ReadJob;

static void read_job_free(ReadJob *j)
{
    if (j->fd >= 0)
        close(j->fd);
    g_free(j);
}

/* Reads to end of file: a regular file, or a pipe whose writer may be
 * slow (each wait bounded by the deadline, and by cancellation polled
 * every 100 ms). */
static GByteArray *read_all(ReadJob *j, GCancellable *cancellable, GError **error)
{
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
        struct pollfd pfd = {.fd = j->fd, .events = POLLIN};
        int ready = poll(&pfd, 1, (int)MIN(left / 1000 + 1, 100));
        if (ready < 0 && errno != EINTR) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: cannot wait for data: %s",
                        g_strerror(errno));
            return NULL;
        }
        if (ready <= 0)
            continue;
        /* Never more than one byte past the cap: enough to know it is too
         * big without reading the rest of a huge file. */
        gsize want = MIN(sizeof buf, j->max_bytes + 1 - data->len);
        ssize_t n = read(j->fd, buf, want);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: reading the descriptor failed: %s",
                        g_strerror(errno));
            return NULL;
        }
        if (n == 0)
            break;
        g_byte_array_append(data, buf, (guint)n);
        if (data->len > j->max_bytes) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: more than %" G_GSIZE_FORMAT " bytes",
                        j->max_bytes);
            return NULL;
        }
    }
    if (data->len == 0) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "image: the descriptor is empty");
        return NULL;
    }
    return g_steal_pointer(&data);
}

static void read_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    ReadJob *j = data;
    GError *error = NULL;
    GByteArray *bytes = read_all(j, cancellable, &error);
    close(j->fd);
    j->fd = -1;
    if (bytes == NULL) {
        g_task_return_error(task, error);
        return;
    }
    npl_image_limits lim;
    npl_image_limits_default(&lim);
    lim.max_bytes = j->max_bytes;
    npl_image img;
    npl_error err;
    npl_status st = npl_image_decode(bytes->data, bytes->len, &lim, &img, &err);
    npl_image_free(&img);
    if (st != NPL_OK) {
        g_byte_array_unref(bytes);
        g_task_return_new_error(task, NPD_ERROR, st == NPL_ERR_NOMEM ? NPD_ERROR_INTERNAL : NPD_ERROR_INVALID_ARGUMENT,
                                "image: %s", err.message);
        return;
    }
    g_task_return_pointer(task, g_byte_array_free_to_bytes(bytes), (GDestroyNotify)g_bytes_unref);
}

void npd_image_input_read_async(int fd, gsize max_bytes, guint timeout_seconds, GCancellable *cancellable,
                                GAsyncReadyCallback callback, gpointer user_data)
{
    ReadJob *j = g_new0(ReadJob, 1);
    j->fd = fd;
    j->max_bytes = max_bytes;
    j->timeout_seconds = timeout_seconds;
    g_autoptr(GTask) task = g_task_new(NULL, cancellable, callback, user_data);
    g_task_set_source_tag(task, npd_image_input_read_async);
    g_task_set_task_data(task, j, (GDestroyNotify)read_job_free);
    g_task_run_in_thread(task, read_thread);
}

GBytes *npd_image_input_read_finish(GAsyncResult *result, GError **error)
{
    return g_task_propagate_pointer(G_TASK(result), error);
}
