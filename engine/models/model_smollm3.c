/* The smollm3 family's hook of the architecture table (engine/models/model_arch.c):
 * SmolLM3, a llama graph whose every fourth layer (il + 1 divisible by 4)
 * attends without RoPE. The step is fixed by the architecture: no GGUF
 * key carries it (llama.cpp hard-codes it too). */
#include "model_arch.h"

#define SMOLLM3_NO_ROPE_STEP 4u

npl_status npl_smollm3_finish(npl_binder *b)
{
    for (uint32_t l = 0; l < b->m->hp.n_layer; l++)
        b->m->layers[l].no_rope = (l + 1) % SMOLLM3_NO_ROPE_STEP == 0;
    b->m->npu_refusal = "smollm3's layers without RoPE";
    return NPL_OK;
}
