/* One case per validation rule of the GGUF reader: each corrupts exactly
 * one field of an otherwise valid image and checks the error code and
 * that the message names the file, the byte offset and what is wrong.
 * Images are parsed from exact-size heap copies so ASan catches any read
 * past the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "gguf.h"
#include "gguf_builder.h"
#include "npl_test.h"

#define NAME "bad.gguf"

/* Parses the first len bytes of b; returns the handle (or NULL) with the
 * copy already released when NULL. */
static npl_gguf *parse_prefix(const gguf_builder *b, size_t len, npl_error *err, uint8_t **copy)
{
    *copy = malloc(len ? len : 1);
    if (!*copy)
        abort();
    memcpy(*copy, b->data, len);
    npl_gguf *g = npl_gguf_open_memory(*copy, len, NAME, err);
    if (!g) {
        free(*copy);
        *copy = NULL;
    }
    return g;
}

static void expect_fail_at(const gguf_builder *b, npl_status code, uint64_t offset, const char *what, int line)
{
    npl_error err = { 0 };
    uint8_t *copy;
    npl_gguf *g = parse_prefix(b, b->len, &err, &copy);
    char prefix[64];
    snprintf(prefix, sizeof prefix, NAME ": offset %llu: ", (unsigned long long)offset);
    printf("  %s\n", err.message);
    if (g || err.code != code || strncmp(err.message, prefix, strlen(prefix)) != 0 ||
        !strstr(err.message, what)) {
        fprintf(stderr, "line %d: expected %s \"%s...%s\", got %s \"%s\"\n", line, npl_status_name(code), prefix,
                what, g ? "success" : npl_status_name(err.code), err.message);
        nt_check_failed(__FILE__, line, "expected error");
    }
    npl_gguf_close(g);
    free(copy);
}

#define EXPECT_FAIL(b, code, offset, what) expect_fail_at((b), (code), (offset), (what), __LINE__)

static void expect_ok_at(const gguf_builder *b, int line)
{
    npl_error err = { 0 };
    uint8_t *copy;
    npl_gguf *g = parse_prefix(b, b->len, &err, &copy);
    if (!g) {
        fprintf(stderr, "line %d: expected success, got \"%s\"\n", line, err.message);
        nt_check_failed(__FILE__, line, "expected success");
    }
    npl_gguf_close(g);
    free(copy);
}

#define EXPECT_OK(b) expect_ok_at((b), __LINE__)

/* ---- header ---- */

static void test_bad_magic(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 0);
    b.data[3] = 'L';
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, 0, "bad magic 47 47 55 4c");
    memcpy(b.data, "\0\0\0\0", 4);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, 0, "not a GGUF file");
    gb_free(&b);
}

static void test_version_1(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 1, 0, 0);
    EXPECT_FAIL(&b, NPL_ERR_UNSUPPORTED, 4, "GGUF version 1 is not supported");
    gb_free(&b);
}

static void test_version_unknown(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 4, 0, 0);
    EXPECT_FAIL(&b, NPL_ERR_UNSUPPORTED, 4, "unsupported GGUF version 4");
    gb_patch_u32(&b, 4, 0);
    EXPECT_FAIL(&b, NPL_ERR_UNSUPPORTED, 4, "unsupported GGUF version 0");
    gb_patch_u32(&b, 4, 0x03000000u);
    EXPECT_FAIL(&b, NPL_ERR_UNSUPPORTED, 4, "big-endian");
    gb_patch_u32(&b, 4, 2);
    EXPECT_OK(&b);
    gb_free(&b);
}

static void test_truncated_header(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 0);
    for (size_t len = 0; len < b.len; len++) {
        npl_error err = { 0 };
        uint8_t *copy;
        npl_gguf *g = parse_prefix(&b, len, &err, &copy);
        CHECK(g == NULL && err.code == NPL_ERR_FORMAT);
        CHECK(strstr(err.message, "truncated") != NULL);
        npl_gguf_close(g);
    }
    npl_error err = { 0 };
    CHECK(npl_gguf_open_memory(NULL, 0, "empty", &err) == NULL && err.code == NPL_ERR_FORMAT);
    CHECK(strcmp(err.message, "empty: offset 0: truncated: magic needs 4 bytes but only 0 are left") == 0);
    CHECK(npl_gguf_open_memory(NULL, 8, "null", &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    EXPECT_OK(&b); /* the untruncated header alone is a valid, empty file */
    gb_free(&b);
}

/* A file exercising every part of the format; every proper prefix of it
 * must fail cleanly. */
static void test_truncated_every_byte(void)
{
    gguf_builder b = { 0 };
    gb_tensor t[] = {
        { .name = "tok_embd.weight", .n_dims = 2, .ne = { 32, 2 }, .type = NPL_TYPE_Q4_0 },
        { .name = "norm", .n_dims = 1, .ne = { 5 }, .type = NPL_TYPE_F16 },
        { .name = "out", .n_dims = 3, .ne = { 32, 1, 2 }, .type = NPL_TYPE_Q8_0 },
        { .name = "last", .n_dims = 4, .ne = { 3, 1, 1, 2 }, .type = NPL_TYPE_F32 },
    };
    gb_header(&b, 3, 4, 7);
    gb_key(&b, "general.alignment", NPL_GGUF_UINT32); gb_u32(&b, 64);
    gb_key(&b, "s", NPL_GGUF_STRING); gb_str(&b, "value");
    gb_key(&b, "f", NPL_GGUF_FLOAT64); gb_f64(&b, 0.5);
    gb_key(&b, "b", NPL_GGUF_BOOL); gb_u8(&b, 1);
    gb_key(&b, "tokens", NPL_GGUF_ARRAY); gb_array_header(&b, NPL_GGUF_STRING, 3);
    gb_str(&b, "<s>"); gb_str(&b, ""); gb_str(&b, "hello");
    gb_key(&b, "scores", NPL_GGUF_ARRAY); gb_array_header(&b, NPL_GGUF_FLOAT32, 2);
    gb_f32(&b, 1.0f); gb_f32(&b, 2.0f);
    gb_key(&b, "nested", NPL_GGUF_ARRAY); gb_array_header(&b, NPL_GGUF_ARRAY, 2);
    gb_array_header(&b, NPL_GGUF_INT16, 1); gb_u16(&b, 9);
    gb_array_header(&b, NPL_GGUF_STRING, 1); gb_str(&b, "x");
    gb_tensors(&b, t, 4, 64);
    EXPECT_OK(&b);

    int bad = 0;
    for (size_t len = 0; len < b.len; len++) {
        npl_error err = { 0 };
        uint8_t *copy;
        npl_gguf *g = parse_prefix(&b, len, &err, &copy);
        if (g || err.code != NPL_ERR_FORMAT || strncmp(err.message, NAME ": offset ", strlen(NAME ": offset ")) != 0) {
            fprintf(stderr, "prefix %zu: %s\n", len, g ? "accepted" : err.message);
            bad++;
        }
        npl_gguf_close(g);
        free(copy);
    }
    printf("  %zu truncated prefixes all rejected: %s\n", b.len, bad ? "no" : "yes");
    CHECK(bad == 0);
    gb_free(&b);
}

/* ---- counts and lengths ---- */

static void test_huge_kv_count(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, UINT64_MAX);
    gb_key(&b, "k", NPL_GGUF_UINT8); gb_u8(&b, 1);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, 16, "metadata count 18446744073709551615 cannot fit in the 14 bytes left");
    gb_patch_u64(&b, 16, 2); /* one more than present: plain truncation */
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, 16, "metadata count 2 cannot fit");
    gb_patch_u64(&b, 16, 1);
    EXPECT_OK(&b);
    gb_free(&b);
}

static void test_huge_tensor_count(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, UINT64_C(1) << 60, 0);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, 8, "tensor count 1152921504606846976 cannot fit");
    gb_free(&b);
}

static void test_string_length(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 1);
    gb_u64(&b, UINT64_MAX); /* key length */
    gb_bytes(&b, "key.with.some.bytes!", 20);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, 24, "key length 18446744073709551615 exceeds the 20 bytes left");
    gb_free(&b);

    gb_header(&b, 3, 0, 1);
    gb_key(&b, "k", NPL_GGUF_STRING);
    size_t at = b.len;
    gb_str(&b, "abc");
    gb_patch_u64(&b, at, 4);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "string value length 4 exceeds the 3 bytes left");
    gb_patch_u64(&b, at, UINT64_C(1) << 63);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "string value length 9223372036854775808 exceeds");
    gb_patch_u64(&b, at, 3);
    EXPECT_OK(&b);
    gb_free(&b);
}

/* A key "name" holding count empty strings; the offset of its count. */
static size_t empty_strings(gguf_builder *b, const char *name, uint64_t count)
{
    gb_key(b, name, NPL_GGUF_ARRAY);
    gb_u32(b, NPL_GGUF_STRING);
    size_t at = b->len;
    gb_u64(b, count);
    for (uint64_t i = 0; i < count; i++)
        gb_str(b, "");
    return at;
}

/* Arrays of strings together hold at most 2^21 elements: each costs 40
 * bytes parsed from as few as 8 in the file (issue #34: a 97 MB file cost
 * 515 MB when probed). Exactly the bound is fine. */
static void test_array_items_total(void)
{
    const uint64_t half = UINT64_C(1) << 20;
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 2);
    empty_strings(&b, "a", half);
    size_t at = empty_strings(&b, "b", half + 1);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "more than 2097152 string or array elements in all arrays together");
    gb_free(&b);
    gb_header(&b, 3, 0, 2);
    empty_strings(&b, "a", half);
    empty_strings(&b, "b", half);
    EXPECT_OK(&b);
    gb_free(&b);
}

static void test_array_count(void)
{
    /* count * 8 wraps to 0 in 64 bits: must still be rejected */
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 1);
    gb_key(&b, "a", NPL_GGUF_ARRAY);
    gb_u32(&b, NPL_GGUF_UINT64);
    size_t at = b.len;
    gb_u64(&b, UINT64_C(1) << 61);
    gb_u64(&b, 7);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "array of 2305843009213693952 uint64 elements cannot fit in the 8 bytes left");
    gb_patch_u64(&b, at, 2);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "array of 2 uint64 elements cannot fit");
    gb_patch_u64(&b, at, 1);
    EXPECT_OK(&b);
    gb_free(&b);

    /* strings need at least 8 bytes each: no allocation for a huge count */
    gb_header(&b, 3, 0, 1);
    gb_key(&b, "a", NPL_GGUF_ARRAY);
    gb_u32(&b, NPL_GGUF_STRING);
    at = b.len;
    gb_u64(&b, UINT64_MAX);
    gb_str(&b, "x");
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "string elements cannot fit in the 9 bytes left");
    gb_patch_u64(&b, at, 2);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "array of 2 string elements cannot fit");
    gb_free(&b);

    gb_header(&b, 3, 0, 1);
    gb_key(&b, "a", NPL_GGUF_ARRAY);
    gb_u32(&b, NPL_GGUF_ARRAY);
    at = b.len;
    gb_u64(&b, UINT64_C(1) << 40);
    gb_array_header(&b, NPL_GGUF_UINT8, 0);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "array of 1099511627776 array elements cannot fit in the 12 bytes left");
    gb_patch_u64(&b, at, 1);
    EXPECT_OK(&b);
    gb_free(&b);
}

/* ---- keys and value types ---- */

static void test_empty_key(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 2);
    gb_key(&b, "ok", NPL_GGUF_UINT8); gb_u8(&b, 1);
    size_t at = b.len;
    gb_key(&b, "", NPL_GGUF_UINT8); gb_u8(&b, 1);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "metadata entry 1 has an empty key");
    gb_free(&b);
}

static void test_duplicate_key(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 3);
    gb_key(&b, "llama.context_length", NPL_GGUF_UINT32); gb_u32(&b, 1);
    gb_key(&b, "llama.context_lengt", NPL_GGUF_UINT32); gb_u32(&b, 2);
    size_t at = b.len;
    gb_key(&b, "llama.context_length", NPL_GGUF_STRING); gb_str(&b, "x");
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "duplicate key 'llama.context_length'");
    gb_free(&b);

    /* keys are shown safely in messages: no control bytes, bounded */
    gb_header(&b, 3, 0, 2);
    char key[200];
    memset(key, 'k', sizeof key);
    key[3] = '\n';
    key[4] = '\0';
    gb_strn(&b, key, sizeof key); gb_u32(&b, NPL_GGUF_UINT8); gb_u8(&b, 0);
    at = b.len;
    gb_strn(&b, key, sizeof key); gb_u32(&b, NPL_GGUF_UINT8); gb_u8(&b, 0);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "duplicate key 'kkk??kkkk");
    npl_error err = { 0 };
    uint8_t *copy;
    npl_gguf *g = parse_prefix(&b, b.len, &err, &copy);
    CHECK(g == NULL && strchr(err.message, '\n') == NULL && strstr(err.message, "...'") != NULL);
    npl_gguf_close(g);
    free(copy);
    gb_free(&b);
}

static void test_unknown_value_type(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "general.x");
    size_t at = b.len;
    gb_u32(&b, 13);
    gb_u32(&b, 0);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "key 'general.x' has unknown value type 13");
    gb_patch_u32(&b, at, UINT32_MAX);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "unknown value type 4294967295");
    gb_free(&b);

    gb_header(&b, 3, 0, 1);
    gb_key(&b, "a", NPL_GGUF_ARRAY);
    at = b.len;
    gb_array_header(&b, (npl_gguf_type)13, 0);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "unknown array element type 13");
    gb_free(&b);
}

static void test_nesting_depth(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 1);
    gb_key(&b, "deep", NPL_GGUF_ARRAY);
    size_t at = 0;
    for (int d = 0; d < 9; d++) {
        at = b.len;
        gb_array_header(&b, d < 8 ? NPL_GGUF_ARRAY : NPL_GGUF_UINT8, 1);
    }
    gb_u8(&b, 1);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "arrays nested more than 8 levels deep");
    gb_free(&b);
}

static void test_bad_bool(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 1);
    gb_key(&b, "flag", NPL_GGUF_BOOL);
    size_t at = b.len;
    gb_u8(&b, 2);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "bool value 2 (expected 0 or 1)");
    gb_free(&b);

    gb_header(&b, 3, 0, 1);
    gb_key(&b, "flags", NPL_GGUF_ARRAY);
    gb_array_header(&b, NPL_GGUF_BOOL, 3);
    at = b.len;
    gb_u8(&b, 0); gb_u8(&b, 1); gb_u8(&b, 0xff);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at + 2, "bool array element 2 has value 255");
    gb_free(&b);
}

/* ---- alignment ---- */

static void test_alignment_type(void)
{
    gguf_builder b = { 0 };
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "general.alignment");
    size_t at = b.len;
    gb_u32(&b, NPL_GGUF_UINT64);
    gb_u64(&b, 32);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "general.alignment has type uint64, expected uint32");
    gb_free(&b);
}

static void test_alignment_value(void)
{
    const uint32_t bad[] = { 0, 48, 3, 0x80000001u };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gguf_builder b = { 0 };
        gb_header(&b, 3, 0, 1);
        gb_key(&b, "general.alignment", NPL_GGUF_UINT32);
        size_t at = b.len;
        gb_u32(&b, bad[i]);
        EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "expected a non-zero power of two");
        gb_patch_u32(&b, at, 1);
        EXPECT_OK(&b);
        gb_free(&b);
    }
}

/* ---- tensors ---- */

/* Header + one kv; the caller writes n_tensors tensor infos. */
static void tensor_prefix(gguf_builder *b, uint64_t n_tensors)
{
    gb_header(b, 3, n_tensors, 1);
    gb_key(b, "general.architecture", NPL_GGUF_STRING);
    gb_str(b, "llama");
}

/* Pads and appends `bytes` of data. */
static void tensor_data(gguf_builder *b, size_t bytes)
{
    gb_pad_to(b, 32);
    for (size_t i = 0; i < bytes; i++)
        gb_u8(b, (uint8_t)i);
}

static void test_tensor_n_dims(void)
{
    const uint32_t bad[] = { 0, 5, UINT32_MAX };
    for (size_t i = 0; i < 3; i++) {
        gguf_builder b = { 0 };
        tensor_prefix(&b, 1);
        gb_str(&b, "w");
        size_t at = b.len;
        gb_u32(&b, bad[i]);
        for (int d = 0; d < 5; d++)
            gb_u64(&b, 32);
        gb_u32(&b, NPL_TYPE_F32);
        gb_u64(&b, 0);
        tensor_data(&b, 4096);
        char what[64];
        snprintf(what, sizeof what, "tensor 'w' has %u dimensions (expected 1 to 4)", bad[i]);
        EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, what);
        gb_free(&b);
    }
}

static void test_tensor_dim_zero(void)
{
    gguf_builder b = { 0 };
    tensor_prefix(&b, 1);
    gb_str(&b, "w");
    gb_u32(&b, 3);
    gb_u64(&b, 32);
    size_t at = b.len;
    gb_u64(&b, 0);
    gb_u64(&b, 2);
    gb_u32(&b, NPL_TYPE_F32);
    gb_u64(&b, 0);
    tensor_data(&b, 256);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "tensor 'w' dimension 1 is 0");
    gb_free(&b);
}

static void test_tensor_nelements_overflow(void)
{
    gguf_builder b = { 0 };
    tensor_prefix(&b, 1);
    gb_str(&b, "w");
    gb_u32(&b, 2);
    gb_u64(&b, UINT64_C(1) << 32);
    size_t at = b.len;
    gb_u64(&b, UINT64_C(1) << 32);
    gb_u32(&b, NPL_TYPE_F32);
    gb_u64(&b, 0);
    tensor_data(&b, 64);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "tensor 'w' element count overflows");
    gb_free(&b);

    /* past int64 even without wrapping */
    tensor_prefix(&b, 1);
    gb_str(&b, "w");
    gb_u32(&b, 2);
    gb_u64(&b, UINT64_C(1) << 31);
    at = b.len;
    gb_u64(&b, UINT64_C(1) << 32);
    gb_u32(&b, NPL_TYPE_I8);
    gb_u64(&b, 0);
    tensor_data(&b, 64);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "element count overflows");
    gb_free(&b);
}

static void test_tensor_size_overflow(void)
{
    /* 2^62 f32 elements: the count fits int64, the byte size does not */
    gguf_builder b = { 0 };
    tensor_prefix(&b, 1);
    gb_str(&b, "w");
    gb_u32(&b, 1);
    size_t at = b.len;
    gb_u64(&b, UINT64_C(1) << 62);
    gb_u32(&b, NPL_TYPE_F32);
    gb_u64(&b, 0);
    tensor_data(&b, 64);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "tensor 'w' byte size overflows");
    gb_free(&b);
}

static void test_tensor_unknown_type(void)
{
    const uint32_t bad[] = { 4, 5, 31, NPL_TYPE_COUNT_MAX, 1000, UINT32_MAX };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gguf_builder b = { 0 };
        tensor_prefix(&b, 1);
        gb_str(&b, "w");
        gb_u32(&b, 1);
        gb_u64(&b, 256);
        size_t at = b.len;
        gb_u32(&b, bad[i]);
        gb_u64(&b, 0);
        tensor_data(&b, 2048);
        char what[64];
        snprintf(what, sizeof what, "tensor 'w' has unknown ggml type %u", bad[i]);
        EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, what);
        gb_patch_u32(&b, at, NPL_TYPE_Q4_0);
        EXPECT_OK(&b);
        gb_free(&b);
    }
}

static void test_tensor_block_multiple(void)
{
    gguf_builder b = { 0 };
    tensor_prefix(&b, 1);
    gb_str(&b, "w");
    gb_u32(&b, 2);
    size_t at = b.len;
    gb_u64(&b, 48);
    gb_u64(&b, 2);
    gb_u32(&b, NPL_TYPE_Q4_0);
    gb_u64(&b, 0);
    tensor_data(&b, 256);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "tensor 'w' row length 48 is not a multiple of the q4_0 block size 32");
    gb_patch_u64(&b, at, 64);
    EXPECT_OK(&b);
    gb_free(&b);
}

static void test_tensor_offset_unaligned(void)
{
    gguf_builder b = { 0 };
    tensor_prefix(&b, 2);
    uint64_t ne[1] = { 4 };
    gb_tensor_info(&b, "a", 1, ne, NPL_TYPE_F32, 0);
    gb_str(&b, "b");
    gb_u32(&b, 1);
    gb_u64(&b, 4);
    gb_u32(&b, NPL_TYPE_F32);
    size_t at = b.len;
    gb_u64(&b, 16);
    tensor_data(&b, 64);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "tensor 'b' offset 16 is not a multiple of the alignment 32");
    gb_patch_u64(&b, at, 32);
    EXPECT_OK(&b);
    gb_free(&b);
}

static void test_tensor_out_of_range(void)
{
    gguf_builder b = { 0 };
    tensor_prefix(&b, 2);
    uint64_t ne[1] = { 8 };
    gb_tensor_info(&b, "a", 1, ne, NPL_TYPE_F32, 0);
    gb_str(&b, "b");
    gb_u32(&b, 1);
    gb_u64(&b, 8);
    gb_u32(&b, NPL_TYPE_F32);
    size_t at = b.len;
    gb_u64(&b, 32);
    tensor_data(&b, 63); /* b needs [32, 64) */
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "tensor 'b' (32 bytes at data offset 32) extends past the end of the data section (63 bytes");
    gb_u8(&b, 0);
    EXPECT_OK(&b);
    /* an aligned offset near 2^64 must not wrap around */
    gb_patch_u64(&b, at, UINT64_MAX - 31);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "extends past the end of the data section");
    gb_patch_u64(&b, at, 64);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "extends past the end of the data section");
    gb_free(&b);

    /* file ends inside the padding before the data section */
    tensor_prefix(&b, 1);
    gb_str(&b, "w");
    gb_u32(&b, 1);
    gb_u64(&b, 1);
    gb_u32(&b, NPL_TYPE_I8);
    at = b.len;
    gb_u64(&b, 0);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "tensor 'w' (1 bytes at data offset 0) extends past the end of the data section (0 bytes");
    gb_free(&b);
}

static void test_tensor_duplicate_name(void)
{
    gguf_builder b = { 0 };
    tensor_prefix(&b, 3);
    uint64_t ne[1] = { 8 };
    gb_tensor_info(&b, "blk.0.attn_k.weight", 1, ne, NPL_TYPE_F32, 0);
    gb_tensor_info(&b, "blk.0.attn_q.weight", 1, ne, NPL_TYPE_F32, 32);
    size_t at = b.len;
    gb_tensor_info(&b, "blk.0.attn_k.weight", 1, ne, NPL_TYPE_F32, 64);
    tensor_data(&b, 96);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "duplicate tensor name 'blk.0.attn_k.weight'");
    gb_free(&b);
}

static void test_tensor_empty_name(void)
{
    gguf_builder b = { 0 };
    tensor_prefix(&b, 1);
    uint64_t ne[1] = { 8 };
    size_t at = b.len;
    gb_tensor_info(&b, "", 1, ne, NPL_TYPE_F32, 0);
    tensor_data(&b, 32);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "tensor 0 has an empty name");
    gb_free(&b);
}

static void test_tensor_name_length(void)
{
    char name[257];
    memset(name, 'n', 256);
    name[256] = '\0';
    gguf_builder b = { 0 };
    tensor_prefix(&b, 1);
    uint64_t ne[1] = { 8 };
    size_t at = b.len;
    gb_tensor_info(&b, name, 1, ne, NPL_TYPE_F32, 0);
    tensor_data(&b, 32);
    EXPECT_FAIL(&b, NPL_ERR_FORMAT, at, "is 256 bytes long (limit 255)");
    gb_free(&b);

    name[255] = '\0'; /* the longest allowed */
    tensor_prefix(&b, 1);
    gb_tensor_info(&b, name, 1, ne, NPL_TYPE_F32, 0);
    tensor_data(&b, 32);
    EXPECT_OK(&b);
    gb_free(&b);
}

static const nt_case cases[] = {
    { "bad_magic", test_bad_magic },
    { "version_1", test_version_1 },
    { "version_unknown", test_version_unknown },
    { "truncated_header", test_truncated_header },
    { "truncated_every_byte", test_truncated_every_byte },
    { "huge_kv_count", test_huge_kv_count },
    { "huge_tensor_count", test_huge_tensor_count },
    { "string_length", test_string_length },
    { "array_count", test_array_count },
    { "array_items_total", test_array_items_total },
    { "empty_key", test_empty_key },
    { "duplicate_key", test_duplicate_key },
    { "unknown_value_type", test_unknown_value_type },
    { "nesting_depth", test_nesting_depth },
    { "bad_bool", test_bad_bool },
    { "alignment_type", test_alignment_type },
    { "alignment_value", test_alignment_value },
    { "tensor_n_dims", test_tensor_n_dims },
    { "tensor_dim_zero", test_tensor_dim_zero },
    { "tensor_nelements_overflow", test_tensor_nelements_overflow },
    { "tensor_size_overflow", test_tensor_size_overflow },
    { "tensor_unknown_type", test_tensor_unknown_type },
    { "tensor_block_multiple", test_tensor_block_multiple },
    { "tensor_offset_unaligned", test_tensor_offset_unaligned },
    { "tensor_out_of_range", test_tensor_out_of_range },
    { "tensor_duplicate_name", test_tensor_duplicate_name },
    { "tensor_empty_name", test_tensor_empty_name },
    { "tensor_name_length", test_tensor_name_length },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
