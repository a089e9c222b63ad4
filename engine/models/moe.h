/* The mixture-of-experts feed-forward shared by the MoE families (qwen3moe,
 * gpt-oss, qwen35moe; docs/engine.md "Mixture of experts"): a router picks,
 * per token, k of the layer's experts and weights them; each expert is a
 * gated FFN whose matrices are slices of the stacked ffn_{gate,up,down}_exps
 * tensors, used in place in the mapped file. A step's rows are grouped by
 * expert, so an expert's weights are read once per step (a prefill chunk)
 * and a decode reads only the experts its rows selected. A family may add a
 * shared expert (ffn_{gate,up,down}_shexp) that every token goes through,
 * its output scaled by sigmoid(ffn_gate_inp_shexp . x) where the file has
 * that gate (Qwen's families). Gemma 4's expert layers run the experts
 * beside a dense FFN, with their own router input (moe_dense.c). */
#ifndef NPL_MOE_H
#define NPL_MOE_H

#include "model_bind.h"

/* How router logits become the selected experts' weights. */
typedef enum npl_moe_gating {
    NPL_MOE_SOFTMAX,      /* softmax over every expert, then the k largest (qwen3moe) */
    NPL_MOE_TOPK_SOFTMAX, /* the k largest logits, then softmax over those k (gpt-oss) */
} npl_moe_gating;

/* The gated activation of an expert. */
typedef enum npl_moe_act {
    NPL_MOE_SILU,       /* silu(gate) * up */
    NPL_MOE_SWIGLU_OAI, /* gpt-oss: g = min(gate, 7), u = clamp(up, -7, 7), g * sigmoid(1.702 g) * (u + 1) */
    NPL_MOE_GEGLU,      /* gelu(gate) * up, GELU in its tanh form (gemma4) */
} npl_moe_act;

/* The family's settings, the same for every layer. */
typedef struct npl_moe_cfg {
    uint32_t n_expert, n_used; /* <arch>.expert_count, expert_used_count */
    uint32_t n_ff;             /* <arch>.expert_feed_forward_length: rows of one expert's gate and up */
    npl_moe_gating gating;
    npl_moe_act act;
    bool norm_w;   /* the selected weights divided by their sum */
    float w_scale; /* then multiplied by this (1: none) */
    /* The family has one shared expert (SwiGLU, no biases) of n_ff_shexp
     * rows (<arch>.expert_shared_feed_forward_length, default n_ff). */
    bool shared;
    uint32_t n_ff_shexp;
    /* gemma4: a layer's ffn_gate_up_exps (per expert its gate rows, then
     * its up rows) may stand for ffn_gate_exps and ffn_up_exps; each
     * expert's output is times ffn_down_exps.scale[expert] where the file
     * has it; the experts run beside the dense FFN (moe_dense.c). */
    bool gemma4;
} npl_moe_cfg;

/* One layer's experts: n_expert matrices each, and optional biases. */
typedef struct npl_moe_layer {
    npl_matrix router;        /* ffn_gate_inp: n_embd -> n_expert */
    const float *router_b;    /* [n_expert] or NULL */
    npl_matrix *gate, *up, *down; /* [n_expert] slices */
    const float *gate_b, *up_b, *down_b; /* [n_expert][n_ff], [n_expert][n_ff], [n_expert][n_embd] or NULL */
    /* The shared expert (sh_down.rows == 0: none) and its scalar gate
     * (sh_gate_inp.rows == 0: ungated). */
    npl_matrix sh_gate, sh_up, sh_down; /* ffn_{gate,up,down}_shexp */
    npl_matrix sh_gate_inp;             /* ffn_gate_inp_shexp: n_embd -> 1 */
    const float *down_s;                /* ffn_down_exps.scale [n_expert] or NULL */
    /* gemma4 (moe_dense.c): the router's input scale (ffn_gate_inp.scale),
     * the experts' input norm (pre_ffw_norm_2) and the output norms of the
     * dense FFN (post_ffw_norm_1) and of the experts (post_ffw_norm_2). */
    const float *router_in_scale, *pre_norm, *dense_post_norm, *post_norm;
} npl_moe_layer;

/* A model's experts: the settings, every layer's (indexed by layer, set
 * for the MoE layers) and the step buffers. */
typedef struct npl_moe {
    npl_moe_cfg cfg;
    npl_moe_layer *layers;
    npl_matrix *slices;   /* n_layer * 3 * n_expert, behind layers[].gate/up/down */
    size_t rows;          /* the step buffers' rows */
    float *logits;        /* rows * n_expert */
    int32_t *sel;         /* rows * n_used: the selected experts */
    float *w;             /* rows * n_used: their weights */
    uint32_t *order;      /* rows * n_used: (row, slot) pairs sorted by expert */
    uint32_t *start;      /* n_expert + 1: each expert's run in order */
    float *xg;            /* rows * n_embd: an expert's rows gathered */
    float *g, *u;         /* rows * max(n_ff, n_ff_shexp) */
    float *sh_y;          /* rows * n_embd: the shared expert's output (NULL without) */
    float *sh_w;          /* rows: its gate logit, then its weight */
    uint32_t *where;      /* rows * n_used: the place of (row, slot) in order */
    float *y;             /* rows * n_used * n_embd: the expert outputs, in order */
    /* npl_model_moe_stats: rows through the MoE layers and the bytes of
     * the experts' matrices read for them (an expert once per step) */
    uint64_t rows_done, expert_bytes_read;
    float *xr, *xe;       /* gemma4: rows * n_embd each, the router's and the experts' inputs */
} npl_moe;

/* Reads <arch>.expert_count, expert_used_count and
 * expert_feed_forward_length into m->moe (allocated; gating and the rest
 * from cfg), refusing files without experts or with impossible counts. */
npl_status npl_moe_read(npl_binder *b, const npl_moe_cfg *cfg);

/* Binds layer l's router and experts (with the biases when biases is
 * set) into L->moe. */
npl_status npl_moe_bind_layer(const npl_binder *b, uint32_t l, npl_layer *L, bool biases);

/* Binds layer l's shared expert (ffn_{gate,up,down}_shexp) into its
 * experts (after npl_moe_bind_layer), with the scalar gate
 * ffn_gate_inp_shexp, which must be present when gated is set. */
npl_status npl_moe_bind_shared(const npl_binder *b, uint32_t l, bool gated);

/* The widest input row of the experts' matrices (the down projections'). */
uint32_t npl_moe_max_cols(const npl_model *m);

/* Step buffers for up to rows rows (after the layers are bound); NPL_OK
 * without experts. */
npl_status npl_moe_ws_init(npl_model *m, size_t rows, npl_error *err);
/* Frees m->moe (NULL safe). */
void npl_moe_free(npl_model *m);

/* Layer l's feed-forward over the step's n rows: fw.xn in, out in fw.xn. */
void npl_moe_ffn(npl_model *m, uint32_t l, size_t n);

/* Layer l's experts over n rows of in, routed by the rows of xr (the
 * router's input), their weighted sum into out (which may be in or xr). */
void npl_moe_ffn_rows(npl_model *m, uint32_t l, size_t n, const float *in, const float *xr, float *out);

/* gemma4 (moe_dense.c): binds layer l's router input scale, the norms
 * around its experts and the per-expert output scale (after
 * npl_moe_bind_layer). */
npl_status npl_moe_bind_beside_dense(const npl_binder *b, uint32_t l);

/* gemma4 (moe_dense.c): with fw.xn holding layer l's dense FFN output and
 * fw.x the residual stream (the FFN's input before its norm), fw.xn =
 * RMSNorm(xn) * post_ffw_norm_1 + RMSNorm(experts) * post_ffw_norm_2. */
void npl_moe_beside_dense(npl_model *m, uint32_t l, size_t n);

#endif
