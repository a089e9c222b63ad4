/* npl_backend: one ops table per device a model's layers run on: the CPU
 * engine (engine/models/forward.c, engine/models/kv_cache.c), the emulated NPU and the
 * NPU on XRT (both through the NPU host runtime, engine/npu/backend_npu.h).
 * Only that runtime knows the NPU: the model and its sequences hold the
 * device's state as opaque pointers (npl_model_device_state.context,
 * npl_seq.device) that the entry's own functions read.
 *
 * Device selection (engine/backend/device_select.c) decides which entry a request
 * names and opens its device through `probe`; loading asks the entry
 * whether it runs the model's architecture variations and opens it; from
 * then on the public npl_prefill, npl_prefill_embeddings, npl_decode,
 * npl_seq_create / npl_seq_free, npl_model_device_stats and unloading
 * call the model's entry (npl_model_backend); a sequence's steps go to
 * the entry its cache lives on (npl_seq.backend: the CPU's once the phase
 * split moved it, engine/backend/phase_split.c). Adding a device is
 * adding an entry here. */
#ifndef NPL_BACKEND_H
#define NPL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npullm.h"

struct npl_npu_device;
struct npl_npu_probe_config;

typedef struct npl_backend {
    const char *name; /* "cpu", "npu-emu" or "npu" */
    /* The layers run on the host: loading packs their weights for the
     * CPU kernels (engine/models/cpu_weight_cache.c). */
    bool host_layers;
    /* Opens the device (discovery already approved it): *dev stays NULL
     * for the CPU. cfg names the kernels discovery found (NPU only). */
    npl_status (*probe)(const struct npl_npu_probe_config *cfg, struct npl_npu_device **dev, npl_error *err);
    /* Sets the backend up for m (m->device is set, its context NULL) on
     * dev, taking ownership of dev also on failure; close undoes it. */
    npl_status (*open)(npl_model *m, struct npl_npu_device *dev, const char *cache_dir, npl_error *err);
    void (*close)(npl_model *m);
    /* The public calls of the same names (npullm.h contracts). */
    npl_status (*prefill)(npl_model *m, npl_seq *s, const int32_t *tokens, size_t n,
                          size_t max_tokens_this_call, size_t *consumed, npl_error *err);
    npl_status (*prefill_embeddings)(npl_model *m, npl_seq *s, const float *embd, size_t n,
                                     bool bidirectional, npl_error *err);
    npl_status (*decode)(npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n_seqs,
                         npl_error *err);
    /* Sequences: seq_attach gives s (just created for m, its host arrays
     * allocated) what the device needs, in s->device; seq_release undoes
     * it, also for a sequence that never got it. */
    npl_status (*seq_attach)(npl_model *m, npl_seq *s, npl_error *err);
    void (*seq_release)(npl_seq *s);
    /* The KV pool (engine/models/kv_pool.c) on a device: seq_copy_prefix
     * gives dst (empty) src's first n positions on the device,
     * seq_kv_bytes says what a sequence's cache holds there. NULL: the
     * cache is the sequence's host arrays. */
    npl_status (*seq_copy_prefix)(npl_seq *dst, const npl_seq *src, uint32_t n, npl_error *err);
    size_t (*seq_kv_bytes)(const npl_seq *s);
    /* The phase split (engine/backend/phase_split.c): writes s's cache
     * into its host arrays in the CPU's layout and format (npl_seq), its
     * logits included, and releases its device state (counted in the
     * entry's stats). NULL: the cache is the host arrays already. */
    npl_status (*seq_export)(npl_seq *s, npl_error *err);
    /* npl_model_device_stats: false when the device keeps no counters. */
    bool (*stats)(const npl_model *m, npl_device_stats *out);
} npl_backend;

/* Where a model runs, kept by npl_model (m->device): the device's name
 * and the reason it was chosen (npl_model_device, npl_model_device_reason),
 * its entry here and that entry's state for the model (NULL on the CPU). */
typedef struct npl_model_device_state {
    char name[32];
    char reason[640];
    const npl_backend *ops;
    void *context;
    /* Where sequences decode (npl_model_set_decode_device): NULL where
     * they prefilled; else the CPU's entry, to which a sequence with a
     * device cache moves at its next npl_decode. */
    const npl_backend *decode_ops;
} npl_model_device_state;

/* The entry named name ("cpu", "npu-emu", "npu"), or NULL. */
const npl_backend *npl_backend_named(const char *name);
/* The entry m runs on (the CPU's for a model without a device). */
const npl_backend *npl_model_backend(const npl_model *m);

/* Called by npl_model_load once the weights are bound
 * (engine/backend/model_device.c): resolves the requested device
 * (npl_model_params.device) and opens its entry, an NPU with its weight
 * cache in npu_cache_dir (as in npl_model_params). Sets m->device. */
npl_status npl_model_device_open_in(npl_model *m, const char *request, const char *npu_cache_dir,
                                    npl_error *err);
void npl_model_device_close(npl_model *m);

/* npl_decode when sequences may sit on another entry than the model's
 * or must move first (engine/backend/phase_split.c). */
npl_status npl_phase_split_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n_seqs,
                                  npl_error *err);

/* The CPU engine's implementations (engine/models/forward.c). */
npl_status npl_cpu_prefill(npl_model *m, npl_seq *s, const int32_t *tokens, size_t n,
                           size_t max_tokens_this_call, size_t *consumed, npl_error *err);
npl_status npl_cpu_prefill_embeddings(npl_model *m, npl_seq *s, const float *embd, size_t n,
                                      bool bidirectional, npl_error *err);
npl_status npl_cpu_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n_seqs,
                          npl_error *err);

#endif
