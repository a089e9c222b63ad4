/* Inside of npl_embed (engine/models/embed.c): the decoder embedders'
 * path (engine/models/embed_decoder.c), and what npl_rerank
 * (engine/models/rerank.c) shares with it. */
#ifndef NPL_EMBED_INTERNAL_H
#define NPL_EMBED_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npullm.h"
#include "tokenizer.h"

/* Texts i in [0, n), tokens ids[starts[i] .. starts[i + 1]) (at least one,
 * at most the context), through a decoder embedder m: each text's vector,
 * pooled as the file says but neither cut nor normalised, into pooled
 * (n * n_embd floats); *n_steps counts the forward steps. */
npl_status npl_embed_decoder(npl_model *m, const int32_t *ids, const size_t *starts, size_t n, float *pooled,
                             size_t *n_steps, npl_error *err);

/* The same for an encoder m (bert, nomic-bert): texts packed into shared
 * passes, each vector pooled (rank: the first row) into pooled;
 * *n_passes counts the passes. */
npl_status npl_encoder_pool(npl_model *m, const int32_t *ids, const size_t *starts, size_t n, float *pooled,
                            size_t *n_passes, npl_error *err);

/* The info an npl_embed or npl_rerank call fills: the caller's, or local
 * when it passed none; zeroed. */
npl_embed_info *npl_embed_info_start(npl_embed_info *info, npl_embed_info *local);

/* Decoder rerankers (rerank_decoder.c): document i's prompt with the query
 * appended to all as tokens, cut to the context when truncate (counted
 * in info) or refused. */
npl_status npl_rerank_decoder_pair(npl_model *m, const char *query, const char *doc, size_t doc_len, size_t i,
                                   bool truncate, struct npl_tokens *all, npl_embed_info *info, npl_error *err);

#endif
