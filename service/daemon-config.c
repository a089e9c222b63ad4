#include "daemon-config.h"

#include <string.h>
#include <unistd.h>

#ifndef NPD_DEFAULT_CONFIG_PATH
#define NPD_DEFAULT_CONFIG_PATH "/etc/npullm/npullm.conf"
#endif
#ifndef NPD_DEFAULT_MODEL_DIRS
#define NPD_DEFAULT_MODEL_DIRS "/var/lib/npullm/models:/usr/share/npullm/models"
#endif

/* Command-line values; -1 / NULL mean "not given" so the file decides. */
typedef struct {
    gboolean session_bus;
    gboolean verbose;
    gchar *config_path;
    gchar **model_dirs;
    gchar *default_model;
    gint idle_timeout;
    gint exit_on_idle;
    gchar *device;
    gint threads;
} CommandLine;

static void config_set_defaults(NpdConfig *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->model_dirs = g_strsplit(NPD_DEFAULT_MODEL_DIRS, ":", -1);
    cfg->idle_timeout = 300;
    cfg->device = NPD_DEVICE_AUTO;
    cfg->prefill_chunk = 64;
    cfg->weight_cache = TRUE;
    cfg->max_context = 4096;
    cfg->default_max_tokens = 1024;
    cfg->max_running = 4;
    cfg->max_queued = 32;
    cfg->max_per_client = 8;
    cfg->max_prompt_bytes = 1024 * 1024;
    cfg->max_messages = 256;
    cfg->max_image_bytes = 32 * 1024 * 1024;
    cfg->max_per_user = 16;
    cfg->max_calls_per_user = 16;
    cfg->max_images_per_user = 2;
    cfg->max_images_in_flight = 4;
    cfg->max_image_memory = 512 * 1024 * 1024;
    cfg->auth_timeout = 30;
    cfg->kv_cache_mib = NPD_KV_CACHE_AUTO;
    npd_power_config_defaults(&cfg->power);
}

static gboolean parse_device(const char *text, NpdDevice *out, GError **error)
{
    if (g_strcmp0(text, "auto") == 0) {
        *out = NPD_DEVICE_AUTO;
    } else if (g_strcmp0(text, "cpu") == 0) {
        *out = NPD_DEVICE_CPU;
    } else if (g_strcmp0(text, "npu") == 0) {
        *out = NPD_DEVICE_NPU;
    } else if (g_strcmp0(text, "npu-emu") == 0) {
        *out = NPD_DEVICE_NPU_EMU;
    } else {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "device '%s': expected auto, cpu, npu or npu-emu", text);
        return FALSE;
    }
    return TRUE;
}

/* Reads an unsigned key within [min, max]; a missing key keeps *out. */
static gboolean read_uint(GKeyFile *kf, const char *group, const char *key, guint64 min, guint64 max,
                          guint64 *out, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree gchar *text = g_key_file_get_value(kf, group, key, &local);
    if (text == NULL)
        return TRUE;
    guint64 value = 0;
    if (!g_ascii_string_to_unsigned(g_strstrip(text), 10, min, max, &value, NULL)) {
        g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                    "[%s] %s=%s: expected an integer from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT,
                    group, key, text, min, max);
        return FALSE;
    }
    *out = value;
    return TRUE;
}

#define READ_UINT(kf, group, key, min, max, field)                                  \
    do {                                                                             \
        guint64 v_ = (field);                                                        \
        if (!read_uint((kf), (group), (key), (min), (max), &v_, error))              \
            return FALSE;                                                            \
        (field) = v_;                                                                \
    } while (0)

static gboolean config_read_file(NpdConfig *cfg, const char *path, gboolean must_exist, GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) local = NULL;
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &local)) {
        if (!must_exist && g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return TRUE;
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "%s: ", path);
        return FALSE;
    }
    cfg->config_path = g_strdup(path);

    if (g_key_file_has_key(kf, "Models", "Directories", NULL)) {
        gchar **dirs = g_key_file_get_string_list(kf, "Models", "Directories", NULL, error);
        if (dirs == NULL)
            return FALSE;
        g_strfreev(cfg->model_dirs);
        cfg->model_dirs = dirs;
    }
    if (g_key_file_has_key(kf, "Models", "Default", NULL)) {
        g_free(cfg->default_model);
        cfg->default_model = g_key_file_get_string(kf, "Models", "Default", error);
        if (cfg->default_model == NULL)
            return FALSE;
        g_strstrip(cfg->default_model);
    }
    READ_UINT(kf, "Models", "IdleTimeout", 0, G_MAXINT32, cfg->idle_timeout);
    READ_UINT(kf, "Models", "MaxContext", 16, 1u << 20, cfg->max_context);
    READ_UINT(kf, "Models", "DefaultMaxTokens", 1, 1u << 20, cfg->default_max_tokens);
    if (g_key_file_has_key(kf, "Engine", "Device", NULL)) {
        g_autofree gchar *device = g_key_file_get_string(kf, "Engine", "Device", error);
        if (device == NULL || !parse_device(g_strstrip(device), &cfg->device, error))
            return FALSE;
    }
    READ_UINT(kf, "Engine", "Threads", 0, 1024, cfg->threads);
    READ_UINT(kf, "Engine", "PrefillChunk", 1, 65536, cfg->prefill_chunk);
    if (g_key_file_has_key(kf, "Engine", "WeightCache", NULL)) {
        g_autoptr(GError) bad = NULL;
        cfg->weight_cache = g_key_file_get_boolean(kf, "Engine", "WeightCache", &bad);
        if (bad != NULL) {
            g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE,
                        "%s: [Engine] WeightCache must be true or false", path);
            return FALSE;
        }
    }
    if (!npd_power_config_read(&cfg->power, kf, error))
        return FALSE;
    READ_UINT(kf, "Limits", "MaxRunning", 1, 256, cfg->max_running);
    READ_UINT(kf, "Limits", "MaxQueued", 0, 65536, cfg->max_queued);
    READ_UINT(kf, "Limits", "MaxPerClient", 1, 65536, cfg->max_per_client);
    READ_UINT(kf, "Limits", "MaxPromptBytes", 1, 64u * 1024 * 1024, cfg->max_prompt_bytes);
    READ_UINT(kf, "Limits", "MaxMessages", 1, 65536, cfg->max_messages);
    READ_UINT(kf, "Limits", "MaxImageBytes", 1, G_MAXINT32, cfg->max_image_bytes);
    READ_UINT(kf, "Limits", "MaxPerUser", 1, 65536, cfg->max_per_user);
    READ_UINT(kf, "Limits", "MaxCallsPerUser", 1, 65536, cfg->max_calls_per_user);
    READ_UINT(kf, "Limits", "MaxImagesPerUser", 1, 1024, cfg->max_images_per_user);
    READ_UINT(kf, "Limits", "MaxImagesInFlight", 1, 1024, cfg->max_images_in_flight);
    READ_UINT(kf, "Limits", "MaxImageMemory", 1024 * 1024, G_MAXUINT64, cfg->max_image_memory);
    READ_UINT(kf, "Limits", "KvCacheMiB", 0, 1u << 24, cfg->kv_cache_mib);
    READ_UINT(kf, "Authorization", "Timeout", 1, 3600, cfg->auth_timeout);
    return TRUE;
}

gboolean npd_config_load(NpdConfig *cfg, int *argc, char ***argv, GError **error)
{
    CommandLine cl = {.idle_timeout = -1, .exit_on_idle = -1, .threads = -1};
    GOptionEntry entries[] = {
        {"session", 0, 0, G_OPTION_ARG_NONE, &cl.session_bus,
         "Use the session bus instead of the system bus (development)", NULL},
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &cl.config_path,
         "Configuration file (default " NPD_DEFAULT_CONFIG_PATH ")", "FILE"},
        {"model-dir", 'm', 0, G_OPTION_ARG_FILENAME_ARRAY, &cl.model_dirs,
         "Directory with NAME.gguf models (repeatable; replaces the configured list)", "DIR"},
        {"default-model", 0, 0, G_OPTION_ARG_STRING, &cl.default_model,
         "Model used when a request names none", "NAME"},
        {"idle-timeout", 0, 0, G_OPTION_ARG_INT, &cl.idle_timeout,
         "Seconds before an unused model is unloaded (0: after each request)", "S"},
        {"exit-on-idle", 0, 0, G_OPTION_ARG_INT, &cl.exit_on_idle,
         "Exit after S seconds without requests and loaded models (D-Bus activation)", "S"},
        {"device", 'd', 0, G_OPTION_ARG_STRING, &cl.device,
         "auto, cpu, npu or npu-emu", "DEVICE"},
        {"threads", 't', 0, G_OPTION_ARG_INT, &cl.threads,
         "CPU engine threads (0: all online CPUs)", "N"},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &cl.verbose, "Log debug messages", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- npullm language model service");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_summary(ctx, "Serves local GGUF language models on D-Bus (org.npullm).");

    config_set_defaults(cfg);
    gboolean ok = g_option_context_parse(ctx, argc, argv, error);
    if (ok && *argc > 1) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "unexpected argument '%s'", (*argv)[1]);
        ok = FALSE;
    }
    if (ok) {
        const char *path = cl.config_path ? cl.config_path : NPD_DEFAULT_CONFIG_PATH;
        ok = config_read_file(cfg, path, cl.config_path != NULL, error);
    }
    if (ok && cl.model_dirs != NULL) {
        g_strfreev(cfg->model_dirs);
        cfg->model_dirs = g_steal_pointer(&cl.model_dirs);
    }
    if (ok && cl.default_model != NULL) {
        g_free(cfg->default_model);
        cfg->default_model = g_steal_pointer(&cl.default_model);
    }
    if (ok && cl.idle_timeout >= 0)
        cfg->idle_timeout = (guint)cl.idle_timeout;
    if (ok && cl.exit_on_idle >= 0)
        cfg->exit_on_idle = (guint)cl.exit_on_idle;
    if (ok && cl.threads >= 0)
        cfg->threads = (guint)cl.threads;
    if (ok && (cl.idle_timeout < -1 || cl.exit_on_idle < -1 || cl.threads < -1 || cl.threads > 1024)) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--idle-timeout, --exit-on-idle and --threads take a non-negative number");
        ok = FALSE;
    }
    if (ok && cl.device != NULL)
        ok = parse_device(cl.device, &cfg->device, error);
    cfg->session_bus = cl.session_bus;
    cfg->verbose = cl.verbose;

    g_free(cl.config_path);
    g_strfreev(cl.model_dirs);
    g_free(cl.default_model);
    g_free(cl.device);
    return ok;
}

void npd_config_clear(NpdConfig *cfg)
{
    g_free(cfg->config_path);
    g_strfreev(cfg->model_dirs);
    g_free(cfg->default_model);
    memset(cfg, 0, sizeof *cfg);
}

const char *npd_device_request(NpdDevice device)
{
    switch (device) {
    case NPD_DEVICE_AUTO:
        return "auto";
    case NPD_DEVICE_NPU:
        return "npu";
    case NPD_DEVICE_NPU_EMU:
        return "npu-emu";
    case NPD_DEVICE_CPU:
        break;
    }
    return "cpu";
}

guint64 npd_kv_cache_budget(const NpdConfig *cfg)
{
    if (cfg->kv_cache_mib != NPD_KV_CACHE_AUTO)
        return (guint64)cfg->kv_cache_mib << 20;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    guint64 ram = pages > 0 && page > 0 ? (guint64)pages * (guint64)page : 0;
    return MIN(ram / 8, (guint64)1 << 30);
}
