/* Facts about a GGUF file without loading its weights: what the service's
 * model catalog lists and npullm-run --info prints, from one function so
 * the two never disagree. Self-contained on purpose (fixed-size strings,
 * nothing to free): hosts and a future architecture registry build on it. */
#ifndef NPL_MODEL_PROBE_H
#define NPL_MODEL_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "npl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_model_facts {
    char architecture[64];   /* general.architecture ("clip" for a vision projector), "" when absent */
    char quantization[32];   /* the weight type of the matrices holding the most bytes, e.g. "q4_0" */
    uint64_t n_params;       /* elements of every tensor */
    uint32_t context_length; /* ARCH.context_length, 0 when absent */
    /* Models: ARCH.embedding_length. Projectors: the width of the text
     * model they feed (clip.vision.projection_dim, else the output width
     * of mm.input_projection.weight). 0 when unknown. */
    uint32_t embedding_length;
    bool is_projector;       /* a vision projector (mmproj), not a model */
    char projector_type[32]; /* projectors: clip.projector_type, e.g. "gemma3" */
    bool supported;          /* this engine can run it */
    bool embedding;          /* supported, and makes embeddings (no text): docs/embeddings.md */
    bool rerank;             /* an embedding model that is a reranker (pooling rank): it scores pairs */
    char reason[256];        /* why not, when !supported; "" otherwise */
} npl_model_facts;

/* The text architecture a projector type feeds ("gemma3" for gemma3,
 * "gemma4" for gemma4v), NULL for a type the vision tower does not run. */
const char *npl_projector_text_arch(const char *projector_type);

/* Fills *out from the GGUF file at path. A well-formed file the engine
 * cannot run (another architecture, a missing tensor, an unsupported
 * weight type) is NPL_OK with supported = false and the loader's reason.
 * Errors: NPL_ERR_IO (cannot open or map: may be transient, e.g. EMFILE),
 * NPL_ERR_NOMEM, NPL_ERR_FORMAT (not a GGUF file). */
npl_status npl_model_probe(const char *path, npl_model_facts *out, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
