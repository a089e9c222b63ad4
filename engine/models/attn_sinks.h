/* Attention sinks (gpt-oss): a learned logit per query head that joins the
 * softmax's denominator without a value, so a head may attend to nothing.
 * The attention kernels have none: each head's output is rescaled
 * afterwards by S / (S + exp(sink)), S the sum of exp(score) over the keys
 * it saw, from a second pass over those keys. */
#ifndef NPL_ATTN_SINKS_H
#define NPL_ATTN_SINKS_H

#include "model_internal.h"

/* The step's n rows of fw.attn in layer `layer` (which has attn_sinks),
 * from fw.q and the rows' caches. */
void npl_attn_sinks_apply(npl_model *m, uint32_t layer, size_t n);

#endif
