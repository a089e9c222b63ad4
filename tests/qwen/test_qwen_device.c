/* qwen2 and qwen3 on the emulated NPU: both load there (qwen3's per-head
 * Q/K norms and qwen2's Q/K/V biases are variants of the NPU's kernel
 * groups; the gates in meson.build check what they compute). What no
 * device runs is refused at load with an error naming it: an output
 * projection bias (attn_output.bias, which no Qwen 2 file has).
 *
 *   usage: test-qwen-device device QWEN2.gguf QWEN3.gguf QWEN2_WITH_O_BIAS.gguf */
#include <string.h>

#include "npl_test.h"
#include "npullm.h"

static npl_model *load(const char *path, const char *device, npl_error *err)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 1;
    p.device = device;
    p.npu_cache_dir = ""; /* nothing written next to the build's models */
    npl_error_clear(err);
    return npl_model_load(path, &p, err);
}

static void test_device(void)
{
    const char *qwen2 = nt_arg(0), *qwen3 = nt_arg(1), *o_bias = nt_arg(2);
    REQUIRE(qwen2 && qwen3 && o_bias);
    npl_error err;
    const char *devices[] = {"npu-emu", "cpu"};
    for (size_t i = 0; i < 2; i++) {
        npl_model *m = load(qwen2, devices[i], &err);
        CHECKF(m != NULL && strcmp(npl_model_device(m), devices[i]) == 0, "  qwen2 on %s: %s",
               devices[i], err.message);
        npl_model_free(m);

        m = load(o_bias, devices[i], &err);
        CHECKF(m == NULL && err.code == NPL_ERR_UNSUPPORTED &&
                   strstr(err.message, "tensor 'blk.0.attn_output.bias' is not supported"),
               "  qwen2 with an output bias refused on %s: %s", devices[i], err.message);
        npl_model_free(m);
    }

    npl_model *m = load(qwen3, "npu-emu", &err);
    CHECKF(m != NULL && strcmp(npl_model_device(m), "npu-emu") == 0, "  qwen3 on npu-emu: %s", err.message);
    npl_model_free(m);
}

NT_MAIN({"device", test_device})
