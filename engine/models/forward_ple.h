/* gemma4's per-layer token inputs and layer ends in the forward pass
 * (forward_ple.c). */
#ifndef NPL_FORWARD_PLE_H
#define NPL_FORWARD_PLE_H

#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "npullm.h"

/* Step buffers for up to rows tokens (fw.ple) when m has per-layer
 * inputs; nothing otherwise. */
npl_status npl_ple_ws_init(npl_model *m, size_t rows, npl_error *err);

/* The step's per-layer inputs, from the first layer's input in fw.x and
 * the tokens (NULL for rows of embeddings, which take token 0's). */
void npl_ple_inputs(npl_model *m, const int32_t *tokens, size_t n);

/* The end of layer l (m->fold_layer_end): fw.xn holds its FFN output,
 * which goes into fw.x through the layer's post-FFN norm; then the
 * layer's per-layer input (when the model has them) and output scale. */
void npl_ple_layer_end(npl_model *m, uint32_t l, size_t n);

/* 1 / RMS(x), the sum of squares in double like the rest of the pass. */
float npl_inv_rms(const float *x, size_t n, float eps);

#endif
