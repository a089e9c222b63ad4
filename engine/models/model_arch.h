/* npl_arch: one description per architecture the engine runs. The loader
 * finds the file's general.architecture in the table, reads the
 * hyper-parameters under the entry's key prefix, binds every tensor of its
 * tensor table, and sets the forward pass's variations from its data.
 * Adding a family = adding an entry (engine/models/model_arch.c) and a gate
 * (docs/engine.md). */
#ifndef NPL_MODEL_ARCH_H
#define NPL_MODEL_ARCH_H

#include <stddef.h>

#include "model_bind.h"

/* The size of a tensor, in terms of the hyper-parameters. */
typedef enum npl_shape_rule {
    NPL_SHAPE_EMBD,         /* vector [n_embd] */
    NPL_SHAPE_HEAD,         /* vector [head_dim] */
    NPL_SHAPE_Q,            /* vector [n_head * head_dim] */
    NPL_SHAPE_KV,           /* vector [n_head_kv * head_dim] */
    NPL_SHAPE_EMBD_Q,       /* matrix [n_embd, n_head * head_dim] */
    NPL_SHAPE_EMBD_KV,      /* matrix [n_embd, n_head_kv * head_dim] */
    NPL_SHAPE_Q_EMBD,       /* matrix [n_head * head_dim, n_embd] */
    NPL_SHAPE_EMBD_FF,      /* matrix [n_embd, n_ff] */
    NPL_SHAPE_FF_EMBD,      /* matrix [n_ff, n_embd] */
    NPL_SHAPE_FF,           /* vector [n_ff] */
} npl_shape_rule;

/* One per-layer tensor "blk.<l>.<suffix>", bound into the npl_layer
 * field at `field` (an npl_matrix for matrix shapes, a const float * for
 * vectors). */
typedef struct npl_arch_tensor {
    const char *suffix;
    npl_shape_rule shape;
    size_t field;
    bool optional; /* absent: the field stays NULL / empty */
} npl_arch_tensor;

typedef enum npl_rope_style {
    NPL_ROPE_NORM, /* pairs (x[2i], x[2i+1]) */
    NPL_ROPE_NEOX, /* pairs (x[i], x[i + n_rot/2]) */
} npl_rope_style;

typedef enum npl_ffn_act {
    NPL_FFN_SILU, /* SwiGLU */
    NPL_FFN_GELU, /* GELU(tanh)-gated */
} npl_ffn_act;

typedef struct npl_arch {
    const char *name; /* general.architecture, and the prefix of its keys */

    /* Hyper-parameters beyond the common ones (context, sizes, heads,
     * head size, rope dimensions, rms epsilon) that every entry reads. */
    float default_rope_base; /* rope.freq_base when absent */
    /* Before the common keys: recognises a dialect of the family and says
     * how to read them (npl_binder's rms_eps_*, own_rope_base); may be NULL. */
    npl_status (*prepare)(npl_binder *b);
    /* After them: reads what only this family has (sliding windows, rope
     * scaling) and refuses what the engine does not run; may be NULL. */
    npl_status (*read_extra)(npl_binder *b);

    /* Per-layer tensors, in file order. */
    const npl_arch_tensor *tensors;
    size_t n_tensors;
    /* Per-layer suffixes of the family that this engine does not compute:
     * a file holding one is refused rather than run wrongly. */
    const char *const *refused;
    size_t n_refused;
    bool rope_freqs; /* may carry rope_freqs.weight (Llama 3.1+) */

    /* Forward variations. */
    npl_rope_style rope;
    npl_ffn_act ffn;
    bool embd_scale_sqrt; /* token embeddings times sqrt(n_embd) */
    /* An encoder that makes embeddings (docs/embeddings.md), not text:
     * read_extra binds its embeddings (no output or output norm), the
     * layers run in engine/models/embed.c, generation is refused. */
    bool encoder;
    /* A text model that a file with <arch>.pooling_type makes an
     * embedding model instead (Qwen3-Embedding): engine/models/embed_decoder.c. */
    bool may_embed;
    /* A text model's blocks that make only embeddings, whatever its file
     * says (gemma-embedding): engine/models/embed_decoder.c, bidirectional. */
    bool always_embeds;
    /* After the layers are bound: marks local layers, attention scale
     * overrides; may be NULL. */
    npl_status (*finish)(npl_binder *b);
} npl_arch;

/* The entry named name (general.architecture), or NULL. */
const npl_arch *npl_arch_find(const char *name);

/* Names of every entry, comma-separated, for messages: written to buf
 * (cut to cap bytes), which is returned. */
const char *npl_arch_names(char *buf, size_t cap);

/* Reads the hyper-parameters and binds the weights of m (whose gguf and
 * tokenizer are open) as architecture a describes. */
npl_status npl_arch_load(const npl_arch *a, npl_model *m, npl_error *err);

/* "<arch>.<key>" = v as a rope base, or an error naming the key. */
npl_status npl_arch_check_rope_base(const npl_binder *b, const char *key, float v);

/* Layer l's attention of a hybrid (qwen35, lfm2), bound by its finish hook:
 * attn_q of q_mult * n_head * head_dim rows (2: qwen35's query and gate per
 * head, which sets L->attn_gate), attn_k, attn_v, attn_output, per-head
 * attn_q_norm and attn_k_norm. */
npl_status npl_arch_bind_attention(const npl_binder *b, uint32_t l, npl_layer *L, uint32_t q_mult);

/* engine/models/model_<family>.c: the families' hooks. */
npl_status npl_llama_read_extra(npl_binder *b);
/* Refuses any rope scaling (model_llama.c). */
npl_status npl_llama_rope_plain(npl_binder *b);
/* engine/models/model_moe.c: qwen3moe and gpt-oss on engine/models/moe.h. */
npl_status npl_qwen3moe_read_extra(npl_binder *b);
npl_status npl_qwen3moe_finish(npl_binder *b);
npl_status npl_gptoss_read_extra(npl_binder *b);
npl_status npl_gptoss_finish(npl_binder *b);
/* qwen35moe: qwen35's layers with experts and a gated shared expert. */
npl_status npl_moe_shared_prepare(npl_binder *b);
npl_status npl_qwen35moe_read_extra(npl_binder *b);
npl_status npl_qwen35moe_finish(npl_binder *b);
/* qwen2moe: qwen2's attention, experts and a gated shared expert. */
npl_status npl_qwen2moe_read_extra(npl_binder *b);
npl_status npl_qwen2moe_finish(npl_binder *b);
npl_status npl_gemma3_prepare(npl_binder *b);
npl_status npl_gemma3_read_extra(npl_binder *b);
npl_status npl_gemma3_finish(npl_binder *b);
/* engine/models/model_gemma_embed.c: gemma-embedding (EmbeddingGemma) */
npl_status npl_gemma_embed_read_extra(npl_binder *b);
npl_status npl_gemma_embed_finish(npl_binder *b);
npl_status npl_gemma4_prepare(npl_binder *b);
npl_status npl_gemma4_read_extra(npl_binder *b);
npl_status npl_gemma4_finish(npl_binder *b);
npl_status npl_granite_read_extra(npl_binder *b);
npl_status npl_granite_finish(npl_binder *b);
npl_status npl_smollm3_finish(npl_binder *b);
npl_status npl_phi3_read_extra(npl_binder *b);
npl_status npl_phi3_finish(npl_binder *b);
/* Q, K and V of layer l: rows of the fused blk.<l>.attn_qkv.weight (Q, K,
 * V) when the file has one, else attn_q/k/v (model_phi3.c). */
npl_status npl_bind_attention_qkv(const npl_binder *b, uint32_t l, npl_layer *L);
/* Whether a file of architecture a (its entry, or NULL) makes embeddings:
 * an encoder, or a text model whose file names a pooling. */
bool npl_arch_makes_embeddings(const npl_arch *a, const npl_gguf *g);
npl_status npl_qwen35_read_extra(npl_binder *b);
/* qwen35's keys without the refusal of experts (qwen35moe shares them). */
npl_status npl_qwen35_read_hybrid(npl_binder *b);
npl_status npl_lfm2_prepare(npl_binder *b);
npl_status npl_lfm2_kv_heads(const npl_binder *b);
npl_status npl_lfm2_read_extra(npl_binder *b);
npl_status npl_lfm2_finish(npl_binder *b);
npl_status npl_qwen35_finish(npl_binder *b);
npl_status npl_mistral3_read_extra(npl_binder *b);
/* YaRN from rope.scaling.factor, yarn_beta_fast/slow (default 32 and 1) and
 * yarn_log_multiplier over an original context of orig_ctx (model_mistral3.c). */
npl_status npl_read_yarn(npl_binder *b, uint32_t orig_ctx);
/* engine/models/model_bert.c */
/* <arch>.pooling_type (mean when absent) into enc; none refused, and rank
 * unless rank_ok (models with a classification head). */
npl_status npl_read_pooling_rank(npl_binder *b, npl_encoder *enc, bool rank_ok);
/* A reranker's classification head: cls.weight, cls.bias (optional),
 * cls.output.weight (1 to 16 rows) and its optional bias. */
npl_status npl_read_rank_head(npl_binder *b, npl_encoder *enc);
/* engine/models/rerank_decoder.c: a decoder embedder's pooling; rank
 * (Qwen3-Reranker) with its head and tokenizer.chat_template.rerank. */
npl_status npl_read_decoder_pooling(npl_binder *b, npl_encoder *enc);
npl_status npl_bert_prepare(npl_binder *b);
npl_status npl_bert_read_extra(npl_binder *b);
npl_status npl_nomic_bert_prepare(npl_binder *b);
npl_status npl_nomic_bert_read_extra(npl_binder *b);
npl_status npl_nomic_bert_finish(npl_binder *b);

#endif
