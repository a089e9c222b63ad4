/* Loading a model: map the GGUF file, build the tokenizer, bind the
 * weights of the architecture (in place, never copied), and set up the
 * thread pool and the scratch memory every forward step reuses. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "chat_prompt.h"
#include "chat_template.h"
#include "cpu_weight_cache.h"
#include "moe.h"
#include "forward_dnet.h"
#include "model_arch.h"
#include "model_refusals.h"
#include "model_internal.h"

void npl_model_params_default(npl_model_params *p)
{
    p->n_threads = 0;
    p->prefill_chunk = NPL_DEFAULT_PREFILL_CHUNK;
    p->device = NULL;
    p->kv_type = NULL; /* f16 */
    p->npu_cache_dir = NULL; /* the NPU weight cache next to the model */
    p->weight_cache_dir = NULL; /* no packed-weight cache */
    p->block_rows = 0;
}

/* npl_model_params.kv_type: NULL or a name the cache formats know. */
static npl_status parse_kv_type(const char *name, npl_kv_format *out, npl_error *err)
{
    if (!name || strcmp(name, "f16") == 0)
        *out = NPL_KV_F16;
    else if (strcmp(name, "q8_0") == 0)
        *out = NPL_KV_Q8_0;
    else
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "kv_type '%.64s' is not known (accepted: f16, q8_0)", name);
    return NPL_OK;
}

/* The cache format against the model's head size (Q8_0 blocks are 32
 * values, and a row is one head). */
static npl_status init_kv_format(npl_model *m, npl_kv_format fmt, npl_error *err)
{
    m->kv_format = fmt;
    m->kv_row_bytes = npl_kv_row_bytes(fmt, m->hp.head_dim);
    if (!m->kv_row_bytes)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "%s: a q8_0 KV cache needs a head size that is a multiple of 32, this model's is %u "
                             "(use kv_type f16)",
                             npl_gguf_path(m->gguf), m->hp.head_dim);
    return NPL_OK;
}

static npl_status check_architecture(npl_model *m, npl_error *err)
{
    const char *path = npl_gguf_path(m->gguf);
    npl_str arch;
    npl_status st = npl_gguf_require_str(m->gguf, "general.architecture", &arch, err);
    if (st)
        return st;
    m->architecture = npl_str_dup(arch);
    if (!m->architecture)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    m->arch = strlen(m->architecture) == arch.len ? npl_arch_find(m->architecture) : NULL;
    char names[160];
    const char *missing = m->arch ? NULL : npl_arch_missing_piece(m->architecture);
    if (!m->arch)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "%s: architecture '%.*s' is not supported%s%s (supported: %s)",
                             path, (int)(arch.len > 64 ? 64 : arch.len), arch.ptr, missing ? ": " : "",
                             missing ? missing : "", npl_arch_names(names, sizeof names));
    npl_str name = {"", 0};
    npl_gguf_get_str(m->gguf, "general.name", &name);
    m->name = npl_str_dup(name);
    if (!m->name)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    return NPL_OK;
}

/* Binds the weights as the file's architecture entry describes them. */
static npl_status load_architecture(npl_model *m, npl_error *err)
{
    return npl_arch_load(m->arch, m, err);
}

/* Angle per position of each rotated pair: base^(-2i/n_rot), divided by
 * the file's frequency factors when it has them (rope_freqs of Llama 3.1+,
 * phi3's LongRoPE factors), times the linear scaling of the positions. */
static double *rope_table(const npl_model *m, uint32_t n_rot, float base, float scale, const float *factors)
{
    uint32_t half = n_rot / 2;
    double *t = malloc(half * sizeof *t);
    if (!t)
        return NULL;
    for (uint32_t i = 0; i < half; i++) {
        double f = pow((double)base, -2.0 * (double)i / (double)n_rot);
        if (factors)
            f /= (double)factors[i];
        double mix = scale; /* YaRN: the pairs below yarn_lo keep their angle */
        if (m->yarn) {
            double y = (i - m->yarn_lo) / fmax(0.001, m->yarn_hi - m->yarn_lo);
            double ramp = 1.0 - fmin(1.0, fmax(0.0, y));
            mix = scale * (1.0 - ramp) + ramp;
        }
        t[i] = f * mix;
    }
    return t;
}

/* Local (sliding-window) layers have their own base and rotated
 * dimensions, no scaling and no frequency factors (gemma4's are its
 * global layers'). */
static npl_status init_rope(npl_model *m, npl_error *err)
{
    m->rope_inv_freq = rope_table(m, m->hp.n_rot, m->hp.rope_base, m->hp.rope_scale, m->rope_freqs);
    if (!m->rope_inv_freq)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    if (m->rope_factors_long) {
        m->rope_inv_freq_long = rope_table(m, m->hp.n_rot, m->hp.rope_base, m->hp.rope_scale, m->rope_factors_long);
        if (!m->rope_inv_freq_long)
            return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    }
    /* rope_base_swa 0: the local layers share the global table (gpt-oss) */
    if (m->hp.n_swa && m->hp.rope_base_swa > 0.0f) {
        m->rope_inv_freq_swa = rope_table(m, m->hp.n_rot_swa, m->hp.rope_base_swa, 1.0f, NULL);
        if (!m->rope_inv_freq_swa)
            return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    }
    return NPL_OK;
}

npl_status npl_model_check_gguf(npl_gguf *g, npl_error *err)
{
    npl_model *m = calloc(1, sizeof *m);
    if (!m)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    m->gguf = g;
    npl_status st = check_architecture(m, err);
    if (!st) {
        m->tok = npl_tokenizer_from_gguf(m->gguf, err);
        st = m->tok ? load_architecture(m, err) : err ? err->code : NPL_ERR_FORMAT;
    }
    if (!st)
        st = init_kv_format(m, NPL_KV_F16, err);
    npl_moe_free(m);
    free(m->layers);
    npl_tokenizer_free(m->tok);
    free(m->name);
    free(m->architecture);
    free(m);
    return st;
}

npl_model *npl_model_load(const char *path, const npl_model_params *params, npl_error *err)
{
    npl_model_params defaults;
    if (!params) {
        npl_model_params_default(&defaults);
        params = &defaults;
    }
    if (!path) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "no model path given");
        return NULL;
    }
    if (params->n_threads < 0 || params->n_threads > 1024) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "n_threads = %d is out of range [0, 1024]", params->n_threads);
        return NULL;
    }
    if (params->prefill_chunk > 65536) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "prefill_chunk = %u is out of range [1, 65536]", params->prefill_chunk);
        return NULL;
    }
    if (params->block_rows > 65536) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "block_rows = %u is out of range [0, 65536]", params->block_rows);
        return NULL;
    }
    npl_kv_format kv_format = NPL_KV_F16;
    if (parse_kv_type(params->kv_type, &kv_format, err))
        return NULL;

    npl_model *m = calloc(1, sizeof *m);
    if (!m) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    m->prefill_chunk = params->prefill_chunk ? params->prefill_chunk : NPL_DEFAULT_PREFILL_CHUNK;
    m->block_rows = params->block_rows;
    m->simd = npl_simd_detect();

    m->gguf = npl_gguf_open(path, err);
    if (!m->gguf)
        goto fail;
    if (check_architecture(m, err))
        goto fail;
    m->tok = npl_tokenizer_from_gguf(m->gguf, err);
    if (!m->tok)
        goto fail;
    if (load_architecture(m, err))
        goto fail;
    if (init_kv_format(m, kv_format, err))
        goto fail;
    if (init_rope(m, err))
        goto fail;

    m->pool = npl_threadpool_create(params->n_threads);
    if (!m->pool) {
        npl_error_set(err, errno == ENOMEM ? NPL_ERR_NOMEM : NPL_ERR_INTERNAL,
                      "cannot start the compute threads: %s", strerror(errno));
        goto fail;
    }
    if (npl_forward_ws_init(m, err))
        goto fail;
    npl_model_info_fill(m);
    /* The CPU structures above stay: the NPU runtime repacks the weights
     * they bind, and looks token embeddings up on the host. */
    if (npl_model_device_open_in(m, params->device, params->npu_cache_dir, err))
        goto fail;
    if (npl_model_backend(m)->host_layers && !m->arch->encoder) /* the layers run here: their packed weights, cached */
        npl_model_cpu_weights_prepare(m, params->weight_cache_dir);
    return m;

fail:
    npl_model_free(m);
    return NULL;
}

int npl_model_set_threads(npl_model *m, int n_threads)
{
    if (m->pool == NULL)
        return 0;
    npl_threadpool_set_active(m->pool, n_threads);
    return npl_threadpool_active(m->pool);
}

void npl_model_free(npl_model *m)
{
    if (!m)
        return;
    npl_model_device_close(m);
    npl_forward_ws_free(&m->fw);
    npl_dnet_ws_free(m);
    free(m->shortconv_ws);
    npl_model_weight_cache_wait(m); /* the writer reads the workspace's packed copies */
    npl_matmul_ws_free(m->mm_ws);
    npl_cpu_weight_cache_free(m->weight_cache); /* after the workspace that read it */
    npl_threadpool_free(m->pool);
    free(m->rope_inv_freq);
    free(m->rope_inv_freq_long);
    free(m->rope_inv_freq_swa);
    npl_moe_free(m);
    free(m->layers);
    npl_tokenizer_free(m->tok);
    npl_gguf_close(m->gguf);
    free(m->name);
    free(m->architecture);
    free(m);
}

const npl_model_info *npl_model_get_info(const npl_model *m)
{
    return &m->info;
}

const npl_tokenizer *npl_model_tokenizer(const npl_model *m)
{
    return m->tok;
}

bool npl_model_claim_chat_warning(const npl_model *m)
{
    return m && !atomic_exchange(&((npl_model *)m)->chat_fallback_said, true);
}

const npl_gguf *npl_model_gguf(const npl_model *m)
{
    return m->gguf;
}
