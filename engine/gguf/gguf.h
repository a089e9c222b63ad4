/* GGUF v2/v3 reader. The file is mmap'ed read-only; metadata strings and
 * tensor data are views into the mapping (never copied), so loading costs
 * time proportional to the metadata, not to the weights.
 *
 * Every length, count and offset is validated against the file size before
 * it is used: a malformed file yields NPL_ERR_FORMAT with a message naming
 * the file, the byte offset and what is wrong. */
#ifndef NPL_GGUF_H
#define NPL_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* On-disk metadata value types; never renumber. */
typedef enum npl_gguf_type {
    NPL_GGUF_UINT8 = 0,
    NPL_GGUF_INT8 = 1,
    NPL_GGUF_UINT16 = 2,
    NPL_GGUF_INT16 = 3,
    NPL_GGUF_UINT32 = 4,
    NPL_GGUF_INT32 = 5,
    NPL_GGUF_FLOAT32 = 6,
    NPL_GGUF_BOOL = 7,
    NPL_GGUF_STRING = 8,
    NPL_GGUF_ARRAY = 9,
    NPL_GGUF_UINT64 = 10,
    NPL_GGUF_INT64 = 11,
    NPL_GGUF_FLOAT64 = 12,
} npl_gguf_type;

/* A string inside the mapping: NOT NUL-terminated, may contain NULs. */
typedef struct npl_str {
    const char *ptr;
    uint64_t len;
} npl_str;

typedef struct npl_gguf_value npl_gguf_value;

struct npl_gguf_value {
    npl_gguf_type type;
    union {
        uint64_t u64;   /* UINT8/16/32/64 (zero-extended) and BOOL (0/1) */
        int64_t i64;    /* INT8/16/32/64 (sign-extended) */
        double f64;     /* FLOAT32/64 */
        npl_str str;    /* STRING */
        struct {
            npl_gguf_type elem_type;
            uint64_t count;
            /* Numeric/bool elements: little-endian packed data in the
             * mapping (count * element size bytes); read with
             * npl_gguf_array_* helpers. */
            const void *data;
            /* STRING and ARRAY elements: parsed per element. */
            const npl_gguf_value *items;
        } arr;
    };
};

typedef struct npl_gguf_kv {
    npl_str key;
    npl_gguf_value value;
} npl_gguf_kv;

#define NPL_GGUF_MAX_DIMS 4

typedef struct npl_gguf_tensor {
    npl_str name;
    uint32_t n_dims;
    uint64_t ne[NPL_GGUF_MAX_DIMS]; /* ne[0] is the contiguous (row) dim; unused dims are 1 */
    uint32_t type;                  /* npl_ggml_type id */
    uint64_t offset;                /* relative to the data section */
    uint64_t size;                  /* bytes */
    const void *data;               /* into the mapping */
} npl_gguf_tensor;

typedef struct npl_gguf npl_gguf;

/* Maps and parses a file. Returns NULL and fills err on failure. */
npl_gguf *npl_gguf_open(const char *path, npl_error *err);

/* Parses an in-memory image (not copied; must outlive the handle). `name`
 * is used in error messages. For tests and fuzzing. */
npl_gguf *npl_gguf_open_memory(const void *data, size_t size, const char *name, npl_error *err);

void npl_gguf_close(npl_gguf *g);

const char *npl_gguf_path(const npl_gguf *g);
uint32_t npl_gguf_version(const npl_gguf *g);
uint64_t npl_gguf_alignment(const npl_gguf *g);
uint64_t npl_gguf_file_size(const npl_gguf *g);
/* The file's bytes (file_size of them) and where its tensor data begins:
 * the bytes before it are the header, metadata and tensor table. */
const uint8_t *npl_gguf_bytes(const npl_gguf *g);
uint64_t npl_gguf_data_offset(const npl_gguf *g);

/* Metadata. Lookup is O(1) average. */
size_t npl_gguf_n_kv(const npl_gguf *g);
const npl_gguf_kv *npl_gguf_kv_at(const npl_gguf *g, size_t i);
const npl_gguf_value *npl_gguf_find(const npl_gguf *g, const char *key);

/* Typed getters: true on success. Integer getters accept any integer type
 * whose value fits the target; float getters accept FLOAT32/FLOAT64 and
 * integers. A missing key or mismatched type returns false (no error). */
bool npl_gguf_get_u32(const npl_gguf *g, const char *key, uint32_t *out);
bool npl_gguf_get_u64(const npl_gguf *g, const char *key, uint64_t *out);
bool npl_gguf_get_i64(const npl_gguf *g, const char *key, int64_t *out);
bool npl_gguf_get_f32(const npl_gguf *g, const char *key, float *out);
bool npl_gguf_get_bool(const npl_gguf *g, const char *key, bool *out);
bool npl_gguf_get_str(const npl_gguf *g, const char *key, npl_str *out);
/* Array of the given element type (NPL_GGUF_ARRAY for nested arrays). */
const npl_gguf_value *npl_gguf_get_array(const npl_gguf *g, const char *key, npl_gguf_type elem_type);

/* Required variants: same as the getters but on failure fill err with
 * NPL_ERR_FORMAT "FILE: missing required key 'KEY'" (or wrong type). */
npl_status npl_gguf_require_u32(const npl_gguf *g, const char *key, uint32_t *out, npl_error *err);
npl_status npl_gguf_require_f32(const npl_gguf *g, const char *key, float *out, npl_error *err);
npl_status npl_gguf_require_str(const npl_gguf *g, const char *key, npl_str *out, npl_error *err);
const npl_gguf_value *npl_gguf_require_array(const npl_gguf *g, const char *key, npl_gguf_type elem_type, npl_error *err);

/* Element access for numeric arrays (index < count; converts to the
 * requested representation like the scalar getters). */
int64_t npl_gguf_array_i64(const npl_gguf_value *arr, uint64_t i);
uint64_t npl_gguf_array_u64(const npl_gguf_value *arr, uint64_t i);
double npl_gguf_array_f64(const npl_gguf_value *arr, uint64_t i);

/* Tensors. Lookup by name is O(1) average. */
size_t npl_gguf_n_tensors(const npl_gguf *g);
const npl_gguf_tensor *npl_gguf_tensor_at(const npl_gguf *g, size_t i);
const npl_gguf_tensor *npl_gguf_find_tensor(const npl_gguf *g, const char *name);
uint64_t npl_gguf_tensor_nelements(const npl_gguf_tensor *t);

/* Convenience: true when s equals the NUL-terminated c string. */
bool npl_str_eq(npl_str s, const char *c);
/* Copies s into a freshly malloc'ed NUL-terminated string (NULL on OOM). */
char *npl_str_dup(npl_str s);

const char *npl_gguf_type_name(npl_gguf_type t);

#ifdef __cplusplus
}
#endif

#endif
