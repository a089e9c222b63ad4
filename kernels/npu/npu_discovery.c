#include "npu_discovery.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npu_manifest.h"

#define AMD_PCI_VENDOR 0x1022u
#define MAX_ACCEL_NODES 64

const char *npl_npu_verdict_name(npl_npu_verdict v)
{
    switch (v) {
    case NPL_NPU_USABLE: return "usable";
    case NPL_NPU_NO_DRIVER: return "no-driver";
    case NPL_NPU_UNSUPPORTED_GENERATION: return "unsupported-generation";
    case NPL_NPU_NO_PERMISSION: return "no-permission";
    case NPL_NPU_MEMLOCK_LIMIT: return "memlock-limit";
    case NPL_NPU_NO_XRT_SUPPORT: return "no-xrt-support";
    case NPL_NPU_XRT_MISSING: return "xrt-missing";
    case NPL_NPU_XRT_TOO_OLD: return "xrt-too-old";
    case NPL_NPU_NO_XDNA_PLUGIN: return "no-xdna-plugin";
    case NPL_NPU_KERNELS_MISSING: return "kernels-missing";
    }
    return "unknown";
}

const char *npl_npu_generation_name(npl_npu_generation g)
{
    switch (g) {
    case NPL_NPU_GEN_XDNA1: return "xdna1";
    case NPL_NPU_GEN_XDNA2: return "xdna2";
    case NPL_NPU_GEN_NONE: break;
    }
    return "none";
}

npl_npu_generation npl_npu_generation_of(uint16_t device, uint8_t revision, const char **chip)
{
    const char *name = NULL;
    npl_npu_generation g = NPL_NPU_GEN_NONE;
    if (device == 0x1502) {
        g = NPL_NPU_GEN_XDNA1;
        name = "Phoenix/Hawk Point";
    } else if (device == 0x17f0) {
        switch (revision) {
        case 0x10: name = "Strix Point"; break;
        case 0x11: name = "Strix Halo"; break;
        case 0x20: name = "Krackan Point"; break;
        default: break;
        }
        if (name)
            g = NPL_NPU_GEN_XDNA2;
    }
    if (chip)
        *chip = name ? name : "unknown";
    return g;
}

void npl_npu_probe_config_default(npl_npu_probe_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->sysfs_root = "/sys";
    cfg->dev_root = "/dev";
    cfg->xrt_library = NPL_NPU_XRT_LIBRARY;
    cfg->xrt_version_json = NPL_NPU_XRT_VERSION_JSON;
    cfg->kernel_dir = NPL_NPU_DEFAULT_KERNEL_DIR;
    cfg->xrt_plugin = NPL_NPU_XRT_XDNA_PLUGIN;
#ifdef NPL_NPU_HAVE_XRT
    cfg->xrt_support_built = true;
#endif
}

static void set_reason(npl_npu_probe_result *r, npl_npu_verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_reason(npl_npu_probe_result *r, npl_npu_verdict v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    r->verdict = v;
    snprintf(r->backend, sizeof r->backend, "cpu");
}

/* First line of a small sysfs file, without the newline. */
static bool read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\r\n")] = '\0';
    return ok;
}

static bool read_hex(const char *dir, const char *name, unsigned long max, unsigned long *value)
{
    char path[PATH_MAX], line[64];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path
        || !read_line(path, line, sizeof line))
        return false;
    char *end;
    errno = 0;
    unsigned long v = strtoul(line, &end, 16);
    if (errno || end == line || *end != '\0' || v > max)
        return false;
    *value = v;
    return true;
}

/* Name of the driver bound to a sysfs device dir: the basename of its
 * driver symlink (which, in a real tree, points into /sys/bus/.../drivers). */
static bool driver_name(const char *device_dir, char *out, size_t cap)
{
    char path[PATH_MAX], target[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/driver", device_dir) >= (int)sizeof path)
        return false;
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0)
        return false;
    target[n] = '\0';
    while (n > 1 && target[n - 1] == '/')
        target[--n] = '\0';
    const char *base = strrchr(target, '/');
    int len = snprintf(out, cap, "%s", base ? base + 1 : target);
    return len > 0 && (size_t)len < cap;
}

static int accel_index(const char *name)
{
    if (strncmp(name, "accel", 5) != 0 || !name[5])
        return -1;
    int v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > 100000)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

static int compare_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Finds the first accel node bound to amdxdna; lists other drivers seen
 * so the reason can name them. */
static bool find_amdxdna(const npl_npu_probe_config *cfg, npl_npu_probe_result *r, char *others,
                         size_t others_cap, bool *any_accel)
{
    char class_dir[PATH_MAX];
    *any_accel = false;
    others[0] = '\0';
    if (snprintf(class_dir, sizeof class_dir, "%s/class/accel", cfg->sysfs_root) >= (int)sizeof class_dir)
        return false;
    DIR *d = opendir(class_dir);
    if (!d)
        return false;
    int idx[MAX_ACCEL_NODES];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_ACCEL_NODES) {
        int i = accel_index(e->d_name);
        if (i >= 0)
            idx[n++] = i;
    }
    closedir(d);
    qsort(idx, (size_t)n, sizeof idx[0], compare_int);
    *any_accel = n > 0;
    for (int k = 0; k < n; k++) {
        char dev_dir[PATH_MAX], drv[64];
        if (snprintf(dev_dir, sizeof dev_dir, "%s/accel%d/device", class_dir, idx[k])
                >= (int)sizeof dev_dir
            || !driver_name(dev_dir, drv, sizeof drv))
            snprintf(drv, sizeof drv, "no driver");
        if (strcmp(drv, "amdxdna") == 0) {
            snprintf(r->node, sizeof r->node, "accel%d", idx[k]);
            return true;
        }
        size_t used = strlen(others);
        snprintf(others + used, others_cap - used, "%saccel%d: %s", used ? ", " : "", idx[k], drv);
    }
    return false;
}

/* Whether this process (its effective uid, gid and groups) may open the
 * node for reading and writing, which the driver requires. */
static bool node_accessible(const char *path)
{
    return access(path, R_OK | W_OK) == 0;
}

/* Parses "BUILD_VERSION" : "2.18.179" out of XRT's version.json. */
static bool version_from_json(const char *path, unsigned *major, unsigned *minor, unsigned *patch)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *k = strstr(text, "\"BUILD_VERSION\"");
    if (!k)
        return false;
    k = strchr(k + 15, ':');
    if (!k)
        return false;
    k = strchr(k, '"');
    if (!k)
        return false;
    unsigned a = 0, b = 0, c = 0;
    int got = sscanf(k + 1, "%u.%u.%u", &a, &b, &c);
    if (got < 2)
        return false;
    *major = a;
    *minor = b;
    *patch = got == 3 ? c : 0;
    return true;
}

typedef unsigned (*xrt_version_fn)(void);

static bool probe_xrt(const npl_npu_probe_config *cfg, npl_npu_probe_result *r)
{
    void *h = dlopen(cfg->xrt_library, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        set_reason(r, NPL_NPU_XRT_MISSING, "XRT is not installed: cannot load %s (%s)",
                   cfg->xrt_library, why ? why : "unknown error");
        return false;
    }
    r->xrt_found = true;
    bool known = false;
    /* xrtVersionCode() is (major << 16) + minor, exported with C linkage. */
    void *sym = dlsym(h, "xrtVersionCode");
    if (sym) {
        xrt_version_fn code_fn;
        memcpy(&code_fn, &sym, sizeof code_fn);
        unsigned code = code_fn();
        r->xrt_major = code >> 16;
        r->xrt_minor = code & 0xffffu;
        void *psym = dlsym(h, "xrtVersionPatch");
        if (psym) {
            xrt_version_fn patch_fn;
            memcpy(&patch_fn, &psym, sizeof patch_fn);
            r->xrt_patch = patch_fn();
        }
        snprintf(r->xrt_version_source, sizeof r->xrt_version_source, "xrtVersionCode");
        known = true;
    }
    dlclose(h);
    if (!known && cfg->xrt_version_json
        && version_from_json(cfg->xrt_version_json, &r->xrt_major, &r->xrt_minor, &r->xrt_patch)) {
        snprintf(r->xrt_version_source, sizeof r->xrt_version_source, "version.json");
        known = true;
    }
    if (!known) {
        set_reason(r, NPL_NPU_XRT_TOO_OLD,
                   "XRT is too old: %s has no version API and %s is unreadable (need XRT >= %d.%d)",
                   cfg->xrt_library, cfg->xrt_version_json ? cfg->xrt_version_json : "version.json",
                   NPL_NPU_XRT_MIN_MAJOR, NPL_NPU_XRT_MIN_MINOR);
        return false;
    }
    if (r->xrt_major < NPL_NPU_XRT_MIN_MAJOR
        || (r->xrt_major == NPL_NPU_XRT_MIN_MAJOR && r->xrt_minor < NPL_NPU_XRT_MIN_MINOR)) {
        set_reason(r, NPL_NPU_XRT_TOO_OLD, "XRT %u.%u is older than %d.%d", r->xrt_major,
                   r->xrt_minor, NPL_NPU_XRT_MIN_MAJOR, NPL_NPU_XRT_MIN_MINOR);
        return false;
    }
    return true;
}

/* XRT pins every buffer it hands the NPU; model weights are gigabytes, so
 * the process must be allowed to lock unlimited memory (FastFlowLM's
 * `flm validate` and lemonade's LimitMEMLOCK=infinity ask the same). */
static bool probe_memlock(const npl_npu_probe_config *cfg, npl_npu_probe_result *r)
{
    uint64_t limit = cfg->memlock_limit;
    if (!limit) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
            rl.rlim_cur = 0;
        limit = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
    }
    r->memlock_limit = limit;
    if (limit == UINT64_MAX)
        return true;
    set_reason(r, NPL_NPU_MEMLOCK_LIMIT,
               "locked memory is limited to %llu KiB (ulimit -l); XRT pins the model's buffers, "
               "so set it to unlimited (LimitMEMLOCK=infinity for a service, memlock unlimited "
               "in /etc/security/limits.conf)", (unsigned long long)(limit / 1024));
    return false;
}

static bool probe_xdna_plugin(const npl_npu_probe_config *cfg, npl_npu_probe_result *r)
{
    if (!cfg->xrt_plugin)
        return true;
    void *h = dlopen(cfg->xrt_plugin, RTLD_LAZY | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        return true;
    }
    const char *why = dlerror();
    set_reason(r, NPL_NPU_NO_XDNA_PLUGIN,
               "XRT has no amdxdna plugin: cannot load %s (%s); install the XRT plugin built "
               "by AMD's xdna-driver", cfg->xrt_plugin, why ? why : "unknown error");
    return false;
}

static bool probe_kernels(const npl_npu_probe_config *cfg, npl_npu_probe_result *r)
{
    const char *dir = cfg->kernel_dir ? cfg->kernel_dir : NPL_NPU_DEFAULT_KERNEL_DIR;
    snprintf(r->manifest_path, sizeof r->manifest_path, "%s/%s", dir, NPL_NPU_MANIFEST_FILE);
    npl_npu_manifest *m = NULL;
    npl_error e;
    npl_error_clear(&e);
    if (npl_npu_manifest_load(dir, &m, &e) != NPL_OK) {
        set_reason(r, NPL_NPU_KERNELS_MISSING, "NPU kernel binaries missing: %s", e.message);
        return false;
    }
    bool ok = false;
    npl_npu_target want = r->generation == NPL_NPU_GEN_XDNA1 ? NPL_NPU_TARGET_XDNA1
                                                             : NPL_NPU_TARGET_XDNA2;
    if (m->target != want)
        set_reason(r, NPL_NPU_KERNELS_MISSING,
                   "NPU kernel binaries missing: %s is built for %s, this NPU is %s",
                   r->manifest_path, npl_npu_target_name(m->target),
                   npl_npu_generation_name(r->generation));
    else if (npl_npu_manifest_check_files(m, dir, &e) != NPL_OK)
        set_reason(r, NPL_NPU_KERNELS_MISSING, "NPU kernel binaries missing: %s", e.message);
    else
        ok = true;
    npl_npu_manifest_free(m);
    return ok;
}

npl_status npl_npu_probe(const npl_npu_probe_config *cfg, npl_npu_probe_result *r, npl_error *err)
{
    if (!cfg || !r || !cfg->sysfs_root || !cfg->dev_root || !cfg->xrt_library)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu probe: incomplete configuration");
    memset(r, 0, sizeof *r);
    snprintf(r->backend, sizeof r->backend, "cpu");

    char others[256];
    bool any_accel;
    if (!find_amdxdna(cfg, r, others, sizeof others, &any_accel)) {
        if (any_accel)
            set_reason(r, NPL_NPU_NO_DRIVER,
                       "no NPU driver: no accel device is bound to amdxdna (%s)", others);
        else
            set_reason(r, NPL_NPU_NO_DRIVER,
                       "no NPU driver: %s/class/accel has no devices (amdxdna not loaded; it "
                       "needs Linux 6.14 or AMD's xdna-driver)", cfg->sysfs_root);
        return NPL_OK;
    }
    r->found = true;
    char dev_dir[PATH_MAX];
    if (snprintf(dev_dir, sizeof dev_dir, "%s/class/accel/%s/device", cfg->sysfs_root, r->node)
        >= (int)sizeof dev_dir)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu probe: sysfs root path too long");
    unsigned long vendor = 0, device = 0, revision = 0;
    if (!read_hex(dev_dir, "vendor", 0xffff, &vendor) || !read_hex(dev_dir, "device", 0xffff, &device)
        || !read_hex(dev_dir, "revision", 0xff, &revision)) {
        set_reason(r, NPL_NPU_UNSUPPORTED_GENERATION,
                   "unsupported NPU: cannot read the PCI id of %s from %s", r->node, dev_dir);
        return NPL_OK;
    }
    r->pci_vendor = (uint16_t)vendor;
    r->pci_device = (uint16_t)device;
    r->pci_revision = (uint8_t)revision;
    const char *chip = "unknown";
    r->generation = vendor == AMD_PCI_VENDOR
                  ? npl_npu_generation_of(r->pci_device, r->pci_revision, &chip)
                  : NPL_NPU_GEN_NONE;
    snprintf(r->chip, sizeof r->chip, "%s", chip);
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/fw_version", dev_dir) >= (int)sizeof path
        || !read_line(path, r->fw_version, sizeof r->fw_version))
        r->fw_version[0] = '\0';
    /* The out-of-tree driver publishes its version; report it. */
    if (snprintf(path, sizeof path, "%s/module/amdxdna/version", cfg->sysfs_root)
            >= (int)sizeof path
        || !read_line(path, r->driver_version, sizeof r->driver_version))
        r->driver_version[0] = '\0';
    if (r->generation == NPL_NPU_GEN_NONE) {
        set_reason(r, NPL_NPU_UNSUPPORTED_GENERATION,
                   "unsupported NPU generation: PCI %04x:%04x revision 0x%02x on %s",
                   r->pci_vendor, r->pci_device, r->pci_revision, r->node);
        return NPL_OK;
    }
    struct stat st;
    if (snprintf(r->dev_path, sizeof r->dev_path, "%s/accel/%s", cfg->dev_root, r->node)
            >= (int)sizeof r->dev_path
        || stat(r->dev_path, &st) != 0) {
        set_reason(r, NPL_NPU_NO_PERMISSION, "no permission: device node %s is missing (%s)",
                   r->dev_path, strerror(errno));
        return NPL_OK;
    }
    if (!node_accessible(r->dev_path)) {
        set_reason(r, NPL_NPU_NO_PERMISSION,
                   "no permission on %s: need read/write access (add the user to the "
                   "node's group, usually 'render')", r->dev_path);
        return NPL_OK;
    }
    if (!probe_memlock(cfg, r))
        return NPL_OK;
    if (!probe_xrt(cfg, r) || !probe_xdna_plugin(cfg, r))
        return NPL_OK;
    if (!cfg->xrt_support_built) {
        set_reason(r, NPL_NPU_NO_XRT_SUPPORT,
                   "this npullm was built without XRT support (XRT >= %d.%d headers were not "
                   "found at build time, or -Dnpu_xrt=disabled)",
                   NPL_NPU_XRT_MIN_MAJOR, NPL_NPU_XRT_MIN_MINOR);
        return NPL_OK;
    }
    if (!probe_kernels(cfg, r))
        return NPL_OK;
    r->verdict = NPL_NPU_USABLE;
    r->reason[0] = '\0';
    snprintf(r->backend, sizeof r->backend, "npu:%s", npl_npu_generation_name(r->generation));
    return NPL_OK;
}

/* Appends s as a JSON string. */
static int json_string(char *buf, size_t cap, size_t at, const char *s)
{
    int n = 0;
#define PUT(...) n += snprintf(at + (size_t)n < cap ? buf + at + n : NULL, \
                               at + (size_t)n < cap ? cap - at - (size_t)n : 0, __VA_ARGS__)
    PUT("\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            PUT("\\%c", *p);
        else if (*p < 0x20)
            PUT("\\u%04x", *p);
        else
            PUT("%c", *p);
    }
    PUT("\"");
#undef PUT
    return n;
}

int npl_npu_probe_result_json(const npl_npu_probe_result *r, char *buf, size_t cap)
{
    size_t at = 0;
#define PUT(...)                                                                     \
    at += (size_t)snprintf(at < cap ? buf + at : NULL, at < cap ? cap - at : 0, __VA_ARGS__)
#define STR(s) at += (size_t)json_string(buf, cap, at, (s))
    PUT("{\"backend\":");
    STR(r->backend);
    PUT(",\"verdict\":");
    STR(npl_npu_verdict_name(r->verdict));
    PUT(",\"reason\":");
    STR(r->reason);
    PUT(",\"device\":");
    if (r->found) {
        PUT("{\"node\":");
        STR(r->node);
        PUT(",\"path\":");
        STR(r->dev_path);
        PUT(",\"pci\":\"%04x:%04x\",\"revision\":\"0x%02x\",\"generation\":", r->pci_vendor,
            r->pci_device, r->pci_revision);
        STR(npl_npu_generation_name(r->generation));
        PUT(",\"chip\":");
        STR(r->chip);
        PUT(",\"firmware\":");
        STR(r->fw_version);
        PUT(",\"driver\":");
        STR(r->driver_version);
        PUT("}");
    } else {
        PUT("null");
    }
    PUT(",\"xrt\":");
    if (r->xrt_found && r->xrt_version_source[0]) {
        PUT("{\"version\":\"%u.%u.%u\",\"source\":", r->xrt_major, r->xrt_minor, r->xrt_patch);
        STR(r->xrt_version_source);
        PUT("}");
    } else if (r->xrt_found) {
        PUT("{\"version\":null}");
    } else {
        PUT("null");
    }
    PUT(",\"manifest\":");
    STR(r->manifest_path);
    PUT("}");
#undef PUT
#undef STR
    return (int)at;
}
