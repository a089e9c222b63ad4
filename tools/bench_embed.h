/* npullm-bench --embed: texts per second of an embedding model
 * (bench_embed.c). */
#ifndef NPULLM_BENCH_EMBED_H
#define NPULLM_BENCH_EMBED_H

#include <stdbool.h>

/* Embeds batches of 1, 16 and 64 texts of 128 tokens each (after a
 * warm-up batch), reps times each; prints texts/s (mean and best) and
 * tokens/s. 0 on success, 1 on an error (message on stderr). */
int bench_embed(const char *model, int n_threads, long reps, bool json);

#endif
