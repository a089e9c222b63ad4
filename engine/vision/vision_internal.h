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
/* gemma4v: embeddings of one image at most (its patches: times pool^2) */
#define NPL_VISION_MAX_DYN_TOKENS 1024u

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

/* gemma4v's "clippable" linear layers: the input clamped to [in_lo,
 * in_hi] before the product and the output to [out_lo, out_hi] after
 * (llama.cpp's defaults, +-FLT_MAX, when a bound is absent). */
typedef struct npl_vision_clamp {
    bool on;
    float in_lo, in_hi, out_lo, out_hi;
} npl_vision_clamp;

enum { NPL_G4V_Q, NPL_G4V_K, NPL_G4V_V, NPL_G4V_O, NPL_G4V_GATE, NPL_G4V_UP, NPL_G4V_DOWN };

/* Vectors (norm weights, biases) are small: converted to f32 at load. */
typedef struct npl_vision_block {
    const float *ln1_w, *ln1_b;
    npl_matrix wq, wk, wv, wo;
    const float *bq, *bk, *bv, *bo; /* NULL when the file has none */
    const float *ln2_w, *ln2_b;
    npl_matrix w_up, w_down;
    const float *b_up, *b_down;     /* NULL when absent */
    /* gemma4v (vision_gemma4v.c): per-head RMS norms of Q and K, RMS
     * norms after the attention and the FFN, the FFN's gate, the block's
     * output scale (1 or n_embd values) and the clipping bounds of its
     * linear layers. ln1_w/ln2_w are then RMS norm weights. */
    const float *q_norm, *k_norm, *post_attn_norm, *post_ffn_norm;
    npl_matrix w_gate;
    const float *out_scale;
    uint32_t out_scale_n;
    npl_vision_clamp clamp[7]; /* NPL_G4V_Q .. NPL_G4V_DOWN */
} npl_vision_block;

struct npl_vision {
    npl_gguf *gguf;
    npl_vision_info info;
    npl_vision_pixel_params pixel; /* what preprocessing needs (read_pixel_params) */
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

    /* gemma4v (vision_gemma4v.c): no fixed image size (n_side and
     * n_patches are 0; each encoding has its own patch grid), position
     * tables for x and y (pos_size rows each), 2-D RoPE on Q and K,
     * optional standardisation after the pooling, the projection used as
     * stored (one row per output) with its clipping bounds. */
    bool gemma4v;
    uint32_t pos_size;
    float rope_theta;
    const float *std_bias, *std_scale;
    npl_vision_clamp proj_clamp;

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

/* engine/vision/vision_mmproj.c: loading, and the checked accessors the
 * projector-specific loaders share. */
typedef struct npl_vision_loader {
    npl_vision *v;
    const char *path;
    npl_error *err;
    float *arena; /* next free float of v->vectors */
    float *arena_end;
} npl_vision_loader;

npl_status npl_vision_load_weights(npl_vision *v, npl_error *err);
npl_status npl_vision_get_u32(const npl_vision_loader *L, const char *key, bool required, uint32_t def, uint32_t *out);
npl_status npl_vision_get_range(const npl_vision_loader *L, const char *key, bool required, uint32_t def, uint32_t lo,
                                uint32_t hi, uint32_t *out);
npl_status npl_vision_get_bool(const npl_vision_loader *L, const char *key, bool *out);
const npl_gguf_tensor *npl_vision_find(const npl_vision_loader *L, const char *name, bool required);
bool npl_vision_shape_is(const npl_gguf_tensor *t, uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3);
npl_status npl_vision_shape_error(const npl_vision_loader *L, const npl_gguf_tensor *t, const char *name,
                                  const char *want);
npl_status npl_vision_bind_matrix(const npl_vision_loader *L, const npl_gguf_tensor *t, const char *name,
                                  int64_t n_cols, int64_t n_rows, const char *want, npl_matrix *out);
npl_status npl_vision_matrix2(const npl_vision_loader *L, const char *name, uint64_t ne0, uint64_t ne1,
                              const char *want, npl_matrix *out);
/* mm.input_projection.weight, its outputs along ne[out_axis] (Gemma 3: 0,
 * gemma4v: 1), checked against clip.vision.projection_dim. */
npl_status npl_vision_projection(npl_vision_loader *L, int out_axis, const npl_gguf_tensor **t, uint32_t *n_out);
/* A 1-D tensor of n values as f32; NULL (no error) when optional and absent. */
npl_status npl_vision_vector(npl_vision_loader *L, const char *name, uint64_t n, bool required, const float **out);

/* engine/vision/vision_gemma4v_load.c: gemma4v's keys and tensors. */
npl_status npl_gemma4v_pixel_params(const npl_vision_loader *L, npl_vision_pixel_params *out);
npl_status npl_gemma4v_hparams(npl_vision_loader *L);
npl_status npl_gemma4v_load_tensors(npl_vision_loader *L);

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

npl_status npl_vision_attn_alloc(const npl_vision *v, size_t n_patches, npl_vision_attn *a, npl_error *err);
void npl_vision_attn_free(npl_vision_attn *a);
/* scale multiplies q.k (1/sqrt(head_dim) in SigLIP, 1 in gemma4v). */
void npl_vision_attention_fast(const npl_vision *v, npl_vision_attn *a, size_t n_patches, float scale, const float *q,
                               const float *k, const float *val, float *out);

/* One encoding in progress (vision_siglip.c runs Gemma 3's stages,
 * vision_gemma4v.c gemma4v's). */
struct npl_vision_encoding {
    npl_vision *v;
    uint32_t stage;
    uint32_t n_patches; /* this image's: v->n_patches, or gemma4v's nx * ny */
    uint32_t nx, ny;    /* gemma4v: patches per row and per column */
    uint32_t n_tokens;  /* embeddings produced */
    float *pixels;  /* 3 planes of the preprocessed image, until stage 0 ran */
    float *x;       /* n_patches x n_embd: the residual stream */
    float *xn;      /* n_patches x n_embd: normalised input / attention output */
    float *q;       /* n_patches x n_embd */
    float *kh;      /* K, n_patches x n_embd; the exact path then rearranges it per head: [head][patch][head_dim] */
    float *vt;      /* V, n_patches x n_embd; the exact path then transposes it per head: [head][head_dim][patch] */
    float *tmp;     /* n_patches x n_embd: the exact path's K and V while rearranged, the projector's tokens */
    float *hidden;  /* ROW_CHUNK x max(n_ff, 3 patch^2): fc1 output, patch vectors */
    float *gate;    /* gemma4v: ROW_CHUNK x n_ff, the FFN's gate */
    float *scores;  /* exact path: ROW_CHUNK x n_patches */
    float *out;     /* n_tokens x n_embd_out */
    npl_vision_attn attn; /* fast path */
    npl_vision_timings times;
};

/* Row-parallel operations of vision_siglip.c, shared with gemma4v. */
typedef enum npl_vision_row_op {
    OP_LAYERNORM, /* dst = LN(src) * w + b (w, b optional) */
    OP_ADD_BIAS,  /* dst += b */
    OP_ADD,       /* dst += src (+ b when given) */
    OP_ACT,       /* dst = act(dst + b) */
    OP_ACT_FAST,  /* the same with act_gelu.h */
    OP_RMSNORM,   /* dst = RMSNorm(src) * w (w optional) */
    OP_SOFTMAX,   /* dst = softmax(dst * scale) */
    OP_MUL,       /* dst *= src */
} npl_vision_row_op;

void npl_vision_rows(const npl_vision *v, npl_vision_row_op op, float *dst, const float *src, const float *w,
                     const float *b, size_t n_rows, size_t width);
/* y = W x for n <= NPL_VISION_ROW_CHUNK rows (AMX tiles or the matrix kernel). */
void npl_vision_product(const npl_vision *v, const npl_matrix *w, const float *x, size_t x_stride, size_t n, float *y,
                        size_t y_stride);
/* y[r] = W x[r] for n_rows rows, in chunks. */
void npl_vision_matmul_rows(const npl_vision *v, const npl_matrix *w, const float *x, size_t n_rows, float *y);
/* Stage 0's patch products: for each chunk of rows, gather (a task over
 * the chunk's patches, given an npl_vision_embed_job) fills hidden with
 * patch vectors, which the patch kernel turns into rows of x. */
typedef struct npl_vision_embed_job {
    npl_vision_encoding *e;
    size_t r0; /* first patch of the chunk being gathered */
} npl_vision_embed_job;
void npl_vision_embed_patches(npl_vision_encoding *e, npl_task_fn gather);
/* dst = the sum of the k x k patches of token (ty, tx) over a grid nx
 * patches wide (rows of E floats in feat), added in row-major order. */
void npl_vision_pool_sum(const float *feat, size_t nx, size_t k, size_t ty, size_t tx, size_t E, float *dst);
/* The activations of an encoding of n_patches patches giving n_tokens
 * embeddings (pixels of n_pixels floats); its pixels are filled by the caller. */
npl_status npl_vision_encoding_alloc(npl_vision *v, size_t n_pixels, uint32_t n_patches, uint32_t n_tokens,
                                     npl_vision_encoding **out, npl_error *err);

/* engine/vision/vision_gemma4v.c */
npl_vision_encoding *npl_gemma4v_encoding_create(npl_vision *v, const npl_vision_pixel_params *p, const float *pixels,
                                                 npl_error *err);
void npl_gemma4v_stage(npl_vision_encoding *e);

/* engine/vision/vision_preprocess_dyn.c: gemma4v's size (smart resize). */
bool npl_vision_dyn_size(const npl_vision_pixel_params *p, uint32_t w, uint32_t h, uint32_t *out_w, uint32_t *out_h);
npl_status npl_vision_dyn_preprocess(const npl_vision_pixel_params *p, const npl_image *img, float *out, npl_error *err);
/* The letterboxing scale of vision_preprocess.c: src fitted into a
 * dst_w x dst_h black image, bilinear, centred. */
void npl_vision_letterbox(const npl_image *img, uint8_t *dst, uint32_t dst_w, uint32_t dst_h);
/* n RGB pixels to 3 planes of (v / 255 - mean) / std. */
void npl_vision_normalize(const npl_vision_pixel_params *p, const uint8_t *rgb, size_t n, float *out);

/* n floats, 64-byte aligned (freed with free()): the kernels' 64-byte
 * vector loads of activations then never straddle two cache lines, which
 * costs them about 5% (a large malloc returns 16 bytes into a page). */
static inline float *npl_vision_floats(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes ? bytes : 64);
}

#endif
