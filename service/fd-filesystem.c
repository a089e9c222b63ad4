#include "fd-filesystem.h"

#include <errno.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "dbus-errors.h"

/* Owned by its thread, freed on the main thread once it has answered. */
typedef struct {
    int fds[NPD_FD_CHECK_MAX]; /* taken from the caller; -1 once given back or closed */
    guint n;
    guint32 uid;
    GTask *task;       /* NULL once answered (in time or not) */
    GSource *deadline;
    GMainContext *context; /* the caller's, where the answer is given */
    gchar *problem;    /* set by the thread: why the descriptors are refused */
} Check;

/* uid -> outstanding checks; main thread only */
static GHashTable *per_user;
static guint outstanding;

const char *npd_fd_filesystem_stalling(long f_type)
{
    /* the kernel's magic numbers (linux/magic.h, fs/fuse, fs/smb) */
    static const struct {
        unsigned long magic;
        const char *name;
    } stalling[] = {
        {0x65735546, "fuse"},      {0x6969, "nfs"},           {0x517B, "smb"},
        {0xFF534D42, "cifs"},      {0xFE534D42, "smb3"},      {0x00C36400, "ceph"},
        {0x01021997, "9p"},        {0x5346414F, "afs"},       {0x6B414653, "afs"},
        {0x73757245, "coda"},      {0x7461636F, "ocfs2"},     {0x01161970, "gfs2"},
        {0x13661366, "orangefs"},  {0x0BD00BD0, "lustre"},    {0x786F4256, "vboxsf"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(stalling); i++)
        if ((unsigned long)(unsigned int)f_type == stalling[i].magic)
            return stalling[i].name;
    return NULL;
}

/* Closing a file on FUSE waits for its server too (FLUSH): only threads
 * close what may be there, and only fds of filesystems that answered reach
 * the main thread's check_free. */
static void close_fds(Check *c)
{
    for (guint i = 0; i < c->n; i++)
        if (c->fds[i] >= 0)
            close(c->fds[i]);
    for (guint i = 0; i < c->n; i++)
        c->fds[i] = -1;
}

static void check_free(Check *c)
{
    close_fds(c);
    if (c->context != NULL)
        g_main_context_unref(c->context);
    g_free(c->problem);
    g_free(c);
}

static void answer(Check *c, GError *error)
{
    GTask *task = g_steal_pointer(&c->task);
    if (c->deadline != NULL) {
        g_source_destroy(c->deadline);
        g_clear_pointer(&c->deadline, g_source_unref);
    }
    if (error != NULL) {
        g_task_return_error(task, error);
    } else {
        /* the descriptors go back to the caller */
        int *fds = g_new(int, c->n);
        for (guint i = 0; i < c->n; i++) {
            fds[i] = c->fds[i];
            c->fds[i] = -1;
        }
        g_task_return_pointer(task, fds, g_free);
    }
    g_object_unref(task);
}

/* Main thread: the thread has its answer (maybe long after the deadline). */
static gboolean thread_answered(gpointer data)
{
    Check *c = data;
    if (c->task != NULL)
        answer(c, c->problem == NULL ? NULL
                                     : g_error_new(NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s", c->problem));
    outstanding--;
    guint left = GPOINTER_TO_UINT(g_hash_table_lookup(per_user, GUINT_TO_POINTER(c->uid))) - 1;
    if (left == 0)
        g_hash_table_remove(per_user, GUINT_TO_POINTER(c->uid));
    else
        g_hash_table_insert(per_user, GUINT_TO_POINTER(c->uid), GUINT_TO_POINTER(left));
    return G_SOURCE_REMOVE;
}

static gpointer close_thread(gpointer c)
{
    check_free(c);
    return NULL;
}

static gboolean deadline_passed(gpointer data)
{
    Check *c = data;
    answer(c, g_error_new(NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                          "the file's filesystem did not answer within %u s (pass a pipe instead)",
                          NPD_FD_CHECK_TIMEOUT_MS / 1000));
    return G_SOURCE_REMOVE;
}

static gpointer check_thread(gpointer data)
{
    Check *c = data;
    for (guint i = 0; i < c->n && c->problem == NULL; i++) {
        struct statfs sf;
        if (fstatfs(c->fds[i], &sf) != 0) {
            c->problem = g_strdup_printf("unusable descriptor: %s", g_strerror(errno));
            break;
        }
        const char *type = npd_fd_filesystem_stalling((long)sf.f_type);
        if (type != NULL)
            c->problem = g_strdup_printf("files on %s filesystems are not accepted (pass a pipe instead)", type);
    }
    if (c->problem != NULL)
        close_fds(c);
    /* an idle source, not g_main_context_invoke: that would run the
     * answer right here whenever the main thread is between iterations */
    GSource *idle = g_idle_source_new();
    g_source_set_callback(idle, thread_answered, c, (GDestroyNotify)check_free);
    g_source_attach(idle, c->context);
    g_source_unref(idle);
    return NULL;
}

void npd_fd_filesystem_check_async(int *fds, guint n, guint32 uid, GAsyncReadyCallback callback,
                                   gpointer user_data)
{
    GTask *task = g_task_new(NULL, NULL, callback, user_data);
    g_task_set_source_tag(task, npd_fd_filesystem_check_async);
    if (per_user == NULL)
        per_user = g_hash_table_new(g_direct_hash, g_direct_equal);
    guint mine = GPOINTER_TO_UINT(g_hash_table_lookup(per_user, GUINT_TO_POINTER(uid)));
    Check *c = g_new0(Check, 1);
    c->uid = uid;
    c->context = g_main_context_ref_thread_default();
    c->n = MIN(n, NPD_FD_CHECK_MAX);
    for (guint i = 0; i < n; i++) {
        if (i < c->n)
            c->fds[i] = fds[i];
        fds[i] = -1;
    }
    g_autoptr(GError) error = NULL;
    GThread *t = NULL;
    if (n > NPD_FD_CHECK_MAX || outstanding >= NPD_FD_CHECKS || mine >= NPD_FD_CHECKS_PER_USER)
        g_set_error_literal(&error, NPD_ERROR, NPD_ERROR_BUSY,
                            "too many files are being checked (a filesystem that does not answer?): try again later");
    else
        t = g_thread_try_new("npullm-fd-check", check_thread, c, &error);
    if (t == NULL) {
        /* (closed by a thread of their own: they may be on FUSE) */
        g_thread_unref(g_thread_new("npullm-fd-close", close_thread, c));
        g_task_return_new_error(task, NPD_ERROR, NPD_ERROR_BUSY, "%s", error->message);
        g_object_unref(task);
        return;
    }
    c->task = task;
    g_thread_unref(t);
    outstanding++;
    g_hash_table_insert(per_user, GUINT_TO_POINTER(uid), GUINT_TO_POINTER(mine + 1));
    c->deadline = g_timeout_source_new(NPD_FD_CHECK_TIMEOUT_MS);
    g_source_set_callback(c->deadline, deadline_passed, c, NULL);
    g_source_attach(c->deadline, c->context);
}

int *npd_fd_filesystem_check_finish(GAsyncResult *result, GError **error)
{
    return g_task_propagate_pointer(G_TASK(result), error);
}
