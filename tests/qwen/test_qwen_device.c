/* qwen2 and qwen3 on the emulated NPU: the backend registry asks the NPU
 * runtime whether it computes the architecture's variations. qwen3 (per-
 * head Q/K norms, NEOX rope) loads there; qwen2 (Q/K/V biases, which the
 * NPU's kernel groups do not have) is refused with an error that says why
 * and what to use instead, rather than run without its biases.
 *
 *   usage: test-qwen-device device QWEN2.gguf QWEN3.gguf */
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
    const char *qwen2 = nt_arg(0), *qwen3 = nt_arg(1);
    REQUIRE(qwen2 && qwen3);
    npl_error err;
    npl_model *m = load(qwen2, "npu-emu", &err);
    CHECKF(m == NULL && err.code == NPL_ERR_UNSUPPORTED && strstr(err.message, "device npu-emu") &&
               strstr(err.message, "'qwen2'") && strstr(err.message, "biases") && strstr(err.message, "cpu"),
           "  qwen2 refused on npu-emu: %s", err.message);
    npl_model_free(m);

    m = load(qwen2, "cpu", &err);
    CHECKF(m != NULL && strcmp(npl_model_device(m), "cpu") == 0, "  qwen2 on the cpu: %s", err.message);
    npl_model_free(m);

    m = load(qwen3, "npu-emu", &err);
    CHECKF(m != NULL && strcmp(npl_model_device(m), "npu-emu") == 0, "  qwen3 on npu-emu: %s", err.message);
    npl_model_free(m);
}

NT_MAIN({"device", test_device})
