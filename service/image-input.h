/* The image of a DescribeImage call: read from the file descriptor the
 * caller passed (the daemon never opens a client's path), with a size cap
 * and a deadline, then decoded once to check it, all in a GIO worker
 * thread: the main loop never blocks on a slow pipe or a large file, and a
 * corrupt, truncated or enormous image is refused before any request
 * exists. */
#ifndef NPD_IMAGE_INPUT_H
#define NPD_IMAGE_INPUT_H

#include <gio/gio.h>

/* Takes ownership of fd (closed when done). The result is the encoded
 * image (1..max_bytes bytes), or NPD_ERROR_INVALID_ARGUMENT saying what is
 * wrong with it, or NPD_ERROR_CANCELLED. */
void npd_image_input_read_async(int fd, gsize max_bytes, guint timeout_seconds, GCancellable *cancellable,
                                GAsyncReadyCallback callback, gpointer user_data);
GBytes *npd_image_input_read_finish(GAsyncResult *result, GError **error);

#endif
