/* npullm-run --rerank: documents scored against a query by a reranker
 * (docs/embeddings.md). */
#ifndef NPULLM_RUN_RERANK_H
#define NPULLM_RUN_RERANK_H

#include <stdbool.h>
#include <stddef.h>

#include "npullm.h"

/* Scores docs[0..n) against query and prints one score per line in the
 * documents' order, or with json one object {"model", "tokens",
 * "truncated", "scores": [...]}. Returns the exit status (0, 1 runtime
 * failure, 2 bad input); errors are one line on stderr. */
int run_rerank(npl_model *m, const char *query, const char *const *docs, size_t n, bool truncate, bool json);

#endif
