/* Internals shared by the tokenizer files. Not part of the engine API.
 *
 * The tokenizer is immutable once built: every tokenize call allocates its
 * own scratch state, so one tokenizer serves several threads at once. */
#ifndef NPL_TOKENIZER_INTERNAL_H
#define NPL_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"

/* Per-token behaviour bits. They start from the GGUF token type and are
 * then adjusted the way the reference adjusts them (e.g. a token whose
 * text names an end-of-turn marker is always treated as control). */
enum {
    NPL_TATTR_NORMAL = 1u << 0,
    NPL_TATTR_UNKNOWN = 1u << 1,
    NPL_TATTR_CONTROL = 1u << 2,
    NPL_TATTR_USER_DEFINED = 1u << 3,
    NPL_TATTR_UNUSED = 1u << 4,
    NPL_TATTR_BYTE = 1u << 5,
    NPL_TATTR_EOG = 1u << 6, /* ends generation */
};

typedef enum npl_pretok_kind {
    NPL_PRETOK_LLAMA3 = 1, /* also for files without tokenizer.ggml.pre */
    NPL_PRETOK_QWEN2 = 2,
    NPL_PRETOK_SMOLLM = 3, /* GPT-2's rules with digits one by one (SmolLM2, StarCoder) */
    NPL_PRETOK_TEKKEN = 4, /* Mistral's: camel case split, digits one by one */
    NPL_PRETOK_GPT4O = 5,  /* o200k: camel case split with contractions, digits by three */
    NPL_PRETOK_QWEN35 = 6, /* Qwen2's with combining marks part of words */
    /* Gemma 4 (GGUF model "gemma4"): BPE over raw UTF-8 with spaces as
     * U+2581, words split at newline runs only, <0xNN> byte fallback */
    NPL_PRETOK_GEMMA4 = 7,
} npl_pretok_kind;

/* Upper bound on tokens and on merges (real vocabularies have < 1M);
 * keeps every table size within 32 bits. */
#define NPL_TOKENIZER_MAX_ENTRIES (1 << 28)

/* Everything needed to build a tokenizer, as plain arrays (the GGUF
 * loader fills one; unit tests can fill one by hand). Strings are views
 * that must outlive the tokenizer. Ids are -1 when absent; the tri-state
 * flags are -1 for "model default". */
typedef struct npl_tokenizer_spec {
    npl_tokenizer_kind kind;
    const char *pre; /* BPE pre-tokenizer name; NULL = "llama-bpe" */
    int32_t n_tokens;
    const npl_str *tokens;
    const int32_t *types; /* NULL: all NORMAL */
    const float *scores;  /* NULL: all 0 */
    size_t n_merges;      /* BPE */
    const npl_str *merges;
    int32_t bos, eos, eot, eom, unk;
    int32_t sep; /* WordPiece: appended after the text */
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int add_bos, add_eos, add_space_prefix, add_sep;
    int lowercase, strip_accents; /* WordPiece normalizer */
    int remove_extra_ws;          /* unigram: tokenizer.ggml.remove_extra_whitespaces */
    const uint8_t *charsmap;      /* unigram: tokenizer.ggml.precompiled_charsmap, NULL when none */
    size_t charsmap_len;
} npl_tokenizer_spec;

/* Spec with every id -1 and every flag at "default". */
void npl_tokenizer_spec_init(npl_tokenizer_spec *spec);
npl_tokenizer *npl_tokenizer_build(const npl_tokenizer_spec *spec, npl_error *err);

/* Open-addressing map from token text to id. A slot holds the text's
 * hash in the high half and id + 1 in the low half (0 = empty), so most
 * probes are decided without touching the token text. */
typedef struct npl_text_map {
    uint64_t *slots;
    uint32_t mask;
} npl_text_map;

/* Byte trie of the texts special-token matching looks for. */
typedef struct npl_trie_node {
    int32_t child;        /* first child, -1 when none */
    int32_t sibling;      /* next sibling, -1 when none */
    int32_t token;        /* id whose text ends here, -1 when none */
    int32_t token_always; /* same, among ids matched even without
                             NPL_TOKENIZE_PARSE_SPECIAL (user-defined) */
    unsigned char byte;
} npl_trie_node;

typedef struct npl_special_trie {
    npl_trie_node *nodes;
    size_t n_nodes, cap_nodes;
    int32_t root[256]; /* first-level node per byte, -1 when none */
    size_t max_len;
    bool has_any, has_always;
} npl_special_trie;

/* BPE merge ranks keyed by the ids of the two halves, with a second map
 * keyed by text for merges whose halves are not both vocabulary entries. */
typedef struct npl_merge_map {
    int32_t *left, *right; /* halves of rank r (ids), -1 when text-keyed */
    uint64_t *slots;       /* pair hash << 32 | rank + 1; 0 = empty */
    uint32_t mask;
    /* text-keyed merges */
    npl_str *text_left, *text_right;
    int32_t *text_rank;
    size_t n_text;
    int32_t *text_slots; /* index into text_* or -1 */
    uint32_t text_mask;
} npl_merge_map;

struct npl_tokenizer {
    npl_tokenizer_kind kind;
    char pre_name[64];
    npl_pretok_kind pretok;

    int32_t n_vocab;
    npl_str *text;     /* per token (views) */
    uint8_t *attr;     /* per token: NPL_TATTR_* */
    float *scores;     /* per token (SPM, UGM), NULL for BPE */
    npl_text_map map;

    int32_t bos, eos, eot, eom, unk;
    bool add_bos, add_eos, add_space_prefix;
    int32_t sep;   /* WordPiece: [SEP], -1 when none */
    bool add_sep;  /* WordPiece: append sep after the text */
    size_t max_token_len; /* WordPiece: longest vocabulary text, bytes */
    bool lowercase, strip_accents; /* WordPiece normalizer */
    bool ignore_merges; /* BPE: a pre-token that is a vocab entry is one token */

    /* BPE */
    npl_merge_map merges;
    unsigned char byte_utf8[256][2]; /* GPT-2 byte-to-unicode, UTF-8 */
    unsigned char byte_utf8_len[256];
    int32_t byte_token[256]; /* BPE: mapped char's id; SPM: <0xNN> id */
    int16_t byte_of_cp[0x144]; /* BPE: inverse of byte_utf8, -1 = none */
    pcre2_code *pretok_re;

    npl_special_trie special;
    struct npl_ugm *ugm; /* unigram: pieces, charsmap (tokenizer_ugm.c) */
};

/* Text hashing and lookup. */
uint32_t npl_tok_hash(const void *s, size_t n);
int32_t npl_tok_lookup(const npl_tokenizer *tok, const void *s, size_t n);
int32_t npl_tok_lookup_hashed(const npl_tokenizer *tok, const void *s, size_t n, uint32_t h);
/* Hint that a lookup with hash h follows soon. */
static inline void npl_tok_prefetch(const npl_tokenizer *tok, uint32_t h)
{
    __builtin_prefetch(&tok->map.slots[h & tok->map.mask]);
}

/* Growable id list used during a tokenize call. */
npl_status npl_tokens_reserve(npl_tokens *t, size_t extra, npl_error *err);

/* Special tokens (tokenizer_special.c). */
npl_status npl_special_trie_build(npl_tokenizer *tok, npl_error *err);
void npl_special_trie_free(npl_special_trie *trie);
/* Adds text s[0..n) (n >= 1) with id to a trie whose root is all -1. */
npl_status npl_special_trie_insert(npl_special_trie *t, const unsigned char *s, size_t n, int32_t id, bool always,
                                  bool last_wins, npl_error *err);

typedef struct npl_fragment {
    size_t start, len;
    int32_t token; /* -1: raw text text[start..start+len) */
} npl_fragment;

typedef struct npl_fragments {
    npl_fragment *v;
    size_t n, cap;
} npl_fragments;

/* Splits text into raw spans and special tokens the way the reference
 * does: longest token text first, leftmost non-overlapping occurrences. */
npl_status npl_special_partition(const npl_tokenizer *tok, const char *text, size_t len,
                                 bool parse_special, npl_fragments *out, npl_error *err);

/* Pre-tokenizer (tokenizer_pretok.c). */
npl_status npl_pretok_compile(npl_tokenizer *tok, npl_error *err);

/* text re-encoded as the reference decodes it (an invalid byte becomes
 * U+FFFD) into out, which has room for 3 * len bytes; spaces as U+2581 when
 * escape_spaces (Gemma 4). Returns the length. */
size_t npl_pretok_canonical(const char *text, size_t len, bool escape_spaces, unsigned char *out);

/* Called once per pre-token: bytes are the canonical UTF-8 of the word
 * (invalid input already replaced the way the reference does). */
typedef npl_status (*npl_pretok_word_fn)(void *ctx, const unsigned char *word, size_t n,
                                         npl_error *err);
npl_status npl_pretok_split(const npl_tokenizer *tok, const char *text, size_t len,
                            npl_pretok_word_fn fn, void *ctx, npl_error *err);

/* BPE (tokenizer_bpe.c). */
npl_status npl_bpe_build(npl_tokenizer *tok, const npl_tokenizer_spec *spec, npl_error *err);
void npl_bpe_free(npl_tokenizer *tok);
npl_status npl_bpe_tokenize(const npl_tokenizer *tok, const char *text, size_t len,
                            npl_tokens *out, npl_error *err);

/* SentencePiece (tokenizer_spm.c). */
npl_status npl_spm_build(npl_tokenizer *tok, npl_error *err);
/* Tokenizes text (spaces not yet escaped), with a leading space added
 * when prefix_space. */
npl_status npl_spm_tokenize(const npl_tokenizer *tok, const char *text, size_t len,
                            bool prefix_space, npl_tokens *out, npl_error *err);

/* WordPiece (tokenizer_wpm.c). */
void npl_wpm_build(npl_tokenizer *tok);
npl_status npl_wpm_tokenize(const npl_tokenizer *tok, const char *text, size_t len, npl_tokens *out,
                            npl_error *err);

/* SentencePiece unigram (tokenizer_ugm.c). */
npl_status npl_ugm_build(npl_tokenizer *tok, const npl_tokenizer_spec *spec, npl_error *err);
void npl_ugm_free(npl_tokenizer *tok);
npl_status npl_ugm_tokenize(const npl_tokenizer *tok, const char *text, size_t len, npl_tokens *out,
                            npl_error *err);

/* Min-heap of candidate merges. The order key packs the priority (BPE:
 * merge rank; SentencePiece: score, higher first) above the left symbol
 * index, so ties go to the leftmost pair with one integer comparison. */
typedef struct npl_merge_cand {
    uint64_t order; /* priority << 32 | left */
    int32_t right;
    uint32_t size; /* bytes of left + right when queued */
} npl_merge_cand;

static inline npl_merge_cand npl_merge_cand_make(uint32_t priority, int32_t left, int32_t right, uint32_t size)
{
    npl_merge_cand c = {((uint64_t)priority << 32) | (uint32_t)left, right, size};
    return c;
}

static inline int32_t npl_merge_cand_left(npl_merge_cand c)
{
    return (int32_t)(uint32_t)c.order;
}

/* Priority of a SentencePiece score: a higher score gives a smaller
 * value; equal scores (also 0.0 and -0.0) give equal values. */
static inline uint32_t npl_score_priority(float score)
{
    float f = score + 0.0f; /* -0.0 -> +0.0 */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~ascending;
}

typedef struct npl_merge_heap {
    npl_merge_cand *v;
    size_t n, cap;
} npl_merge_heap;

npl_status npl_merge_heap_push(npl_merge_heap *h, npl_merge_cand c, npl_error *err);
npl_merge_cand npl_merge_heap_pop(npl_merge_heap *h);
void npl_merge_heap_free(npl_merge_heap *h);

/* Linked symbols shared by both merge loops. */
typedef struct npl_symbols {
    uint32_t *start, *len; /* byte span in the session text; len 0 = merged away */
    int32_t *prev, *next;
    int32_t *id;           /* vocab id of the span, -1 when none */
    size_t n, cap;
} npl_symbols;

npl_status npl_symbols_reserve(npl_symbols *s, size_t n, npl_error *err);
void npl_symbols_free(npl_symbols *s);

/* Joins the two symbols of a popped candidate into its left one and
 * returns that left index, or -1 when the candidate is stale (one side
 * changed since it was queued). The caller sets the new span's id. */
int32_t npl_symbols_merge(npl_symbols *s, npl_merge_cand c);

#endif
