/* The NPU runtime's weights at load: every matrix in Q4NX, read from the
 * model's Q4NX cache file when a valid one exists, else repacked from the
 * GGUF tensors and written as the new cache (file format:
 * kernels/npu/q4nx_cache.h; docs/npu.md "Cache file").
 *
 * The cache of /dir/model.gguf is <cache dir>/model.gguf.q4nx. It is tied
 * to the model by the file's size and mtime and a digest of the matrices
 * (names, types, shapes) and of what the repacker makes of each type, so
 * a changed model or repacker rebuilds it. Only a failing repack fails:
 * a cache that is missing, stale or damaged (checked tensor by tensor as
 * it is read) is rebuilt, one that cannot be written is skipped, and the
 * report says which; the engine never prints. */
#ifndef NPL_NPU_WEIGHT_CACHE_H
#define NPL_NPU_WEIGHT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "matvec.h"
#include "npl_error.h"

#define NPL_NPU_WEIGHT_CACHE_SUFFIX ".q4nx"

/* One matrix of the model and where its Q4NX bytes go (a host view of a
 * device buffer, dst_bytes >= its Q4NX layout's bytes). */
typedef struct npl_npu_cache_matrix {
    const char *name; /* GGUF tensor name: the cache's key for it */
    const npl_matrix *mat;
    void *dst;
    size_t dst_bytes;
} npl_npu_cache_matrix;

/* What happened, for npl_device_stats. */
typedef struct npl_npu_cache_report {
    uint32_t repacked;  /* matrices repacked (0 when the cache held them) */
    uint32_t cached;    /* matrices read from the cache */
    bool written;       /* a new cache file was written */
    char note[400];     /* one line: the file used or written, or why not */
} npl_npu_cache_report;

/* Fills every mats[i].dst for the model at model_path. cache_dir as
 * npl_model_params.npu_cache_dir: NULL = the model's directory, "" = no
 * cache. Fails only when a matrix cannot be repacked, for lack of memory,
 * or for a bad argument. */
npl_status npl_npu_weights_fill(const char *model_path, const char *cache_dir,
                                const npl_npu_cache_matrix *mats, size_t n,
                                npl_npu_cache_report *report, npl_error *err);

#endif
