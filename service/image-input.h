/* The image of a DescribeImage call, from the descriptor the caller passed
 * (the daemon never opens a client's path) to the preprocessed tensor the
 * engine encodes.
 *
 * On arrival, before polkit: the descriptor must not be on FUSE or a
 * network filesystem (whose operations, even fstat, a user process can
 * stall forever: fd-filesystem.c asks fstatfs on a thread of its own,
 * with a deadline), then (main thread) a readable regular file of sane
 * size or a pipe. The
 * daemon then reads from a description of its own: a regular file is
 * reopened through /proc/self/fd (non-blocking; when the daemon may not
 * open the file itself, positional reads on the caller's description,
 * which never depend on its offset or flags), a pipe is drained with
 * non-blocking splice() into a private pipe. Nothing ever waits on the
 * caller's shared description.
 *
 * Then in a worker thread: read to the end (size cap, deadline, and
 * cancellation checked at least every 100 ms), probe the header, decode,
 * preprocess for the model's projector. Memory is taken from the global
 * image budget as it is needed (Busy beyond it). The engine thread never
 * decodes. */
#ifndef NPD_IMAGE_INPUT_H
#define NPD_IMAGE_INPUT_H

#include <gio/gio.h>

#include "engine-worker.h"
#include "image-budget.h"

typedef struct NpdImageSource NpdImageSource;

/* Checks fd, whose filesystem fd-filesystem.c found not to stall, and
 * takes it (closed on every path). NULL with
 * NPD_ERROR_INVALID_ARGUMENT saying what is wrong. */
NpdImageSource *npd_image_source_new(int fd, gsize max_bytes, GError **error);
void npd_image_source_free(NpdImageSource *src);

/* Takes src. The result is the preprocessed image for the projector at
 * mmproj_path, or NPD_ERROR_INVALID_ARGUMENT (the image), BUSY (the
 * budget), MODEL_LOAD_FAILED (the projector), CANCELLED, INTERNAL. */
void npd_image_input_read_async(NpdImageSource *src, const char *mmproj_path, NpdImageBudget *budget,
                                guint timeout_seconds, GCancellable *cancellable, GAsyncReadyCallback callback,
                                gpointer user_data);
NpdImagePixels *npd_image_input_read_finish(GAsyncResult *result, GError **error);

#endif
