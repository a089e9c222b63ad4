/* npullm-run --embed: texts to vectors with an embedding model
 * (docs/embeddings.md). */
#ifndef NPULLM_RUN_EMBED_H
#define NPULLM_RUN_EMBED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npullm.h"

/* Embeds texts[0..n) and prints one line of values per text, or with
 * json one object {"model", "dimensions", "pooling", "tokens",
 * "truncated", "embeddings": [[...], ...]}. Returns the exit status
 * (0, 1 runtime failure, 2 bad input); errors are one line on stderr. */
int run_embed(npl_model *m, const char *const *texts, size_t n, const npl_embed_options *opts, bool json);

/* s as a JSON string on stdout. */
void run_print_json_string(const char *s);

#endif
