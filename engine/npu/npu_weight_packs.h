/* The NPU runtime's packed weight arguments: the kernels take a layer's
 * weights as two buffer arguments, w_attn (attention norm, Q/K/V, Q/K
 * norms, rope factors) and w_ffn (O projection, norms, gate/up/down), and
 * the output norm and LM head as w_head, each a pack whose parts the
 * kernels' manifest lays out (docs/npu.md, "Kernel groups"). */
#ifndef NPL_NPU_WEIGHT_PACKS_H
#define NPL_NPU_WEIGHT_PACKS_H

#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "npu_manifest.h"
#include "npu_weight_cache.h"

struct npl_model;

/* The packs, named in the contract w_attn, w_ffn and w_head. */
typedef enum npl_npu_pack {
    NPL_NPU_PACK_ATTN,
    NPL_NPU_PACK_FFN,
    NPL_NPU_PACK_HEAD,
    NPL_NPU_PACK_COUNT
} npl_npu_pack;

/* Bytes of a pack as specs[0] lays it out for shape; every other group
 * of specs[1..n-1] that is not NULL takes the same pack and must lay it
 * out the same way (refused otherwise). */
npl_status npl_npu_pack_bytes(const npl_npu_group_spec *const *specs, size_t n,
                              npl_npu_pack pack, const npl_npu_shape *shape, size_t *bytes,
                              npl_error *err);

/* Fills layer l's pack (any l for the head's) at host, part by part as
 * spec lays it out for shape: vectors now, matrices appended to mats
 * (names[i] holding their GGUF names) for npl_npu_weights_fill. Every
 * part must be a weight the model has (or lacks, for an empty part), of
 * exactly the part's size. */
npl_status npl_npu_pack_fill(const struct npl_model *m, const npl_npu_group_spec *spec,
                             npl_npu_pack pack, uint32_t l, const npl_npu_shape *shape,
                             uint8_t *host, npl_npu_cache_matrix *mats, char (*names)[64],
                             size_t *n_mats, npl_error *err);

#endif
