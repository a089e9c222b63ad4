/* The power policy (power-policy.h). */
#include "power-policy.h"

#include <string.h>

#include "daemon.h"

#define PPD_NAME "org.freedesktop.UPower.PowerProfiles"
#define PPD_PATH "/org/freedesktop/UPower/PowerProfiles"
#define PPD_LEGACY_NAME "net.hadess.PowerProfiles"
#define PPD_LEGACY_PATH "/net/hadess/PowerProfiles"
#define UPOWER_NAME "org.freedesktop.UPower"
#define UPOWER_PATH "/org/freedesktop/UPower"

enum { PPD, PPD_LEGACY, UPOWER, N_SOURCES };

struct NpdPowerPolicy {
    NpdDaemon *daemon;
    GDBusProxy *proxy[N_SOURCES]; /* NULL until created (or on a session bus) */
    GCancellable *cancellable;
    gboolean saving;    /* power-saver or on battery */
    gboolean applied;   /* the worker has been told at least once */
    gchar *description;
    const char *const *names; /* of the sources, for the proxies' callbacks */
    guint pending;            /* proxies still being created */
};

void npd_power_config_defaults(NpdPowerConfig *pc)
{
    pc->follow = TRUE;
    pc->saver_threads = 0;
    pc->saver_pause_background = TRUE;
    pc->saver_idle_timeout = 60;
    pc->unload_on_sleep = FALSE;
    pc->performance_cpu_decode = TRUE;
}

static gboolean bad_value(GError **error, const char *key, const char *text, const char *expected)
{
    g_set_error(error, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_INVALID_VALUE, "[Power] %s=%s: expected %s", key, text,
                expected);
    return FALSE;
}

static gboolean read_count(GKeyFile *kf, const char *key, guint max, guint *out, GError **error)
{
    g_autofree gchar *text = g_key_file_get_value(kf, "Power", key, NULL);
    if (text == NULL)
        return TRUE;
    guint64 v = 0;
    if (!g_ascii_string_to_unsigned(g_strstrip(text), 10, 0, max, &v, NULL)) {
        g_autofree gchar *range = g_strdup_printf("a whole number from 0 to %u", max);
        return bad_value(error, key, text, range);
    }
    *out = (guint)v;
    return TRUE;
}

/* A key of two values: *first says whether it is the first. */
static gboolean read_choice(GKeyFile *kf, const char *key, const char *first, const char *second, gboolean *out,
                            GError **error)
{
    g_autofree gchar *text = g_key_file_get_value(kf, "Power", key, NULL);
    if (text == NULL)
        return TRUE;
    g_strstrip(text);
    if (strcmp(text, first) != 0 && strcmp(text, second) != 0) {
        g_autofree gchar *expected = g_strdup_printf("%s or %s", first, second);
        return bad_value(error, key, text, expected);
    }
    *out = strcmp(text, first) == 0;
    return TRUE;
}

gboolean npd_power_config_read(NpdPowerConfig *pc, GKeyFile *kf, GError **error)
{
    return read_choice(kf, "Follow", "true", "false", &pc->follow, error) &&
           read_choice(kf, "UnloadOnSleep", "true", "false", &pc->unload_on_sleep, error) &&
           read_count(kf, "SaverThreads", 1024, &pc->saver_threads, error) &&
           read_count(kf, "SaverIdleTimeout", G_MAXINT32, &pc->saver_idle_timeout, error) &&
           read_choice(kf, "SaverBackground", "pause", "run", &pc->saver_pause_background, error) &&
           read_choice(kf, "PerformanceDecode", "cpu", "npu", &pc->performance_cpu_decode, error);
}

/* A property of a watched service, NULL while it is not on the bus. */
static GVariant *watched(NpdPowerPolicy *p, int source, const char *property, const char *type)
{
    if (p->proxy[source] == NULL)
        return NULL;
    g_autofree gchar *owner = g_dbus_proxy_get_name_owner(p->proxy[source]);
    GVariant *v = owner != NULL ? g_dbus_proxy_get_cached_property(p->proxy[source], property) : NULL;
    if (v != NULL && !g_variant_is_of_type(v, G_VARIANT_TYPE(type)))
        g_clear_pointer(&v, g_variant_unref);
    return v;
}

static guint engine_threads(const NpdConfig *cfg)
{
    return cfg->threads != 0 ? cfg->threads : g_get_num_processors();
}

/* Works out the policy from what the services say and, when it changed,
 * tells the worker and the Manager's clients. */
static void evaluate(NpdPowerPolicy *p)
{
    NpdDaemon *d = p->daemon;
    const NpdPowerConfig *pc = &d->cfg->power;
    g_autoptr(GVariant) profile_v = watched(p, PPD, "ActiveProfile", "s");
    if (profile_v == NULL)
        profile_v = watched(p, PPD_LEGACY, "ActiveProfile", "s");
    g_autoptr(GVariant) battery_v = watched(p, UPOWER, "OnBattery", "b");
    const char *profile = profile_v != NULL ? g_variant_get_string(profile_v, NULL) : "no profile";
    gboolean on_battery = battery_v != NULL && g_variant_get_boolean(battery_v);
    gboolean saving = pc->follow && (strcmp(profile, "power-saver") == 0 || on_battery);

    guint all = engine_threads(d->cfg);
    guint threads = all;
    if (saving)
        threads = pc->saver_threads != 0 ? MIN(pc->saver_threads, all) : MAX(all / 2, 1);
    gboolean pause_background = saving && pc->saver_pause_background;
    /* the phase split: only where models run on an NPU (the CPU is always there) */
    gboolean on_npu = d->device != NULL && g_strcmp0(d->device->load_as, "cpu") != 0;
    gboolean cpu_decode = on_npu && pc->follow && pc->performance_cpu_decode && !on_battery &&
                          strcmp(profile, "performance") == 0;
    g_autofree gchar *phases = cpu_decode ? g_strdup_printf(", %s prefill, cpu decode", d->device->device)
                                          : g_strdup("");
    guint idle = d->cfg->idle_timeout;
    if (saving && pc->saver_idle_timeout != 0)
        idle = MIN(idle, pc->saver_idle_timeout);
    g_autofree gchar *state = pc->follow ? g_strdup_printf("%s, %s", profile, on_battery ? "on battery" : "on mains")
                                         : g_strdup("not following the power profile ([Power] Follow=false)");
    g_autofree gchar *description = g_strdup_printf(
        "%s: %u of %u thread%s%s, background requests %s, idle models unload after %u s", state, threads, all,
        all == 1 ? "" : "s", phases, pause_background ? "wait" : "run", idle);
    if (p->description != NULL && strcmp(description, p->description) == 0)
        return;
    g_message("power policy: %s", description);
    g_free(p->description);
    p->description = g_steal_pointer(&description);
    npd_worker_set_power(d->worker, threads == all ? 0 : threads, pause_background, cpu_decode);
    /* the idle timeout only when saving starts or ends: a value set
     * through IdleTimeout stays until then */
    if (saving != p->saving || !p->applied) {
        if (p->applied || saving)
            npd_worker_set_idle_timeout(d->worker, idle);
        p->saving = saving;
    }
    p->applied = TRUE;
    npd_manager_announce(d->manager);
}

static void changed_cb(GDBusProxy *proxy, GVariant *changed, GStrv invalidated, gpointer data)
{
    evaluate(data);
}

static void owner_cb(GObject *proxy, GParamSpec *pspec, gpointer data)
{
    evaluate(data);
}

static void proxy_ready_cb(GObject *source, GAsyncResult *res, gpointer data)
{
    g_autoptr(GError) error = NULL;
    GDBusProxy *proxy = g_dbus_proxy_new_finish(res, &error);
    if (proxy == NULL && g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        return; /* freed meanwhile */
    NpdPowerPolicy *p = data;
    if (proxy == NULL) {
        g_message("power policy: cannot watch a power service: %s", error->message);
    } else {
        for (int i = 0; i < N_SOURCES; i++)
            if (p->proxy[i] == NULL && strcmp(g_dbus_proxy_get_name(proxy), p->names[i]) == 0) {
                p->proxy[i] = proxy;
                break;
            }
        g_signal_connect(proxy, "g-properties-changed", G_CALLBACK(changed_cb), p);
        g_signal_connect(proxy, "notify::g-name-owner", G_CALLBACK(owner_cb), p);
    }
    /* once every watch is set up: no policy from half of them */
    if (--p->pending == 0)
        evaluate(p);
}

NpdPowerPolicy *npd_power_policy_new(NpdDaemon *d)
{
    static const char *const names[N_SOURCES] = {PPD_NAME, PPD_LEGACY_NAME, UPOWER_NAME};
    static const char *const paths[N_SOURCES] = {PPD_PATH, PPD_LEGACY_PATH, UPOWER_PATH};
    NpdPowerPolicy *p = g_new0(NpdPowerPolicy, 1);
    p->daemon = d;
    p->cancellable = g_cancellable_new();
    p->names = names;
    if (!d->cfg->power.follow || d->cfg->session_bus) {
        evaluate(p); /* the configured threads, nothing to follow */
        return p;
    }
    /* not activated: the policy follows them when they run */
    for (int i = 0; i < N_SOURCES; i++) {
        p->pending++;
        g_dbus_proxy_new(d->bus, G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START | G_DBUS_PROXY_FLAGS_GET_INVALIDATED_PROPERTIES,
                         NULL, names[i], paths[i], names[i], p->cancellable, proxy_ready_cb, p);
    }
    return p;
}

void npd_power_policy_free(NpdPowerPolicy *p)
{
    if (p == NULL)
        return;
    g_cancellable_cancel(p->cancellable);
    for (int i = 0; i < N_SOURCES; i++)
        if (p->proxy[i] != NULL) {
            g_signal_handlers_disconnect_by_data(p->proxy[i], p);
            g_object_unref(p->proxy[i]);
        }
    g_object_unref(p->cancellable);
    g_free(p->description);
    g_free(p);
}

const char *npd_power_policy_describe(const NpdPowerPolicy *p)
{
    return p != NULL && p->description != NULL ? p->description : "";
}
