/* Fuzz target for the GGUF reader: parse an arbitrary buffer, then walk
 * every metadata value and tensor through the public API and check that
 * everything the reader hands out lies inside the input. Any violated
 * invariant aborts, which libFuzzer reports as a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "gguf.h"

#define FUZZ_NAME "fuzz"

typedef struct walk {
    const uint8_t *begin;
    const uint8_t *end;
    volatile unsigned sink; /* keeps the reads of walked bytes alive */
} walk;

static void require(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz-gguf: invariant violated: %s\n", what);
        abort();
    }
}

/* [p, p + len) must lie inside the input; reads its first and last byte. */
static void check_range(walk *w, const void *p, uint64_t len, const char *what)
{
    if (len == 0)
        return;
    const uint8_t *q = p;
    require(q != NULL && q >= w->begin && q <= w->end && len <= (uint64_t)(w->end - q), what);
    w->sink += q[0] + q[len - 1];
}

static unsigned elem_size(npl_gguf_type t)
{
    switch (t) {
    case NPL_GGUF_UINT8: case NPL_GGUF_INT8: case NPL_GGUF_BOOL: return 1;
    case NPL_GGUF_UINT16: case NPL_GGUF_INT16: return 2;
    case NPL_GGUF_UINT32: case NPL_GGUF_INT32: case NPL_GGUF_FLOAT32: return 4;
    case NPL_GGUF_UINT64: case NPL_GGUF_INT64: case NPL_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static void walk_value(walk *w, const npl_gguf_value *v, unsigned depth)
{
    require(strcmp(npl_gguf_type_name(v->type), "unknown") != 0, "known value type");
    if (v->type == NPL_GGUF_STRING) {
        check_range(w, v->str.ptr, v->str.len, "string inside the input");
        return;
    }
    if (v->type != NPL_GGUF_ARRAY)
        return;
    require(depth < 8, "array nesting within the limit"); /* depth = enclosing arrays */
    unsigned es = elem_size(v->arr.elem_type);
    if (es) {
        require(v->arr.items == NULL, "numeric array has no items");
        require(v->arr.count <= (uint64_t)(w->end - w->begin) / es, "numeric array count bounded");
        check_range(w, v->arr.data, v->arr.count * es, "numeric array inside the input");
        for (uint64_t i = 0; i < v->arr.count; i++) {
            double d = npl_gguf_array_f64(v, i);
            w->sink += (unsigned)npl_gguf_array_i64(v, i) + (unsigned)npl_gguf_array_u64(v, i) + (d == d);
        }
        require(npl_gguf_array_u64(v, v->arr.count) == 0, "out-of-range element is 0");
        return;
    }
    require(v->arr.count == 0 || v->arr.items != NULL, "string/nested array has items");
    require(npl_gguf_array_i64(v, 0) == 0, "non-numeric array element is 0");
    for (uint64_t i = 0; i < v->arr.count; i++) {
        require(v->arr.items[i].type == v->arr.elem_type, "item type matches element type");
        walk_value(w, &v->arr.items[i], depth + 1);
    }
}

static void walk_kv(walk *w, const npl_gguf *g, const npl_gguf_kv *kv)
{
    require(kv->key.len > 0, "non-empty key");
    check_range(w, kv->key.ptr, kv->key.len, "key inside the input");
    walk_value(w, &kv->value, 0);

    /* Keys with an embedded NUL cannot be named by a C string. */
    char *key = npl_str_dup(kv->key);
    if (!key || strlen(key) != kv->key.len) {
        free(key);
        return;
    }
    /* keys are unique, so lookup must find this very entry */
    require(npl_gguf_find(g, key) == &kv->value, "key lookup finds its entry");

    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool b;
    npl_str s;
    w->sink += npl_gguf_get_u32(g, key, &u32) + npl_gguf_get_u64(g, key, &u64) + npl_gguf_get_i64(g, key, &i64) +
               npl_gguf_get_f32(g, key, &f) + npl_gguf_get_bool(g, key, &b) + npl_gguf_get_str(g, key, &s);
    for (int t = NPL_GGUF_UINT8; t <= NPL_GGUF_FLOAT64; t++)
        w->sink += npl_gguf_get_array(g, key, (npl_gguf_type)t) != NULL;

    npl_error err;
    if (npl_gguf_require_u32(g, key, &u32, &err) != NPL_OK)
        require(strncmp(err.message, FUZZ_NAME ": key '", strlen(FUZZ_NAME ": key '")) == 0, "require message");
    if (npl_gguf_require_f32(g, key, &f, &err) != NPL_OK)
        require(err.code == NPL_ERR_FORMAT && strstr(err.message, "expected a number"), "require_f32 message");
    if (npl_gguf_require_str(g, key, &s, &err) != NPL_OK)
        require(err.code == NPL_ERR_FORMAT && strstr(err.message, "expected string"), "require_str message");
    if (!npl_gguf_require_array(g, key, NPL_GGUF_STRING, &err))
        require(err.code == NPL_ERR_FORMAT && strstr(err.message, "expected array of string"),
                "require_array message");
    free(key);
}

static void walk_tensor(walk *w, const npl_gguf *g, const npl_gguf_tensor *t)
{
    require(t->name.len > 0 && t->name.len <= 255, "tensor name length");
    check_range(w, t->name.ptr, t->name.len, "tensor name inside the input");
    require(t->n_dims >= 1 && t->n_dims <= NPL_GGUF_MAX_DIMS, "tensor dims");
    for (int d = 0; d < NPL_GGUF_MAX_DIMS; d++)
        require(t->ne[d] >= 1, "tensor dim >= 1");
    require(npl_gguf_tensor_nelements(t) <= INT64_MAX, "element count fits int64");
    require(t->size > 0 && t->offset % npl_gguf_alignment(g) == 0, "tensor size and offset");
    check_range(w, t->data, t->size, "tensor data inside the input");

    char *name = npl_str_dup(t->name);
    if (name && strlen(name) == t->name.len)
        require(npl_gguf_find_tensor(g, name) == t, "tensor lookup finds its entry");
    free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npl_error err;
    npl_gguf *g = npl_gguf_open_memory(data, size, FUZZ_NAME, &err);
    if (!g) {
        /* every rejection is a located, named error */
        require(err.code != NPL_OK, "failure has an error code");
        require(strncmp(err.message, FUZZ_NAME ": offset ", strlen(FUZZ_NAME ": offset ")) == 0,
                "failure message names the file and offset");
        return 0;
    }
    walk w = { .begin = data, .end = data + size, .sink = 0 };
    require(npl_gguf_version(g) == 2 || npl_gguf_version(g) == 3, "version");
    uint64_t align = npl_gguf_alignment(g);
    require(align != 0 && (align & (align - 1)) == 0, "alignment is a power of two");
    require(npl_gguf_file_size(g) == size, "file size");

    size_t n_kv = npl_gguf_n_kv(g);
    for (size_t i = 0; i < n_kv; i++)
        walk_kv(&w, g, npl_gguf_kv_at(g, i));
    require(npl_gguf_kv_at(g, n_kv) == NULL, "kv_at past the end");

    size_t n_tensors = npl_gguf_n_tensors(g);
    for (size_t i = 0; i < n_tensors; i++)
        walk_tensor(&w, g, npl_gguf_tensor_at(g, i));
    require(npl_gguf_tensor_at(g, n_tensors) == NULL, "tensor_at past the end");

    npl_gguf_close(g);
    return 0;
}
