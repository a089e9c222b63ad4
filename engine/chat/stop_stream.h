/* The output side of generation (npl_stream in npullm.h): sampled ids in,
 * showable text out, with end-of-generation tokens, stop strings and a
 * token budget as the ways to finish.
 *
 * Text that might still turn into a stop string is held back until it
 * either completes one (then it and everything after is dropped) or can no
 * longer do so (then it is released). Only complete UTF-8 is emitted. */
#ifndef NPL_STOP_STREAM_H
#define NPL_STOP_STREAM_H

#include "npullm.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* npl_stream_create on a bare tokenizer (which must outlive the stream).
 * Stop strings are copied; empty ones are ignored; a NULL entry or one
 * that is not valid UTF-8 is NPL_ERR_INVALID_ARG. max_tokens 0 means no
 * limit.
 *
 * npl_stream_push clears err on success. On failure (an id outside the
 * vocabulary, out of memory) it fills err and returns NPL_FINISH_STOP so
 * generation ends; err->code tells the two apart. Once finished, further
 * pushes emit nothing and return the same reason. */
npl_stream *npl_stream_create_for_tokenizer(const npl_tokenizer *tok,
                                            const char *const *stop_strings, size_t n_stop,
                                            uint32_t max_tokens, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
