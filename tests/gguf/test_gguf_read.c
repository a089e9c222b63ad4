/* Reading valid GGUF images: every value type and accessor, nested
 * arrays, tensors at alignment 32 and 64, key lookup at scale, files
 * opened from disk (data must stay inside the mapping) and a sparse
 * multi-GB file that must open without touching its data. */
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ggml_types.h"
#include "gguf.h"
#include "gguf_builder.h"
#include "npl_test.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Parses b from an exact-size heap copy so ASan sees any over-read.
 * *copy must be freed after the handle is closed. */
static npl_gguf *open_copy(const gguf_builder *b, const char *name, uint8_t **copy, npl_error *err)
{
    *copy = malloc(b->len ? b->len : 1);
    if (!*copy)
        abort();
    memcpy(*copy, b->data, b->len);
    npl_gguf *g = npl_gguf_open_memory(*copy, b->len, name, err);
    if (!g)
        fprintf(stderr, "open failed: %s\n", err->message);
    return g;
}

static bool inside(const void *p, const uint8_t *base, size_t len)
{
    return (const uint8_t *)p >= base && (const uint8_t *)p <= base + len;
}

/* ---- all value types ---- */

#define N_VALUE_KEYS 27

static void build_all_values(gguf_builder *b, uint32_t version)
{
    gb_header(b, version, 0, N_VALUE_KEYS);
    gb_key(b, "t.u8", NPL_GGUF_UINT8); gb_u8(b, 200);
    gb_key(b, "t.i8", NPL_GGUF_INT8); gb_u8(b, (uint8_t)-100);
    gb_key(b, "t.u16", NPL_GGUF_UINT16); gb_u16(b, 60000);
    gb_key(b, "t.i16", NPL_GGUF_INT16); gb_u16(b, (uint16_t)-30000);
    gb_key(b, "t.u32", NPL_GGUF_UINT32); gb_u32(b, 4000000000u);
    gb_key(b, "t.i32", NPL_GGUF_INT32); gb_u32(b, (uint32_t)-2000000000);
    gb_key(b, "t.f32", NPL_GGUF_FLOAT32); gb_f32(b, 1.5f);
    gb_key(b, "t.bool", NPL_GGUF_BOOL); gb_u8(b, 1);
    gb_key(b, "t.str", NPL_GGUF_STRING); gb_strn(b, "hello\0world", 11);
    gb_key(b, "t.u64", NPL_GGUF_UINT64); gb_u64(b, (UINT64_C(1) << 63) + 5);
    gb_key(b, "t.i64", NPL_GGUF_INT64); gb_u64(b, (uint64_t)INT64_MIN);
    gb_key(b, "t.f64", NPL_GGUF_FLOAT64); gb_f64(b, -2.25);
    gb_key(b, "t.bool0", NPL_GGUF_BOOL); gb_u8(b, 0);
    /* numeric arrays of every element type */
    gb_key(b, "a.u8", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_UINT8, 3);
    gb_u8(b, 1); gb_u8(b, 2); gb_u8(b, 255);
    gb_key(b, "a.i8", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_INT8, 2);
    gb_u8(b, (uint8_t)-1); gb_u8(b, 5);
    gb_key(b, "a.u16", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_UINT16, 2);
    gb_u16(b, 65535); gb_u16(b, 7);
    gb_key(b, "a.i16", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_INT16, 2);
    gb_u16(b, (uint16_t)-32768); gb_u16(b, 32767);
    gb_key(b, "a.u32", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_UINT32, 1);
    gb_u32(b, 0xfffffffeu);
    gb_key(b, "a.i32", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_INT32, 3);
    gb_u32(b, (uint32_t)-7); gb_u32(b, 0); gb_u32(b, 123456);
    gb_key(b, "a.f32", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_FLOAT32, 3);
    gb_f32(b, 0.25f); gb_f32(b, -1e30f); gb_f32(b, NAN);
    gb_key(b, "a.bool", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_BOOL, 3);
    gb_u8(b, 1); gb_u8(b, 0); gb_u8(b, 1);
    gb_key(b, "a.u64", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_UINT64, 2);
    gb_u64(b, UINT64_MAX); gb_u64(b, 42);
    gb_key(b, "a.i64", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_INT64, 2);
    gb_u64(b, (uint64_t)INT64_C(-5000000000)); gb_u64(b, (uint64_t)INT64_MAX);
    gb_key(b, "a.f64", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_FLOAT64, 2);
    gb_f64(b, 3.5); gb_f64(b, 1e300);
    gb_key(b, "a.str", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_STRING, 3);
    gb_str(b, "a"); gb_str(b, ""); gb_str(b, "ccc");
    gb_key(b, "a.empty", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_FLOAT32, 0);
    gb_key(b, "a.empty_str", NPL_GGUF_ARRAY); gb_array_header(b, NPL_GGUF_STRING, 0);
}

static void check_all_values(const npl_gguf *g, const uint8_t *base, size_t len, uint32_t version)
{
    CHECK(npl_gguf_version(g) == version);
    CHECK(npl_gguf_alignment(g) == 32);
    CHECK(npl_gguf_file_size(g) == len);
    CHECK(strcmp(npl_gguf_path(g), "values.gguf") == 0);
    CHECK(npl_gguf_n_kv(g) == N_VALUE_KEYS);
    CHECK(npl_gguf_n_tensors(g) == 0);
    CHECK(npl_gguf_kv_at(g, N_VALUE_KEYS) == NULL);
    CHECK(npl_gguf_tensor_at(g, 0) == NULL);

    /* kv_at keeps file order and agrees with find */
    const npl_gguf_kv *kv0 = npl_gguf_kv_at(g, 0);
    CHECK(kv0 && npl_str_eq(kv0->key, "t.u8") && kv0->value.type == NPL_GGUF_UINT8);
    CHECK(kv0 && inside(kv0->key.ptr, base, len));
    for (size_t i = 0; i < npl_gguf_n_kv(g); i++) {
        const npl_gguf_kv *kv = npl_gguf_kv_at(g, i);
        char *key = npl_str_dup(kv->key);
        CHECK(key && npl_gguf_find(g, key) == &kv->value);
        free(key);
    }
    CHECK(npl_gguf_find(g, "t.u") == NULL);
    CHECK(npl_gguf_find(g, "t.u8x") == NULL);
    CHECK(npl_gguf_find(g, "") == NULL);
    CHECK(npl_gguf_find(g, NULL) == NULL);

    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f;
    bool bv;
    npl_str s;

    CHECK(npl_gguf_find(g, "t.u8")->u64 == 200);
    CHECK(npl_gguf_find(g, "t.i8")->i64 == -100);
    CHECK(npl_gguf_find(g, "t.u16")->u64 == 60000);
    CHECK(npl_gguf_find(g, "t.i16")->i64 == -30000);
    CHECK(npl_gguf_find(g, "t.u32")->u64 == 4000000000u);
    CHECK(npl_gguf_find(g, "t.i32")->i64 == -2000000000);
    CHECK(npl_gguf_find(g, "t.f32")->f64 == 1.5);
    CHECK(npl_gguf_find(g, "t.u64")->u64 == (UINT64_C(1) << 63) + 5);
    CHECK(npl_gguf_find(g, "t.i64")->i64 == INT64_MIN);
    CHECK(npl_gguf_find(g, "t.f64")->f64 == -2.25);
    CHECK(npl_gguf_find(g, "t.f64")->type == NPL_GGUF_FLOAT64);

    /* integer getters: any integer type whose value fits */
    CHECK(npl_gguf_get_u32(g, "t.u8", &u32) && u32 == 200);
    CHECK(npl_gguf_get_u32(g, "t.u32", &u32) && u32 == 4000000000u);
    CHECK(!npl_gguf_get_u32(g, "t.u64", &u32));
    CHECK(!npl_gguf_get_u32(g, "t.i8", &u32));
    CHECK(!npl_gguf_get_u32(g, "t.f32", &u32));
    CHECK(!npl_gguf_get_u32(g, "t.bool", &u32));
    CHECK(!npl_gguf_get_u32(g, "t.str", &u32));
    CHECK(!npl_gguf_get_u32(g, "nope", &u32));
    CHECK(npl_gguf_get_u64(g, "t.u64", &u64) && u64 == (UINT64_C(1) << 63) + 5);
    CHECK(npl_gguf_get_u64(g, "t.u16", &u64) && u64 == 60000);
    CHECK(!npl_gguf_get_u64(g, "t.i16", &u64));
    CHECK(npl_gguf_get_i64(g, "t.i64", &i64) && i64 == INT64_MIN);
    CHECK(npl_gguf_get_i64(g, "t.u32", &i64) && i64 == 4000000000);
    CHECK(npl_gguf_get_i64(g, "t.i8", &i64) && i64 == -100);
    CHECK(!npl_gguf_get_i64(g, "t.u64", &i64));
    CHECK(!npl_gguf_get_i64(g, "t.f64", &i64));
    /* float getter accepts floats and integers */
    CHECK(npl_gguf_get_f32(g, "t.f32", &f) && f == 1.5f);
    CHECK(npl_gguf_get_f32(g, "t.f64", &f) && f == -2.25f);
    CHECK(npl_gguf_get_f32(g, "t.i32", &f) && f == -2e9f);
    CHECK(npl_gguf_get_f32(g, "t.u8", &f) && f == 200.0f);
    CHECK(!npl_gguf_get_f32(g, "t.str", &f));
    CHECK(!npl_gguf_get_f32(g, "t.bool", &f));
    CHECK(npl_gguf_get_bool(g, "t.bool", &bv) && bv);
    CHECK(npl_gguf_get_bool(g, "t.bool0", &bv) && !bv);
    CHECK(!npl_gguf_get_bool(g, "t.u8", &bv));
    CHECK(npl_gguf_get_str(g, "t.str", &s) && s.len == 11 && memcmp(s.ptr, "hello\0world", 11) == 0);
    CHECK(inside(s.ptr, base, len)); /* a view, not a copy */
    CHECK(!npl_gguf_get_str(g, "t.u8", &s));
    CHECK(!npl_gguf_get_str(g, "a.str", &s));

    /* numeric arrays stay views into the image */
    const npl_gguf_value *a = npl_gguf_get_array(g, "a.u8", NPL_GGUF_UINT8);
    CHECK(a && a->arr.count == 3 && inside(a->arr.data, base, len) && a->arr.items == NULL);
    CHECK(npl_gguf_array_u64(a, 2) == 255 && npl_gguf_array_i64(a, 0) == 1 && npl_gguf_array_f64(a, 1) == 2.0);
    CHECK(npl_gguf_array_u64(a, 3) == 0); /* out of range */
    CHECK(npl_gguf_get_array(g, "a.u8", NPL_GGUF_INT8) == NULL);
    CHECK(npl_gguf_get_array(g, "t.u8", NPL_GGUF_UINT8) == NULL);
    a = npl_gguf_get_array(g, "a.i8", NPL_GGUF_INT8);
    CHECK(a && npl_gguf_array_i64(a, 0) == -1 && npl_gguf_array_i64(a, 1) == 5);
    CHECK(npl_gguf_array_u64(a, 0) == 0); /* negative saturates */
    a = npl_gguf_get_array(g, "a.u16", NPL_GGUF_UINT16);
    CHECK(a && npl_gguf_array_u64(a, 0) == 65535 && npl_gguf_array_u64(a, 1) == 7);
    a = npl_gguf_get_array(g, "a.i16", NPL_GGUF_INT16);
    CHECK(a && npl_gguf_array_i64(a, 0) == -32768 && npl_gguf_array_i64(a, 1) == 32767);
    a = npl_gguf_get_array(g, "a.u32", NPL_GGUF_UINT32);
    CHECK(a && npl_gguf_array_u64(a, 0) == 0xfffffffeu);
    a = npl_gguf_get_array(g, "a.i32", NPL_GGUF_INT32);
    CHECK(a && a->arr.count == 3 && npl_gguf_array_i64(a, 0) == -7 && npl_gguf_array_i64(a, 2) == 123456);
    CHECK(npl_gguf_array_f64(a, 0) == -7.0);
    a = npl_gguf_get_array(g, "a.f32", NPL_GGUF_FLOAT32);
    CHECK(a && npl_gguf_array_f64(a, 0) == 0.25 && npl_gguf_array_f64(a, 1) == (double)-1e30f);
    CHECK(a && isnan(npl_gguf_array_f64(a, 2)));
    CHECK(npl_gguf_array_i64(a, 1) == INT64_MIN && npl_gguf_array_i64(a, 2) == 0); /* saturating */
    CHECK(npl_gguf_array_u64(a, 0) == 0 && npl_gguf_array_u64(a, 2) == 0);
    a = npl_gguf_get_array(g, "a.bool", NPL_GGUF_BOOL);
    CHECK(a && npl_gguf_array_u64(a, 0) == 1 && npl_gguf_array_u64(a, 1) == 0 && npl_gguf_array_i64(a, 2) == 1);
    a = npl_gguf_get_array(g, "a.u64", NPL_GGUF_UINT64);
    CHECK(a && npl_gguf_array_u64(a, 0) == UINT64_MAX && npl_gguf_array_i64(a, 0) == INT64_MAX);
    CHECK(npl_gguf_array_u64(a, 1) == 42);
    a = npl_gguf_get_array(g, "a.i64", NPL_GGUF_INT64);
    CHECK(a && npl_gguf_array_i64(a, 0) == INT64_C(-5000000000) && npl_gguf_array_i64(a, 1) == INT64_MAX);
    a = npl_gguf_get_array(g, "a.f64", NPL_GGUF_FLOAT64);
    CHECK(a && npl_gguf_array_f64(a, 0) == 3.5 && npl_gguf_array_f64(a, 1) == 1e300);
    CHECK(npl_gguf_array_i64(a, 0) == 3 && npl_gguf_array_i64(a, 1) == INT64_MAX);
    CHECK(npl_gguf_array_u64(a, 1) == UINT64_MAX);

    /* string arrays are parsed per element, each a view */
    a = npl_gguf_get_array(g, "a.str", NPL_GGUF_STRING);
    CHECK(a && a->arr.count == 3 && a->arr.items != NULL);
    if (a && a->arr.items) {
        CHECK(a->arr.items[0].type == NPL_GGUF_STRING && npl_str_eq(a->arr.items[0].str, "a"));
        CHECK(npl_str_eq(a->arr.items[1].str, "") && npl_str_eq(a->arr.items[2].str, "ccc"));
        CHECK(inside(a->arr.items[2].str.ptr, base, len));
    }
    CHECK(npl_gguf_array_u64(a, 0) == 0); /* not numeric */

    a = npl_gguf_get_array(g, "a.empty", NPL_GGUF_FLOAT32);
    CHECK(a && a->arr.count == 0 && npl_gguf_array_f64(a, 0) == 0.0);
    a = npl_gguf_get_array(g, "a.empty_str", NPL_GGUF_STRING);
    CHECK(a && a->arr.count == 0);
}

static void run_values(uint32_t version)
{
    gguf_builder b = { 0 };
    build_all_values(&b, version);
    uint8_t *copy;
    npl_error err = { 0 };
    npl_gguf *g = open_copy(&b, "values.gguf", &copy, &err);
    CHECK(g != NULL);
    CHECK(err.code == NPL_OK);
    if (g)
        check_all_values(g, copy, b.len, version);
    npl_gguf_close(g);
    free(copy);
    gb_free(&b);
}

static void test_values_v3(void) { run_values(3); }
static void test_values_v2(void) { run_values(2); }

/* ---- nested arrays ---- */

static void test_nested_arrays(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 3);
    /* [[1, 2], [], [3]] of int32 */
    gb_key(&b, "n.int", NPL_GGUF_ARRAY);
    gb_array_header(&b, NPL_GGUF_ARRAY, 3);
    gb_array_header(&b, NPL_GGUF_INT32, 2); gb_u32(&b, 1); gb_u32(&b, 2);
    gb_array_header(&b, NPL_GGUF_INT32, 0);
    gb_array_header(&b, NPL_GGUF_INT32, 1); gb_u32(&b, 3);
    /* [["x"], ["y", "zz"]] */
    gb_key(&b, "n.str", NPL_GGUF_ARRAY);
    gb_array_header(&b, NPL_GGUF_ARRAY, 2);
    gb_array_header(&b, NPL_GGUF_STRING, 1); gb_str(&b, "x");
    gb_array_header(&b, NPL_GGUF_STRING, 2); gb_str(&b, "y"); gb_str(&b, "zz");
    /* 8 levels deep, the limit: [[[[[[[[7]]]]]]]] of uint8 */
    gb_key(&b, "n.deep", NPL_GGUF_ARRAY);
    for (int d = 0; d < 7; d++)
        gb_array_header(&b, NPL_GGUF_ARRAY, 1);
    gb_array_header(&b, NPL_GGUF_UINT8, 1);
    gb_u8(&b, 7);

    uint8_t *copy;
    npl_error err = { 0 };
    npl_gguf *g = open_copy(&b, "nested.gguf", &copy, &err);
    CHECK(g != NULL);
    if (g) {
        const npl_gguf_value *a = npl_gguf_get_array(g, "n.int", NPL_GGUF_ARRAY);
        CHECK(a && a->arr.count == 3 && a->arr.items);
        if (a && a->arr.items) {
            const npl_gguf_value *x = &a->arr.items[0];
            CHECK(x->type == NPL_GGUF_ARRAY && x->arr.elem_type == NPL_GGUF_INT32 && x->arr.count == 2);
            CHECK(npl_gguf_array_i64(x, 0) == 1 && npl_gguf_array_i64(x, 1) == 2);
            CHECK(inside(x->arr.data, copy, b.len));
            CHECK(a->arr.items[1].arr.count == 0);
            CHECK(npl_gguf_array_i64(&a->arr.items[2], 0) == 3);
        }
        a = npl_gguf_get_array(g, "n.str", NPL_GGUF_ARRAY);
        CHECK(a && a->arr.count == 2 && a->arr.items);
        if (a && a->arr.items) {
            const npl_gguf_value *y = &a->arr.items[1];
            CHECK(y->arr.elem_type == NPL_GGUF_STRING && y->arr.count == 2 && y->arr.items);
            CHECK(y->arr.items && npl_str_eq(y->arr.items[1].str, "zz"));
            CHECK(npl_str_eq(a->arr.items[0].arr.items[0].str, "x"));
        }
        const npl_gguf_value *v = npl_gguf_get_array(g, "n.deep", NPL_GGUF_ARRAY);
        int depth = 1;
        while (v && v->arr.elem_type == NPL_GGUF_ARRAY && v->arr.count == 1) {
            v = &v->arr.items[0];
            depth++;
        }
        CHECK(depth == 8 && v && v->arr.elem_type == NPL_GGUF_UINT8 && npl_gguf_array_u64(v, 0) == 7);
    }
    npl_gguf_close(g);
    free(copy);
    gb_free(&b);
}

/* ---- tensors ---- */

static void run_tensors(uint64_t alignment)
{
    gb_tensor t[] = {
        { .name = "tok_embd.weight", .n_dims = 2, .ne = { 64, 3 }, .type = NPL_TYPE_F32 },
        { .name = "blk.0.attn_q.weight", .n_dims = 2, .ne = { 64, 5 }, .type = NPL_TYPE_Q4_0 },
        { .name = "blk.0.ffn.weight", .n_dims = 3, .ne = { 96, 2, 2 }, .type = NPL_TYPE_Q8_0 },
        { .name = "output_norm.weight", .n_dims = 1, .ne = { 7 }, .type = NPL_TYPE_F16 },
        { .name = "blk.0.4d", .n_dims = 4, .ne = { 32, 2, 3, 2 }, .type = NPL_TYPE_Q8_0 },
    };
    const size_t n = sizeof t / sizeof t[0];
    /* block geometry from the format definition, independent of the traits */
    const uint64_t expect_size[] = { 64 * 4 * 3, 2 * 18 * 5, 3 * 34 * 4, 7 * 2, 34 * 12 };

    gguf_builder b = { 0 };
    bool explicit_alignment = alignment != 32;
    gb_header(&b, 3, n, explicit_alignment ? 2 : 1);
    gb_key(&b, "general.architecture", NPL_GGUF_STRING);
    gb_str(&b, "llama");
    if (explicit_alignment) {
        gb_key(&b, "general.alignment", NPL_GGUF_UINT32);
        gb_u32(&b, (uint32_t)alignment);
    }
    size_t data_start = gb_tensors(&b, t, n, alignment);
    CHECK(data_start % alignment == 0);

    uint8_t *copy;
    npl_error err = { 0 };
    npl_gguf *g = open_copy(&b, "tensors.gguf", &copy, &err);
    CHECK(g != NULL);
    if (g) {
        CHECK(npl_gguf_alignment(g) == alignment);
        CHECK(npl_gguf_n_tensors(g) == n);
        for (size_t i = 0; i < n; i++) {
            const npl_gguf_tensor *x = npl_gguf_tensor_at(g, i);
            CHECK(x && npl_str_eq(x->name, t[i].name));
            CHECK(npl_gguf_find_tensor(g, t[i].name) == x);
            CHECK(x->n_dims == t[i].n_dims && x->type == t[i].type);
            uint64_t nel = 1;
            for (int d = 0; d < 4; d++) {
                uint64_t want = d < (int)t[i].n_dims ? t[i].ne[d] : 1;
                CHECK(x->ne[d] == want);
                nel *= want;
            }
            CHECK(npl_gguf_tensor_nelements(x) == nel);
            CHECK(x->size == expect_size[i] && x->size == t[i].size);
            CHECK(x->offset == t[i].offset && x->offset % alignment == 0);
            /* points into the caller's buffer: never copied */
            CHECK((const uint8_t *)x->data == copy + data_start + t[i].offset);
            CHECK(((const uint8_t *)x->data - copy) % alignment == 0);
            const uint8_t *d = x->data;
            CHECK(d[0] == gb_tensor_byte(i, 0) && d[x->size - 1] == gb_tensor_byte(i, x->size - 1));
        }
        CHECK(npl_gguf_find_tensor(g, "missing") == NULL);
        CHECK(npl_gguf_find_tensor(g, "blk.0") == NULL);
        CHECK(npl_gguf_find_tensor(g, NULL) == NULL);
        CHECK(npl_gguf_tensor_nelements(NULL) == 0);
    }
    npl_gguf_close(g);
    free(copy);
    gb_free(&b);
}

static void test_tensors_align32(void) { run_tensors(32); }
static void test_tensors_align64(void) { run_tensors(64); }

/* Two infos may describe the same bytes (ggml writers never do, but it is
 * not unsafe). */
static void test_overlapping_tensors_allowed(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 2, 0);
    uint64_t ne[1] = { 8 };
    gb_tensor_info(&b, "a", 1, ne, NPL_TYPE_F32, 0);
    gb_tensor_info(&b, "b", 1, ne, NPL_TYPE_F32, 0);
    gb_pad_to(&b, 32);
    for (int i = 0; i < 32; i++)
        gb_u8(&b, (uint8_t)i);
    uint8_t *copy;
    npl_error err = { 0 };
    npl_gguf *g = open_copy(&b, "overlap.gguf", &copy, &err);
    CHECK(g != NULL);
    if (g)
        CHECK(npl_gguf_tensor_at(g, 0)->data == npl_gguf_tensor_at(g, 1)->data);
    npl_gguf_close(g);
    free(copy);
    gb_free(&b);
}

/* ---- scale ---- */

static void test_string_array_262144(void)
{
    const uint64_t n = 262144;
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 1);
    gb_key(&b, "tokenizer.ggml.tokens", NPL_GGUF_ARRAY);
    gb_array_header(&b, NPL_GGUF_STRING, n);
    char tok[32];
    for (uint64_t i = 0; i < n; i++) {
        snprintf(tok, sizeof tok, "tok%" PRIu64, i);
        gb_str(&b, tok);
    }
    uint8_t *copy;
    npl_error err = { 0 };
    double t0 = now_ms();
    npl_gguf *g = open_copy(&b, "vocab.gguf", &copy, &err);
    double t1 = now_ms();
    printf("parsed a %" PRIu64 "-entry string array (%zu bytes) in %.2f ms\n", n, b.len, t1 - t0);
    CHECK(g != NULL);
    const npl_gguf_value *a = g ? npl_gguf_get_array(g, "tokenizer.ggml.tokens", NPL_GGUF_STRING) : NULL;
    CHECK(a && a->arr.count == n);
    if (a) {
        for (uint64_t i = 0; i < n; i += 997) {
            snprintf(tok, sizeof tok, "tok%" PRIu64, i);
            CHECK(npl_str_eq(a->arr.items[i].str, tok));
        }
        CHECK(npl_str_eq(a->arr.items[n - 1].str, "tok262143"));
    }
    npl_gguf_close(g);
    free(copy);
    gb_free(&b);
}

/* Many keys and tensors: every one found, near-misses not. */
static void test_lookup_many(void)
{
    const int n_keys = 20000, n_tensors = 3000;
    gguf_builder b = { 0 };
    gb_header(&b, 3, (uint64_t)n_tensors, (uint64_t)n_keys);
    char name[64];
    for (int i = 0; i < n_keys; i++) {
        snprintf(name, sizeof name, "key.%d", i);
        gb_key(&b, name, NPL_GGUF_UINT32);
        gb_u32(&b, (uint32_t)i * 3);
    }
    uint64_t ne[1] = { 8 };
    for (int i = 0; i < n_tensors; i++) {
        snprintf(name, sizeof name, "blk.%d.weight", i);
        gb_tensor_info(&b, name, 1, ne, NPL_TYPE_F32, (uint64_t)i * 32);
    }
    gb_pad_to(&b, 32);
    for (int i = 0; i < n_tensors * 32; i++)
        gb_u8(&b, 0);

    uint8_t *copy;
    npl_error err = { 0 };
    double t0 = now_ms();
    npl_gguf *g = open_copy(&b, "many.gguf", &copy, &err);
    double t1 = now_ms();
    CHECK(g != NULL);
    if (g) {
        int bad = 0;
        for (int i = 0; i < n_keys; i++) {
            uint32_t v;
            snprintf(name, sizeof name, "key.%d", i);
            if (!npl_gguf_get_u32(g, name, &v) || v != (uint32_t)i * 3)
                bad++;
            snprintf(name, sizeof name, "key.%d.", i);
            if (npl_gguf_find(g, name))
                bad++;
        }
        for (int i = 0; i < n_tensors; i++) {
            snprintf(name, sizeof name, "blk.%d.weight", i);
            const npl_gguf_tensor *t = npl_gguf_find_tensor(g, name);
            if (!t || t != npl_gguf_tensor_at(g, (size_t)i))
                bad++;
        }
        double t2 = now_ms();
        printf("%d keys + %d tensors: open %.2f ms, %d lookups %.2f ms\n", n_keys, n_tensors, t1 - t0,
               2 * n_keys + n_tensors, t2 - t1);
        CHECK(bad == 0);
    }
    npl_gguf_close(g);
    free(copy);
    gb_free(&b);
}

/* ---- required-key helpers ---- */

static void test_required_keys(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 6);
    gb_key(&b, "r.u32", NPL_GGUF_UINT32); gb_u32(&b, 4096);
    gb_key(&b, "r.big", NPL_GGUF_UINT64); gb_u64(&b, UINT64_C(1) << 40);
    gb_key(&b, "r.neg", NPL_GGUF_INT32); gb_u32(&b, (uint32_t)-3);
    gb_key(&b, "r.f", NPL_GGUF_FLOAT32); gb_f32(&b, 1e-5f);
    gb_key(&b, "r.s", NPL_GGUF_STRING); gb_str(&b, "llama");
    gb_key(&b, "r.a", NPL_GGUF_ARRAY); gb_array_header(&b, NPL_GGUF_FLOAT32, 1); gb_f32(&b, 2.0f);
    uint8_t *copy;
    npl_error err = { 0 };
    npl_gguf *g = open_copy(&b, "req.gguf", &copy, &err);
    CHECK(g != NULL);
    if (!g)
        goto out;

    uint32_t u;
    float f;
    npl_str s;
    CHECK(npl_gguf_require_u32(g, "r.u32", &u, &err) == NPL_OK && u == 4096);
    CHECK(npl_gguf_require_f32(g, "r.f", &f, &err) == NPL_OK && f == 1e-5f);
    CHECK(npl_gguf_require_f32(g, "r.u32", &f, &err) == NPL_OK && f == 4096.0f);
    CHECK(npl_gguf_require_str(g, "r.s", &s, &err) == NPL_OK && npl_str_eq(s, "llama"));
    const npl_gguf_value *a = npl_gguf_require_array(g, "r.a", NPL_GGUF_FLOAT32, &err);
    CHECK(a && npl_gguf_array_f64(a, 0) == 2.0);

    CHECK(npl_gguf_require_u32(g, "llama.block_count", &u, &err) == NPL_ERR_FORMAT);
    CHECK(err.code == NPL_ERR_FORMAT && strcmp(err.message, "req.gguf: missing required key 'llama.block_count'") == 0);
    printf("%s\n", err.message);
    CHECK(npl_gguf_require_f32(g, "x", &f, &err) == NPL_ERR_FORMAT);
    CHECK(strcmp(err.message, "req.gguf: missing required key 'x'") == 0);
    CHECK(npl_gguf_require_str(g, "y", &s, &err) == NPL_ERR_FORMAT);
    CHECK(strcmp(err.message, "req.gguf: missing required key 'y'") == 0);
    CHECK(npl_gguf_require_array(g, "z", NPL_GGUF_STRING, &err) == NULL && err.code == NPL_ERR_FORMAT);
    CHECK(strcmp(err.message, "req.gguf: missing required key 'z'") == 0);

    CHECK(npl_gguf_require_u32(g, "r.s", &u, &err) == NPL_ERR_FORMAT);
    printf("%s\n", err.message);
    CHECK(strcmp(err.message, "req.gguf: key 'r.s' has type string, expected an integer") == 0);
    CHECK(npl_gguf_require_u32(g, "r.big", &u, &err) == NPL_ERR_FORMAT);
    printf("%s\n", err.message);
    CHECK(strstr(err.message, "req.gguf: key 'r.big'") && strstr(err.message, "1099511627776"));
    CHECK(npl_gguf_require_u32(g, "r.neg", &u, &err) == NPL_ERR_FORMAT);
    CHECK(strstr(err.message, "key 'r.neg'") && strstr(err.message, "-3"));
    CHECK(npl_gguf_require_f32(g, "r.s", &f, &err) == NPL_ERR_FORMAT);
    CHECK(strcmp(err.message, "req.gguf: key 'r.s' has type string, expected a number") == 0);
    CHECK(npl_gguf_require_str(g, "r.a", &s, &err) == NPL_ERR_FORMAT);
    printf("%s\n", err.message);
    CHECK(strcmp(err.message, "req.gguf: key 'r.a' has type array of float32, expected string") == 0);
    CHECK(npl_gguf_require_array(g, "r.a", NPL_GGUF_STRING, &err) == NULL);
    CHECK(strcmp(err.message, "req.gguf: key 'r.a' has type array of float32, expected array of string") == 0);
    CHECK(npl_gguf_require_array(g, "r.u32", NPL_GGUF_UINT32, &err) == NULL);
    CHECK(strcmp(err.message, "req.gguf: key 'r.u32' has type uint32, expected array of uint32") == 0);
out:
    npl_gguf_close(g);
    free(copy);
    gb_free(&b);
}

static void test_strings_and_names(void)
{
    npl_str s = { "ab\0c", 4 };
    CHECK(!npl_str_eq(s, "ab"));
    CHECK(npl_str_eq((npl_str){ "ab", 2 }, "ab"));
    CHECK(npl_str_eq((npl_str){ NULL, 0 }, ""));
    CHECK(!npl_str_eq((npl_str){ "ab", 2 }, NULL));
    char *d = npl_str_dup(s);
    CHECK(d && memcmp(d, "ab\0c", 5) == 0);
    free(d);
    d = npl_str_dup((npl_str){ NULL, 0 });
    CHECK(d && d[0] == '\0');
    free(d);
    CHECK(strcmp(npl_gguf_type_name(NPL_GGUF_UINT8), "uint8") == 0);
    CHECK(strcmp(npl_gguf_type_name(NPL_GGUF_FLOAT64), "float64") == 0);
    CHECK(strcmp(npl_gguf_type_name(NPL_GGUF_ARRAY), "array") == 0);
    CHECK(strcmp(npl_gguf_type_name((npl_gguf_type)13), "unknown") == 0);
    /* NULL handles are harmless */
    CHECK(npl_gguf_n_kv(NULL) == 0 && npl_gguf_n_tensors(NULL) == 0 && npl_gguf_find(NULL, "x") == NULL);
    uint32_t u;
    CHECK(npl_gguf_require_u32(NULL, "x", &u, NULL) == NPL_ERR_INVALID_ARG);
    CHECK(npl_gguf_get_u32(NULL, "x", &u) == false);
    npl_gguf_close(NULL);
}

/* ---- files on disk ---- */

static bool make_temp_dir(char *dir, size_t cap)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/npl-gguf-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(dir) != NULL;
}

static bool write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

/* The [start, end) of the mapping of `path` in /proc/self/maps. */
static bool find_mapping(const char *path, uintptr_t *start, uintptr_t *end)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        size_t ll = strlen(line), pl = strlen(path);
        if (ll >= pl && strcmp(line + ll - pl, path) == 0) {
            unsigned long s, e;
            if (sscanf(line, "%lx-%lx", &s, &e) == 2) {
                *start = s;
                *end = e;
                found = true;
            }
        }
    }
    fclose(f);
    return found;
}

static void test_open_file(void)
{
    char dir[256], path[300];
    CHECK(make_temp_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/model.gguf", dir);

    gb_tensor t[] = {
        { .name = "a", .n_dims = 2, .ne = { 32, 4 }, .type = NPL_TYPE_Q8_0 },
        { .name = "b", .n_dims = 1, .ne = { 1000 }, .type = NPL_TYPE_F32 },
    };
    gguf_builder b = { 0 };
    gb_header(&b, 3, 2, 1);
    gb_key(&b, "general.name", NPL_GGUF_STRING);
    gb_str(&b, "disk test");
    size_t data_start = gb_tensors(&b, t, 2, 32);
    CHECK(write_file(path, b.data, b.len));

    npl_error err = { 0 };
    npl_gguf *g = npl_gguf_open(path, &err);
    CHECK(g != NULL);
    if (g) {
        CHECK(strcmp(npl_gguf_path(g), path) == 0);
        CHECK(npl_gguf_file_size(g) == b.len);
        npl_str name;
        CHECK(npl_gguf_get_str(g, "general.name", &name) && npl_str_eq(name, "disk test"));
        uintptr_t start = 0, end = 0;
        CHECK(find_mapping(path, &start, &end));
        const uint8_t *base = (const uint8_t *)start;
        for (size_t i = 0; i < 2; i++) {
            const npl_gguf_tensor *x = npl_gguf_tensor_at(g, i);
            uintptr_t p = (uintptr_t)x->data;
            CHECK(p >= start && p + x->size <= end);
            CHECK((const uint8_t *)x->data == base + data_start + t[i].offset);
            CHECK(memcmp(x->data, b.data + data_start + t[i].offset, x->size) == 0);
        }
        CHECK((uintptr_t)name.ptr >= start && (uintptr_t)name.ptr < end);
    }
    npl_gguf_close(g);
    uintptr_t s2, e2;
    CHECK(!find_mapping(path, &s2, &e2)); /* close unmaps */

    /* a corrupt file reports its path */
    b.data[0] = 'X';
    CHECK(write_file(path, b.data, b.len));
    CHECK(npl_gguf_open(path, &err) == NULL && err.code == NPL_ERR_FORMAT);
    CHECK(strncmp(err.message, path, strlen(path)) == 0 && strstr(err.message, ": offset 0: bad magic"));
    printf("%s\n", err.message);

    /* an empty file is a truncated one, not an mmap failure */
    CHECK(write_file(path, "", 0));
    CHECK(npl_gguf_open(path, &err) == NULL && err.code == NPL_ERR_FORMAT);
    CHECK(strstr(err.message, "offset 0: truncated") != NULL);
    printf("%s\n", err.message);

    CHECK(unlink(path) == 0);
    CHECK(npl_gguf_open(path, &err) == NULL && err.code == NPL_ERR_IO);
    CHECK(strstr(err.message, "cannot open") != NULL);
    printf("%s\n", err.message);
    CHECK(npl_gguf_open(dir, &err) == NULL && err.code == NPL_ERR_IO);
    printf("%s\n", err.message);
    CHECK(npl_gguf_open(NULL, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    CHECK(rmdir(dir) == 0);
    gb_free(&b);
}

static long resident_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A 2.5 GB model whose data is a hole: opening must parse only the header
 * and leave the data pages untouched. */
static void test_sparse_2gb(void)
{
    char dir[256], path[300];
    CHECK(make_temp_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/sparse.gguf", dir);

    const uint64_t rows = 40960, cols = 16384; /* f32: 2.5 GiB */
    gguf_builder b = { 0 };
    gb_header(&b, 3, 2, 1);
    gb_key(&b, "general.architecture", NPL_GGUF_STRING);
    gb_str(&b, "llama");
    uint64_t ne_big[2] = { cols, rows }, ne_small[1] = { 32 };
    gb_tensor_info(&b, "huge.weight", 2, ne_big, NPL_TYPE_F32, 0);
    gb_tensor_info(&b, "tail.weight", 1, ne_small, NPL_TYPE_Q8_0, rows * cols * 4);
    gb_pad_to(&b, 32);
    uint64_t total = b.len + rows * cols * 4 + 34;

    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    CHECK(fd >= 0);
    bool written = fd >= 0 && write(fd, b.data, b.len) == (ssize_t)b.len && ftruncate(fd, (off_t)total) == 0;
    CHECK(written);
    if (fd >= 0)
        close(fd);

    if (written) {
        long rss0 = resident_kb();
        npl_error err = { 0 };
        double t0 = now_ms();
        npl_gguf *g = npl_gguf_open(path, &err);
        double t1 = now_ms();
        long rss1 = resident_kb();
        printf("opened a %.2f GB sparse file in %.3f ms; RSS %ld kB -> %ld kB (+%ld kB)\n", total / 1e9, t1 - t0,
               rss0, rss1, rss1 - rss0);
        CHECK(g != NULL);
        if (!g)
            fprintf(stderr, "%s\n", err.message);
        CHECK(rss1 - rss0 < 4096);
        const npl_gguf_tensor *x = g ? npl_gguf_find_tensor(g, "huge.weight") : NULL;
        CHECK(x && x->size == rows * cols * 4 && npl_gguf_tensor_nelements(x) == rows * cols);
        x = g ? npl_gguf_find_tensor(g, "tail.weight") : NULL;
        CHECK(x && (const uint8_t *)x->data + x->size == (const uint8_t *)npl_gguf_tensor_at(g, 0)->data + total - b.len);
        npl_gguf_close(g);
    }
    unlink(path);
    rmdir(dir);
    gb_free(&b);
}

static const nt_case cases[] = {
    { "values_v3", test_values_v3 },
    { "values_v2", test_values_v2 },
    { "nested_arrays", test_nested_arrays },
    { "tensors_align32", test_tensors_align32 },
    { "tensors_align64", test_tensors_align64 },
    { "overlapping_tensors_allowed", test_overlapping_tensors_allowed },
    { "string_array_262144", test_string_array_262144 },
    { "lookup_many", test_lookup_many },
    { "required_keys", test_required_keys },
    { "strings_and_names", test_strings_and_names },
    { "open_file", test_open_file },
    { "sparse_2gb", test_sparse_2gb },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
