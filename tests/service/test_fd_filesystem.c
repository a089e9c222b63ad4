/* fd-filesystem.c on its own, with a real FUSE mount (bindfs, allow_other)
 * whose server is stopped with SIGSTOP: the check answers with a named
 * error after its deadline while the main loop keeps running, one more
 * check of the same user than NPD_FD_CHECKS_PER_USER is Busy, and once the server answers again the
 * stuck threads end and their slots are free (issue #34: AddModel's
 * fstat froze the daemon's main loop on such a file). Through the bus
 * this cannot be tested: dbus-daemon's own close() of the forwarded
 * descriptor waits for the stopped server too.
 *
 *   test-fd-filesystem     (exit 77, skipped, without bindfs or /dev/fuse,
 *                           or where FUSE cannot be mounted) */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "dbus-errors.h"
#include "fd-filesystem.h"

typedef struct {
    gboolean done;
    int *fds;
    GError *error;
} Result;

static void checked(GObject *source, GAsyncResult *res, gpointer data)
{
    Result *r = data;
    r->fds = npd_fd_filesystem_check_finish(res, &r->error);
    r->done = TRUE;
}

static gboolean tick(gpointer data)
{
    (*(guint *)data)++;
    return G_SOURCE_CONTINUE;
}

static void check(int fd, guint32 uid, Result *r)
{
    npd_fd_filesystem_check_async(&fd, 1, uid, checked, r);
    g_assert_cmpint(fd, ==, -1); /* taken */
}

static void wait_for(Result *r)
{
    while (!r->done)
        g_main_context_iteration(NULL, TRUE);
}

static int skip(const char *why)
{
    printf("SKIP: %s\n", why);
    return 77;
}

int main(void)
{
    g_autofree gchar *bindfs = g_find_program_in_path("bindfs");
    if (bindfs == NULL || access("/dev/fuse", R_OK | W_OK) != 0)
        return skip("no bindfs or /dev/fuse: the case needs a real FUSE mount");
    g_autofree gchar *dir = g_dir_make_tmp("npullm-fdfs-XXXXXX", NULL);
    g_autofree gchar *src = g_build_filename(dir, "src", NULL);
    g_autofree gchar *mnt = g_build_filename(dir, "mnt", NULL);
    g_autofree gchar *plain = g_build_filename(src, "file", NULL);
    g_autofree gchar *fused = g_build_filename(mnt, "file", NULL);
    g_assert_cmpint(g_mkdir(src, 0755), ==, 0);
    g_assert_cmpint(g_mkdir(mnt, 0755), ==, 0);
    g_assert_true(g_file_set_contents(plain, "GGUF", 4, NULL));
    const gchar *argv[] = {bindfs, "-f", "-o", "allow_other", src, mnt, NULL};
    GPid pid = 0;
    g_assert_true(g_spawn_async(NULL, (gchar **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL));
    struct stat above, at;
    g_assert_cmpint(stat(dir, &above), ==, 0);
    for (int i = 0; i < 200 && (stat(mnt, &at) != 0 || at.st_dev == above.st_dev); i++)
        g_usleep(50000);
    int fds[NPD_FD_CHECKS_PER_USER + 1];
    gboolean mounted = at.st_dev != above.st_dev;
    for (int i = 0; mounted && i < NPD_FD_CHECKS_PER_USER + 1; i++)
        fds[i] = open(fused, O_RDONLY | O_CLOEXEC);
    if (!mounted || fds[0] < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return skip("cannot mount FUSE with allow_other here");
    }

    /* a file elsewhere passes and comes back; the FUSE one is refused */
    Result ok = {0}, fuse = {0};
    check(open(plain, O_RDONLY | O_CLOEXEC), 1000, &ok);
    wait_for(&ok);
    g_assert_no_error(ok.error);
    g_assert_cmpint(ok.fds[0], >=, 0);
    close(ok.fds[0]);
    g_free(ok.fds);
    check(fds[0], 1000, &fuse);
    wait_for(&fuse);
    g_assert_error(fuse.error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT);
    g_assert_nonnull(strstr(fuse.error->message, "files on fuse filesystems are not accepted"));
    g_clear_error(&fuse.error);

    /* the server stops answering (a guard lets it go on after 30 s,
     * should this test fail: exiting closes its files, which waits too) */
    pid_t guard = fork();
    if (guard == 0) {
        sleep(30);
        kill(pid, SIGCONT);
        _exit(0);
    }
    kill(pid, SIGSTOP);
    guint ticks = 0;
    guint tick_id = g_timeout_add(100, tick, &ticks);
    Result stuck[NPD_FD_CHECKS_PER_USER] = {{0}}, c = {0};
    gint64 start = g_get_monotonic_time();
    for (int i = 0; i < NPD_FD_CHECKS_PER_USER; i++)
        check(fds[1 + i], 1000, &stuck[i]);
    check(open(plain, O_RDONLY | O_CLOEXEC), 1000, &c); /* the user's checks are all waiting */
    wait_for(&c);
    g_assert_error(c.error, NPD_ERROR, NPD_ERROR_BUSY);
    for (int i = 0; i < NPD_FD_CHECKS_PER_USER; i++)
        wait_for(&stuck[i]);
    double waited = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
    printf("# answered after %.1f s, the main loop ticked %u times meanwhile\n", waited, ticks);
    for (int i = 0; i < NPD_FD_CHECKS_PER_USER; i++) {
        g_assert_error(stuck[i].error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT);
        g_assert_nonnull(strstr(stuck[i].error->message, "did not answer"));
        g_clear_error(&stuck[i].error);
    }
    g_assert_cmpuint(ticks, >=, 20);
    /* another user is not held up by this one's stuck checks */
    Result other = {0};
    check(open(plain, O_RDONLY | O_CLOEXEC), 2000, &other);
    wait_for(&other);
    g_assert_no_error(other.error);
    close(other.fds[0]);
    g_free(other.fds);

    /* the server answers again: the stuck threads end, the slots free up */
    kill(pid, SIGCONT);
    kill(guard, SIGKILL);
    waitpid(guard, NULL, 0);
    gboolean freed = FALSE;
    for (int i = 0; i < 100 && !freed; i++) {
        Result again = {0};
        check(open(fused, O_RDONLY | O_CLOEXEC), 1000, &again);
        wait_for(&again);
        freed = !g_error_matches(again.error, NPD_ERROR, NPD_ERROR_BUSY);
        if (freed)
            g_assert_nonnull(strstr(again.error->message, "fuse"));
        g_clear_error(&again.error);
        for (int k = 0; k < 5; k++)
            g_main_context_iteration(NULL, FALSE);
        if (!freed)
            g_usleep(100000);
    }
    g_assert_true(freed);
    g_source_remove(tick_id);
    g_clear_error(&c.error);

    const gchar *umount_argv[] = {"umount", mnt, NULL};
    g_spawn_sync(NULL, (gchar **)umount_argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                 NULL, NULL, NULL, NULL);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    g_unlink(plain);
    g_rmdir(src);
    g_rmdir(mnt);
    g_rmdir(dir);
    printf("ok stalled\n");
    return 0;
}
