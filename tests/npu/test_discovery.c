/* NPU discovery against fake sysfs/dev trees and fake XRT libraries: one
 * case per fallback reason, plus the usable paths. */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "npu_discovery.h"
#include "npl_test.h"

typedef struct tree {
    char *root;
    char sysfs[512], dev[512], kernels[512], json[512];
    npl_npu_probe_config cfg;
} tree;

static const char *env_path(const char *name)
{
    const char *v = getenv(name);
    if (!v) {
        fprintf(stderr, "%s is not set (run through meson test)\n", name);
        exit(77);
    }
    return v;
}

static void put(const tree *t, const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", t->root, rel);
    if (nt_write_file(path, text) != 0)
        abort();
}

/* An accel node whose PCI device has the given ids and driver. */
static void add_accel(const tree *t, int index, const char *driver, const char *vendor,
                      const char *device, const char *revision)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "sys/devices/pci0000:00/0000:c5:00.%d/vendor", index);
    put(t, rel, vendor);
    snprintf(rel, sizeof rel, "sys/devices/pci0000:00/0000:c5:00.%d/device", index);
    put(t, rel, device);
    snprintf(rel, sizeof rel, "sys/devices/pci0000:00/0000:c5:00.%d/revision", index);
    put(t, rel, revision);
    if (driver) {
        snprintf(path, sizeof path, "%s/sys/devices/pci0000:00/0000:c5:00.%d/driver", t->root, index);
        char target[128];
        snprintf(target, sizeof target, "../../../bus/pci/drivers/%s", driver);
        if (symlink(target, path) != 0)
            abort();
    }
    snprintf(rel, sizeof rel, "sys/class/accel/accel%d/.keep", index);
    put(t, rel, "");
    snprintf(path, sizeof path, "%s/sys/class/accel/accel%d/device", t->root, index);
    char target[128];
    snprintf(target, sizeof target, "../../../devices/pci0000:00/0000:c5:00.%d", index);
    if (symlink(target, path) != 0)
        abort();
    snprintf(rel, sizeof rel, "dev/accel/accel%d", index);
    put(t, rel, "");
    snprintf(path, sizeof path, "%s/dev/accel/accel%d", t->root, index);
    chmod(path, 0666);
}

static const char manifest_xdna2[] =
    "npullm-npu-manifest 1\ndevice = xdna2\n[group lm_head]\n"
    "xclbin = lm.xclbin\nkernel = MLIR_AIE\narg = x io f32 [n_embd]\n";

static void tree_init(tree *t)
{
    memset(t, 0, sizeof *t);
    t->root = nt_tempdir();
    chmod(t->root, 0755); /* the no-permission case probes as another user */
    snprintf(t->sysfs, sizeof t->sysfs, "%s/sys", t->root);
    snprintf(t->dev, sizeof t->dev, "%s/dev", t->root);
    snprintf(t->kernels, sizeof t->kernels, "%s/kernels", t->root);
    snprintf(t->json, sizeof t->json, "%s/version.json", t->root);
    mkdir(t->sysfs, 0755);
    put(t, "kernels/manifest.txt", manifest_xdna2);
    put(t, "kernels/lm.xclbin", "x");
    npl_npu_probe_config_default(&t->cfg);
    t->cfg.sysfs_root = t->sysfs;
    t->cfg.dev_root = t->dev;
    t->cfg.kernel_dir = t->kernels;
    t->cfg.xrt_library = env_path("NPU_FAKE_XRT_NEW");
    t->cfg.xrt_version_json = t->json;
    t->cfg.xrt_support_built = true;
    t->cfg.xrt_plugin = env_path("NPU_FAKE_XRT_NEW"); /* a loadable stand-in */
    t->cfg.memlock_limit = UINT64_MAX;                /* unlimited */
}

static void tree_free(tree *t)
{
    nt_rmtree(t->root);
    free(t->root);
}

static void strix(tree *t)
{
    add_accel(t, 0, "amdxdna", "0x1022\n", "0x17f0\n", "0x10\n");
    put(t, "sys/devices/pci0000:00/0000:c5:00.0/fw_version", "1.5.5.391\n");
    put(t, "sys/module/amdxdna/version", "0.6\n");
}

static npl_npu_probe_result probe(const tree *t)
{
    npl_npu_probe_result r;
    npl_error err;
    CHECK_OK(npl_npu_probe(&t->cfg, &r, &err), &err);
    return r;
}

#define CHECK_VERDICT(r, v, needle)                                                  \
    do {                                                                             \
        if ((r).verdict != (v) || !strstr((r).reason, (needle))                      \
            || strcmp((r).backend, (v) == NPL_NPU_USABLE ? (r).backend : "cpu")) {   \
            CHECK(!"verdict " #v);                                                   \
            nt_note("  got %s: '%s' (wanted '%s')", npl_npu_verdict_name((r).verdict), \
                     (r).reason, (needle));                                          \
        }                                                                            \
    } while (0)

static void usable_xdna2(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_USABLE, "");
    CHECK(strcmp(r.backend, "npu:xdna2") == 0 && r.reason[0] == '\0');
    CHECK(strcmp(r.node, "accel0") == 0 && r.generation == NPL_NPU_GEN_XDNA2);
    CHECK(r.pci_vendor == 0x1022 && r.pci_device == 0x17f0 && r.pci_revision == 0x10);
    CHECK(strcmp(r.chip, "Strix Point") == 0 && strcmp(r.fw_version, "1.5.5.391") == 0);
    CHECK(strcmp(r.driver_version, "0.6") == 0 && r.memlock_limit == UINT64_MAX);
    CHECK(r.xrt_found && r.xrt_major == 2 && r.xrt_minor == 19 && r.xrt_patch == 7);
    CHECK(strcmp(r.xrt_version_source, "xrtVersionCode") == 0);
    tree_free(&t);
}

static void usable_xdna1(void)
{
    tree t;
    tree_init(&t);
    add_accel(&t, 0, "amdxdna", "0x1022\n", "0x1502\n", "0x00\n");
    put(&t, "kernels/manifest.txt",
        "npullm-npu-manifest 1\ndevice = xdna1\n[group lm_head]\n"
        "xclbin = lm.xclbin\nkernel = MLIR_AIE\narg = x io f32 [n_embd]\n");
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_USABLE, "");
    CHECK(strcmp(r.backend, "npu:xdna1") == 0 && r.fw_version[0] == '\0');
    tree_free(&t);
}

static void no_accel_devices(void)
{
    tree t;
    tree_init(&t);
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_NO_DRIVER, "class/accel has no devices");
    CHECK(!r.found);
    tree_free(&t);
}

static void other_driver_only(void)
{
    tree t;
    tree_init(&t);
    add_accel(&t, 0, "ivpu", "0x8086\n", "0x7d1d\n", "0x04\n");
    add_accel(&t, 2, NULL, "0x1022\n", "0x17f0\n", "0x10\n");
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_NO_DRIVER, "no accel device is bound to amdxdna (accel0: ivpu, accel2: no driver)");
    tree_free(&t);
}

static void picks_the_amdxdna_node(void)
{
    tree t;
    tree_init(&t);
    add_accel(&t, 0, "ivpu", "0x8086\n", "0x7d1d\n", "0x04\n");
    add_accel(&t, 1, "amdxdna", "0x1022\n", "0x17f0\n", "0x20\n");
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_USABLE, "");
    CHECK(strcmp(r.node, "accel1") == 0 && strcmp(r.chip, "Krackan Point") == 0);
    CHECK(strstr(r.dev_path, "/dev/accel/accel1") != NULL);
    tree_free(&t);
}

static void unsupported_generation(void)
{
    const struct {
        const char *vendor, *device, *revision, *needle;
    } c[] = {
        { "0x1022\n", "0x17f0\n", "0x00\n", "PCI 1022:17f0 revision 0x00" },
        { "0x1022\n", "0x17f1\n", "0x10\n", "PCI 1022:17f1 revision 0x10" },
        { "0x10ee\n", "0x1502\n", "0x00\n", "PCI 10ee:1502" },
        { "0x1022\n", "banana\n", "0x00\n", "cannot read the PCI id" },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        tree t;
        tree_init(&t);
        add_accel(&t, 0, "amdxdna", c[i].vendor, c[i].device, c[i].revision);
        npl_npu_probe_result r = probe(&t);
        CHECK_VERDICT(r, NPL_NPU_UNSUPPORTED_GENERATION, c[i].needle);
        tree_free(&t);
    }
}

static void generation_table(void)
{
    const char *chip = NULL;
    CHECK(npl_npu_generation_of(0x1502, 0x00, &chip) == NPL_NPU_GEN_XDNA1);
    CHECK(npl_npu_generation_of(0x17f0, 0x10, &chip) == NPL_NPU_GEN_XDNA2 && !strcmp(chip, "Strix Point"));
    CHECK(npl_npu_generation_of(0x17f0, 0x11, &chip) == NPL_NPU_GEN_XDNA2 && !strcmp(chip, "Strix Halo"));
    CHECK(npl_npu_generation_of(0x17f0, 0x20, &chip) == NPL_NPU_GEN_XDNA2 && !strcmp(chip, "Krackan Point"));
    CHECK(npl_npu_generation_of(0x17f0, 0x00, &chip) == NPL_NPU_GEN_NONE && !strcmp(chip, "unknown"));
    CHECK(npl_npu_generation_of(0x1234, 0x10, NULL) == NPL_NPU_GEN_NONE);
}

static void device_node_missing(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    char path[1024];
    snprintf(path, sizeof path, "%s/accel/accel0", t.dev);
    unlink(path);
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_NO_PERMISSION, "device node");
    CHECK(strstr(r.reason, "is missing") != NULL);
    tree_free(&t);
}

/* The node is root's and mode 0600: a normal user may not open it. Run as
 * root, the probe runs in a child that drops to 'nobody'. */
static void no_permission_on_node(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    char path[1024];
    snprintf(path, sizeof path, "%s/accel/accel0", t.dev);
    CHECK(chmod(path, 0600) == 0);
    if (geteuid() != 0) {
        CHECK(chmod(path, 0) == 0);
        npl_npu_probe_result r = probe(&t);
        CHECK_VERDICT(r, NPL_NPU_NO_PERMISSION, "no permission on");
        tree_free(&t);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        npl_npu_probe_result r;
        npl_error err;
        if (npl_npu_probe(&t.cfg, &r, &err) != NPL_OK)
            _exit(4);
        if (r.verdict != NPL_NPU_NO_PERMISSION || !strstr(r.reason, "no permission on")
            || !strstr(r.reason, "/dev/accel/accel0")) {
            fprintf(stderr, "  child got %s: %s\n", npl_npu_verdict_name(r.verdict), r.reason);
            _exit(5);
        }
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        nt_note("  child status %d", status);
    tree_free(&t);
}

static void xrt_missing(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    t.cfg.xrt_library = "/nonexistent/libxrt_coreutil.so.2";
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_XRT_MISSING, "XRT is not installed: cannot load /nonexistent/libxrt_coreutil.so.2");
    CHECK(!r.xrt_found);
    tree_free(&t);
}

static void xrt_too_old(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    t.cfg.xrt_library = env_path("NPU_FAKE_XRT_OLD");
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_XRT_TOO_OLD, "XRT 2.13 is older than 2.18");
    tree_free(&t);
}

/* Without the version API the version comes from version.json. */
static void xrt_version_from_json(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    t.cfg.xrt_library = env_path("NPU_FAKE_XRT_NOVER");
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_XRT_TOO_OLD, "has no version API");
    put(&t, "version.json",
        "{\n  \"BUILD_VERSION\" : \"2.17.319\",\n  \"BUILD_BRANCH\" : \"2024.1\"\n}\n");
    r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_XRT_TOO_OLD, "XRT 2.17 is older than 2.18");
    put(&t, "version.json", "{ \"BUILD_VERSION\" : \"2.18.179\" }");
    r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_USABLE, "");
    CHECK(r.xrt_minor == 18 && r.xrt_patch == 179 && !strcmp(r.xrt_version_source, "version.json"));
    tree_free(&t);
}

static void built_without_xrt(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    t.cfg.xrt_support_built = false;
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_NO_XRT_SUPPORT, "built without XRT support");
    tree_free(&t);
}

/* XRT pins the model's buffers: a locked-memory limit falls back. */
static void memlock_limited(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    t.cfg.memlock_limit = 8u << 20;
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_MEMLOCK_LIMIT, "locked memory is limited to 8192 KiB");
    CHECK(r.memlock_limit == 8u << 20);
    tree_free(&t);
}

static void xdna_plugin_missing(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    t.cfg.xrt_plugin = "/nonexistent/libxrt_driver_xdna.so.2";
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_NO_XDNA_PLUGIN,
                  "XRT has no amdxdna plugin: cannot load /nonexistent/libxrt_driver_xdna.so.2");
    tree_free(&t);
}

static void kernels_missing(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    char path[1024];
    snprintf(path, sizeof path, "%s/lm.xclbin", t.kernels);
    unlink(path);
    npl_npu_probe_result r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_KERNELS_MISSING, "lm.xclbin of group lm_head is missing");
    put(&t, "kernels/manifest.txt",
        "npullm-npu-manifest 1\ndevice = xdna1\n[group g]\nxclbin = a\nkernel = K\n"
        "arg = x io f32 [1]\n");
    r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_KERNELS_MISSING, "is built for xdna1, this NPU is xdna2");
    put(&t, "kernels/manifest.txt",
        "npullm-npu-manifest 1\ndevice = xdna2\n[group g]\narg = x io f32 [1]\n");
    r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_KERNELS_MISSING, "needs xclbin and kernel");
    snprintf(path, sizeof path, "%s/manifest.txt", t.kernels);
    unlink(path);
    r = probe(&t);
    CHECK_VERDICT(r, NPL_NPU_KERNELS_MISSING, "cannot open");
    CHECK(strstr(r.manifest_path, "kernels/manifest.txt") != NULL);
    tree_free(&t);
}

static void json_report(void)
{
    tree t;
    tree_init(&t);
    strix(&t);
    npl_npu_probe_result r = probe(&t);
    char buf[2048];
    int n = npl_npu_probe_result_json(&r, buf, sizeof buf);
    CHECK(n > 0 && (size_t)n < sizeof buf && (size_t)n == strlen(buf));
    CHECK(npl_npu_probe_result_json(&r, NULL, 0) == n);
    CHECK(strstr(buf, "\"backend\":\"npu:xdna2\"") && strstr(buf, "\"verdict\":\"usable\""));
    CHECK(strstr(buf, "\"pci\":\"1022:17f0\",\"revision\":\"0x10\",\"generation\":\"xdna2\""));
    CHECK(strstr(buf, "\"firmware\":\"1.5.5.391\"") && strstr(buf, "\"version\":\"2.19.7\""));
    /* Quotes and control characters in a reason are escaped. */
    snprintf(r.reason, sizeof r.reason, "say \"hi\"\\\n");
    n = npl_npu_probe_result_json(&r, buf, sizeof buf);
    CHECK(strstr(buf, "\"reason\":\"say \\\"hi\\\"\\\\\\u000a\"") != NULL);
    /* Truncation still reports the full length. */
    char small[16];
    CHECK(npl_npu_probe_result_json(&r, small, sizeof small) == n && strlen(small) == 15);
    tree_free(&t);
}

static const nt_case cases[] = {
    { "usable_xdna2", usable_xdna2 },
    { "usable_xdna1", usable_xdna1 },
    { "no_accel_devices", no_accel_devices },
    { "other_driver_only", other_driver_only },
    { "picks_the_amdxdna_node", picks_the_amdxdna_node },
    { "unsupported_generation", unsupported_generation },
    { "generation_table", generation_table },
    { "device_node_missing", device_node_missing },
    { "no_permission_on_node", no_permission_on_node },
    { "xrt_missing", xrt_missing },
    { "xrt_too_old", xrt_too_old },
    { "xrt_version_from_json", xrt_version_from_json },
    { "built_without_xrt", built_without_xrt },
    { "kernels_missing", kernels_missing },
    { "memlock_limited", memlock_limited },
    { "xdna_plugin_missing", xdna_plugin_missing },
    { "json_report", json_report },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
