/* GGUF v2/v3 reader. Parses only the header, metadata and tensor table;
 * everything else (strings, numeric arrays, tensor data) stays a view into
 * the caller's buffer or the read-only mapping.
 *
 * Layout (all little-endian):
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv x { string key, u32 value_type, value }
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to general.alignment, then the data section.
 * A string is u64 length + bytes; an array is u32 elem_type + u64 count +
 * elements.
 *
 * Every read goes through one bounds-checked cursor, and every count is
 * checked against the bytes left before anything is allocated for it. */
#include "gguf.h"

#include "ggml_types.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_ALIGNMENT_KEY "general.alignment"
/* Deeper nesting has no use in any model and would let a tiny file
 * drive deep recursion. */
#define GGUF_MAX_ARRAY_DEPTH 8
/* Strings and nested arrays inside arrays, all arrays of a file together:
 * each is parsed into an npl_gguf_value (40 bytes, from as few as 8 in the
 * file), so this bounds what a parse can allocate (about 84 MB) whatever
 * the file holds. Real tokenizers need far fewer (262,144 tokens plus
 * ~500,000 merges for the largest vocabularies). */
#define GGUF_MAX_ARRAY_ITEMS (UINT64_C(1) << 21)
/* ggml keeps names in a fixed char[256] including the NUL. */
#define GGUF_MAX_TENSOR_NAME_LEN 255

/* Smallest possible encodings, used to reject counts that cannot fit in
 * the bytes left before allocating anything for them. */
#define GGUF_MIN_STRING_BYTES 8u                       /* u64 length, empty */
#define GGUF_MIN_ARRAY_BYTES 12u                       /* u32 type + u64 count */
#define GGUF_MIN_KV_BYTES (8u + 1u + 4u + 1u)          /* 1-byte key, u8 value */
#define GGUF_MIN_TENSOR_INFO_BYTES (8u + 1u + 4u + 8u + 4u + 8u)

/* One allocation per parsed string/nested array; freed together. */
typedef struct items_block {
    struct items_block *next;
    npl_gguf_value items[];
} items_block;

/* Open addressing with linear probing; slots hold entry index + 1 so that
 * zero means empty. Capacity is a power of two at least twice the entries,
 * so probes stay short and a free slot always exists. */
typedef struct name_index {
    size_t *slots;
    size_t mask;
} name_index;

struct npl_gguf {
    char *path;
    const uint8_t *base;
    uint64_t size;
    bool mapped;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    npl_gguf_kv *kvs;
    size_t n_kv;
    npl_gguf_tensor *tensors;
    size_t n_tensors;
    name_index kv_index;
    name_index tensor_index;
    items_block *blocks;
    uint64_t n_items; /* parsed array elements, against GGUF_MAX_ARRAY_ITEMS */
};

/* ---- error messages ---- */

/* Renders a file string for an error message: bounded length, and bytes
 * that would garble a terminal or log shown as '?'. */
static const char *printable(npl_str s, char *buf, size_t cap)
{
    const size_t limit = 64;
    size_t n = 0;
    for (uint64_t i = 0; i < s.len && n + 4 < cap; i++) {
        if (i == limit) {
            memcpy(buf + n, "...", 3);
            n += 3;
            break;
        }
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    buf[n] = '\0';
    return buf;
}

#define NAME_BUF 80

/* ---- bounds-checked little-endian cursor ---- */

typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    const char *name;
    npl_error *err;
} cursor;

static bool fail_at(const cursor *c, npl_status code, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool fail_at(const cursor *c, npl_status code, uint64_t offset, const char *fmt, ...)
{
    char what[NPL_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    npl_error_set(c->err, code, "%s: offset %llu: %s", c->name, (unsigned long long)offset, what);
    return false;
}

#define FAIL(c, offset, ...) fail_at((c), NPL_ERR_FORMAT, (offset), __VA_ARGS__)

static uint64_t cur_left(const cursor *c)
{
    return c->size - c->pos;
}

static uint64_t load_le(const uint8_t *p, unsigned nbytes)
{
    uint64_t v = 0;
    for (unsigned i = nbytes; i-- > 0;)
        v = (v << 8) | p[i];
    return v;
}

static bool cur_take(cursor *c, uint64_t n, const char *what, const uint8_t **out)
{
    if (n > cur_left(c))
        return FAIL(c, c->pos, "truncated: %s needs %llu bytes but only %llu are left", what,
                    (unsigned long long)n, (unsigned long long)cur_left(c));
    *out = c->base + c->pos;
    c->pos += n;
    return true;
}

static bool cur_uint(cursor *c, unsigned nbytes, const char *what, uint64_t *out)
{
    const uint8_t *p = NULL;
    if (!cur_take(c, nbytes, what, &p))
        return false;
    *out = load_le(p, nbytes);
    return true;
}

static bool cur_u32(cursor *c, const char *what, uint32_t *out)
{
    uint64_t v = 0;
    if (!cur_uint(c, 4, what, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool cur_u64(cursor *c, const char *what, uint64_t *out)
{
    return cur_uint(c, 8, what, out);
}

static bool cur_str(cursor *c, const char *what, npl_str *out)
{
    uint64_t at = c->pos;
    uint64_t len = 0;
    char label[64];
    snprintf(label, sizeof label, "%s length", what);
    if (!cur_u64(c, label, &len))
        return false;
    if (len > cur_left(c))
        return FAIL(c, at, "%s length %llu exceeds the %llu bytes left in the file", what,
                    (unsigned long long)len, (unsigned long long)cur_left(c));
    out->ptr = (const char *)c->base + c->pos;
    out->len = len;
    c->pos += len;
    return true;
}

/* ---- checked arithmetic ---- */

static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static bool is_pow2(uint64_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

/* Two's-complement sign extension without implementation-defined casts. */
static int64_t sign_extend(uint64_t raw, unsigned bits)
{
    uint64_t sign = (uint64_t)1 << (bits - 1);
    uint64_t magnitude = raw & (sign - 1);
    if (raw & sign)
        return (int64_t)magnitude - (int64_t)(sign - 1) - 1;
    return (int64_t)magnitude;
}

/* ---- name index ---- */

typedef npl_str (*name_at_fn)(const npl_gguf *g, size_t i);

static npl_str kv_name_at(const npl_gguf *g, size_t i)
{
    return g->kvs[i].key;
}

static npl_str tensor_name_at(const npl_gguf *g, size_t i)
{
    return g->tensors[i].name;
}

static uint64_t hash_bytes(const char *p, uint64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

static bool name_index_init(name_index *ix, size_t n)
{
    size_t cap = 8;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 2 / sizeof(size_t))
            return false;
        cap *= 2;
    }
    ix->slots = calloc(cap, sizeof *ix->slots);
    ix->mask = cap - 1;
    return ix->slots != NULL;
}

/* The slot holding `name`, or the empty slot where it would go. */
static size_t name_index_slot(const name_index *ix, const npl_gguf *g, name_at_fn name_at,
                              const char *ptr, uint64_t len)
{
    size_t slot = (size_t)hash_bytes(ptr, len) & ix->mask;
    for (;;) {
        size_t entry = ix->slots[slot];
        if (entry == 0)
            return slot;
        npl_str s = name_at(g, entry - 1);
        if (s.len == len && memcmp(s.ptr, ptr, len) == 0)
            return slot;
        slot = (slot + 1) & ix->mask;
    }
}

/* Entry index of `name`, or SIZE_MAX. */
static size_t name_index_find(const name_index *ix, const npl_gguf *g, name_at_fn name_at,
                              const char *name)
{
    if (!ix->slots || !name)
        return SIZE_MAX;
    size_t entry = ix->slots[name_index_slot(ix, g, name_at, name, strlen(name))];
    return entry ? entry - 1 : SIZE_MAX;
}

/* Adds entry i; false when its name is already present. */
static bool name_index_add(name_index *ix, const npl_gguf *g, name_at_fn name_at, size_t i)
{
    npl_str s = name_at(g, i);
    size_t slot = name_index_slot(ix, g, name_at, s.ptr, s.len);
    if (ix->slots[slot] != 0)
        return false;
    ix->slots[slot] = i + 1;
    return true;
}

/* ---- metadata values ---- */

static bool type_is_known(uint32_t t)
{
    return t <= NPL_GGUF_FLOAT64;
}

/* Encoded size of a fixed-size type; 0 for STRING and ARRAY. */
static unsigned scalar_size(npl_gguf_type t)
{
    switch (t) {
    case NPL_GGUF_UINT8:
    case NPL_GGUF_INT8:
    case NPL_GGUF_BOOL:
        return 1;
    case NPL_GGUF_UINT16:
    case NPL_GGUF_INT16:
        return 2;
    case NPL_GGUF_UINT32:
    case NPL_GGUF_INT32:
    case NPL_GGUF_FLOAT32:
        return 4;
    case NPL_GGUF_UINT64:
    case NPL_GGUF_INT64:
    case NPL_GGUF_FLOAT64:
        return 8;
    case NPL_GGUF_STRING:
    case NPL_GGUF_ARRAY:
        break;
    }
    return 0;
}

static bool is_unsigned_type(npl_gguf_type t)
{
    return t == NPL_GGUF_UINT8 || t == NPL_GGUF_UINT16 || t == NPL_GGUF_UINT32 || t == NPL_GGUF_UINT64;
}

static bool is_signed_type(npl_gguf_type t)
{
    return t == NPL_GGUF_INT8 || t == NPL_GGUF_INT16 || t == NPL_GGUF_INT32 || t == NPL_GGUF_INT64;
}

static bool is_float_type(npl_gguf_type t)
{
    return t == NPL_GGUF_FLOAT32 || t == NPL_GGUF_FLOAT64;
}

/* Decodes a fixed-size value of type t from its raw little-endian bits. */
static void decode_scalar(npl_gguf_type t, uint64_t raw, npl_gguf_value *v)
{
    v->type = t;
    switch (t) {
    case NPL_GGUF_INT8:
    case NPL_GGUF_INT16:
    case NPL_GGUF_INT32:
    case NPL_GGUF_INT64:
        v->i64 = sign_extend(raw, scalar_size(t) * 8);
        break;
    case NPL_GGUF_FLOAT32: {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, sizeof f);
        v->f64 = f;
        break;
    }
    case NPL_GGUF_FLOAT64:
        memcpy(&v->f64, &raw, sizeof v->f64);
        break;
    default: /* unsigned and bool */
        v->u64 = raw;
        break;
    }
}

static npl_gguf_value *alloc_items(npl_gguf *g, uint64_t count)
{
    uint64_t bytes;
    if (!mul_u64(count, sizeof(npl_gguf_value), &bytes) || bytes > SIZE_MAX - sizeof(items_block))
        return NULL;
    items_block *b = calloc(1, sizeof(items_block) + (size_t)bytes);
    if (!b)
        return NULL;
    b->next = g->blocks;
    g->blocks = b;
    return b->items;
}

static bool parse_value(npl_gguf *g, cursor *c, npl_gguf_type t, npl_gguf_value *v, unsigned depth);

static bool parse_array(npl_gguf *g, cursor *c, npl_gguf_value *v, unsigned depth)
{
    uint64_t at = c->pos;
    if (depth > GGUF_MAX_ARRAY_DEPTH)
        return FAIL(c, at, "arrays nested more than %d levels deep", GGUF_MAX_ARRAY_DEPTH);

    uint32_t elem = 0;
    if (!cur_u32(c, "array element type", &elem))
        return false;
    if (!type_is_known(elem))
        return FAIL(c, at, "unknown array element type %u", elem);

    uint64_t count_at = c->pos;
    uint64_t count = 0;
    if (!cur_u64(c, "array count", &count))
        return false;

    npl_gguf_type et = (npl_gguf_type)elem;
    unsigned fixed = scalar_size(et);
    uint64_t min_elem = fixed ? fixed : et == NPL_GGUF_STRING ? GGUF_MIN_STRING_BYTES : GGUF_MIN_ARRAY_BYTES;
    if (count > cur_left(c) / min_elem)
        return FAIL(c, count_at, "array of %llu %s elements cannot fit in the %llu bytes left",
                    (unsigned long long)count, npl_gguf_type_name(et), (unsigned long long)cur_left(c));

    v->type = NPL_GGUF_ARRAY;
    v->arr.elem_type = et;
    v->arr.count = count;
    v->arr.data = NULL;
    v->arr.items = NULL;

    if (fixed) {
        const uint8_t *p = NULL;
        uint64_t data_at = c->pos;
        if (!cur_take(c, count * fixed, "array data", &p))
            return false;
        if (et == NPL_GGUF_BOOL) {
            for (uint64_t i = 0; i < count; i++)
                if (p[i] > 1)
                    return FAIL(c, data_at + i, "bool array element %llu has value %u (expected 0 or 1)",
                                (unsigned long long)i, p[i]);
        }
        v->arr.data = p;
        return true;
    }

    if (count == 0)
        return true;
    if (count > GGUF_MAX_ARRAY_ITEMS - g->n_items)
        return FAIL(c, count_at,
                    "array of %llu %s elements: more than %llu string or array elements in all arrays together",
                    (unsigned long long)count, npl_gguf_type_name(et), (unsigned long long)GGUF_MAX_ARRAY_ITEMS);
    g->n_items += count;
    npl_gguf_value *items = alloc_items(g, count);
    if (!items)
        return fail_at(c, NPL_ERR_NOMEM, count_at, "out of memory for an array of %llu elements",
                       (unsigned long long)count);
    v->arr.items = items;
    for (uint64_t i = 0; i < count; i++)
        if (!parse_value(g, c, et, &items[i], depth))
            return false;
    return true;
}

/* depth counts the arrays enclosing this value. */
static bool parse_value(npl_gguf *g, cursor *c, npl_gguf_type t, npl_gguf_value *v, unsigned depth)
{
    if (t == NPL_GGUF_STRING) {
        v->type = t;
        return cur_str(c, "string value", &v->str);
    }
    if (t == NPL_GGUF_ARRAY)
        return parse_array(g, c, v, depth + 1);

    uint64_t at = c->pos;
    uint64_t raw = 0;
    char label[32];
    snprintf(label, sizeof label, "%s value", npl_gguf_type_name(t));
    if (!cur_uint(c, scalar_size(t), label, &raw))
        return false;
    if (t == NPL_GGUF_BOOL && raw > 1)
        return FAIL(c, at, "bool value %llu (expected 0 or 1)", (unsigned long long)raw);
    decode_scalar(t, raw, v);
    return true;
}

static bool check_alignment_kv(cursor *c, const npl_gguf_kv *kv, uint64_t type_at, uint64_t value_at,
                               uint64_t *alignment)
{
    if (kv->value.type != NPL_GGUF_UINT32)
        return FAIL(c, type_at, "%s has type %s, expected uint32", GGUF_ALIGNMENT_KEY,
                    npl_gguf_type_name(kv->value.type));
    if (!is_pow2(kv->value.u64))
        return FAIL(c, value_at, "%s is %llu, expected a non-zero power of two", GGUF_ALIGNMENT_KEY,
                    (unsigned long long)kv->value.u64);
    *alignment = kv->value.u64;
    return true;
}

static bool parse_kvs(npl_gguf *g, cursor *c, uint64_t n_kv, uint64_t n_kv_at)
{
    if (n_kv > cur_left(c) / GGUF_MIN_KV_BYTES)
        return FAIL(c, n_kv_at, "metadata count %llu cannot fit in the %llu bytes left",
                    (unsigned long long)n_kv, (unsigned long long)cur_left(c));
    if (n_kv > 0) {
        g->kvs = calloc((size_t)n_kv, sizeof *g->kvs);
        if (!g->kvs || !name_index_init(&g->kv_index, (size_t)n_kv))
            return fail_at(c, NPL_ERR_NOMEM, n_kv_at, "out of memory for %llu metadata entries",
                           (unsigned long long)n_kv);
    }

    char nb[NAME_BUF];
    for (uint64_t i = 0; i < n_kv; i++) {
        npl_gguf_kv *kv = &g->kvs[i];
        uint64_t key_at = c->pos;
        if (!cur_str(c, "key", &kv->key))
            return false;
        if (kv->key.len == 0)
            return FAIL(c, key_at, "metadata entry %llu has an empty key", (unsigned long long)i);
        if (!name_index_add(&g->kv_index, g, kv_name_at, (size_t)i))
            return FAIL(c, key_at, "duplicate key '%s'", printable(kv->key, nb, sizeof nb));
        g->n_kv = (size_t)i + 1;

        uint64_t type_at = c->pos;
        uint32_t type = 0;
        if (!cur_u32(c, "value type", &type))
            return false;
        if (!type_is_known(type))
            return FAIL(c, type_at, "key '%s' has unknown value type %u", printable(kv->key, nb, sizeof nb),
                        type);
        uint64_t value_at = c->pos;
        if (!parse_value(g, c, (npl_gguf_type)type, &kv->value, 0))
            return false;
        if (npl_str_eq(kv->key, GGUF_ALIGNMENT_KEY) &&
            !check_alignment_kv(c, kv, type_at, value_at, &g->alignment))
            return false;
    }
    return true;
}

/* Reads one tensor info; `offset_at` receives the position of its offset
 * field, which range errors found later point at. */
static bool parse_tensor_info(npl_gguf *g, cursor *c, size_t i, uint64_t *offset_at)
{
    npl_gguf_tensor *t = &g->tensors[i];
    char nb[NAME_BUF];

    uint64_t name_at = c->pos;
    if (!cur_str(c, "tensor name", &t->name))
        return false;
    if (t->name.len == 0)
        return FAIL(c, name_at, "tensor %zu has an empty name", i);
    if (t->name.len > GGUF_MAX_TENSOR_NAME_LEN)
        return FAIL(c, name_at, "tensor name '%s' is %llu bytes long (limit %d)",
                    printable(t->name, nb, sizeof nb), (unsigned long long)t->name.len,
                    GGUF_MAX_TENSOR_NAME_LEN);
    if (!name_index_add(&g->tensor_index, g, tensor_name_at, i))
        return FAIL(c, name_at, "duplicate tensor name '%s'", printable(t->name, nb, sizeof nb));
    g->n_tensors = i + 1;
    const char *name = printable(t->name, nb, sizeof nb);

    uint64_t dims_at = c->pos;
    if (!cur_u32(c, "tensor dimension count", &t->n_dims))
        return false;
    if (t->n_dims < 1 || t->n_dims > NPL_GGUF_MAX_DIMS)
        return FAIL(c, dims_at, "tensor '%s' has %u dimensions (expected 1 to %d)", name, t->n_dims,
                    NPL_GGUF_MAX_DIMS);

    uint64_t ne0_at = c->pos;
    uint64_t nelements = 1;
    for (uint32_t d = 0; d < NPL_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t at = c->pos;
        if (!cur_u64(c, "tensor dimension", &t->ne[d]))
            return false;
        if (t->ne[d] == 0)
            return FAIL(c, at, "tensor '%s' dimension %u is 0", name, d);
        /* ggml counts elements in int64_t. */
        if (!mul_u64(nelements, t->ne[d], &nelements) || nelements > INT64_MAX)
            return FAIL(c, at, "tensor '%s' element count overflows", name);
    }

    uint64_t type_at = c->pos;
    if (!cur_u32(c, "tensor type", &t->type))
        return false;
    const npl_type_traits *tr = npl_type_traits_get(t->type);
    if (!tr || tr->block_size == 0 || tr->type_size == 0)
        return FAIL(c, type_at, "tensor '%s' has unknown ggml type %u", name, t->type);
    if (t->ne[0] % tr->block_size != 0)
        return FAIL(c, ne0_at, "tensor '%s' row length %llu is not a multiple of the %s block size %u", name,
                    (unsigned long long)t->ne[0], tr->name ? tr->name : "?", tr->block_size);
    uint64_t size;
    if (!mul_u64(t->ne[0] / tr->block_size, tr->type_size, &size) || !mul_u64(size, t->ne[1], &size) ||
        !mul_u64(size, t->ne[2], &size) || !mul_u64(size, t->ne[3], &size))
        return FAIL(c, ne0_at, "tensor '%s' byte size overflows", name);
    t->size = size;

    *offset_at = c->pos;
    if (!cur_u64(c, "tensor offset", &t->offset))
        return false;
    if (t->offset % g->alignment != 0)
        return FAIL(c, *offset_at, "tensor '%s' offset %llu is not a multiple of the alignment %llu", name,
                    (unsigned long long)t->offset, (unsigned long long)g->alignment);
    return true;
}

static bool parse_tensors(npl_gguf *g, cursor *c, uint64_t n_tensors, uint64_t n_tensors_at)
{
    if (n_tensors > cur_left(c) / GGUF_MIN_TENSOR_INFO_BYTES)
        return FAIL(c, n_tensors_at, "tensor count %llu cannot fit in the %llu bytes left after the metadata",
                    (unsigned long long)n_tensors, (unsigned long long)cur_left(c));
    uint64_t *offset_at = NULL;
    if (n_tensors > 0) {
        g->tensors = calloc((size_t)n_tensors, sizeof *g->tensors);
        offset_at = calloc((size_t)n_tensors, sizeof *offset_at);
        if (!g->tensors || !offset_at || !name_index_init(&g->tensor_index, (size_t)n_tensors)) {
            free(offset_at);
            return fail_at(c, NPL_ERR_NOMEM, n_tensors_at, "out of memory for %llu tensors",
                           (unsigned long long)n_tensors);
        }
    }

    bool ok = true;
    for (size_t i = 0; ok && i < n_tensors; i++)
        ok = parse_tensor_info(g, c, i, &offset_at[i]);

    if (ok) {
        uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
        if (__builtin_add_overflow(c->pos, pad, &g->data_offset))
            g->data_offset = UINT64_MAX; /* leaves an empty data section */
        uint64_t data_size = g->data_offset <= g->size ? g->size - g->data_offset : 0;
        char nb[NAME_BUF];
        for (size_t i = 0; ok && i < n_tensors; i++) {
            npl_gguf_tensor *t = &g->tensors[i];
            if (t->offset > data_size || t->size > data_size - t->offset)
                ok = FAIL(c, offset_at[i],
                          "tensor '%s' (%llu bytes at data offset %llu) extends past the end of the data "
                          "section (%llu bytes at file offset %llu)",
                          printable(t->name, nb, sizeof nb), (unsigned long long)t->size,
                          (unsigned long long)t->offset, (unsigned long long)data_size,
                          (unsigned long long)g->data_offset);
            else
                t->data = g->base + g->data_offset + t->offset;
        }
    }
    free(offset_at);
    return ok;
}

static bool parse_header(npl_gguf *g, cursor *c, uint64_t *n_tensors, uint64_t *n_kv)
{
    const uint8_t *magic = NULL;
    if (!cur_take(c, 4, "magic", &magic))
        return false;
    if (memcmp(magic, "GGUF", 4) != 0)
        return FAIL(c, 0, "bad magic %02x %02x %02x %02x (expected \"GGUF\"): not a GGUF file", magic[0],
                    magic[1], magic[2], magic[3]);

    if (!cur_u32(c, "version", &g->version))
        return false;
    uint32_t v = g->version;
    if (v == 1)
        return fail_at(c, NPL_ERR_UNSUPPORTED, 4,
                       "GGUF version 1 is not supported (only versions 2 and 3); convert the model again");
    if (v != 2 && v != 3) {
        uint32_t swapped = __builtin_bswap32(v);
        if (swapped == 2 || swapped == 3)
            return fail_at(c, NPL_ERR_UNSUPPORTED, 4, "big-endian GGUF (version %u) is not supported", swapped);
        return fail_at(c, NPL_ERR_UNSUPPORTED, 4, "unsupported GGUF version %u (supported: 2 and 3)", v);
    }
    return cur_u64(c, "tensor count", n_tensors) && cur_u64(c, "metadata count", n_kv);
}

static bool parse(npl_gguf *g, npl_error *err)
{
    cursor c = { .base = g->base, .size = g->size, .pos = 0, .name = g->path, .err = err };
    uint64_t n_tensors = 0, n_kv = 0;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!parse_header(g, &c, &n_tensors, &n_kv))
        return false;
    if (!parse_kvs(g, &c, n_kv, 16))
        return false;
    return parse_tensors(g, &c, n_tensors, 8);
}

/* ---- open / close ---- */

static npl_gguf *gguf_new(const char *name, npl_error *err)
{
    npl_gguf *g = calloc(1, sizeof *g);
    if (g)
        g->path = strdup(name);
    if (!g || !g->path) {
        free(g);
        npl_error_set(err, NPL_ERR_NOMEM, "%s: out of memory", name);
        return NULL;
    }
    return g;
}

npl_gguf *npl_gguf_open_memory(const void *data, size_t size, const char *name, npl_error *err)
{
    if (!name)
        name = "<memory>";
    if (!data && size > 0) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: NULL buffer of %zu bytes", name, size);
        return NULL;
    }
    static const uint8_t empty[1];
    npl_gguf *g = gguf_new(name, err);
    if (!g)
        return NULL;
    g->base = data ? data : empty;
    g->size = size;
    if (!parse(g, err)) {
        npl_gguf_close(g);
        return NULL;
    }
    npl_error_clear(err);
    return g;
}

npl_gguf *npl_gguf_open(const char *path, npl_error *err)
{
    if (!path) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_gguf_open: NULL path");
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        npl_error_set(err, NPL_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        npl_error_set(err, NPL_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        npl_error_set(err, NPL_ERR_IO, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        npl_error_set(err, NPL_ERR_IO, "%s: file too large to map", path);
        close(fd);
        return NULL;
    }

    size_t size = (size_t)st.st_size;
    if (size == 0) { /* mmap rejects empty files; the parser reports the truncation */
        close(fd);
        return npl_gguf_open_memory(NULL, 0, path, err);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        npl_error_set(err, NPL_ERR_IO, "%s: cannot mmap %zu bytes: %s", path, size, strerror(map_errno));
        return NULL;
    }

    npl_gguf *g = gguf_new(path, err);
    if (!g) {
        munmap(map, size);
        return NULL;
    }
    g->base = map;
    g->size = size;
    g->mapped = true;
    if (!parse(g, err)) {
        npl_gguf_close(g);
        return NULL;
    }
    npl_error_clear(err);
    return g;
}

void npl_gguf_close(npl_gguf *g)
{
    if (!g)
        return;
    while (g->blocks) {
        items_block *next = g->blocks->next;
        free(g->blocks);
        g->blocks = next;
    }
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    free(g->kvs);
    free(g->tensors);
    if (g->mapped)
        munmap((void *)g->base, (size_t)g->size);
    free(g->path);
    free(g);
}

const char *npl_gguf_path(const npl_gguf *g)
{
    return g ? g->path : NULL;
}

uint32_t npl_gguf_version(const npl_gguf *g)
{
    return g ? g->version : 0;
}

uint64_t npl_gguf_alignment(const npl_gguf *g)
{
    return g ? g->alignment : 0;
}

uint64_t npl_gguf_file_size(const npl_gguf *g)
{
    return g ? g->size : 0;
}

const uint8_t *npl_gguf_bytes(const npl_gguf *g)
{
    return g ? g->base : NULL;
}

uint64_t npl_gguf_data_offset(const npl_gguf *g)
{
    return g ? (g->data_offset <= g->size ? g->data_offset : g->size) : 0;
}

/* ---- metadata access ---- */

size_t npl_gguf_n_kv(const npl_gguf *g)
{
    return g ? g->n_kv : 0;
}

const npl_gguf_kv *npl_gguf_kv_at(const npl_gguf *g, size_t i)
{
    return g && i < g->n_kv ? &g->kvs[i] : NULL;
}

const npl_gguf_value *npl_gguf_find(const npl_gguf *g, const char *key)
{
    if (!g)
        return NULL;
    size_t i = name_index_find(&g->kv_index, g, kv_name_at, key);
    return i == SIZE_MAX ? NULL : &g->kvs[i].value;
}

static bool value_u64(const npl_gguf_value *v, uint64_t *out)
{
    if (is_unsigned_type(v->type)) {
        *out = v->u64;
        return true;
    }
    if (is_signed_type(v->type) && v->i64 >= 0) {
        *out = (uint64_t)v->i64;
        return true;
    }
    return false;
}

static bool value_i64(const npl_gguf_value *v, int64_t *out)
{
    if (is_signed_type(v->type)) {
        *out = v->i64;
        return true;
    }
    if (is_unsigned_type(v->type) && v->u64 <= INT64_MAX) {
        *out = (int64_t)v->u64;
        return true;
    }
    return false;
}

static bool value_f64(const npl_gguf_value *v, double *out)
{
    if (is_float_type(v->type))
        *out = v->f64;
    else if (is_unsigned_type(v->type))
        *out = (double)v->u64;
    else if (is_signed_type(v->type))
        *out = (double)v->i64;
    else
        return false;
    return true;
}

bool npl_gguf_get_u64(const npl_gguf *g, const char *key, uint64_t *out)
{
    const npl_gguf_value *v = npl_gguf_find(g, key);
    uint64_t x;
    if (!v || !value_u64(v, &x))
        return false;
    if (out)
        *out = x;
    return true;
}

bool npl_gguf_get_u32(const npl_gguf *g, const char *key, uint32_t *out)
{
    uint64_t x;
    if (!npl_gguf_get_u64(g, key, &x) || x > UINT32_MAX)
        return false;
    if (out)
        *out = (uint32_t)x;
    return true;
}

bool npl_gguf_get_i64(const npl_gguf *g, const char *key, int64_t *out)
{
    const npl_gguf_value *v = npl_gguf_find(g, key);
    int64_t x;
    if (!v || !value_i64(v, &x))
        return false;
    if (out)
        *out = x;
    return true;
}

bool npl_gguf_get_f32(const npl_gguf *g, const char *key, float *out)
{
    const npl_gguf_value *v = npl_gguf_find(g, key);
    double x;
    if (!v || !value_f64(v, &x))
        return false;
    if (out)
        *out = (float)x;
    return true;
}

bool npl_gguf_get_bool(const npl_gguf *g, const char *key, bool *out)
{
    const npl_gguf_value *v = npl_gguf_find(g, key);
    if (!v || v->type != NPL_GGUF_BOOL)
        return false;
    if (out)
        *out = v->u64 != 0;
    return true;
}

bool npl_gguf_get_str(const npl_gguf *g, const char *key, npl_str *out)
{
    const npl_gguf_value *v = npl_gguf_find(g, key);
    if (!v || v->type != NPL_GGUF_STRING)
        return false;
    if (out)
        *out = v->str;
    return true;
}

const npl_gguf_value *npl_gguf_get_array(const npl_gguf *g, const char *key, npl_gguf_type elem_type)
{
    const npl_gguf_value *v = npl_gguf_find(g, key);
    if (!v || v->type != NPL_GGUF_ARRAY || v->arr.elem_type != elem_type)
        return NULL;
    return v;
}

/* "uint32" or "array of string" */
static const char *describe_value_type(const npl_gguf_value *v, char *buf, size_t cap)
{
    if (v->type == NPL_GGUF_ARRAY)
        snprintf(buf, cap, "array of %s", npl_gguf_type_name(v->arr.elem_type));
    else
        snprintf(buf, cap, "%s", npl_gguf_type_name(v->type));
    return buf;
}

/* Looks up a required key; when it is missing, fills err and *status. */
static const npl_gguf_value *require_value(const npl_gguf *g, const char *key, npl_status *status,
                                           npl_error *err)
{
    if (!g || !key) {
        *status = npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_gguf_require: NULL handle or key");
        return NULL;
    }
    const npl_gguf_value *v = npl_gguf_find(g, key);
    if (!v)
        *status = npl_error_set(err, NPL_ERR_FORMAT, "%s: missing required key '%s'", g->path, key);
    return v;
}

static npl_status wrong_type(const npl_gguf *g, const char *key, const npl_gguf_value *v, const char *expected,
                             npl_error *err)
{
    char tb[48];
    return npl_error_set(err, NPL_ERR_FORMAT, "%s: key '%s' has type %s, expected %s", g->path, key,
                         describe_value_type(v, tb, sizeof tb), expected);
}

npl_status npl_gguf_require_u32(const npl_gguf *g, const char *key, uint32_t *out, npl_error *err)
{
    npl_status st = NPL_OK;
    const npl_gguf_value *v = require_value(g, key, &st, err);
    if (!v)
        return st;
    if (!is_unsigned_type(v->type) && !is_signed_type(v->type))
        return wrong_type(g, key, v, "an integer", err);
    uint64_t x;
    if (!value_u64(v, &x) || x > UINT32_MAX) {
        char vb[32];
        if (is_signed_type(v->type))
            snprintf(vb, sizeof vb, "%lld", (long long)v->i64);
        else
            snprintf(vb, sizeof vb, "%llu", (unsigned long long)v->u64);
        return npl_error_set(err, NPL_ERR_FORMAT, "%s: key '%s' has value %s, which does not fit in uint32",
                             g->path, key, vb);
    }
    if (out)
        *out = (uint32_t)x;
    return NPL_OK;
}

npl_status npl_gguf_require_f32(const npl_gguf *g, const char *key, float *out, npl_error *err)
{
    npl_status st = NPL_OK;
    const npl_gguf_value *v = require_value(g, key, &st, err);
    if (!v)
        return st;
    double x;
    if (!value_f64(v, &x))
        return wrong_type(g, key, v, "a number", err);
    if (out)
        *out = (float)x;
    return NPL_OK;
}

npl_status npl_gguf_require_str(const npl_gguf *g, const char *key, npl_str *out, npl_error *err)
{
    npl_status st = NPL_OK;
    const npl_gguf_value *v = require_value(g, key, &st, err);
    if (!v)
        return st;
    if (v->type != NPL_GGUF_STRING)
        return wrong_type(g, key, v, "string", err);
    if (out)
        *out = v->str;
    return NPL_OK;
}

const npl_gguf_value *npl_gguf_require_array(const npl_gguf *g, const char *key, npl_gguf_type elem_type,
                                             npl_error *err)
{
    npl_status st = NPL_OK;
    const npl_gguf_value *v = require_value(g, key, &st, err);
    if (!v)
        return NULL;
    if (v->type != NPL_GGUF_ARRAY || v->arr.elem_type != elem_type) {
        char eb[48];
        snprintf(eb, sizeof eb, "array of %s", npl_gguf_type_name(elem_type));
        wrong_type(g, key, v, eb, err);
        return NULL;
    }
    return v;
}

/* ---- numeric array elements ---- */

/* Decodes element i of a numeric array; false for other values or i out
 * of range. */
static bool array_element(const npl_gguf_value *arr, uint64_t i, npl_gguf_value *out)
{
    if (!arr || arr->type != NPL_GGUF_ARRAY || !arr->arr.data || i >= arr->arr.count)
        return false;
    unsigned n = scalar_size(arr->arr.elem_type);
    if (n == 0)
        return false;
    decode_scalar(arr->arr.elem_type, load_le((const uint8_t *)arr->arr.data + i * n, n), out);
    return true;
}

/* Conversions saturate (NaN gives 0): arrays have no failure channel, and a
 * clamped value is safer than C's undefined out-of-range float casts. */
int64_t npl_gguf_array_i64(const npl_gguf_value *arr, uint64_t i)
{
    npl_gguf_value v;
    if (!array_element(arr, i, &v))
        return 0;
    if (is_signed_type(v.type))
        return v.i64;
    if (is_float_type(v.type)) {
        if (!(v.f64 == v.f64))
            return 0;
        if (v.f64 >= 9223372036854775808.0)
            return INT64_MAX;
        if (v.f64 < -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)v.f64;
    }
    return v.u64 > INT64_MAX ? INT64_MAX : (int64_t)v.u64;
}

uint64_t npl_gguf_array_u64(const npl_gguf_value *arr, uint64_t i)
{
    npl_gguf_value v;
    if (!array_element(arr, i, &v))
        return 0;
    if (is_signed_type(v.type))
        return v.i64 < 0 ? 0 : (uint64_t)v.i64;
    if (is_float_type(v.type)) {
        if (!(v.f64 > 0))
            return 0;
        if (v.f64 >= 18446744073709551616.0)
            return UINT64_MAX;
        return (uint64_t)v.f64;
    }
    return v.u64;
}

double npl_gguf_array_f64(const npl_gguf_value *arr, uint64_t i)
{
    npl_gguf_value v;
    if (!array_element(arr, i, &v))
        return 0.0;
    if (is_float_type(v.type))
        return v.f64;
    if (is_signed_type(v.type))
        return (double)v.i64;
    return (double)v.u64;
}

/* ---- tensors ---- */

size_t npl_gguf_n_tensors(const npl_gguf *g)
{
    return g ? g->n_tensors : 0;
}

const npl_gguf_tensor *npl_gguf_tensor_at(const npl_gguf *g, size_t i)
{
    return g && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const npl_gguf_tensor *npl_gguf_find_tensor(const npl_gguf *g, const char *name)
{
    if (!g)
        return NULL;
    size_t i = name_index_find(&g->tensor_index, g, tensor_name_at, name);
    return i == SIZE_MAX ? NULL : &g->tensors[i];
}

uint64_t npl_gguf_tensor_nelements(const npl_gguf_tensor *t)
{
    if (!t)
        return 0;
    uint64_t n = 1;
    for (int d = 0; d < NPL_GGUF_MAX_DIMS; d++)
        if (!mul_u64(n, t->ne[d], &n))
            return UINT64_MAX;
    return n;
}

/* ---- strings and names ---- */

bool npl_str_eq(npl_str s, const char *c)
{
    if (!c)
        return false;
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

char *npl_str_dup(npl_str s)
{
    if (s.len >= SIZE_MAX)
        return NULL;
    char *p = malloc((size_t)s.len + 1);
    if (!p)
        return NULL;
    if (s.len)
        memcpy(p, s.ptr, (size_t)s.len);
    p[s.len] = '\0';
    return p;
}

const char *npl_gguf_type_name(npl_gguf_type t)
{
    switch (t) {
    case NPL_GGUF_UINT8: return "uint8";
    case NPL_GGUF_INT8: return "int8";
    case NPL_GGUF_UINT16: return "uint16";
    case NPL_GGUF_INT16: return "int16";
    case NPL_GGUF_UINT32: return "uint32";
    case NPL_GGUF_INT32: return "int32";
    case NPL_GGUF_FLOAT32: return "float32";
    case NPL_GGUF_BOOL: return "bool";
    case NPL_GGUF_STRING: return "string";
    case NPL_GGUF_ARRAY: return "array";
    case NPL_GGUF_UINT64: return "uint64";
    case NPL_GGUF_INT64: return "int64";
    case NPL_GGUF_FLOAT64: return "float64";
    }
    return "unknown";
}
