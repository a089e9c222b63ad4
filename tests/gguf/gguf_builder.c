#include "gguf_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"

void gb_free(gguf_builder *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void gb_bytes(gguf_builder *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            fprintf(stderr, "gguf_builder: out of memory\n");
            abort();
        }
        b->data = d;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void put_le(gguf_builder *b, uint64_t v, unsigned n)
{
    uint8_t tmp[8];
    for (unsigned i = 0; i < n; i++)
        tmp[i] = (uint8_t)(v >> (8 * i));
    gb_bytes(b, tmp, n);
}

void gb_u8(gguf_builder *b, uint8_t v) { put_le(b, v, 1); }
void gb_u16(gguf_builder *b, uint16_t v) { put_le(b, v, 2); }
void gb_u32(gguf_builder *b, uint32_t v) { put_le(b, v, 4); }
void gb_u64(gguf_builder *b, uint64_t v) { put_le(b, v, 8); }

void gb_f32(gguf_builder *b, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    gb_u32(b, bits);
}

void gb_f64(gguf_builder *b, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    gb_u64(b, bits);
}

void gb_strn(gguf_builder *b, const char *s, size_t n)
{
    gb_u64(b, n);
    gb_bytes(b, s, n);
}

void gb_str(gguf_builder *b, const char *s)
{
    gb_strn(b, s, strlen(s));
}

void gb_header(gguf_builder *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gb_bytes(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}

void gb_key(gguf_builder *b, const char *key, npl_gguf_type type)
{
    gb_str(b, key);
    gb_u32(b, (uint32_t)type);
}

void gb_array_header(gguf_builder *b, npl_gguf_type elem, uint64_t count)
{
    gb_u32(b, (uint32_t)elem);
    gb_u64(b, count);
}

void gb_tensor_info(gguf_builder *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                    uint64_t offset)
{
    gb_str(b, name);
    gb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        gb_u64(b, ne[d]);
    gb_u32(b, type);
    gb_u64(b, offset);
}

void gb_pad_to(gguf_builder *b, uint64_t alignment)
{
    while (b->len % alignment)
        gb_u8(b, 0);
}

void gb_patch_u32(gguf_builder *b, size_t at, uint32_t v)
{
    for (unsigned i = 0; i < 4; i++)
        b->data[at + i] = (uint8_t)(v >> (8 * i));
}

void gb_patch_u64(gguf_builder *b, size_t at, uint64_t v)
{
    for (unsigned i = 0; i < 8; i++)
        b->data[at + i] = (uint8_t)(v >> (8 * i));
}

uint8_t gb_tensor_byte(size_t tensor_index, uint64_t j)
{
    return (uint8_t)((tensor_index * 31 + j * 7) & 0xff);
}

size_t gb_tensors(gguf_builder *b, gb_tensor *t, size_t n, uint64_t alignment)
{
    uint64_t offset = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t rows = 1;
        for (uint32_t d = 1; d < 4; d++)
            rows *= t[i].ne[d] ? t[i].ne[d] : 1;
        t[i].size = npl_type_row_size(t[i].type, (int64_t)t[i].ne[0]) * rows;
        t[i].offset = offset;
        gb_tensor_info(b, t[i].name, t[i].n_dims, t[i].ne, t[i].type, offset);
        offset += (t[i].size + alignment - 1) / alignment * alignment;
    }
    gb_pad_to(b, alignment);
    size_t data_start = b->len;
    for (size_t i = 0; i < n; i++) {
        while (b->len < data_start + t[i].offset)
            gb_u8(b, 0);
        for (uint64_t j = 0; j < t[i].size; j++)
            gb_u8(b, gb_tensor_byte(i, j));
    }
    return data_start;
}
