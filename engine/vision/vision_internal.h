/* Inside of npl_vision, shared by the mmproj loader, the preprocessing and
 * the encoder. Not part of the public API. */
#ifndef NPL_VISION_INTERNAL_H
#define NPL_VISION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gguf.h"
#include "matmul_amx.h"
#include "matvec.h"
#include "threadpool.h"
#include "vision.h"

/* Sizes the loader accepts: well above SigLIP so400m (1152 wide, 27
 * blocks, 4096 patches), low enough that every buffer size fits size_t. */
#define NPL_VISION_MAX_EMBD 16384u
#define NPL_VISION_MAX_FF (1u << 18)
#define NPL_VISION_MAX_LAYERS 256u
#define NPL_VISION_MAX_IMAGE 4096u
#define NPL_VISION_MAX_PATCHES 65536u
#define NPL_VISION_MAX_OUT_EMBD 65536u

/* Patch rows per matrix product: bounds the matmul workspace and the FFN
 * hidden buffer whatever the number of patches; large enough that a
 * weight tile is reused over many rows while it sits in cache. */
#define NPL_VISION_ROW_CHUNK 256u

/* Queries per call of the online-softmax attention kernel (they share
 * each block of keys and values it converts). */
#define NPL_VISION_ATTN_QUERIES 64u

typedef enum npl_vision_act {
    NPL_VISION_GELU,       /* tanh approximation (clip.use_gelu) */
    NPL_VISION_SILU,       /* clip.use_silu */
    NPL_VISION_GELU_QUICK, /* x * sigmoid(1.702 x): neither key set */
} npl_vision_act;

/* Vectors (norm weights, biases) are small: converted to f32 at load. */
typedef struct npl_vision_block {
    const float *ln1_w, *ln1_b;
    npl_matrix wq, wk, wv, wo;
    const float *bq, *bk, *bv, *bo; /* NULL when the file has none */
    const float *ln2_w, *ln2_b;
    npl_matrix w_up, w_down;
    const float *b_up, *b_down;     /* NULL when absent */
} npl_vision_block;

struct npl_vision {
    npl_gguf *gguf;
    npl_vision_info info;
    uint32_t n_side;     /* patches per side: image_size / patch_size */
    uint32_t n_patches;  /* n_side^2 */
    uint32_t head_dim;
    float eps;
    npl_vision_act act;

    npl_matrix patch_embd;   /* n_embd rows of 3 * patch^2: (channel, y, x) */
    const float *patch_bias; /* n_embd or NULL */
    npl_matrix pos_embd;     /* n_patches rows of n_embd */
    const float *pre_ln_w, *pre_ln_b; /* optional */
    npl_vision_block *blocks;
    const float *post_ln_w, *post_ln_b; /* optional */
    const float *soft_emb_norm;         /* n_embd */
    float *proj_t;                      /* n_embd_out rows of n_embd: mm.input_projection transposed */
    npl_matrix proj;

    float *vectors; /* owned storage behind every const float * above */

    bool exact;        /* npl_vision_params.exact */
    bool bf16_weights; /* npl_vision_params.bf16_weights */
    bool q8_weights;   /* npl_vision_params.q8_weights */
    uint8_t *converted; /* the matrices converted at load (vision_weights.c) */

    npl_simd_level simd;
    npl_threadpool *pool;
    npl_matmul_ws *mm_ws;

    /* AMX tiles (vision_weights.c): the F16 matrices packed for them, and
     * the activations of one product split for them; n_amx = 0 without. */
    struct npl_vision_amx *amx;
    size_t n_amx;
    npl_amx_acts *amx_acts;
};

/* engine/vision/vision_mmproj.c */
npl_status npl_vision_load_weights(npl_vision *v, npl_error *err);

/* engine/vision/vision_weights.c: the matrices made ready at load (integer types
 * repacked now rather than on the first image; F16 as Q8_0 or BF16 when
 * asked). */
npl_status npl_vision_prepare_weights(npl_vision *v, npl_error *err);
void npl_vision_free_weights(npl_vision *v);

/* The packed copy of m for the AMX tiles, or NULL. */
const npl_amx_weights *npl_vision_amx_weights(const npl_vision *v, const npl_matrix *m);

/* engine/vision/vision_attention.c: the fast path's attention buffers (per
 * encoding) and the attention of every patch over every patch: out
 * (n_patches x n_embd) from the biased Q, K, V of the same layout. */
typedef struct npl_vision_attn {
    float *kt;          /* per head: keys_floats, the keys transposed */
    float *vh;          /* per head: n_patches rows of head_dim values */
    size_t keys_floats;
    float *scratch;     /* per thread: scratch_floats */
    size_t scratch_floats;
} npl_vision_attn;

npl_status npl_vision_attn_alloc(const npl_vision *v, npl_vision_attn *a, npl_error *err);
void npl_vision_attn_free(npl_vision_attn *a);
void npl_vision_attention_fast(const npl_vision *v, npl_vision_attn *a, const float *q, const float *k,
                               const float *val, float *out);

/* n floats, 64-byte aligned (freed with free()): the kernels' 64-byte
 * vector loads of activations then never straddle two cache lines, which
 * costs them about 5% (a large malloc returns 16 bytes into a page). */
static inline float *npl_vision_floats(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes ? bytes : 64);
}

#endif
