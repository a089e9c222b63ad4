/* The contracts of the kernel groups the emulator implements, in the
 * manifest format an NPU kernel directory uses (docs/npu.md): arguments in
 * the order the kernel takes them, and the transfers of each group's
 * runtime sequence, from which the host generates its instruction stream
 * per run. A real kernel build publishes the same argument names,
 * classes and types. */
#include "npu_emu.h"

/* Pieces several groups share: a layer's weights in two packed
 * arguments (read whole), the KV transfers (rows 0..pos+n_tokens-1 in;
 * the rows of this call out). When n_head*head_dim and
 * n_head_kv*head_dim are multiples of 32, wq, wk and wv back to back are
 * byte for byte one Q4NX matrix [(n_head+2*n_head_kv)*head_dim, n_embd]
 * (Q4NX blocks are 32 rows and 5120 bytes, a multiple of the part
 * alignment), and w_gate + w_up one [2*n_ff, n_embd]: the packed q/k/v
 * and gate/up of real designs. Empty parts (qk_norm = 0, post_norms =
 * 0, qkv_bias = 0) take no bytes. The Q/K/V biases are f32, as the
 * projections' sums they are added to, and come after wv, so they leave
 * the q/k/v matrix whole. rope_freqs is all ones for models without
 * factors. */
#define FFN_WEIGHT_ARGS \
    "arg  = w_ffn          static       pack\n" \
    "part = w_ffn wo             q4nx [n_embd, n_head*head_dim]\n" \
    "part = w_ffn post_attn_norm bf16 [post_norms*n_embd]\n" \
    "part = w_ffn ffn_norm       bf16 [n_embd]\n" \
    "part = w_ffn w_gate         q4nx [n_ff, n_embd]\n" \
    "part = w_ffn w_up           q4nx [n_ff, n_embd]\n" \
    "part = w_ffn w_down         q4nx [n_embd, n_ff]\n" \
    "part = w_ffn post_ffn_norm  bf16 [post_norms*n_embd]\n"
#define FFN_WEIGHT_DMA \
    "dma = in  w_ffn          0 *\n"
#define QKV_WEIGHT_ARGS \
    "arg  = w_attn         static       pack\n" \
    "part = w_attn attn_norm     bf16 [n_embd]\n" \
    "part = w_attn wq            q4nx [n_head*head_dim, n_embd]\n" \
    "part = w_attn wk            q4nx [n_head_kv*head_dim, n_embd]\n" \
    "part = w_attn wv            q4nx [n_head_kv*head_dim, n_embd]\n" \
    "part = w_attn q_bias        f32  [qkv_bias*n_head*head_dim]\n" \
    "part = w_attn k_bias        f32  [qkv_bias*n_head_kv*head_dim]\n" \
    "part = w_attn v_bias        f32  [qkv_bias*n_head_kv*head_dim]\n" \
    "part = w_attn q_norm        bf16 [qk_norm*head_dim]\n" \
    "part = w_attn k_norm        bf16 [qk_norm*head_dim]\n" \
    "part = w_attn rope_freqs    f32  [rope_dims/2]\n"
#define QKV_WEIGHT_DMA \
    "dma = in  w_attn         0 *\n"
#define KV_ROWS_IN \
    "dma = in  k_cache        0 (pos+n_tokens)*n_head_kv*head_dim*2\n" \
    "dma = in  v_cache        0 (pos+n_tokens)*n_head_kv*head_dim*2\n"
#define KV_ROW_OUT \
    "dma = out k_cache        pos*n_head_kv*head_dim*2 n_tokens*n_head_kv*head_dim*2\n" \
    "dma = out v_cache        pos*n_head_kv*head_dim*2 n_tokens*n_head_kv*head_dim*2\n"

static const char emu_manifest[] =
    "npullm-npu-manifest 1\n"
    "device = emu\n"
    "# Every group fits the 5 buffer arguments stock aiecc kernels declare\n"
    "# (max_args defaults to 5). The residual stream x is bf16 between groups.\n"
    "\n"
    "# Decode: one token. RMSNorm, Q/K/V matvecs, optional Q/K/V biases,\n"
    "# optional per-head Q/K norms, RoPE; K and V go to row `pos` of the\n"
    "# caches, and only that row moves back.\n"
    "[group rms_qkv_rope_mv]\n"
    "fixed = n_tokens=1\n"
    "params = shape\n"
    "arg = x          io           bf16 [n_embd]\n"
    QKV_WEIGHT_ARGS
    "arg = q          intermediate bf16 [n_head*head_dim]\n"
    "arg = k_cache    intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "arg = v_cache    intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "dma = in  x              0 *\n"
    QKV_WEIGHT_DMA
    "dma = out q              0 *\n"
    KV_ROW_OUT
    "\n"
    "# Decode attention over cache rows 0..pos (sliding window optional),\n"
    "# streamed in chunks with an online softmax; only rows 0..pos move in.\n"
    "[group attention_decode]\n"
    "fixed = n_tokens=1\n"
    "params = shape\n"
    "arg = q       intermediate bf16 [n_head*head_dim]\n"
    "arg = k_cache intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "arg = v_cache intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "arg = attn    intermediate bf16 [n_head*head_dim]\n"
    "dma = in  q              0 *\n"
    KV_ROWS_IN
    "dma = out attn           0 *\n"
    "\n"
    "# Decode: O projection, residual, RMSNorm, gate/up, activation, down,\n"
    "# residual (in f32 on the tile); x is updated in place, as bf16.\n"
    "# Post-norms are Gemma's.\n"
    "[group o_ffn_mv]\n"
    "fixed = n_tokens=1\n"
    "params = shape\n"
    "arg = attn           intermediate bf16 [n_head*head_dim]\n"
    "arg = x              io           bf16 [n_embd]\n"
    FFN_WEIGHT_ARGS
    "dma = in  attn           0 *\n"
    "dma = in  x              0 *\n"
    FFN_WEIGHT_DMA
    "dma = out x              0 *\n"
    "\n"
    "# Decode: attention_decode fused with o_ffn_mv, so a decoded layer is\n"
    "# two dispatches (rms_qkv_rope_mv + attn_o_ffn_mv).\n"
    "[group attn_o_ffn_mv]\n"
    "fixed = n_tokens=1\n"
    "params = shape\n"
    "arg = q              intermediate bf16 [n_head*head_dim]\n"
    "arg = k_cache        intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "arg = v_cache        intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "arg = x              io           bf16 [n_embd]\n"
    FFN_WEIGHT_ARGS
    "dma = in  q              0 *\n"
    KV_ROWS_IN
    "dma = in  x              0 *\n"
    FFN_WEIGHT_DMA
    "dma = out x              0 *\n"
    "\n"
    "# Final RMSNorm and vocabulary projection of one position (pass the\n"
    "# last row of a prefill chunk through the offset of x).\n"
    "[group lm_head]\n"
    "params = shape\n"
    "arg  = x        io           bf16 [n_embd]\n"
    "arg  = w_head   static       pack\n"
    "part = w_head out_norm bf16 [n_embd]\n"
    "part = w_head w_out    q4nx [n_vocab, n_embd]\n"
    "arg  = logits   output       f32  [n_vocab]\n"
    "dma = in  x              0 *\n"
    "dma = in  w_head         0 *\n"
    "dma = out logits         0 *\n"
    "\n"
    "# Prefill: the same contracts over a chunk of n_tokens <= chunk rows at\n"
    "# positions pos .. pos+n_tokens-1; only the chunk's rows move.\n"
    "[group rms_qkv_rope]\n"
    "params = shape\n"
    "arg = x          io           bf16 [chunk, n_embd]\n"
    QKV_WEIGHT_ARGS
    "arg = q          intermediate bf16 [chunk, n_head*head_dim]\n"
    "arg = k_cache    intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "arg = v_cache    intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "dma = in  x              0 n_tokens*n_embd*2\n"
    QKV_WEIGHT_DMA
    "dma = out q              0 n_tokens*n_head*head_dim*2\n"
    KV_ROW_OUT
    "\n"
    "# Prefill attention: causal (optionally windowed) or non-causal.\n"
    "[group attention]\n"
    "params = shape\n"
    "arg = q       intermediate bf16 [chunk, n_head*head_dim]\n"
    "arg = k_cache intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "arg = v_cache intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
    "arg = attn    intermediate bf16 [chunk, n_head*head_dim]\n"
    "dma = in  q              0 n_tokens*n_head*head_dim*2\n"
    KV_ROWS_IN
    "dma = out attn           0 n_tokens*n_head*head_dim*2\n"
    "\n"
    "[group o_ffn]\n"
    "params = shape\n"
    "arg = attn           intermediate bf16 [chunk, n_head*head_dim]\n"
    "arg = x              io           bf16 [chunk, n_embd]\n"
    FFN_WEIGHT_ARGS
    "dma = in  attn           0 n_tokens*n_head*head_dim*2\n"
    "dma = in  x              0 n_tokens*n_embd*2\n"
    FFN_WEIGHT_DMA
    "dma = out x              0 n_tokens*n_embd*2\n";

const char *npl_npu_emu_builtin_manifest(void)
{
    return emu_manifest;
}
