/* Whether client descriptors live on filesystems whose operations no
 * user process can stall: a FUSE server (or a network peer) can keep
 * even fstat() waiting forever, so the first question is asked with
 * fstatfs() on a thread of its own, against a deadline, before anything
 * else touches the descriptor. The answer does not depend on the
 * daemon's mount namespace (the unit's ProtectSystem/PrivateTmp make it
 * private, so mount ids of the caller's files are not in ours).
 *
 * A check that misses its deadline fails the call, and its thread stays
 * until the filesystem answers: at most NPD_FD_CHECKS_PER_USER of one
 * user and NPD_FD_CHECKS of everyone are outstanding; beyond that, Busy.
 * Main thread only. */
#ifndef NPD_FD_FILESYSTEM_H
#define NPD_FD_FILESYSTEM_H

#include <gio/gio.h>

/* calls (each with all its descriptors) being checked or stuck */
#define NPD_FD_CHECKS 32
#define NPD_FD_CHECKS_PER_USER 8
#define NPD_FD_CHECK_TIMEOUT_MS 5000
#define NPD_FD_CHECK_MAX 8 /* descriptors of one call */

/* The filesystem type name when f_type (statfs) is one that may stall
 * (FUSE, network filesystems), else NULL. */
const char *npd_fd_filesystem_stalling(long f_type);

/* Checks fds (n of them, at most NPD_FD_CHECK_MAX) for the caller uid.
 * Takes them (the entries are set to -1): closing a file on FUSE waits
 * for its server as well, so refused ones are closed by a thread. The
 * result: the n descriptors given back (g_free the array), or NULL with
 * NPD_ERROR_INVALID_ARGUMENT (a stalling filesystem, no answer in time,
 * an unusable descriptor) or NPD_ERROR_BUSY (too many checks waiting). */
void npd_fd_filesystem_check_async(int *fds, guint n, guint32 uid, GAsyncReadyCallback callback,
                                   gpointer user_data);
int *npd_fd_filesystem_check_finish(GAsyncResult *result, GError **error);

#endif
