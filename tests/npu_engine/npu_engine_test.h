/* Prompts of the tests/npu_engine cases (tests/common/npl_test.h runs
 * them: `prog CASE MODEL...`, one meson test per case and model). */
#ifndef NPU_ENGINE_TEST_H
#define NPU_ENGINE_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npl_test_model.h"
#include "npullm.h"

/* n ids spread over the vocabulary, BOS-like first id. */
static inline void ne_make_prompt(int32_t *ids, size_t n, uint32_t seed, uint32_t n_vocab)
{
    uint64_t s = seed * 2654435761u + 1;
    ids[0] = 1;
    for (size_t i = 1; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % n_vocab);
    }
}

#endif
