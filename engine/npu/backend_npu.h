/* The NPU host runtime: runs a loaded model's layers through the NPU
 * device interface (kernels/npu/npu_device.h), on the emulator or on XRT.
 *
 * At load it builds the residency plan: every layer's weights in Q4NX
 * (read from the model's Q4NX cache file, or repacked and cached; norms
 * to bf16) in one static buffer per layer, uploaded once,
 * then the weights are sealed; the activations (x, q, attention output,
 * logits) get one set of buffers per model, and each sequence owns its KV
 * cache in intermediate buffers. Per sequence it keeps run lists:
 *   decode   rms_qkv_rope_mv + attn_o_ffn_mv per layer, then lm_head
 *            (2 dispatches per layer + 1, one submission per token; the
 *            shapes are rewritten for each position, the list is reused)
 *   prefill  rms_qkv_rope + attention + o_ffn per layer over a chunk of
 *            at most `chunk` rows (the fixed shape), and for the chunk
 *            that ends the prompt, lm_head of its last row only.
 * A decode step of several sequences is one submission: one run list
 * holds every sequence's decode runs, sequence i on row i of the
 * activations and logits slot i (up to a chunk of sequences per
 * submission), kept while the same sequences come back in the same order.
 * Only activations move per call: the embedding rows in (looked up on the
 * host), the logits out, and the shape parameters of each dispatch.
 *
 * Used by engine/models/model.c (loading), the public npl_prefill / npl_decode
 * and the sequence constructor through the backend registry
 * (engine/backend/backend.c) when the model runs on an NPU. */
#ifndef NPL_BACKEND_NPU_H
#define NPL_BACKEND_NPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npullm.h"

typedef struct npl_backend_npu npl_backend_npu;
typedef struct npl_npu_seq npl_npu_seq;
struct npl_npu_device;

/* Builds the residency plan of m (whose weights are bound) on dev and
 * uploads the weights, their Q4NX form read from the model's cache file
 * in cache_dir or repacked and cached there (engine/npu/npu_weight_cache.h;
 * cache_dir as npl_model_params.npu_cache_dir: NULL = next to the model,
 * "" = none). Takes ownership of dev, also on failure. */
npl_status npl_backend_npu_create_in(npl_model *m, struct npl_npu_device *dev,
                                     const char *cache_dir, npl_backend_npu **out,
                                     npl_error *err);
/* The same with the cache next to the model file. */
npl_status npl_backend_npu_create(npl_model *m, struct npl_npu_device *dev,
                                  npl_backend_npu **out, npl_error *err);
void npl_backend_npu_free(npl_backend_npu *b);

/* The device's own counters plus the per-phase split (npullm.h). */
void npl_backend_npu_stats(const npl_backend_npu *b, npl_device_stats *out);

/* Gives s (just created for m) its KV cache on the device and its run
 * lists; npl_backend_npu_seq_release undoes it (s may have none). */
npl_status npl_backend_npu_seq_attach(npl_backend_npu *b, npl_seq *s, npl_error *err);
void npl_backend_npu_seq_release(npl_seq *s);

/* dst (empty, same model) takes src's first n positions: for every layer
 * the K and V rows a later step reads (all n of a global layer, the
 * window before n of a local one), copied from src's device buffers to
 * dst's on the device, and src's tokens. */
npl_status npl_backend_npu_seq_copy_prefix(npl_seq *dst, const npl_seq *src, uint32_t n,
                                           npl_error *err);

/* The phase split (backend.h seq_export): s's K and V rows copied from
 * the device into its host arrays in the model's KV format, its device
 * cache freed. On failure s keeps its device cache. */
npl_status npl_backend_npu_seq_export(npl_seq *s, npl_error *err);

/* Device bytes of s's KV cache (K and V buffers). */
size_t npl_backend_npu_seq_kv_bytes(const npl_seq *s);

/* npl_prefill, npl_prefill_embeddings and npl_decode (same contracts,
 * npullm.h) on the device. */
npl_status npl_backend_npu_prefill(npl_model *m, npl_seq *s, const int32_t *tokens, size_t n,
                                   size_t max_tokens_this_call, size_t *consumed,
                                   npl_error *err);
npl_status npl_backend_npu_prefill_embeddings(npl_model *m, npl_seq *s, const float *embd,
                                              size_t n, bool bidirectional, npl_error *err);
npl_status npl_backend_npu_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens,
                                  size_t n_seqs, npl_error *err);

/* Puts m (loaded, on the CPU) on an NPU runtime built by hand with
 * npl_backend_npu_create_in (tests): its calls go to the runtime from now
 * on and unloading frees it (engine/backend/backend.c). */
void npl_backend_attach_npu(npl_model *m, npl_backend_npu *runtime);

#endif
