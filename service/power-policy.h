/* The power policy (power-policy.c): follows power-profiles-daemon
 * (ActiveProfile of org.freedesktop.UPower.PowerProfiles, or of the legacy
 * net.hadess.PowerProfiles) and UPower (OnBattery) on the system bus, and
 * on power-saver or battery computes with fewer threads, keeps background
 * requests queued and unloads idle models sooner, as the [Power] table of
 * the configuration says (docs/desktop.md). Changes reach the engine
 * between scheduling steps; no request is dropped. Main context only. */
#ifndef NPD_POWER_POLICY_H
#define NPD_POWER_POLICY_H

#include <gio/gio.h>

/* [Power] of the configuration file. */
typedef struct {
    gboolean follow;            /* Follow: watch the profile and the battery */
    guint saver_threads;        /* SaverThreads: 0 = half of the engine's, at least 1 */
    gboolean saver_pause_background; /* SaverBackground=pause (or run) */
    guint saver_idle_timeout;   /* SaverIdleTimeout: seconds, 0 = unchanged */
    gboolean unload_on_sleep;   /* UnloadOnSleep: unload unused models before sleep */
    /* PerformanceDecode=cpu (default) or npu: on performance and mains,
     * models on an NPU prefill there and decode on the CPU (the phase
     * split, docs/desktop.md) or do both on the NPU */
    gboolean performance_cpu_decode;
} NpdPowerConfig;

void npd_power_config_defaults(NpdPowerConfig *pc);
/* Reads [Power] of kf (missing keys keep their values); G_KEY_FILE_ERROR
 * on a bad value. */
gboolean npd_power_config_read(NpdPowerConfig *pc, GKeyFile *kf, GError **error);

typedef struct NpdDaemon NpdDaemon;
typedef struct NpdPowerPolicy NpdPowerPolicy;

/* Starts watching (on d->bus; not on a session bus) and applies the policy
 * to d->worker whenever it changes, announcing it on the Manager. */
NpdPowerPolicy *npd_power_policy_new(NpdDaemon *d);
void npd_power_policy_free(NpdPowerPolicy *p);
/* The PowerPolicy property, e.g. "power-saver, on battery: 1 of 2 threads,
 * background requests wait, idle models unload after 60 s". */
const char *npd_power_policy_describe(const NpdPowerPolicy *p);

#endif
