#include "model-install.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "call-fds.h"
#include "dbus-errors.h"
#include "request-options.h"

#define COPY_CHUNK (4u << 20)
/* Progress signals: at most one per percent of the file. */
#define PROGRESS_STEPS 100

/* One file of an install: the model, or its vision projector. */
typedef struct {
    const char *what; /* the argument it came from, for messages */
    int fd;
    guint64 size;
    gchar *target;    /* dir/NAME.gguf, dir/NAME.mmproj.gguf */
    gchar *tmp;       /* the hidden copy while installing */
} Part;

enum { PART_MODEL, PART_PROJECTOR, N_PARTS };

typedef struct {
    NpdDaemon *daemon;
    NpdPendingCall *call; /* once running: keeps the caller's pending count (and --exit-on-idle away) */
    gchar *caller;
    gchar *name;
    gchar *dir;    /* the install directory, resolved */
    Part parts[N_PARTS]; /* fd -1: absent */
    guint64 size;  /* of all parts */
    guint64 copied; /* of the parts before the one being copied */
    gchar *path;   /* the job object */
    guint reg_id;
    gint refs;     /* the install and each pending Progress signal */
} Job;

typedef struct {
    Job *job;
    guint64 done;
} Progress;

static guint64 next_job_id = 1;

static void job_free(Job *j)
{
    if (!g_atomic_int_dec_and_test(&j->refs))
        return;
    if (j->reg_id != 0)
        g_dbus_connection_unregister_object(j->daemon->bus, j->reg_id);
    for (int i = 0; i < N_PARTS; i++) {
        if (j->parts[i].fd >= 0)
            close(j->parts[i].fd);
        g_free(j->parts[i].target);
        g_free(j->parts[i].tmp);
    }
    if (j->call != NULL)
        npd_pending_call_free(j->call);
    g_free(j->caller);
    g_free(j->name);
    g_free(j->dir);
    g_free(j->path);
    g_free(j);
}

/* The directory AddModel installs into (the first model directory),
 * resolved; created when missing. */
static gchar *install_dir(NpdDaemon *d, GError **error)
{
    const char *dir = d->cfg->model_dirs != NULL ? d->cfg->model_dirs[0] : NULL;
    if (dir == NULL || dir[0] == '\0') {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED, "no model directory is configured");
        return NULL;
    }
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INTERNAL, "cannot create the model directory %s: %s", dir,
                    g_strerror(errno));
        return NULL;
    }
    char *real = realpath(dir, NULL);
    gchar *out = g_strdup(real);
    free(real);
    if (out == NULL)
        g_set_error(error, NPD_ERROR, NPD_ERROR_INTERNAL, "cannot resolve the model directory %s: %s", dir,
                    g_strerror(errno));
    return out;
}

static gboolean set_errno_error(GError **error, int err, const char *what, const char *dir)
{
    if (err == ENOSPC || err == EDQUOT)
        g_set_error(error, NPD_ERROR, NPD_ERROR_NO_SPACE, "not enough space in the model directory %s while %s",
                    dir, what);
    else
        g_set_error(error, NPD_ERROR, NPD_ERROR_INTERNAL, "%s in %s failed: %s", what, dir, g_strerror(err));
    return FALSE;
}

/* ---- the copy, on a worker thread --------------------------------------- */

static gboolean emit_progress(gpointer data)
{
    Progress *p = data;
    Job *j = p->job;
    g_dbus_connection_emit_signal(j->daemon->bus, j->caller, j->path, NPD_MODEL_JOB_IFACE, "Progress",
                                  g_variant_new("(tt)", p->done, j->size), NULL);
    return G_SOURCE_REMOVE;
}

static void progress_free(gpointer data)
{
    Progress *p = data;
    job_free(p->job);
    g_free(p);
}

static void post_progress(Job *j, guint64 done)
{
    Progress *p = g_new0(Progress, 1);
    g_atomic_int_inc(&j->refs);
    p->job = j;
    p->done = done;
    g_main_context_invoke_full(NULL, G_PRIORITY_DEFAULT, emit_progress, p, progress_free);
}

static gboolean write_all(int fd, const guint8 *buf, gsize n, GError **error, const char *dir)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return set_errno_error(error, errno, "writing the model", dir);
        buf += w;
        n -= (gsize)w;
    }
    return TRUE;
}

static gboolean copy_part(Job *j, Part *pt, int out, GError **error)
{
    int r = posix_fallocate(out, 0, (off_t)pt->size);
    if (r != 0 && r != EOPNOTSUPP && r != EINVAL)
        return set_errno_error(error, r, "reserving space for the model", j->dir);
    g_autofree guint8 *buf = g_malloc(COPY_CHUNK);
    guint64 off = 0, step = MAX(j->size / PROGRESS_STEPS, 1), next = step;
    while (off < pt->size) {
        ssize_t n = pread(pt->fd, buf, (size_t)MIN((guint64)COPY_CHUNK, pt->size - off), (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: reading it failed: %s", pt->what,
                        g_strerror(errno));
            return FALSE;
        }
        if (n == 0) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                        "%s: it ended at byte %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " (changed while copied)",
                        pt->what, off, pt->size);
            return FALSE;
        }
        if (!write_all(out, buf, (gsize)n, error, j->dir))
            return FALSE;
        off += (guint64)n;
        if (off >= next || off == pt->size) {
            post_progress(j, j->copied + off);
            next = off + step;
        }
    }
    j->copied += pt->size;
    if (fsync(out) != 0)
        return set_errno_error(error, errno, "flushing the model to disk", j->dir);
    return TRUE;
}

/* pt copied into a new hidden file beside its target (pt->tmp). */
static gboolean stage_part(Job *j, Part *pt, GError **error)
{
    g_autofree gchar *base = g_path_get_basename(pt->target);
    pt->tmp = g_strdup_printf("%s/.%s.XXXXXX", j->dir, base);
    int out = g_mkstemp_full(pt->tmp, O_RDWR | O_CLOEXEC, 0644);
    if (out < 0) {
        g_clear_pointer(&pt->tmp, g_free);
        return set_errno_error(error, errno, "creating the model file", j->dir);
    }
    gboolean ok = fchmod(out, 0644) == 0 || set_errno_error(error, errno, "setting the model's mode", j->dir);
    ok = ok && copy_part(j, pt, out, error);
    close(out);
    return ok;
}

/* The loader's verdict on the copy: the same checks as a model load. */
static gboolean check_model(const char *tmp, npl_model_facts *out, GError **error)
{
    npl_model_facts facts;
    npl_error err;
    npl_error_clear(&err);
    npl_status st = npl_model_probe(tmp, &facts, &err);
    const char *msg = err.message;
    if (g_str_has_prefix(msg, tmp) && g_str_has_prefix(msg + strlen(tmp), ": "))
        msg += strlen(tmp) + 2;
    if (st == NPL_ERR_FORMAT) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "file: not a usable GGUF model: %s", msg);
        return FALSE;
    }
    if (st != NPL_OK) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INTERNAL, "checking the model failed: %s", msg);
        return FALSE;
    }
    if (facts.is_projector) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                            "file: a vision projector, not a model");
        return FALSE;
    }
    if (!facts.supported) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED, "file: %s", facts.reason);
        return FALSE;
    }
    *out = facts;
    return TRUE;
}

/* The projector must be one the catalog would pair with the model. */
static gboolean check_projector(const char *tmp, const npl_model_facts *model, GError **error)
{
    npl_model_facts facts;
    npl_error err;
    npl_error_clear(&err);
    if (npl_model_probe(tmp, &facts, &err) != NPL_OK || !facts.is_projector || !facts.supported ||
        !npd_model_projector_fits(model, &facts)) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "projector: not a supported vision projector for this model%s%s",
                    facts.reason[0] ? ": " : "", facts.reason);
        return FALSE;
    }
    return TRUE;
}

static gboolean sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return FALSE;
    gboolean ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

/* Free space, hidden temporary files, the copies, the checks, then the
 * renames that make the model appear whole (never over another file; the
 * projector first, so that the model never shows without it). */
static gboolean install(Job *j, GError **error)
{
    struct statvfs vfs;
    if (statvfs(j->dir, &vfs) == 0) {
        guint64 avail = (guint64)vfs.f_bavail * vfs.f_frsize;
        if (avail < j->size + NPD_INSTALL_SPARE_BYTES) {
            g_autofree gchar *need = g_format_size(j->size + NPD_INSTALL_SPARE_BYTES);
            g_autofree gchar *have = g_format_size(avail);
            g_set_error(error, NPD_ERROR, NPD_ERROR_NO_SPACE,
                        "not enough space in the model directory %s: %s needed, %s free", j->dir, need, have);
            return FALSE;
        }
    }
    Part *model = &j->parts[PART_MODEL], *proj = &j->parts[PART_PROJECTOR];
    npl_model_facts facts;
    post_progress(j, 0);
    gboolean ok = stage_part(j, model, error) && (proj->fd < 0 || stage_part(j, proj, error)) &&
                  check_model(model->tmp, &facts, error) &&
                  (proj->fd < 0 || check_projector(proj->tmp, &facts, error));
    gboolean proj_placed = FALSE;
    for (int i = N_PARTS - 1; ok && i >= 0; i--) {
        Part *pt = &j->parts[i];
        if (pt->fd < 0)
            continue;
        if (renameat2(AT_FDCWD, pt->tmp, AT_FDCWD, pt->target, RENAME_NOREPLACE) != 0) {
            if (errno == EEXIST)
                g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                            "name: a model named '%s' (or its projector) already exists", j->name);
            else
                set_errno_error(error, errno, "renaming the model into place", j->dir);
            ok = FALSE;
        } else {
            g_clear_pointer(&pt->tmp, g_free);
            proj_placed = proj_placed || i == PART_PROJECTOR;
        }
    }
    if (!ok && proj_placed)
        unlink(proj->target);
    for (int i = 0; i < N_PARTS; i++)
        if (j->parts[i].tmp != NULL)
            unlink(j->parts[i].tmp);
    if (ok)
        sync_dir(j->dir);
    return ok;
}

/* One install at a time: two that each fit alone would otherwise both
 * pass the free-space check and then both run out (their fallocate or
 * writes interleaved); the second waits and checks what the first left. */
static GMutex install_lock;

static void install_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    GError *error = NULL;
    g_mutex_lock(&install_lock);
    gboolean ok = install(data, &error);
    g_mutex_unlock(&install_lock);
    if (ok)
        g_task_return_boolean(task, TRUE);
    else
        g_task_return_error(task, error);
}

/* ---- the job, on the main thread ----------------------------------------- */

static void install_done(GObject *source, GAsyncResult *res, gpointer data)
{
    Job *j = data;
    g_autoptr(GError) error = NULL;
    gboolean ok = g_task_propagate_boolean(G_TASK(res), &error);
    if (ok)
        g_message("installed model %s (%" G_GUINT64_FORMAT " bytes%s) for %s", j->name, j->size,
                  j->parts[PART_PROJECTOR].fd >= 0 ? ", with its projector" : "", j->caller);
    else
        g_message("installing model %s for %s failed: %s", j->name, j->caller, error->message);
    g_autofree gchar *error_name = ok ? g_strdup("") : g_dbus_error_encode_gerror(error);
    g_dbus_connection_emit_signal(j->daemon->bus, j->caller, j->path, NPD_MODEL_JOB_IFACE, "Finished",
                                  g_variant_new("(ss)", error_name, ok ? "" : error->message), NULL);
    /* gone from the bus now, even while a Progress signal is still queued */
    g_dbus_connection_unregister_object(j->daemon->bus, j->reg_id);
    j->reg_id = 0;
    /* the new model is listed (and ModelsChanged sent) right away */
    npd_model_catalog_rescan(j->daemon->catalog);
    job_free(j);
}

static const GDBusInterfaceVTable job_vtable = {NULL, NULL, NULL, {NULL}};

gboolean npd_model_add_run(NpdPendingCall *p)
{
    Job *j = g_steal_pointer(&p->op);
    GDBusMethodInvocation *inv = p->invocation;
    j->call = p;
    NpdDaemon *d = j->daemon;
    j->path = g_strdup_printf(NPD_MODEL_JOB_PATH_PREFIX "%" G_GUINT64_FORMAT, next_job_id++);
    GDBusInterfaceInfo *info = g_dbus_node_info_lookup_interface(d->introspection, NPD_MODEL_JOB_IFACE);
    GError *error = NULL;
    j->reg_id = g_dbus_connection_register_object(d->bus, j->path, info, &job_vtable, NULL, NULL, &error);
    if (j->reg_id == 0) {
        g_dbus_method_invocation_return_gerror(inv, error);
        g_error_free(error);
        job_free(j);
        return TRUE; /* freed with the job */
    }
    g_dbus_method_invocation_return_value(inv, g_variant_new("(o)", j->path));
    GTask *task = g_task_new(NULL, NULL, install_done, j);
    g_task_set_task_data(task, j, NULL);
    g_task_run_in_thread(task, install_thread);
    g_object_unref(task);
    return TRUE; /* kept by the job until the copy ends */
}

static gboolean name_free(NpdDaemon *d, const char *name, GError **error)
{
    g_autoptr(GError) local = NULL;
    if (npd_model_catalog_lookup(d->catalog, name, &local) == NULL &&
        g_error_matches(local, NPD_ERROR, NPD_ERROR_NO_SUCH_MODEL))
        return TRUE;
    g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "name: a model named '%s' already exists", name);
    return FALSE;
}

/* A part's descriptor (taken from the call): a regular file open for
 * reading, not empty. */
static gboolean check_part(Part *pt, GError **error)
{
    struct stat st;
    int fl = fcntl(pt->fd, F_GETFL);
    if (fstat(pt->fd, &st) != 0 || !S_ISREG(st.st_mode) || fl < 0 || (fl & O_ACCMODE) == O_WRONLY) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: not a regular file open for reading",
                    pt->what);
        return FALSE;
    }
    if (st.st_size <= 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: empty", pt->what);
        return FALSE;
    }
    pt->size = (guint64)st.st_size;
    return TRUE;
}

/* options: "projector" h, the vision projector installed beside it;
 * *projector is its handle (-1: none). */
static gboolean parse_options(GVariant *options, gint32 *projector, GError **error)
{
    GVariantIter it;
    const char *key;
    GVariant *value;
    g_variant_iter_init(&it, options);
    while (g_variant_iter_next(&it, "{&sv}", &key, &value)) {
        g_autoptr(GVariant) v = value;
        if (strcmp(key, "projector") != 0) {
            g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "%s: unknown option", key);
            return FALSE;
        }
        if (!g_variant_is_of_type(v, G_VARIANT_TYPE_HANDLE) || *projector >= 0) {
            g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                                "projector: expected one file descriptor (h)");
            return FALSE;
        }
        *projector = g_variant_get_handle(v);
        if (*projector < 0) {
            g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                                "projector: no file descriptor passed");
            return FALSE;
        }
    }
    return TRUE;
}

/* Once their filesystems are known not to stall: the parts' descriptors
 * (the model's, then the projector's when given) taken and checked. */
static gboolean parts_checked(NpdPendingCall *p, GError **error)
{
    Job *j = p->op;
    for (guint i = 0; i < p->unchecked_fds->len; i++) {
        j->parts[i].fd = g_array_index(p->unchecked_fds, int, i);
        g_array_index(p->unchecked_fds, int, i) = -1;
    }
    for (guint i = 0; i < N_PARTS; i++) {
        if (j->parts[i].fd < 0)
            continue;
        if (!check_part(&j->parts[i], error))
            return FALSE;
        j->size += j->parts[i].size;
    }
    return TRUE;
}

gboolean npd_model_add_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                               GError **error)
{
    Job *j = g_new0(Job, 1);
    j->refs = 1;
    j->daemon = d;
    j->parts[PART_MODEL] = (Part){.what = "file", .fd = -1};
    j->parts[PART_PROJECTOR] = (Part){.what = "projector", .fd = -1};
    j->caller = g_strdup(g_dbus_method_invocation_get_sender(inv));
    p->op = j;
    p->op_free = (GDestroyNotify)job_free;
    gint32 index = -1;
    const char *name = NULL;
    g_autoptr(GVariant) options = NULL;
    g_variant_get(params, "(h&s@a{sv})", &index, &name, &options);
    if (!npd_model_name_valid(name)) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "name: not a valid model name");
        return FALSE;
    }
    if (npd_model_name_is_projectors(name)) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT,
                    "name: '%s' names a vision projector's file (ending in '.mmproj' or starting with 'mmproj'), "
                    "never listed as a model",
                    name);
        return FALSE;
    }
    gint32 handles[N_PARTS] = {[PART_MODEL] = index, [PART_PROJECTOR] = -1};
    if (!parse_options(options, &handles[PART_PROJECTOR], error))
        return FALSE;
    guint n = handles[PART_PROJECTOR] >= 0 ? 2 : 1;
    int fds[N_PARTS];
    if (!npd_call_fds_take(inv, handles, n, fds, error))
        return FALSE;
    npd_pending_call_take_fds(p, fds, n, parts_checked);
    j->name = g_strdup(name);
    if (!name_free(d, name, error) || (j->dir = install_dir(d, error)) == NULL)
        return FALSE;
    for (guint i = 0; i < n; i++) {
        g_autofree gchar *file = g_strconcat(name, i == PART_MODEL ? ".gguf" : ".mmproj.gguf", NULL);
        j->parts[i].target = g_build_filename(j->dir, file, NULL);
    }
    return TRUE;
}

/* ---- RemoveModel ------------------------------------------------------- */

typedef struct {
    gchar *name;
    gchar *path;
    gchar *projector; /* NAME.mmproj.gguf installed with it, or NULL */
} Removal;

static void removal_free(Removal *r)
{
    g_free(r->name);
    g_free(r->path);
    g_free(r->projector);
    g_free(r);
}

gboolean npd_model_remove_run(NpdPendingCall *p)
{
    Removal *r = p->op;
    if (unlink(r->path) != 0) {
        g_dbus_method_invocation_return_error(p->invocation, NPD_ERROR, NPD_ERROR_INTERNAL,
                                              "removing model '%s' failed: %s", r->name, g_strerror(errno));
        return FALSE;
    }
    g_message("removed model %s (%s) for %s", r->name, r->path, p->client->name);
    if (r->projector != NULL)
        unlink(r->projector);
    g_dbus_method_invocation_return_value(p->invocation, NULL);
    npd_model_catalog_rescan(p->daemon->catalog);
    return FALSE;
}

gboolean npd_model_remove_prepare(NpdDaemon *d, GDBusMethodInvocation *inv, NpdPendingCall *p, GVariant *params,
                                  GError **error)
{
    Removal *r = g_new0(Removal, 1);
    p->op = r;
    p->op_free = (GDestroyNotify)removal_free;
    const char *name = NULL;
    g_variant_get(params, "(&s)", &name);
    if (!npd_model_name_valid(name)) {
        g_set_error_literal(error, NPD_ERROR, NPD_ERROR_INVALID_ARGUMENT, "name: not a valid model name");
        return FALSE;
    }
    r->name = g_strdup(name);
    /* every listed model, also one that cannot be used (lookup refuses those) */
    g_autoptr(GPtrArray) models = npd_model_catalog_list(d->catalog);
    const NpdModelEntry *e = NULL;
    for (guint i = 0; i < models->len && e == NULL; i++)
        if (strcmp(((const NpdModelEntry *)models->pdata[i])->name, name) == 0)
            e = models->pdata[i];
    if (e == NULL) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_NO_SUCH_MODEL, "no model named '%s'", name);
        return FALSE;
    }
    g_autofree gchar *dir = install_dir(d, error);
    if (dir == NULL)
        return FALSE;
    g_autofree gchar *file = g_strconcat(name, ".gguf", NULL);
    g_autofree gchar *managed = g_build_filename(dir, file, NULL);
    if (strcmp(e->path, managed) != 0) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_NOT_SUPPORTED,
                    "model '%s' was not installed with AddModel (it is not in %s): remove its file yourself", name,
                    dir);
        return FALSE;
    }
    if (npd_manager_model_is_loaded(d->manager, name)) {
        g_set_error(error, NPD_ERROR, NPD_ERROR_BUSY, "model '%s' is loaded: unload it first", name);
        return FALSE;
    }
    g_autofree gchar *proj_file = g_strconcat(name, ".mmproj.gguf", NULL);
    g_autofree gchar *proj = g_build_filename(dir, proj_file, NULL);
    if (g_strcmp0(e->projector, proj) == 0)
        r->projector = g_steal_pointer(&proj);
    r->path = g_steal_pointer(&managed);
    return TRUE;
}

void npd_model_install_sweep(NpdDaemon *d)
{
    const char *dir = d->cfg->model_dirs != NULL ? d->cfg->model_dirs[0] : NULL;
    g_autoptr(GDir) gd = dir != NULL && dir[0] != '\0' ? g_dir_open(dir, 0, NULL) : NULL;
    const char *f;
    while (gd != NULL && (f = g_dir_read_name(gd)) != NULL) {
        if (f[0] != '.' || strstr(f, ".gguf.") == NULL)
            continue;
        g_autofree gchar *path = g_build_filename(dir, f, NULL);
        if (unlink(path) == 0)
            g_message("removed %s, left by an install that did not finish", path);
    }
}
