/* Test helper: writes GGUF images byte by byte into memory so tests can
 * build valid files and corrupt exactly one field. Aborts on OOM (tests
 * only). */
#ifndef NPL_TEST_GGUF_BUILDER_H
#define NPL_TEST_GGUF_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef struct gguf_builder {
    uint8_t *data;
    size_t len;
    size_t cap;
} gguf_builder;

void gb_free(gguf_builder *b);

void gb_bytes(gguf_builder *b, const void *p, size_t n);
void gb_u8(gguf_builder *b, uint8_t v);
void gb_u16(gguf_builder *b, uint16_t v);
void gb_u32(gguf_builder *b, uint32_t v);
void gb_u64(gguf_builder *b, uint64_t v);
void gb_f32(gguf_builder *b, float v);
void gb_f64(gguf_builder *b, double v);
void gb_strn(gguf_builder *b, const char *s, size_t n);
void gb_str(gguf_builder *b, const char *s);

void gb_header(gguf_builder *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv);
/* Key followed by the value type; the caller writes the value. */
void gb_key(gguf_builder *b, const char *key, npl_gguf_type type);
void gb_array_header(gguf_builder *b, npl_gguf_type elem, uint64_t count);
void gb_tensor_info(gguf_builder *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                    uint64_t offset);
void gb_pad_to(gguf_builder *b, uint64_t alignment);

void gb_patch_u32(gguf_builder *b, size_t at, uint32_t v);
void gb_patch_u64(gguf_builder *b, size_t at, uint64_t v);

/* A tensor for gb_tensors: unused ne entries may be 0 (written as 1). */
typedef struct gb_tensor {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    uint64_t size;   /* bytes, filled by gb_tensors */
    uint64_t offset; /* relative to the data section, filled by gb_tensors */
} gb_tensor;

/* Writes the tensor infos (offsets packed at `alignment`), the padding and
 * the data (byte j of tensor i is (i * 31 + j * 7) & 0xff), with no
 * padding after the last tensor. Sizes come from npl_type_row_size.
 * Returns the file offset of the data section. */
size_t gb_tensors(gguf_builder *b, gb_tensor *t, size_t n, uint64_t alignment);
uint8_t gb_tensor_byte(size_t tensor_index, uint64_t j);

#endif
