/* Gated DeltaNet layers of the forward pass (forward_dnet.c). */
#ifndef NPL_FORWARD_DNET_H
#define NPL_FORWARD_DNET_H

#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "npullm.h"

typedef struct npl_dnet_ws npl_dnet_ws;

/* Step buffers for up to rows tokens (m->dnet), when m has recurrent
 * layers; nothing otherwise. */
npl_status npl_dnet_ws_init(npl_model *m, size_t rows, npl_error *err);
void npl_dnet_ws_free(npl_model *m);

/* Layer `layer` over the step's n rows (fw.row_seq / row_pos): fw.xn in,
 * the layer's output (before the residual add) in fw.xn. */
void npl_dnet_layer(npl_model *m, uint32_t layer, size_t n);

#endif
