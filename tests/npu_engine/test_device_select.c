/* Device selection (`test-device-select CASE [MODEL]`):
 *   requests        cpu / NULL / npu-emu / unknown names; npu and auto
 *                   without any accel device
 *   auto_falls_back a fake sysfs tree with a Strix Point NPU: each missing
 *                   piece (XRT, kernels, the XRT shim) makes auto fall
 *                   back to the CPU naming it, and npu fail naming it
 *   model_devices   the same through npl_model_load and npl_device_resolve
 *                   on this machine: auto picks the CPU and says why (a
 *                   machine with a working NPU and kernels would use it:
 *                   this case assumes none) */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device_select.h"
#include "npu_engine_test.h"
#include "npullm.h"

/* ---- a fake /sys and /dev --------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rmtree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdir -p of the directory part of path. */
static bool make_parents(const char *path)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return false;
        *p = '/';
    }
    return true;
}

static bool put(const char *root, const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = make_parents(path) ? fopen(path, "w") : NULL;
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

static bool link_to(const char *root, const char *rel, const char *target)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return make_parents(path) && symlink(target, path) == 0;
}

/* accel0: an amdxdna-bound Strix Point (1022:17f0 rev 0x10). */
static bool add_strix(const char *root)
{
    const char *pci = "sys/devices/pci0000:00/0000:c5:00.1";
    char rel[256];
    bool ok = true;
    snprintf(rel, sizeof rel, "%s/vendor", pci);
    ok = ok && put(root, rel, "0x1022\n");
    snprintf(rel, sizeof rel, "%s/device", pci);
    ok = ok && put(root, rel, "0x17f0\n");
    snprintf(rel, sizeof rel, "%s/revision", pci);
    ok = ok && put(root, rel, "0x10\n");
    snprintf(rel, sizeof rel, "%s/driver", pci);
    ok = ok && link_to(root, rel, "../../../bus/pci/drivers/amdxdna");
    ok = ok && link_to(root, "sys/class/accel/accel0/device", "../../../devices/pci0000:00/0000:c5:00.1");
    ok = ok && put(root, "dev/accel/accel0", "");
    char node[1024];
    snprintf(node, sizeof node, "%s/dev/accel/accel0", root);
    return ok && chmod(node, 0666) == 0;
}

typedef struct fake {
    char root[256];
    char sysfs[300], dev[300], kernels[300];
    npl_npu_probe_config cfg;
} fake;

static bool fake_init(fake *f)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(f->root, sizeof f->root, "%s/npu-select-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->root))
        return false;
    snprintf(f->sysfs, sizeof f->sysfs, "%s/sys", f->root);
    snprintf(f->dev, sizeof f->dev, "%s/dev", f->root);
    snprintf(f->kernels, sizeof f->kernels, "%s/kernels", f->root);
    mkdir(f->sysfs, 0755);
    mkdir(f->dev, 0755);
    npl_npu_probe_config_default(&f->cfg);
    f->cfg.sysfs_root = f->sysfs;
    f->cfg.dev_root = f->dev;
    f->cfg.kernel_dir = f->kernels;
    f->cfg.xrt_library = "/nonexistent/libxrt_coreutil.so.2";
    f->cfg.xrt_version_json = "/nonexistent/version.json";
    f->cfg.xrt_support_built = true;
    f->cfg.memlock_limit = UINT64_MAX; /* judged as unlimited, whatever this machine allows */
    return true;
}

/* auto must pick the CPU with a reason naming verdict, npu must fail. */
static void check_fallback(const fake *f, const char *verdict)
{
    npl_device_choice c;
    npl_error err;
    CHECK(npl_device_select("auto", &f->cfg, &c, &err) == NPL_OK);
    CHECK(c.dev == NULL && strcmp(c.name, "cpu") == 0);
    CHECKF(strncmp(c.reason, "auto: NPU not used (", 20) == 0 && strstr(c.reason, verdict),
           "reason '%s', wanted %s", c.reason, verdict);
    npl_status st = npl_device_select("npu", &f->cfg, &c, &err);
    CHECKF(st == NPL_ERR_UNSUPPORTED && strstr(err.message, verdict), "status %d: '%s'", (int)st,
           err.message);
}

/* ---- cases ---------------------------------------------------------------- */

static void test_requests(void)
{
    npl_device_choice c;
    npl_error err;
    CHECK(npl_device_select(NULL, NULL, &c, &err) == NPL_OK);
    CHECK(c.dev == NULL && strcmp(c.name, "cpu") == 0 && strcmp(c.reason, "cpu requested") == 0);
    CHECK(npl_device_select("cpu", NULL, &c, &err) == NPL_OK && c.dev == NULL);
    CHECK(npl_device_select("npu-emu", NULL, &c, &err) == NPL_OK);
    CHECK(c.dev != NULL && strcmp(c.name, "npu-emu") == 0);
    npl_npu_device_destroy(c.dev);
    CHECK(npl_device_select("gpu", NULL, &c, &err) == NPL_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "expected cpu, npu, npu-emu or auto") != NULL);

    fake f;
    REQUIRE(fake_init(&f));
    check_fallback(&f, "no-driver");
    rmtree(f.root);
}

static void test_auto_falls_back(void)
{
    fake f;
    REQUIRE(fake_init(&f));
    REQUIRE(add_strix(f.root));
    check_fallback(&f, "xrt-missing");
    /* XRT 2.19 present (the npu suite's stand-in library), no kernels. */
    const char *fake_xrt = getenv("NPU_FAKE_XRT_NEW");
    if (!fake_xrt) {
        fprintf(stderr, "NPU_FAKE_XRT_NEW is not set (run through meson test)\n");
        nt_check_failed(__FILE__, __LINE__, "see above");
        rmtree(f.root);
        return;
    }
    f.cfg.xrt_library = fake_xrt;
    f.cfg.xrt_plugin = fake_xrt; /* any loadable library stands in for the xdna plugin */
    check_fallback(&f, "kernels-missing");
    /* Kernels in place: discovery says usable, but this build has no XRT
     * shim module installed, so opening the device fails. */
    CHECK(put(f.root, "kernels/manifest.txt",
              "npullm-npu-manifest 1\ndevice = xdna2\n[group lm_head]\n"
              "xclbin = lm.xclbin\nkernel = MLIR_AIE\n"
              "arg = x io f32 [n_embd]\n"));
    CHECK(put(f.root, "kernels/lm.xclbin", "x"));
    npl_device_choice c;
    npl_error err;
    CHECK(npl_device_select("auto", &f.cfg, &c, &err) == NPL_OK);
    CHECKF(c.dev == NULL && strstr(c.reason, "auto: NPU not used (open-failed: "), "'%s'",
           c.reason);
    CHECK(npl_device_select("npu", &f.cfg, &c, &err) != NPL_OK);
    CHECK(strstr(err.message, "XRT shim") != NULL);
    rmtree(f.root);
}

static npl_model *load(const char *device, npl_error *err)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 1;
    p.device = device;
    return npl_model_load(nt_arg(0), &p, err);
}

static void test_model_devices(void)
{
    npl_error err;
    npl_device_stats st;
    npl_model *m = load(NULL, &err);
    REQUIRE(m);
    CHECK(strcmp(npl_model_device(m), "cpu") == 0);
    CHECK(strcmp(npl_model_device_reason(m), "cpu requested") == 0);
    CHECK(!npl_model_device_stats(m, &st) && st.weight_bytes == 0);
    npl_model_free(m);

    m = load("auto", &err);
    REQUIRE(m);
    CHECK(strcmp(npl_model_device(m), "cpu") == 0);
    CHECKF(strncmp(npl_model_device_reason(m), "auto: NPU not used (", 20) == 0, "'%s'",
           npl_model_device_reason(m));
    fprintf(stderr, "auto on this machine: %s\n", npl_model_device_reason(m));
    npl_model_free(m);

    CHECK(load("npu", &err) == NULL && err.code == NPL_ERR_UNSUPPORTED);
    CHECK(strncmp(err.message, "device npu: ", 12) == 0);
    CHECK(load("gpu", &err) == NULL && err.code == NPL_ERR_INVALID_ARG);

    /* What the service decides at start, without a model. */
    npl_device_plan plan;
    CHECK(npl_device_resolve(NULL, &plan, &err) == NPL_OK);
    CHECK(strcmp(plan.device, "cpu") == 0 && strcmp(plan.load_as, "cpu") == 0);
    CHECK(npl_device_resolve("auto", &plan, &err) == NPL_OK);
    CHECK(strcmp(plan.device, "cpu") == 0 && strcmp(plan.load_as, "cpu") == 0);
    CHECK(strncmp(plan.reason, "auto: NPU not used (", 20) == 0);
    CHECK(npl_device_resolve("npu-emu", &plan, &err) == NPL_OK);
    CHECK(strcmp(plan.device, "npu-emu") == 0 && strcmp(plan.load_as, "npu-emu") == 0);
    CHECK(npl_device_resolve("npu", &plan, &err) == NPL_ERR_UNSUPPORTED);
    CHECK(npl_device_resolve("gpu", &plan, &err) == NPL_ERR_INVALID_ARG);

    m = load("npu-emu", &err);
    REQUIRE(m);
    CHECK(strcmp(npl_model_device(m), "npu-emu") == 0);
    CHECK(strstr(npl_model_device_reason(m), "emulated NPU") != NULL);
    CHECK(npl_model_device_stats(m, &st) && st.weight_bytes > 0);
    npl_model_free(m);
}

NT_MAIN({"requests", test_requests}, {"auto_falls_back", test_auto_falls_back},
        {"model_devices", test_model_devices})
