/* The refusals of architectures that have no table entry yet, by what
 * they need beyond the table's building blocks (docs/engine.md). */
#include "model_refusals.h"

#include <stddef.h>
#include <string.h>

/* the MoE feed-forward with shared experts exists (moe.c); these families'
 * layouts on it do not */
#define MOE_LAYOUT "mixture-of-experts layers: this family's layout is not wired to the engine's MoE feed-forward"
#define MAMBA2 "Mamba 2 state-space layers are not implemented"

static const struct {
    const char *name;
    const char *missing;
} refusals[] = {
    {"qwen3next", "Qwen3-Next: its fused DeltaNet projections (ssm_in, ssm_ba) are not wired to qwen35's layers"},
    {"lfm2moe", "LFM2 MoE: " MOE_LAYOUT " (its convolution layers are lfm2's)"},
    {"granitemoe", "Granite MoE: " MOE_LAYOUT},
    {"granitehybrid", "Granite 4.0-H: " MAMBA2 " (and, in the MoE sizes, " MOE_LAYOUT ")"},
    {"nemotron_h", "Nemotron-H: " MAMBA2},
    {"mamba2", MAMBA2},
    {"mamba", "Mamba state-space layers are not implemented"},
    {"phimoe", "Phi-3.5-MoE: " MOE_LAYOUT},
    {"olmoe", "OLMoE: " MOE_LAYOUT},
    {"llama4", "Llama 4: " MOE_LAYOUT " (and chunked attention)"},
    {"deepseek2", "DeepSeek V2 / V3: multi-head latent attention and " MOE_LAYOUT},
    {"gemma3n", "Gemma 3n: per-layer embeddings, AltUp and LAuReL blocks are not implemented"},
    {"gemma2", "Gemma 2: attention and final logit soft-capping are not implemented"},
};

const char *npl_arch_missing_piece(const char *name)
{
    for (size_t i = 0; name && i < sizeof refusals / sizeof refusals[0]; i++)
        if (strcmp(refusals[i].name, name) == 0)
            return refusals[i].missing;
    return NULL;
}
