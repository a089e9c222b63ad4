/* npullmd configuration: the GKeyFile /etc/npullm/npullm.conf (or
 * --config FILE) overridden by command-line options. */
#ifndef NPD_DAEMON_CONFIG_H
#define NPD_DAEMON_CONFIG_H

#include <glib.h>

#include "power-policy.h"

typedef enum {
    NPD_DEVICE_AUTO,
    NPD_DEVICE_CPU,
    NPD_DEVICE_NPU,
    NPD_DEVICE_NPU_EMU,
} NpdDevice;

#define NPD_KV_CACHE_AUTO G_MAXUINT

typedef struct {
    gboolean session_bus;
    gboolean verbose;
    gchar *config_path;      /* file actually read, NULL when none */
    gchar **model_dirs;      /* NULL-terminated */
    gchar *default_model;    /* NULL or "" = first model found */
    guint idle_timeout;      /* seconds */
    guint exit_on_idle;      /* seconds, 0 = never exit */
    NpdDevice device;
    guint threads;           /* 0 = all online CPUs */
    guint prefill_chunk;
    gboolean weight_cache;   /* keep the CPU's repacked weights in the cache directory */
    guint max_context;
    guint default_max_tokens;
    guint max_running;
    guint max_queued;
    guint max_per_client;
    gsize max_prompt_bytes;
    guint max_messages;
    gsize max_image_bytes;
    /* per Unix user, over all of its connections */
    guint max_per_user;        /* unfinished requests (running + queued) */
    guint max_calls_per_user;  /* calls waiting for polkit or their image */
    guint max_images_per_user; /* images being read and decoded */
    /* all users together: images being read and decoded, and the bytes
     * they hold (encoded, decoding, preprocessed) */
    guint max_images_in_flight;
    guint64 max_image_memory;
    /* KV caches kept for prefix reuse, per loaded model, in MiB:
     * NPD_KV_CACHE_AUTO = sized from RAM, 0 = no reuse */
    guint kv_cache_mib;
    guint auth_timeout;      /* seconds */
    NpdPowerConfig power;    /* [Power] */
} NpdConfig;

/* Parses argv (removing what it consumed) and the configuration file.
 * Fails with G_OPTION_ERROR / G_KEY_FILE_ERROR / G_FILE_ERROR on bad
 * input, including an unknown --device. */
gboolean npd_config_load(NpdConfig *cfg, int *argc, char ***argv, GError **error);
void npd_config_clear(NpdConfig *cfg);

/* The engine's name for the requested device (npl_device_resolve). */
const char *npd_device_request(NpdDevice device);

/* Bytes of KV cache kept per loaded model for prefix reuse: KvCacheMiB,
 * or when not set an eighth of the RAM, at most 1 GiB. */
guint64 npd_kv_cache_budget(const NpdConfig *cfg);

#endif
