/* npullm-npu-probe: prints whether `--device auto` would use the NPU, and
 * if not, the one-line reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_discovery.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: npullm-npu-probe [--sysfs DIR] [--dev DIR] [--kernels DIR]\n"
            "                        [--xrt-lib PATH] [--xrt-version-json PATH] [--json]\n"
            "Reports whether the AMD NPU can be used and why not.\n");
}

int main(int argc, char **argv)
{
    npl_npu_probe_config cfg;
    npl_npu_probe_config_default(&cfg);
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **target = NULL;
        if (strcmp(a, "--json") == 0) {
            json = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--sysfs") == 0)
            target = &cfg.sysfs_root;
        else if (strcmp(a, "--dev") == 0)
            target = &cfg.dev_root;
        else if (strcmp(a, "--kernels") == 0)
            target = &cfg.kernel_dir;
        else if (strcmp(a, "--xrt-lib") == 0)
            target = &cfg.xrt_library;
        else if (strcmp(a, "--xrt-version-json") == 0)
            target = &cfg.xrt_version_json;
        if (!target || i + 1 >= argc) {
            fprintf(stderr, "npullm-npu-probe: %s '%s'\n",
                    target ? "missing value for" : "unknown option", a);
            usage(stderr);
            return 2;
        }
        *target = argv[++i];
    }
    npl_npu_probe_result r;
    npl_error err;
    npl_error_clear(&err);
    if (npl_npu_probe(&cfg, &r, &err) != NPL_OK) {
        fprintf(stderr, "npullm-npu-probe: %s\n", err.message);
        return 1;
    }
    if (json) {
        int need = npl_npu_probe_result_json(&r, NULL, 0);
        char *buf = malloc((size_t)need + 1);
        if (!buf) {
            fprintf(stderr, "npullm-npu-probe: out of memory\n");
            return 1;
        }
        npl_npu_probe_result_json(&r, buf, (size_t)need + 1);
        printf("%s\n", buf);
        free(buf);
        return 0;
    }
    if (r.found)
        printf("device:   %s (%s, PCI %04x:%04x rev 0x%02x, %s, %s, firmware %s)\n", r.node,
               r.dev_path[0] ? r.dev_path : "no node checked", r.pci_vendor, r.pci_device,
               r.pci_revision, npl_npu_generation_name(r.generation), r.chip,
               r.fw_version[0] ? r.fw_version : "not reported");
    else
        printf("device:   none\n");
    if (r.found)
        printf("driver:   amdxdna %s\n", r.driver_version[0] ? r.driver_version : "(version not reported)");
    if (r.xrt_found && r.xrt_version_source[0])
        printf("xrt:      %u.%u.%u (from %s)\n", r.xrt_major, r.xrt_minor, r.xrt_patch,
               r.xrt_version_source);
    else
        printf("xrt:      %s\n", r.xrt_found ? "found, version unknown" : "not checked or missing");
    if (r.manifest_path[0])
        printf("kernels:  %s\n", r.manifest_path);
    if (r.verdict == NPL_NPU_USABLE)
        printf("decision: %s\n", r.backend);
    else
        printf("decision: cpu (%s: %s)\n", npl_npu_verdict_name(r.verdict), r.reason);
    return 0;
}
