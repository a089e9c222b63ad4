/* npl_model_probe: what a file is and whether this engine can run it,
 * from its metadata and the loader's checks, never its weights. */
#include "model_probe.h"

#include <stdio.h>
#include <string.h>

#include "ggml_types.h"
#include "model_arch.h"
#include "model_internal.h"

uint64_t npl_gguf_param_count(const npl_gguf *g)
{
    uint64_t n = 0;
    for (size_t i = 0; i < npl_gguf_n_tensors(g); i++)
        n += npl_gguf_tensor_nelements(npl_gguf_tensor_at(g, i));
    return n;
}

/* What a person calls the model's quantization: the type of the matrices
 * (2-D and up) that take the most bytes in the file. */
const char *npl_gguf_dominant_type(const npl_gguf *g)
{
    uint64_t bytes[NPL_TYPE_COUNT_MAX] = {0};
    for (size_t i = 0; i < npl_gguf_n_tensors(g); i++) {
        const npl_gguf_tensor *t = npl_gguf_tensor_at(g, i);
        if (t->n_dims >= 2 && t->type < NPL_TYPE_COUNT_MAX)
            bytes[t->type] += t->size;
    }
    uint32_t best = NPL_TYPE_F32;
    for (uint32_t ty = 0; ty < NPL_TYPE_COUNT_MAX; ty++)
        if (bytes[ty] > bytes[best])
            best = ty;
    const npl_type_traits *tr = npl_type_traits_get(best);
    return tr && tr->name ? tr->name : "unknown";
}

static void copy_str(char *dst, size_t cap, npl_str s)
{
    size_t n = s.len < cap - 1 ? s.len : cap - 1;
    memcpy(dst, s.ptr, n);
    dst[n] = '\0';
    if (strlen(dst) != n) /* an embedded NUL: the key is not a usable name */
        dst[0] = '\0';
}

static uint32_t arch_u32(const npl_gguf *g, const char *arch, const char *key)
{
    char k[128];
    uint32_t v = 0;
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return npl_gguf_get_u32(g, k, &v) ? v : 0;
}

const char *npl_projector_text_arch(const char *projector_type)
{
    if (strcmp(projector_type, "gemma3") == 0)
        return "gemma3";
    if (strcmp(projector_type, "gemma4v") == 0)
        return "gemma4";
    return NULL;
}

/* A projector is supported when its type is one the vision tower runs;
 * its width is what pairs it with a model. */
static void probe_projector(const npl_gguf *g, npl_model_facts *f)
{
    npl_str proj = {"", 0};
    if (!npl_gguf_get_str(g, "clip.projector_type", &proj))
        npl_gguf_get_str(g, "clip.vision.projector_type", &proj);
    copy_str(f->projector_type, sizeof f->projector_type, proj);
    uint32_t dim = 0;
    /* Gemma 3's projection is stored [text width, n_embd], gemma4v's [n_embd, text width] */
    int out_dim = strcmp(f->projector_type, "gemma4v") == 0 ? 1 : 0;
    const npl_gguf_tensor *t = npl_gguf_find_tensor(g, "mm.input_projection.weight");
    if (!npl_gguf_get_u32(g, "clip.vision.projection_dim", &dim) && t && t->n_dims >= 2 && t->ne[out_dim] <= UINT32_MAX)
        dim = (uint32_t)t->ne[out_dim];
    f->embedding_length = dim;
    bool vision = false;
    if (!npl_gguf_get_bool(g, "clip.has_vision_encoder", &vision) || !vision)
        snprintf(f->reason, sizeof f->reason, "not a vision projector (clip.has_vision_encoder is not true)");
    else if (!npl_projector_text_arch(f->projector_type))
        snprintf(f->reason, sizeof f->reason, "projector type '%s' is not supported (supported: gemma3, gemma4v)",
                 f->projector_type);
    else
        f->supported = true;
}

npl_status npl_model_probe(const char *path, npl_model_facts *out, npl_error *err)
{
    memset(out, 0, sizeof *out);
    if (!path)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "no model path given");
    npl_gguf *g = npl_gguf_open(path, err);
    if (!g)
        return err ? err->code : NPL_ERR_IO;
    npl_str arch = {"", 0};
    npl_gguf_get_str(g, "general.architecture", &arch);
    copy_str(out->architecture, sizeof out->architecture, arch);
    out->n_params = npl_gguf_param_count(g);
    snprintf(out->quantization, sizeof out->quantization, "%s", npl_gguf_dominant_type(g));

    npl_status st = NPL_OK;
    if (strcmp(out->architecture, "clip") == 0) {
        out->is_projector = true;
        probe_projector(g, out);
    } else {
        out->context_length = arch_u32(g, out->architecture, "context_length");
        out->embedding_length = arch_u32(g, out->architecture, "embedding_length");
        npl_error why;
        npl_error_clear(&why);
        st = npl_model_check_gguf(g, &why);
        if (st == NPL_ERR_FORMAT || st == NPL_ERR_UNSUPPORTED) {
            /* the file is readable; the engine cannot run it, and says why
             * (without the path: the caller knows it) */
            const char *msg = why.message;
            size_t plen = strlen(path);
            if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
                msg += plen + 2;
            snprintf(out->reason, sizeof out->reason, "%.*s", (int)sizeof out->reason - 1, msg);
            st = NPL_OK;
        } else if (st) {
            npl_error_set(err, st, "%.*s", NPL_ERROR_MESSAGE_MAX - 1, why.message);
        } else {
            out->supported = true;
            const npl_arch *a = npl_arch_find(out->architecture);
            out->embedding = npl_arch_makes_embeddings(a, g);
            out->rerank = out->embedding && arch_u32(g, out->architecture, "pooling_type") == 4;
        }
    }
    npl_gguf_close(g);
    return st;
}
