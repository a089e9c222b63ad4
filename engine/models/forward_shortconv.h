/* LFM2's gated short-convolution layers of the forward pass (forward_shortconv.c). */
#ifndef NPL_FORWARD_SHORTCONV_H
#define NPL_FORWARD_SHORTCONV_H

#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "npullm.h"

/* Step buffers for up to rows tokens (m->shortconv_ws) when m has such
 * layers; nothing otherwise. */
npl_status npl_shortconv_ws_init(npl_model *m, size_t rows, npl_error *err);

/* Layer `layer` over the step's n rows: fw.xn in, its output (before the
 * residual add) in fw.xn. */
void npl_shortconv_layer(npl_model *m, uint32_t layer, size_t n);

#endif
