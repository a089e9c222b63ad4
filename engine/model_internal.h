/* Inside of npl_model and npl_seq, shared by the loader, the KV cache and
 * the forward pass. Not part of the public API. */
#ifndef NPL_MODEL_INTERNAL_H
#define NPL_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
} npl_hparams;

typedef struct npl_layer {
    const float *attn_norm; /* n_embd */
    npl_matrix wq, wk, wv, wo;
    const float *ffn_norm;  /* n_embd */
    npl_matrix w_gate, w_up, w_down;
} npl_layer;

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
    /* Row i of the step: which sequence, at which position. */
    npl_seq **row_seq;
    uint32_t *row_pos;
    float **logit_out; /* per logits row: where its logits go */
} npl_forward_ws;

struct npl_model {
    npl_gguf *gguf;
    npl_tokenizer *tok;
    npl_model_info info;
    char *name;          /* owned copy of general.name */
    char *architecture;  /* owned copy of general.architecture */
    npl_hparams hp;

    npl_matrix tok_embd;
    npl_matrix output;   /* token_embd itself when tied */
    const float *output_norm;
    const float *rope_freqs; /* n_rot / 2 divisors, or NULL */
    double *rope_inv_freq;   /* n_rot / 2: angle per position of each pair */
    npl_layer *layers;

    uint32_t prefill_chunk;
    npl_simd_level simd;
    npl_threadpool *pool;
    npl_matmul_ws *mm_ws;
    npl_forward_ws fw;
};

struct npl_seq {
    npl_model *model;
    uint32_t n_ctx;
    uint32_t pos;
    /* [layer][kv_head][position][head_dim] halves, K and V apart: a step
     * reads each head's cached rows front to back. */
    uint16_t *k_cache;
    uint16_t *v_cache;
    float *logits; /* n_vocab */
    bool has_logits;
    bool in_batch; /* marks duplicates while npl_decode checks its batch */
};

/* engine/model_llama.c: hyper-parameters and weights of a "llama" file. */
npl_status npl_llama_load(npl_model *m, npl_error *err);

/* engine/model_info.c: fills m->info once the weights are bound. */
void npl_model_info_fill(npl_model *m);

/* engine/forward.c */
npl_status npl_forward_ws_init(npl_model *m, npl_error *err);
void npl_forward_ws_free(npl_forward_ws *fw);

/* engine/kv_cache.c: the cached rows of one (layer, kv head). */
static inline size_t npl_kv_head_offset(const npl_seq *s, uint32_t layer, uint32_t kv_head)
{
    const npl_hparams *hp = &s->model->hp;
    return (((size_t)layer * hp->n_head_kv + kv_head) * s->n_ctx) * hp->head_dim;
}

#endif
