/* Constrained output: grammars (a GBNF-like text format, JSON Schema, or
 * "any JSON value"), a matcher that follows one sequence's output through
 * a grammar, and the token mask that tells a sampler which vocabulary
 * tokens may come next. docs/chat-and-sampling.md ("Constrained output")
 * describes the text format and the JSON Schema subset.
 *
 * A compiled npl_grammar and an npl_vocab_index are immutable and may be
 * shared by any number of threads and matchers. A matcher (and its
 * clones, which share a mask cache) belongs to one thread at a time. */
#ifndef NPL_GRAMMAR_H
#define NPL_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits; input beyond them is refused with an error naming the limit. */
#define NPL_GRAMMAR_MAX_TEXT (1u << 20)     /* bytes of grammar text */
#define NPL_GRAMMAR_MAX_RULES 8192u         /* rules, after repetitions are expanded */
#define NPL_GRAMMAR_MAX_ELEMS (1u << 18)    /* elements of all alternatives */
#define NPL_GRAMMAR_MAX_REPEAT 256u         /* m and n of x{m,n} */
#define NPL_GRAMMAR_MAX_NESTING 64u         /* nested parentheses */
#define NPL_GRAMMAR_MAX_STACKS 1024u        /* parse stacks alive at once */
#define NPL_GRAMMAR_MAX_DEPTH 1024u         /* depth of one parse stack */
#define NPL_SCHEMA_MAX_TEXT (1u << 20)      /* bytes of a JSON Schema */
#define NPL_SCHEMA_MAX_DEPTH 32u            /* nesting of subschemas */

typedef struct npl_grammar npl_grammar;

/* Compiles grammar text (start rule "root"). Errors name line:column. */
npl_grammar *npl_grammar_compile_text(const char *text, size_t len, npl_error *err);
/* Compiles a JSON Schema; errors name the schema path (/properties/age/type). */
npl_grammar *npl_grammar_compile_schema(const char *json, size_t len, npl_error *err);
/* The grammar text a schema compiles to (malloc'd), for inspection. */
char *npl_grammar_schema_to_text(const char *json, size_t len, npl_error *err);
/* Any JSON value (what format "json" asks for). */
npl_grammar *npl_grammar_json_any(npl_error *err);
void npl_grammar_free(npl_grammar *g);

/* The vocabulary pre-indexed for masks: every token's bytes in a byte
 * trie. Built once per tokenizer (about 100 ms at 256k tokens). */
typedef struct npl_vocab_index npl_vocab_index;
npl_vocab_index *npl_vocab_index_create(const npl_tokenizer *tok, npl_error *err);
/* The same from token texts (token i spells texts[i][0..lens[i])) and
 * end-of-generation ids: for tests and tools without a model. */
npl_vocab_index *npl_vocab_index_from_texts(const char *const *texts, const size_t *lens, uint32_t n,
                                            const int32_t *eog, uint32_t n_eog, npl_error *err);
void npl_vocab_index_free(npl_vocab_index *vi);
uint32_t npl_vocab_index_n_vocab(const npl_vocab_index *vi);

/* One sequence's position in a grammar. The grammar and the index must
 * outlive it. */
typedef struct npl_grammar_matcher npl_grammar_matcher;
npl_grammar_matcher *npl_grammar_matcher_create(const npl_grammar *g, const npl_vocab_index *vi, npl_error *err);
/* A copy at the same position (shares the mask cache: same thread). */
npl_grammar_matcher *npl_grammar_matcher_clone(const npl_grammar_matcher *m, npl_error *err);
void npl_grammar_matcher_reset(npl_grammar_matcher *m); /* back to the start */
void npl_grammar_matcher_free(npl_grammar_matcher *m);
uint32_t npl_grammar_matcher_n_vocab(const npl_grammar_matcher *m);

/* Fills mask (one bit per token id, (n_vocab + 31) / 32 words, bit set =
 * allowed) with the tokens that can continue a valid output; an
 * end-of-generation token only when the output is complete. Returns the
 * number of allowed tokens (0: nothing can follow, e.g. after an
 * end-of-generation token). */
size_t npl_grammar_matcher_mask(npl_grammar_matcher *m, uint32_t *mask);
/* Advances by a token; false (state unchanged) when the grammar does not
 * allow it. An end-of-generation token is accepted only when complete. */
bool npl_grammar_matcher_accept_token(npl_grammar_matcher *m, int32_t id);
/* Advances by raw bytes (false, state unchanged, when not allowed). */
bool npl_grammar_matcher_accept_bytes(npl_grammar_matcher *m, const char *s, size_t n);
/* The output so far is a complete sentence of the grammar. */
bool npl_grammar_matcher_is_complete(const npl_grammar_matcher *m);
/* Something may still follow (false once only the end can come). */
bool npl_grammar_matcher_can_continue(const npl_grammar_matcher *m);
/* An end-of-generation token was accepted. */
bool npl_grammar_matcher_is_finished(const npl_grammar_matcher *m);

#ifdef __cplusplus
}
#endif

#endif
