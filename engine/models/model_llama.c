/* The llama family's hook of the architecture table (engine/models/model_arch.c),
 * also used by qwen2 and qwen3, which read the same keys: dense models
 * only, and no rope scaling beyond rope_freqs.weight. */
#include "model_arch.h"

npl_status npl_llama_read_extra(npl_binder *b)
{
    npl_status st;
    uint32_t n_expert = 0;
    if ((st = npl_bind_u32(b, "expert_count", false, 0, 0, UINT32_MAX, &n_expert)))
        return st;
    if (n_expert > 0)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: mixture-of-experts %s models (%s.expert_count = %u) are not supported", b->path,
                             b->arch, b->arch, n_expert);
    return npl_llama_rope_plain(b);
}

npl_status npl_llama_rope_plain(npl_binder *b)
{
    npl_status st;
    npl_str scaling;
    bool found;
    if ((st = npl_bind_str(b, "rope.scaling.type", &scaling, &found)))
        return st;
    if (found && !npl_str_eq(scaling, "none"))
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: rope scaling type '%.*s' is not supported", b->path,
                             (int)(scaling.len > 64 ? 64 : scaling.len), scaling.ptr);
    return NPL_OK;
}
