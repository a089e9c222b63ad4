/* The refusals of architectures that have no table entry yet, by what
 * they need beyond the table's building blocks (docs/engine.md). */
#include "model_refusals.h"

#include <stddef.h>
#include <string.h>

/* the MoE feed-forward exists (moe.c); what these families add to it does not */
#define MOE "mixture-of-experts layers with shared experts (ffn_*_shexp) are not implemented"
#define MOE_LAYOUT "mixture-of-experts layers: this family's layout is not wired to the engine's MoE feed-forward"
#define MAMBA2 "Mamba 2 state-space layers are not implemented"

static const struct {
    const char *name;
    const char *missing;
} refusals[] = {
    {"qwen35moe", "Qwen 3.5 / 3.6 MoE: " MOE " (its DeltaNet and attention layers are qwen35's)"},
    {"qwen3next", "Qwen3-Next: " MOE " (its DeltaNet layers are qwen35's)"},
    {"qwen2moe", "Qwen 2 MoE: " MOE},
    {"lfm2moe", "LFM2 MoE: " MOE_LAYOUT " (its convolution layers are lfm2's)"},
    {"granitemoe", "Granite MoE: " MOE_LAYOUT},
    {"granitehybrid", "Granite 4.0-H: " MAMBA2 " (and, in the MoE sizes, " MOE ")"},
    {"nemotron_h", "Nemotron-H: " MAMBA2},
    {"mamba2", MAMBA2},
    {"mamba", "Mamba state-space layers are not implemented"},
    {"phimoe", "Phi-3.5-MoE: " MOE_LAYOUT},
    {"olmoe", "OLMoE: " MOE_LAYOUT},
    {"llama4", "Llama 4: " MOE " (and chunked attention)"},
    {"deepseek2", "DeepSeek V2 / V3: multi-head latent attention and " MOE},
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
