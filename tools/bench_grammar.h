/* npullm-bench --grammar: the cost of constrained output (bench_grammar.c). */
#ifndef NPULLM_BENCH_GRAMMAR_H
#define NPULLM_BENCH_GRAMMAR_H

#include <stdbool.h>

typedef struct bench_grammar_opts {
    const char *model;  /* decode with and without the grammar (NULL: skip) */
    const char *vocab;  /* a GGUF whose tokenizer the mask is timed on (NULL: the model's) */
    int n_threads;
    long n;             /* generated tokens per decode run */
    long reps;          /* alternating rounds */
    bool json;
} bench_grammar_opts;

/* Prints the figures; 0 on success. */
int bench_grammar(const bench_grammar_opts *o);

#endif
