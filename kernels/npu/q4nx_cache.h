/* One-time cache of repacked Q4NX tensors, kept next to the model so the
 * repack runs once. The file records what it was made from (model size,
 * mtime and a caller digest), so a changed model is noticed and the cache
 * rebuilt; every tensor carries a checksum, so a damaged file is too.
 * Files are written to a temporary name and renamed into place, so a
 * crash never leaves a half-written cache under the real name. Layout in
 * docs/npu.md. */
#ifndef NPL_Q4NX_CACHE_H
#define NPL_Q4NX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "q4nx.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NPL_Q4NX_CACHE_MAGIC "NPLQ4NX\0"
#define NPL_Q4NX_CACHE_VERSION 2u /* 2: the public reference's byte order */
#define NPL_Q4NX_CACHE_HEADER_BYTES 64u
#define NPL_Q4NX_CACHE_ALIGN 64u      /* tensor data offsets are multiples */
#define NPL_Q4NX_CACHE_NAME_MAX 255u  /* bytes in a tensor name */

/* What the cache was built from; all three must match to reuse it. */
typedef struct npl_q4nx_cache_key {
    uint64_t source_size;      /* model file size in bytes */
    int64_t source_mtime_ns;   /* model file modification time */
    uint64_t source_digest;    /* caller's digest, e.g. of the tensor list */
} npl_q4nx_cache_key;

/* Fills size and mtime from the model file; digest is stored as given. */
npl_status npl_q4nx_cache_key_from_file(const char *model_path, uint64_t digest,
                                        npl_q4nx_cache_key *key, npl_error *err);

/* 64-bit checksum used for tensor data and the table (not cryptographic:
 * it detects damage and staleness, not tampering). Chain calls through
 * seed to digest several pieces. */
uint64_t npl_q4nx_checksum(const void *data, size_t n, uint64_t seed);

typedef struct npl_q4nx_cache_writer npl_q4nx_cache_writer;

/* Starts dir/file_name (written as a temporary file in dir). */
npl_status npl_q4nx_cache_writer_open(const char *dir, const char *file_name,
                                      const npl_q4nx_cache_key *key,
                                      npl_q4nx_cache_writer **out, npl_error *err);

/* Appends one repacked tensor; names must be unique. */
npl_status npl_q4nx_cache_writer_add(npl_q4nx_cache_writer *w, const char *name,
                                     uint32_t src_type, const npl_q4nx_layout *layout,
                                     const void *data, npl_error *err);

/* Writes the table and header, syncs, and renames into place. Frees w
 * whatever the outcome; on failure the temporary file is removed. */
npl_status npl_q4nx_cache_writer_commit(npl_q4nx_cache_writer *w, npl_error *err);

/* Drops an unfinished cache (w may be NULL). */
void npl_q4nx_cache_writer_abort(npl_q4nx_cache_writer *w);

typedef enum npl_q4nx_cache_state {
    NPL_Q4NX_CACHE_VALID = 0,
    NPL_Q4NX_CACHE_MISSING,  /* no file: build it */
    NPL_Q4NX_CACHE_STALE,    /* made from another model file: rebuild */
    NPL_Q4NX_CACHE_CORRUPT,  /* damaged or unknown format: rebuild */
} npl_q4nx_cache_state;

typedef struct npl_q4nx_cache npl_q4nx_cache;

/* Opens and fully verifies dir/file_name against key. Returns NPL_OK with
 * *out set only when valid; otherwise an error (message says why) and
 * *state tells the caller whether to build or rebuild. */
npl_status npl_q4nx_cache_open(const char *dir, const char *file_name,
                               const npl_q4nx_cache_key *key, npl_q4nx_cache **out,
                               npl_q4nx_cache_state *state, npl_error *err);

/* Opens dir/file_name like npl_q4nx_cache_open (header, key, table and
 * its checksum, every tensor's bounds and size) but neither maps the file
 * nor reads the tensor data: npl_q4nx_cache_read reads each tensor once,
 * straight into its destination, and verifies its checksum then. For a
 * large cache read once at load: one pass over the data instead of two,
 * and a file truncated or rewritten in place meanwhile is a read error,
 * not a fault in a mapping. */
npl_status npl_q4nx_cache_open_unmapped(const char *dir, const char *file_name,
                                        const npl_q4nx_cache_key *key, npl_q4nx_cache **out,
                                        npl_q4nx_cache_state *state, npl_error *err);

size_t npl_q4nx_cache_count(const npl_q4nx_cache *cache);

/* The tensor's Q4NX bytes (layout->bytes long, valid until close), or NULL
 * when the cache has no tensor of that name; always NULL for a cache
 * opened unmapped (read it with npl_q4nx_cache_read). */
const void *npl_q4nx_cache_find(const npl_q4nx_cache *cache, const char *name,
                                uint32_t *src_type, npl_q4nx_layout *layout);

/* Copies tensor `name` into dst (dst_bytes >= its layout's bytes) after
 * checking that it was repacked from src_type with shape rows x cols.
 * NPL_ERR_FORMAT when the cache has no such tensor, holds it with another
 * type or shape, or (unmapped) its bytes are short or fail their
 * checksum; NPL_ERR_IO when reading fails. */
npl_status npl_q4nx_cache_read(const npl_q4nx_cache *cache, const char *name, uint32_t src_type,
                               uint32_t rows, uint32_t cols, void *dst, size_t dst_bytes,
                               npl_error *err);

void npl_q4nx_cache_close(npl_q4nx_cache *cache);

#ifdef __cplusplus
}
#endif

#endif
