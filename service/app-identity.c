/* The application behind a bus peer (app-identity.h). */
#include "app-identity.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gdesktopappinfo.h>
#include <gio/gunixfdlist.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What is read from the peer's files: far more than any real one. */
#define MAX_INFO_BYTES (64 * 1024)

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

void npd_app_identity_free(NpdAppIdentity *app)
{
    if (app == NULL)
        return;
    g_free(app->id);
    g_free(app->display_name);
    g_free(app);
}

/* An application id as the desktop entry specification has them
 * (reverse-DNS, or a plain desktop file name): letters, digits, '.', '_',
 * '-'; nothing that could read as a path or break a log line. */
static gboolean app_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 255 || id[0] == '.' || id[0] == '-')
        return FALSE;
    for (const char *p = id; *p; p++)
        if (!g_ascii_isalnum(*p) && *p != '.' && *p != '_' && *p != '-')
            return FALSE;
    return TRUE;
}

/* systemd escapes '-' in a unit's parts as \x2d. */
static gchar *unescape_unit_part(const char *s, size_t n)
{
    GString *out = g_string_sized_new(n);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' && g_ascii_isxdigit(s[i + 2]) &&
            g_ascii_isxdigit(s[i + 3])) {
            g_string_append_c(out, (char)(g_ascii_xdigit_value(s[i + 2]) * 16 + g_ascii_xdigit_value(s[i + 3])));
            i += 3;
        } else {
            g_string_append_c(out, s[i]);
        }
    }
    return g_string_free(out, FALSE);
}

gchar *npd_app_id_from_unit(const char *unit)
{
    if (!g_str_has_prefix(unit, "app-"))
        return NULL;
    const char *body = unit + 4;
    const char *end;
    if (g_str_has_suffix(body, ".scope")) {
        /* app[-LAUNCHER]-ID-RANDOM.scope: the last part is the random one */
        end = body + strlen(body) - strlen(".scope");
        const char *dash = g_strrstr_len(body, end - body, "-");
        if (dash == NULL)
            return NULL;
        end = dash;
    } else if (g_str_has_suffix(body, ".service")) {
        /* app[-LAUNCHER]-ID[@RANDOM].service */
        end = body + strlen(body) - strlen(".service");
        const char *at = memchr(body, '@', end - body);
        if (at != NULL)
            end = at;
    } else {
        return NULL;
    }
    /* the id's own dashes are escaped: an unescaped one ends the launcher */
    const char *dash = g_strrstr_len(body, end - body, "-");
    const char *start = dash != NULL ? dash + 1 : body;
    if (start >= end)
        return NULL;
    gchar *id = unescape_unit_part(start, (size_t)(end - start));
    if (!app_id_valid(id))
        g_clear_pointer(&id, g_free);
    return id;
}

static gchar *app_id_from_cgroup_path(const char *path)
{
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    /* the innermost app unit (a scope may sit inside a user service) */
    for (gint i = (gint)g_strv_length(parts) - 1; i >= 0; i--) {
        gchar *id = npd_app_id_from_unit(parts[i]);
        if (id != NULL)
            return id;
    }
    return NULL;
}

gchar *npd_app_id_from_cgroup(const char *cgroup_text)
{
    g_auto(GStrv) lines = g_strsplit(cgroup_text, "\n", -1);
    static const char *const prefixes[] = {"0::", "1:name=systemd:"};
    for (guint k = 0; k < G_N_ELEMENTS(prefixes); k++) {
        for (guint i = 0; lines[i] != NULL; i++) {
            const char *line = lines[i];
            /* v1 hierarchies number the named one variously */
            const char *path = k == 0 ? (g_str_has_prefix(line, prefixes[0]) ? line + 3 : NULL)
                                      : strstr(line, ":name=systemd:");
            if (path == NULL)
                continue;
            if (k == 1)
                path += strlen(":name=systemd:");
            gchar *id = app_id_from_cgroup_path(path);
            if (id != NULL)
                return id;
        }
    }
    return NULL;
}

/* A whole small regular file under dirfd, not following a final
 * symbolic link (one in the peer's root would resolve against ours).
 * Read to its end: proc files say they are empty. */
static gchar *read_small_file_at(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat st;
    GString *text = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        text = g_string_sized_new(4096);
        char buf[4096];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0 && text->len + (gsize)n <= MAX_INFO_BYTES)
            g_string_append_len(text, buf, n);
        if (n != 0 || memchr(text->str, '\0', text->len) != NULL) {
            g_string_free(text, TRUE); /* too long, unreadable or binary */
            text = NULL;
        }
    }
    close(fd);
    return text != NULL ? g_string_free(text, FALSE) : NULL;
}

static gchar *flatpak_app_id(int proc_fd)
{
    int root = openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return NULL;
    g_autofree gchar *text = read_small_file_at(root, ".flatpak-info");
    close(root);
    if (text == NULL)
        return NULL;
    g_autoptr(GKeyFile) kf = g_key_file_new();
    if (!g_key_file_load_from_data(kf, text, (gsize)-1, G_KEY_FILE_NONE, NULL))
        return NULL;
    gchar *id = g_key_file_get_string(kf, "Application", "name", NULL);
    if (id != NULL && !app_id_valid(id))
        g_clear_pointer(&id, g_free);
    return id;
}

static gchar *exe_name(int proc_fd)
{
    char target[4096];
    ssize_t n = readlinkat(proc_fd, "exe", target, sizeof target - 1);
    if (n <= 0)
        return NULL;
    target[n] = '\0';
    /* " (deleted)" after an upgrade replaced the file */
    char *deleted = g_strrstr(target, " (deleted)");
    if (deleted != NULL && deleted[strlen(" (deleted)")] == '\0')
        *deleted = '\0';
    gchar *base = g_path_get_basename(target);
    if (!app_id_valid(base))
        g_clear_pointer(&base, g_free);
    return base;
}

/* The process is still the one the pidfd names: /proc/PID was not a
 * reused pid's. A pidfd polls readable once its process has exited. */
static gboolean pidfd_alive(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

static void identify_process(NpdAppIdentity *app, int pidfd, guint32 pid, guint32 uid)
{
    g_autofree gchar *dir = g_strdup_printf("/proc/%u", pid);
    int proc_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (proc_fd < 0)
        return;
    struct stat st;
    gchar *id = NULL;
    const char *source = "unknown";
    /* another user's process behind a reused pid says nothing */
    if (fstat(proc_fd, &st) == 0 && st.st_uid == uid) {
        if ((id = flatpak_app_id(proc_fd)) != NULL) {
            source = "flatpak";
        } else {
            g_autofree gchar *cgroup = read_small_file_at(proc_fd, "cgroup");
            if (cgroup != NULL && (id = npd_app_id_from_cgroup(cgroup)) != NULL)
                source = "systemd";
            else if ((id = exe_name(proc_fd)) != NULL)
                source = "exe";
        }
    }
    close(proc_fd);
    if (id != NULL && (pidfd < 0 || pidfd_alive(pidfd))) {
        g_free(app->id);
        app->id = id;
        app->source = source;
    } else {
        g_free(id);
    }
}

static gchar *display_name_of(const char *id)
{
    if (id[0] == '\0')
        return NULL;
    g_autofree gchar *desktop = g_strconcat(id, ".desktop", NULL);
    g_autoptr(GDesktopAppInfo) info = g_desktop_app_info_new(desktop);
    if (info == NULL)
        return NULL;
    const char *name = g_app_info_get_display_name(G_APP_INFO(info));
    return name != NULL && g_utf8_validate(name, -1, NULL) ? g_strdup(name) : NULL;
}

/* The bus daemon's word for name: its pid, and a pidfd (handed out by
 * dbus-broker and dbus-daemon 1.15.6 or later; else opened from the pid,
 * then checked alive after reading). */
static int peer_pidfd(GDBusConnection *bus, const char *name, guint32 *pid)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GUnixFDList) fds = NULL;
    g_autoptr(GVariant) ret = g_dbus_connection_call_with_unix_fd_list_sync(
        bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionCredentials",
        g_variant_new("(s)", name), G_VARIANT_TYPE("(a{sv})"), G_DBUS_CALL_FLAGS_NONE, 5000, NULL, &fds, NULL, &error);
    if (ret == NULL) {
        g_debug("no credentials for %s: %s", name, error->message);
        return -2;
    }
    g_autoptr(GVariant) creds = g_variant_get_child_value(ret, 0);
    if (!g_variant_lookup(creds, "ProcessID", "u", pid))
        return -2;
    gint32 handle = -1;
    if (fds != NULL && g_variant_lookup(creds, "ProcessFD", "h", &handle) && handle >= 0 &&
        handle < g_unix_fd_list_get_length(fds)) {
        int fd = g_unix_fd_list_get(fds, handle, NULL);
        if (fd >= 0)
            return fd;
    }
    return (int)syscall(SYS_pidfd_open, (pid_t)*pid, 0);
}

NpdAppIdentity *npd_app_identity_lookup(GDBusConnection *bus, const char *name, guint32 uid)
{
    NpdAppIdentity *app = g_new0(NpdAppIdentity, 1);
    app->id = g_strdup("");
    app->source = "unknown";
    guint32 pid = 0;
    int pidfd = peer_pidfd(bus, name, &pid);
    if (pidfd == -2 || pid == 0)
        return app;
    /* without pidfds (kernels before 5.3) the pid is read as is */
    if (pidfd >= 0 || errno == ENOSYS)
        identify_process(app, pidfd, pid, uid);
    if (pidfd >= 0)
        close(pidfd);
    app->display_name = display_name_of(app->id);
    g_debug("%s is application '%s' (%s)", name, app->id, app->source);
    return app;
}
