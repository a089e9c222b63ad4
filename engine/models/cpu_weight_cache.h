/* The CPU's repacked weights at load, through a cache file: the SIMD
 * kernels multiply the integer matrices in an interleaved layout
 * (kernels/cpu/matmul_packed.h) that costs a pass over every weight to
 * make. With a cache directory, the first load makes it and writes it to
 * <dir>/<model basename>.cpuw; the next loads map that file read-only and
 * hand its pages to the kernels, so a reload after an idle unload costs
 * little more than the mapping (docs/engine.md "Packed-weight cache").
 *
 * The file is tied to the model by the file's size and mtime and a hash of
 * its header, metadata and tensor table, and to the kernels by their
 * layout version; a missing, stale or damaged cache is rebuilt (written
 * to a temporary file and renamed into place), and one that cannot be
 * written (full disk, unwritable directory) is skipped: the weights are
 * then repacked in memory as without a cache. Nothing here fails a load;
 * the report says what happened. The engine never prints. */
#ifndef NPL_CPU_WEIGHT_CACHE_H
#define NPL_CPU_WEIGHT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "matvec.h"
#include "npullm.h"
#include "threadpool.h"

#define NPL_CPU_WEIGHT_CACHE_SUFFIX ".cpuw"
#define NPL_CPU_WEIGHT_CACHE_MAGIC "NPLCPUW\0"
#define NPL_CPU_WEIGHT_CACHE_VERSION 1u /* of the file format below the layout */

/* Header field offsets (little-endian); the table of matrices follows at
 * HEADER_BYTES, each matrix's bytes start on a page boundary. */
enum {
    NPL_CPUW_MAGIC = 0,           /* 8 bytes */
    NPL_CPUW_VERSION = 8,         /* u32 NPL_CPU_WEIGHT_CACHE_VERSION */
    NPL_CPUW_LAYOUT = 12,         /* u32 npl_matmul_pack_layout_version() */
    NPL_CPUW_SOURCE_SIZE = 16,    /* u64 model file size */
    NPL_CPUW_SOURCE_MTIME = 24,   /* i64 model file mtime, ns */
    NPL_CPUW_SOURCE_DIGEST = 32,  /* u64 hash of the model's bytes before its tensor data */
    NPL_CPUW_COUNT = 40,          /* u32 matrices */
    NPL_CPUW_FILE_BYTES = 48,     /* u64 the whole file */
    NPL_CPUW_TABLE_CHECKSUM = 56, /* u64 */
    NPL_CPUW_HEADER_CHECKSUM = 64, /* u64 of bytes 0..63 */
    NPL_CPUW_HEADER_BYTES = 128,
};

/* Table entry: u64 source offset (of the matrix in the model file), u32
 * type, u32 0, i64 rows, i64 cols, u64 offset, u64 bytes, u64 checksum of
 * the sampled pages (first, middle and last 4 KiB of the matrix). */
#define NPL_CPUW_ENTRY_BYTES 56u
#define NPL_CPUW_SAMPLE_BYTES 4096u
#define NPL_CPUW_DATA_ALIGN 4096u

/* The mapped cache file a model's kernels read (NULL when none). */
typedef struct npl_cpu_weight_cache npl_cpu_weight_cache;

/* Repacks mats (or maps them from the cache in cache_dir, NULL or "" =
 * no cache: they are then repacked on first use, as before) for ws.
 * Never fails: report says what happened. A new cache file is written by
 * a thread of its own from ws's packed copies (report->writing): wait for
 * it before ws is freed. The returned handle (the mapping, the writer)
 * must outlive ws. */
npl_cpu_weight_cache *npl_cpu_weights_prepare(const npl_gguf *g, const char *cache_dir,
                                              npl_matmul_ws *ws, npl_threadpool *pool,
                                              const npl_matrix *const *mats, size_t n,
                                              npl_weight_cache_stats *report);

/* Waits for a cache file being written in the background, adding how it
 * went to report (may be NULL): false when none was. */
bool npl_cpu_weight_cache_wait(npl_cpu_weight_cache *c, npl_weight_cache_stats *report);

/* Waits as above, then unmaps. */
void npl_cpu_weight_cache_free(npl_cpu_weight_cache *c);

/* The above for every matrix the CPU forward pass multiplies, kept in m
 * (weight_cache, weight_cache_stats). */
struct npl_model;
void npl_model_cpu_weights_prepare(struct npl_model *m, const char *cache_dir);

#endif
