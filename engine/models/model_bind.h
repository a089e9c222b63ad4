/* Helpers of the architecture loader (model_arch.c and its hooks): read an
 * architecture's metadata with defaults and range checks, and bind tensors
 * after checking presence, shape and type, with messages that name the
 * file, the key or tensor, and what was expected. */
#ifndef NPL_MODEL_BIND_H
#define NPL_MODEL_BIND_H

#include "model_internal.h"

typedef struct npl_binder {
    npl_model *m;
    const char *path; /* for messages */
    const char *arch; /* metadata keys are "<arch>.<key>" */
    npl_error *err;
    /* The tokenizer may have up to this many tokens more than the
     * embedding has rows (Ollama's Gemma 3 blobs have one); ids past the
     * rows are never sampled and a prompt holding one is refused. */
    uint32_t extra_tokens;
    /* How the architecture's prepare hook (engine/models/model_arch.h) wants the
     * common keys read. */
    bool rms_eps_optional; /* absent: rms_eps_default */
    float rms_eps_default;
    bool own_rope_base; /* the family reads rope.freq_base itself */
    uint32_t swa_pattern; /* gemma3: between read_extra and finish */
    uint32_t full_attn_interval; /* qwen35: between read_extra and finish */
    /* lfm2: attention.head_count_kv is an array, 0 for layers without
     * attention; n_head_kv is its nonzero value. */
    bool kv_heads_per_layer;
    const char *output_norm_name; /* NULL: "output_norm.weight" */
    /* gemma4 (model_gemma4.c): feed_forward_length may be per layer (the
     * prepare hook reads it); what read_extra leaves for finish. */
    bool ff_per_layer;
    /* feed_forward_length when absent (0: required); the shared-expert MoE
     * families' prepare hook sets the shared expert's width (qwen35moe
     * files have no dense FFN and no such key). */
    uint32_t ff_default;
    const npl_gguf_value *ff_arr, *swa_arr;
    const npl_gguf_value *kv_arr; /* gemma4 (31B): attention.head_count_kv per layer, or NULL */
    uint32_t head_dim_full, head_dim_swa, n_kv_shared;
} npl_binder;

/* "<arch>.<key>" as an unsigned 32-bit integer in [lo, hi]; def when absent
 * and not required. */
npl_status npl_bind_u32(const npl_binder *b, const char *key, bool required, uint32_t def, uint32_t lo,
                        uint32_t hi, uint32_t *out);

/* "<arch>.<key>" as a number; def when absent and not required. */
npl_status npl_bind_f32(const npl_binder *b, const char *key, bool required, float def, float *out);

/* "<arch>.<key>" as a string; *found says whether it exists. */
npl_status npl_bind_str(const npl_binder *b, const char *key, npl_str *out, bool *found);

/* A weight matrix of GGUF shape [ne0, ne1] of a type the kernels multiply;
 * `meaning` names the dimensions for the message. */
npl_status npl_bind_matrix(const npl_binder *b, const char *name, uint64_t ne0, uint64_t ne1,
                           const char *meaning, npl_matrix *out);

/* A 1-D f32 vector of n elements (norm weights), used in place. */
npl_status npl_bind_vector(const npl_binder *b, const char *name, uint64_t n, const char *meaning,
                           const float **out);

/* token_embd.weight; sets hp.n_vocab from its rows and checks the
 * tokenizer and "<arch>.vocab_size" agree. */
npl_status npl_bind_token_embd(const npl_binder *b);

/* token_embd.weight, output.weight (or tied to the embeddings when the
 * file has none) and output_norm.weight; sets hp.n_vocab from the
 * embedding and checks the tokenizer and "<arch>.vocab_size" agree. */
npl_status npl_bind_embeddings_and_output(const npl_binder *b);

#endif
