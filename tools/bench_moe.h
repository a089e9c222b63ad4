/* npullm-bench on a mixture-of-experts model: the bytes of weights a
 * decoded token reads, counted by the engine (bench_moe.c). */
#ifndef NPULLM_BENCH_MOE_H
#define NPULLM_BENCH_MOE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "npullm.h"

typedef struct bench_moe {
    bool is_moe;
    npl_moe_stats start; /* the engine's counters when the decode runs began */
    uint64_t tokens;     /* tokens decoded between start and the end */
    double dense_bytes;  /* per token: every matrix but the experts (the token embeddings' one row left out) */
    double expert_bytes; /* per token: the experts the engine read, averaged over the tokens */
    double active_bytes; /* dense + all experts * n_used / n_expert: the active parameters' bytes */
} bench_moe;

/* Snapshots the counters before the decode runs; false for a dense model. */
bool bench_moe_begin(const npl_model *m, bench_moe *r);

/* After tokens decoded tokens (one sequence: one token per step):
 * step_bytes is every matrix a step of the dense path reads (npullm-bench's
 * decode_weight_bytes), of which the experts' are replaced by what the
 * engine counted. */
void bench_moe_end(const npl_model *m, uint64_t tokens, uint64_t step_bytes, bench_moe *r);

/* What one token read, in bytes (dense + counted experts). */
double bench_moe_read_bytes(const bench_moe *r);

/* The report beside the decode rate tps (tokens/s). */
void bench_moe_print_text(FILE *f, const bench_moe *r, double tps);
void bench_moe_print_json(FILE *f, const bench_moe *r, double tps);

#endif
