/* Inside of npl_model and npl_seq, shared by the loader, the KV cache and
 * the forward pass. Not part of the public API. */
#ifndef NPL_MODEL_INTERNAL_H
#define NPL_MODEL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "gguf.h"
#include "matvec.h"
#include "npullm.h"
#include "threadpool.h"

#define NPL_DEFAULT_PREFILL_CHUNK 256u

/* Sizes the loader accepts: far above any real model of the supported
 * architectures, low enough that every buffer size computed from them
 * fits comfortably in size_t. */
#define NPL_MAX_EMBD 65536u
#define NPL_MAX_HEADS 1024u
#define NPL_MAX_HEAD_DIM 1024u
#define NPL_MAX_FF (1u << 20)
#define NPL_MAX_LAYERS 1024u
#define NPL_MAX_VOCAB (1u << 22)
#define NPL_MAX_CTX (1u << 22)

typedef struct npl_hparams {
    uint32_t n_vocab;
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim;  /* per head, for Q, K and V */
    uint32_t n_ff;
    uint32_t n_rot;     /* leading dimensions of a head that RoPE rotates */
    uint32_t n_ctx_train;
    float rope_base;
    float rms_eps;
    /* Sliding-window attention (gemma3): layers marked local attend to
     * the last n_swa positions only; 0 = no local layers. */
    uint32_t n_swa;
    float rope_base_swa;  /* rope base of the local layers */
    float rope_scale;     /* global layers: positions times this (linear rope scaling); 1 = none */
    /* Gated DeltaNet layers (qwen35's ssm.* keys); 0 without them. */
    uint32_t ssm_d_conv;  /* convolution width */
    uint32_t ssm_d_state; /* key (and value) size of a head */
    uint32_t ssm_n_k;     /* key heads (group_count) */
    uint32_t ssm_n_v;     /* value heads (time_step_rank), a multiple of ssm_n_k */
    uint32_t n_rot_swa;   /* rotated dimensions of the local layers (gemma4's own; n_rot elsewhere) */
    uint32_t n_embd_per_layer; /* gemma4: size of each layer's own token input; 0 without */
} npl_hparams;

typedef struct npl_layer {
    const float *attn_norm; /* n_embd */
    npl_matrix wq, wk, wv, wo;
    const float *ffn_norm;  /* n_embd */
    npl_matrix w_gate, w_up, w_down;
    /* gemma3; NULL for llama. */
    const float *attn_q_norm;    /* head_dim: per-head RMSNorm of Q before RoPE */
    const float *attn_k_norm;    /* head_dim: same for K */
    const float *post_attn_norm; /* n_embd: RMSNorm of the attention output before the residual add */
    const float *post_ffn_norm;  /* n_embd: same for the FFN output */
    bool local;                  /* sliding-window layer (hp.n_swa) */
    /* qwen2; NULL otherwise. */
    const float *bq, *bk, *bv;   /* biases added to the Q, K and V projections */
    bool no_rope;                /* Q and K enter attention unrotated (smollm3's every fourth layer) */
    /* bert (post-norm encoder); bo also gpt-oss's; NULL otherwise. */
    const float *bo, *b_up, *b_down;           /* biases of the output, up and down projections */
    const float *attn_sinks;                   /* gpt-oss: n_head sink logits (npl_attention_kv_sinks), or NULL */
    const float *attn_out_norm, *attn_out_norm_b; /* LayerNorm after the attention's residual add */
    const float *out_norm, *out_norm_b;           /* LayerNorm after the FFN's residual add */
    /* qwen35's attention: wq's rows are each head's query then its output
     * gate (sigmoid, times the attention output before wo). */
    bool attn_gate;
    /* A Gated DeltaNet layer (qwen35) in place of attention; empty otherwise. */
    npl_matrix w_mix;   /* q, k, v rows into the convolution */
    npl_matrix w_z;     /* output gate of the norm */
    npl_matrix w_beta, w_alpha, w_ssm_out;
    const float *ssm_conv;    /* [channels][d_conv] */
    const float *ssm_dt_bias, *ssm_a, *ssm_norm;
    /* Fixed-size state of the layer (engine/models/seq_state.h), in floats:
     * a convolution tail and a matrix state. Zero for an attention layer,
     * which has KV rows instead. */
    size_t state_conv, state_mat, state_off;
    /* lfm2: a gated short convolution in place of attention (w_mix: the
     * b, c, x rows of in_proj; ssm_conv its kernel; w_ssm_out out_proj). */
    bool shortconv;
    /* A mixture-of-experts feed-forward (engine/models/moe.h) in place of
     * w_gate / w_up / w_down; NULL for a dense one. */
    const struct npl_moe_layer *moe;
    /* Sizes of this layer; the hparams' head_dim, n_rot, n_ff and n_head_kv
     * are the largest (buffers, cache rows). gemma4's local and global
     * layers differ (31B: in KV heads too). */
    uint32_t head_dim, n_rot, n_ff, n_head_kv;
    /* gemma4 (engine/models/model_gemma4.c, forward_ple.c): */
    bool kv_shared;    /* no K and V of its own: attends over layer kv_src's cache */
    uint32_t kv_src;
    bool v_norm;       /* V gets a weightless RMSNorm */
    npl_matrix ple_gate, ple_proj; /* its per-layer input's gate [n_embd -> n_pl] and projection back */
    const float *ple_post_norm;    /* n_embd */
    float out_scale;               /* the layer's output times it (1 = none) */
} npl_layer;

/* How an encoder turns its rows into one vector per text (the file's
 * <arch>.pooling_type, llama.cpp's numbering). */
typedef enum npl_pooling {
    NPL_POOLING_MEAN = 1,
    NPL_POOLING_CLS = 2,
    NPL_POOLING_LAST = 3,
    NPL_POOLING_RANK = 4, /* a reranker: the first row through the classification head */
} npl_pooling;

/* An encoder's weights beyond the layers (engine/models/model_bert.c). */
typedef struct npl_encoder {
    npl_matrix pos_embd;  /* [n_ctx_train rows] learned positions */
    npl_matrix type_embd; /* token types; row 0 for single texts */
    const float *embd_norm, *embd_norm_b; /* LayerNorm of the summed embeddings */
    float norm_eps;       /* <arch>.attention.layer_norm_epsilon */
    npl_pooling pooling;
    bool decoder;         /* a causal text model pooled into a vector (Qwen3-Embedding): embed_decoder.c */
    bool rope;            /* nomic-bert: NEOX RoPE on Q and K instead of pos_embd */
    /* Rank pooling (rerank.c): score = cls_out tanh(cls x + cls_b) + cls_out_b,
     * cls optional (absent: cls_out x + cls_out_b); the first of its outputs. */
    npl_matrix cls, cls_out;
    const float *cls_b, *cls_out_b;
    /* A decoder reranker's prompt (tokenizer.chat_template.rerank, with
     * {query} and {document}); its score is the softmax of the head's
     * outputs, the first (rerank_decoder.c). */
    const char *rerank_prompt;
    size_t rerank_prompt_len;
    /* gemma-embedding (model_gemma_embed.c): every row sees its whole text
     * (a local layer's keys within n_swa / 2 positions on either side), so
     * a text runs in one step; the pooled vector then goes through
     * dense3 (dense2 v) when the file has them (either may be absent). */
    bool bidirectional;
    npl_matrix dense2, dense3;
} npl_encoder;

/* Scratch for one forward step of up to `rows` tokens; one set per model
 * (calls on a model are serialised by contract). */
typedef struct npl_forward_ws {
    size_t rows;
    float *x;        /* rows * n_embd: the residual stream */
    float *xn;       /* rows * n_embd: normalised input of a sub-layer */
    float *q;        /* rows * n_head * head_dim */
    float *k;        /* rows * n_head_kv * head_dim */
    float *v;        /* rows * n_head_kv * head_dim */
    float *attn;     /* rows * n_head * head_dim */
    float *gate;     /* rows * n_ff */
    float *up;       /* rows * n_ff */
    float *rope;     /* rows * n_rot: cos, sin pairs per rotated pair */
    float *attn_scratch; /* n_threads * npl_attention_scratch_floats() */
    size_t attn_scratch_per_thread;
    /* The tiled attention (attention_tiled.h), when it runs here: per
     * thread, key ranges then the kernel's scratch; the step's query
     * blocks (runs of one sequence's consecutive positions). NULL when not. */
    uint8_t *attn_tiled_scratch;
    size_t attn_tiled_scratch_per_thread;
    size_t *attn_block; /* rows + 1 block starts */
    /* Otherwise the multi-position kernel (npl_attention_rows) for
     * prefill chunks in layers without a window: per thread, the key
     * ends of a block then the kernel's scratch, in floats. NULL when
     * the tiled kernel runs or a step has one row. */
    float *attn_rows_scratch;
    size_t attn_rows_scratch_per_thread;
    /* Row i of the step: which sequence, at which position. */
    npl_seq **row_seq;
    uint32_t *row_pos;
    /* bidirectional steps: the last position of row i's sequence in the step */
    uint32_t *row_last;
    float **logit_out; /* per logits row: where its logits go */
    float *rope_swa;   /* rows * n_rot: the local layers' table, or NULL */
    /* Layers with a gated Q (npl_layer.attn_gate): rows * 2 * q_dim of
     * the projection, rows * q_dim of the gates; NULL without them. */
    float *qg, *attn_gate;
    /* gemma4 (forward_ple.c): the step's per-layer inputs [layer][row][n_pl],
     * then rows * n_layer * n_pl of scratch; NULL without them. */
    float *ple;
} npl_forward_ws;

struct npl_model {
    npl_gguf *gguf;
    npl_tokenizer *tok;
    npl_model_info info;
    _Atomic bool chat_fallback_said; /* the template failure was logged */
    char *name;          /* owned copy of general.name */
    char *architecture;  /* owned copy of general.architecture */
    const struct npl_arch *arch; /* its entry in the architecture table (engine/models/model_arch.h) */
    npl_hparams hp;

    npl_matrix tok_embd;
    npl_matrix output;   /* token_embd itself when tied */
    const float *output_norm;
    const float *rope_freqs; /* n_rot / 2 divisors, or NULL */
    double *rope_inv_freq;   /* n_rot / 2: angle per position of each pair */
    /* phi3 LongRoPE: the divisors (rope_factors_long.weight) and angles of
     * sequences whose context exceeds rope_long_ctx (the original one), as
     * llama.cpp picks by context size, not position; NULL without them. */
    const float *rope_factors_long;
    double *rope_inv_freq_long;
    uint32_t rope_long_ctx;
    /* mistral3 YaRN: the angle of pair i blends the scaled one (rope_scale)
     * with the unscaled by a ramp from 1 at pair yarn_lo to 0 at yarn_hi. */
    bool yarn;
    float yarn_lo, yarn_hi;
    /* mistral3: Q times 1 + attn_temp_scale * ln(1 + floor(pos / attn_temp_length)) when the scale is not 0 */
    float attn_temp_scale;
    uint32_t attn_temp_length;
    npl_layer *layers;
    npl_encoder enc; /* encoders only (arch->encoder) */

    uint32_t prefill_chunk;
    uint32_t block_rows; /* npl_model_params.block_rows: fw.rows is at least this */
    npl_simd_level simd;
    npl_threadpool *pool;
    npl_matmul_ws *mm_ws;
    npl_forward_ws fw;

    /* Architecture variants of the forward pass, set from the
     * architecture's table entry by npl_arch_load. */
    float embd_scale;  /* token embeddings are multiplied by it (gemma3: sqrt(n_embd)) */
    float attn_scale;  /* multiplies q.k */
    bool rope_neox;    /* RoPE pairs (x[i], x[i + n_rot/2]) instead of (x[2i], x[2i+1]) */
    bool ffn_gelu;     /* GELU(tanh)-gated FFN instead of SiLU-gated */
    float residual_scale; /* each sub-layer output is multiplied by it before the residual add (granite) */
    float logit_scale;    /* logits are multiplied by it (granite: 1 / granite.logit_scale) */
    float rope_mscale;    /* rotated dimensions of Q and K are multiplied by it (phi3: rope.scaling.attn_factor) */
    const char *npu_refusal; /* what of the architecture the NPU kernels lack (static text), NULL when none */
    double *rope_inv_freq_swa; /* n_rot_swa / 2, local layers; NULL without them */
    /* gemma4: per-layer token inputs (forward_ple.c) and logit softcapping. */
    npl_matrix ple_tok_embd;   /* [n_layer * n_pl] per token */
    npl_matrix ple_model_proj; /* n_embd -> n_layer * n_pl */
    const float *ple_proj_norm; /* n_pl */
    bool fold_layer_end;       /* each layer's FFN output is added (and the layer finished) at its end */
    float logit_softcap;       /* logits = cap * tanh(logits / cap) when not 0 */

    size_t state_floats;      /* a sequence's recurrent state (seq_state.h); 0 without recurrent layers */
    struct npl_dnet_ws *dnet; /* step buffers of the Gated DeltaNet layers (forward_dnet.c), or NULL */
    float *shortconv_ws;      /* lfm2: rows * 3 * n_embd for the short convolutions (forward_shortconv.c), or NULL */
    struct npl_moe *moe;      /* the experts' settings, layers and step buffers (moe.h), or NULL */

    npl_kv_format kv_format; /* of every sequence's KV cache (npl_model_params.kv_type) */
    size_t kv_row_bytes;     /* one cached row of head_dim values in that format */

    struct npl_model_device_state *device; /* engine/backend/backend.h: where the layers run */

    struct npl_cpu_weight_cache *weight_cache; /* mapped packed weights mm_ws reads, or NULL */
    npl_weight_cache_stats weight_cache_stats;
};

struct npl_seq {
    npl_model *model;
    uint32_t n_ctx;
    uint32_t pos;
    /* [layer][kv_head][position] rows of model->kv_row_bytes (head_dim
     * values in model->kv_format), K and V apart: a step reads each head's
     * cached rows front to back. */
    uint8_t *k_cache;
    uint8_t *v_cache;
    size_t k_map_bytes, v_map_bytes; /* their mappings (npl_huge_alloc), 0 when malloc'd */
    float *logits; /* n_vocab */
    bool has_logits;
    bool in_batch; /* marks duplicates while npl_decode checks its batch */
    /* Local (sliding-window) layers of a long context keep a ring of the
     * last kv_ring positions instead of n_ctx rows: position p at row
     * p % kv_ring and, mirrored, at p % kv_ring + kv_ring when that row
     * exists, so any kv_ring consecutive positions are contiguous rows in
     * position order (one attention call, same order as a full cache).
     * kv_ring = 0: every layer keeps n_ctx rows, position p at row p. */
    uint32_t kv_ring;
    uint32_t kv_ring_rows; /* 2 * kv_ring - 1 */
    /* n_layer: start of each layer's rows in k_cache / v_cache, counted
     * in cached values (rows * head_dim) so that it reads the same in
     * every format; npl_kv_head_offset turns it into bytes. */
    size_t *kv_layer_off;
    /* n_ctx: the token at each cached position, -1 for embedding rows
     * (images), so a pool can match a new prompt against it
     * (engine/models/kv_pool.c). Kept by every backend. */
    int32_t *hist;
    struct npl_seq_state *state; /* engine/models/seq_state.h: recurrent layers' state, or NULL */
    void *device; /* its backend's state (e.g. the KV cache on an NPU), NULL on the CPU */
    const struct npl_backend *backend; /* its model's (engine/backend/backend.h): a sequence may outlive the model */
    /* The entries that ran its last prefill and decode, and how often its
     * cache moved between them (the phase split, npl_seq_devices). */
    const struct npl_backend *prefill_backend, *decode_backend;
    uint32_t kv_moves;
};

/* engine/models/model.c: the loader's checks of an open file (architecture,
 * tokenizer, every tensor's presence, type and shape) without threads or
 * scratch memory; NPL_OK when npl_model_load would accept it. */
npl_status npl_model_check_gguf(npl_gguf *g, npl_error *err);

/* engine/models/model_probe.c: parameter count and dominant weight type (by
 * bytes) of a file, shared by npl_model_probe and npl_model_get_info. */
uint64_t npl_gguf_param_count(const npl_gguf *g);
const char *npl_gguf_dominant_type(const npl_gguf *g);

/* engine/models/model_info.c: fills m->info once the weights are bound. */
void npl_model_info_fill(npl_model *m);

/* engine/models/forward.c */
npl_status npl_forward_ws_init(npl_model *m, npl_error *err);
/* One causal step of n <= fw.rows token rows set up in fw.row_seq /
 * fw.row_pos (their sequences' caches hold the earlier positions; the
 * caller advances pos): every row's output after the final norm, n rows
 * of n_embd floats, into hidden (no logits). With enc.bidirectional each
 * row sees every row of its sequence in the step instead. */
void npl_cpu_forward_hidden(npl_model *m, const int32_t *tokens, size_t n, float *hidden);
/* engine/models/kv_cache.c: npl_seq_create without its refusal of
 * embedding models (decoder embedders run their texts through sequences). */
npl_seq *npl_seq_create_any(npl_model *m, uint32_t n_ctx, npl_error *err);
/* The same on entry `on` of the backend registry (NULL: the model's): the
 * CPU's for a sequence that continues one the phase split moved there
 * (engine/models/kv_pool.c). */
npl_seq *npl_seq_create_on(npl_model *m, uint32_t n_ctx, const struct npl_backend *on, npl_error *err);
void npl_forward_ws_free(npl_forward_ws *fw);

/* engine/models/kv_cache.c: bytes a sequence holds (its K and V arrays whole,
 * or its device buffers on an NPU; its logits when it has them, its
 * tokens): what a pool counts, as an allocator may have touched every page. */
size_t npl_seq_bytes(const npl_seq *s);

/* engine/models/kv_cache.c: rows a layer keeps per KV head. */
static inline uint32_t npl_kv_rows(const npl_seq *s, uint32_t layer)
{
    if (s->model->layers[layer].kv_shared)
        return 0; /* reads another layer's rows */
    if (s->model->layers[layer].state_mat || s->model->layers[layer].state_conv)
        return 0; /* a recurrent layer keeps no positions */
    return s->kv_ring && s->model->layers[layer].local ? s->kv_ring_rows : s->n_ctx;
}

/* Byte offset in k_cache / v_cache of the cached rows of one (layer, kv
 * head). */
static inline size_t npl_kv_head_offset(const npl_seq *s, uint32_t layer, uint32_t kv_head)
{
    const npl_model *m = s->model;
    size_t layer_rows = s->kv_layer_off[layer] / m->hp.head_dim;
    return (layer_rows + (size_t)kv_head * npl_kv_rows(s, layer)) * m->kv_row_bytes;
}

/* Row of position pos in a layer's rows (the first one for a ring). */
static inline size_t npl_kv_row(const npl_seq *s, uint32_t layer, uint32_t pos)
{
    return s->kv_ring && s->model->layers[layer].local ? pos % s->kv_ring : pos;
}

/* The mirrored row of a ring position, or SIZE_MAX when there is none. */
static inline size_t npl_kv_mirror_row(const npl_seq *s, uint32_t layer, uint32_t pos)
{
    if (!s->kv_ring || !s->model->layers[layer].local)
        return SIZE_MAX;
    size_t r = pos % s->kv_ring;
    return r + 1 < s->kv_ring ? r + s->kv_ring : SIZE_MAX;
}

#endif
