#include "client-models.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gunixfdlist.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ollama-store.h"

#define BUS_NAME "org.npullm"
#define MANAGER_PATH "/org/npullm"
#define MANAGER_IFACE "org.npullm.Manager"
#define JOB_IFACE "org.npullm.ModelJob"
#define BAR_WIDTH 30
/* Installing copies the whole file before answering Finished: no call
 * timeout for it, only for the calls themselves. */
#define CALL_TIMEOUT_MS (10 * 60 * 1000)

typedef struct {
    GMainLoop *loop;
    gchar *job;        /* our job's path, once AddModel answered */
    GPtrArray *early;  /* signals (path, member, params) seen before that */
    gboolean bar;      /* stderr is a terminal */
    gboolean finished;
    gchar *error_name;
    gchar *error_message;
} AddState;

static void draw_bar(guint64 done, guint64 total)
{
    double f = total > 0 ? (double)done / (double)total : 1.0;
    int filled = (int)(f * BAR_WIDTH);
    g_autofree gchar *d = g_format_size(done);
    g_autofree gchar *t = g_format_size(total);
    fprintf(stderr, "\r[%.*s%*s] %3d%% %s / %s ", filled, "##############################", BAR_WIDTH - filled, "",
            (int)(f * 100.0), d, t);
    fflush(stderr);
}

static void handle_job_signal(AddState *s, const char *member, GVariant *params)
{
    if (strcmp(member, "Progress") == 0 && g_variant_is_of_type(params, G_VARIANT_TYPE("(tt)"))) {
        guint64 done = 0, total = 0;
        g_variant_get(params, "(tt)", &done, &total);
        if (s->bar)
            draw_bar(done, total);
    } else if (strcmp(member, "Finished") == 0 && g_variant_is_of_type(params, G_VARIANT_TYPE("(ss)"))) {
        g_variant_get(params, "(ss)", &s->error_name, &s->error_message);
        s->finished = TRUE;
        if (s->bar)
            fputc('\n', stderr);
        g_main_loop_quit(s->loop);
    }
}

static void on_job_signal(GDBusConnection *bus, const char *sender, const char *path, const char *iface,
                          const char *member, GVariant *params, gpointer data)
{
    AddState *s = data;
    if (s->finished)
        return;
    if (s->job == NULL) {
        /* the reply naming our job has not been seen yet: keep it */
        g_ptr_array_add(s->early, g_variant_ref_sink(g_variant_new("(ss@*)", path, member, params)));
        return;
    }
    if (strcmp(path, s->job) == 0)
        handle_job_signal(s, member, params);
}

static int report_error(NpcOutput *out, const GError *error)
{
    npc_output_error(out, error);
    return npc_exit_code_for_error(error);
}

/* AddModel with fd as the file (and proj_fd as its projector when >= 0),
 * then Progress until Finished. */
static int add_fd(GDBusConnection *bus, const char *daemon, NpcOutput *out, int fd, int proj_fd, const char *name)
{
    AddState s = {.loop = g_main_loop_new(NULL, FALSE), .early = g_ptr_array_new_with_free_func(
                                                             (GDestroyNotify)g_variant_unref),
                  .bar = isatty(STDERR_FILENO) && !out->json};
    guint sub = g_dbus_connection_signal_subscribe(bus, daemon, JOB_IFACE, NULL, NULL, NULL,
                                                   G_DBUS_SIGNAL_FLAGS_NONE, on_job_signal, &s, NULL);
    g_autoptr(GUnixFDList) fds = g_unix_fd_list_new();
    g_autoptr(GError) error = NULL;
    int index = g_unix_fd_list_append(fds, fd, &error);
    GVariantBuilder options;
    g_variant_builder_init(&options, G_VARIANT_TYPE_VARDICT);
    if (index >= 0 && proj_fd >= 0) {
        int proj_index = g_unix_fd_list_append(fds, proj_fd, &error);
        if (proj_index < 0)
            index = -1;
        else
            g_variant_builder_add(&options, "{sv}", "projector", g_variant_new_handle(proj_index));
    }
    g_autoptr(GVariant) reply = NULL;
    if (index < 0)
        g_variant_builder_clear(&options);
    else
        reply = g_dbus_connection_call_with_unix_fd_list_sync(
            bus, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "AddModel",
            g_variant_new("(hsa{sv})", index, name, &options),
            G_VARIANT_TYPE("(o)"), G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION, CALL_TIMEOUT_MS, fds, NULL,
            NULL, &error);
    int code = NPC_EXIT_OK;
    if (reply == NULL) {
        code = report_error(out, error);
    } else {
        g_variant_get(reply, "(o)", &s.job);
        for (guint i = 0; i < s.early->len && !s.finished; i++) {
            const char *path = NULL, *member = NULL;
            g_autoptr(GVariant) params = NULL;
            g_variant_get(s.early->pdata[i], "(&s&s@*)", &path, &member, &params);
            if (strcmp(path, s.job) == 0)
                handle_job_signal(&s, member, params);
        }
        if (!s.finished)
            g_main_loop_run(s.loop);
        if (s.error_name != NULL && s.error_name[0] != '\0') {
            g_autoptr(GError) job_error = g_dbus_error_new_for_dbus_error(s.error_name, s.error_message);
            code = report_error(out, job_error);
        } else {
            g_autofree gchar *msg = g_strdup_printf("installed model %s", name);
            npc_output_message(out, "done", msg);
        }
    }
    g_dbus_connection_signal_unsubscribe(bus, sub);
    g_main_loop_unref(s.loop);
    g_ptr_array_unref(s.early);
    g_free(s.job);
    g_free(s.error_name);
    g_free(s.error_message);
    return code;
}

static int open_or_say(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        g_printerr("npullm-client: cannot open %s: %s\n", path, g_strerror(errno));
    return fd;
}

/* Installs the file at path, with the projector at proj_path unless NULL. */
static int add_path(GDBusConnection *bus, const char *daemon, NpcOutput *out, const char *path,
                    const char *proj_path, const char *name)
{
    int fd = open_or_say(path);
    int proj_fd = fd >= 0 && proj_path != NULL ? open_or_say(proj_path) : -1;
    int code = NPC_EXIT_ERROR;
    if (fd >= 0 && (proj_path == NULL || proj_fd >= 0))
        code = add_fd(bus, daemon, out, fd, proj_fd, name);
    if (proj_fd >= 0)
        close(proj_fd);
    if (fd >= 0)
        close(fd);
    return code;
}

/* "NAME.gguf" -> "NAME" */
static gchar *name_from_file(const char *path)
{
    g_autofree gchar *base = g_path_get_basename(path);
    if (g_str_has_suffix(base, ".gguf"))
        base[strlen(base) - strlen(".gguf")] = '\0';
    return g_steal_pointer(&base);
}

static gchar *ollama_store(void)
{
    const char *env = g_getenv("OLLAMA_MODELS");
    if (env != NULL && env[0] != '\0')
        return g_strdup(env);
    return g_build_filename(g_get_home_dir(), ".ollama", "models", NULL);
}

static int import_ollama(GDBusConnection *bus, const char *daemon, const NpcOptions *opts, NpcOutput *out,
                         const char *name_tag)
{
    g_autofree gchar *store = ollama_store();
    g_autoptr(GError) error = NULL;
    g_autoptr(NpdOllamaModel) m = npd_ollama_store_read(store, name_tag, &error);
    if (m == NULL) {
        g_printerr("npullm-client: %s in the Ollama store %s\n", error->message, store);
        return NPC_EXIT_NO_SUCH_MODEL;
    }
    return add_path(bus, daemon, out, m->model, m->projector, opts->name != NULL ? opts->name : m->name);
}

static int remove_model(GDBusConnection *bus, NpcOutput *out, const char *name)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GVariant) reply = g_dbus_connection_call_sync(
        bus, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "RemoveModel", g_variant_new("(s)", name), NULL,
        G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION, CALL_TIMEOUT_MS, NULL, &error);
    if (reply == NULL)
        return report_error(out, error);
    g_autofree gchar *msg = g_strdup_printf("removed model %s", name);
    npc_output_message(out, "done", msg);
    return NPC_EXIT_OK;
}

int npc_models_run(GDBusConnection *bus, const char *daemon, const NpcOptions *opts, NpcOutput *out,
                   const char *command, int argc, char **argv)
{
    if (argc != 1) {
        g_printerr("npullm-client: %s\n", strcmp(command, "add") == 0      ? "add FILE [--name NAME]"
                                          : strcmp(command, "remove") == 0 ? "remove NAME"
                                                                           : "import-ollama NAME[:TAG] [--name NAME]");
        return NPC_EXIT_USAGE;
    }
    if (strcmp(command, "remove") == 0)
        return remove_model(bus, out, argv[0]);
    if (strcmp(command, "import-ollama") == 0)
        return import_ollama(bus, daemon, opts, out, argv[0]);
    g_autofree gchar *name = opts->name != NULL ? g_strdup(opts->name) : name_from_file(argv[0]);
    return add_path(bus, daemon, out, argv[0], NULL, name);
}
