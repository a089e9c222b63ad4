/* Types shared by the kernel manifest and the NPU device interface: what
 * a buffer is for, what its elements are, and the shape of one kernel
 * group call. */
#ifndef NPL_NPU_TYPES_H
#define NPL_NPU_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Residency class of a device buffer. The class decides which transfers
 * are legal, so the residency plan is enforced, not just documented. */
typedef enum npl_npu_buf_class {
    NPL_NPU_BUF_STATIC = 0,       /* weights: uploaded once at load */
    NPL_NPU_BUF_INTERMEDIATE = 1, /* device-only: never crosses to the host
                                     (inter-group activations, KV cache) */
    NPL_NPU_BUF_OUTPUT = 2,       /* results the host reads back (logits) */
    NPL_NPU_BUF_IO = 3,           /* activations the host writes per call */
} npl_npu_buf_class;
#define NPL_NPU_BUF_CLASS_COUNT 4

const char *npl_npu_buf_class_name(npl_npu_buf_class cls);

typedef enum npl_npu_elem_type {
    NPL_NPU_ELEM_F32 = 0,
    NPL_NPU_ELEM_BF16 = 1,
    NPL_NPU_ELEM_Q4NX = 2, /* shape [rows, cols]; bytes from the Q4NX layout */
    NPL_NPU_ELEM_I32 = 3,
    NPL_NPU_ELEM_U8 = 4,
    NPL_NPU_ELEM_PACK = 5, /* several parts (each its own type and shape) in
                              one buffer argument, at 64-byte aligned offsets */
} npl_npu_elem_type;

const char *npl_npu_elem_type_name(npl_npu_elem_type type);

typedef enum npl_npu_rope_style {
    NPL_NPU_ROPE_NORM = 0, /* rotate adjacent pairs (2i, 2i+1): Llama */
    NPL_NPU_ROPE_NEOX = 1, /* rotate (i, i + dims/2): Gemma, Qwen */
} npl_npu_rope_style;

typedef enum npl_npu_act {
    NPL_NPU_ACT_SILU = 0,      /* SwiGLU: silu(gate) * up */
    NPL_NPU_ACT_GELU_TANH = 1, /* GeGLU: gelu_tanh(gate) * up */
} npl_npu_act;

/* Everything a kernel group needs besides its buffers. Fields used as
 * symbols in manifest shape expressions are the uint32_t ones named in
 * npl_npu_shape_symbol_names. */
typedef struct npl_npu_shape {
    uint32_t n_embd;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim;
    uint32_t n_ff;
    uint32_t n_vocab;
    uint32_t n_tokens;  /* rows in this call: 1 for decode, <= chunk for prefill */
    uint32_t pos;       /* position of the first row */
    uint32_t n_ctx;     /* rows the KV cache buffers hold */
    uint32_t window;    /* sliding window in tokens (key visible while
                           query_pos - key_pos < window); 0 = unlimited */
    uint32_t rope_dims; /* rotated dims per head (even, <= head_dim); 0 = none */
    uint32_t chunk;     /* fixed row count a prefill binary is built for */
    uint32_t rope_style; /* npl_npu_rope_style */
    uint32_t act;        /* npl_npu_act */
    uint32_t causal;     /* 1: causal attention; 0: every row sees all rows */
    uint32_t qk_norm;    /* 1: per-head RMSNorm of Q and K (Gemma 3, Qwen 3) */
    uint32_t post_norms; /* 1: RMSNorm of the attention and FFN outputs (Gemma 3) */
    uint32_t qkv_bias;   /* 1: biases added to the Q, K and V projections (Qwen 2) */
    float rms_eps;
    float rope_theta;
    float rope_freq_scale; /* positions are multiplied by this (linear scaling) */
    float attn_scale;      /* score multiplier, usually 1/sqrt(head_dim) */
} npl_npu_shape;

/* The shape as kernels receive it (runtime parameters, see docs/npu.md):
 * 22 little-endian 32-bit words in field order, floats as IEEE bits. */
#define NPL_NPU_SHAPE_WORDS 22
void npl_npu_shape_pack(const npl_npu_shape *shape, uint32_t words[NPL_NPU_SHAPE_WORDS]);
void npl_npu_shape_unpack(const uint32_t words[NPL_NPU_SHAPE_WORDS], npl_npu_shape *shape);

/* Symbols usable in manifest expressions, NULL-terminated, and lookup of
 * their value in a shape (false for an unknown name). */
extern const char *const npl_npu_shape_symbol_names[];
bool npl_npu_shape_symbol(const npl_npu_shape *shape, const char *name, uint32_t *value);

#ifdef __cplusplus
}
#endif

#endif
