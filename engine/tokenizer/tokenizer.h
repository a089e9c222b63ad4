/* Tokenizers read from GGUF metadata: byte-level BPE (tokenizer.ggml.model
 * "gpt2": Llama 3, Qwen2), SentencePiece (model "llama": Gemma 3) and
 * WordPiece (model "bert": BERT encoders, docs/embeddings.md) and
 * SentencePiece unigram (model "t5": XLM-RoBERTa, bge-m3).
 *
 * Special tokens (control / user-defined) are only produced from text when
 * the caller asks for it (NPL_TOKENIZE_PARSE_SPECIAL), which the engine
 * does only for template text it wrote itself, never for user content. */
#ifndef NPL_TOKENIZER_H
#define NPL_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npl_buf.h"
#include "npl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_tokenizer npl_tokenizer;
typedef struct npl_gguf npl_gguf; /* engine/gguf/gguf.h */

typedef enum npl_tokenizer_kind {
    NPL_TOKENIZER_BPE = 1, /* "gpt2" */
    NPL_TOKENIZER_SPM = 2, /* "llama" */
    NPL_TOKENIZER_WPM = 3, /* "bert": WordPiece */
    NPL_TOKENIZER_UGM = 4, /* "t5": SentencePiece unigram (T5, XLM-RoBERTa) */
} npl_tokenizer_kind;

/* GGUF tokenizer.ggml.token_type values. */
typedef enum npl_token_type {
    NPL_TOKEN_UNDEFINED = 0,
    NPL_TOKEN_NORMAL = 1,
    NPL_TOKEN_UNKNOWN = 2,
    NPL_TOKEN_CONTROL = 3,
    NPL_TOKEN_USER_DEFINED = 4,
    NPL_TOKEN_UNUSED = 5,
    NPL_TOKEN_BYTE = 6,
} npl_token_type;

/* Growable list of token ids. Zero-initialise; free with npl_tokens_free. */
typedef struct npl_tokens {
    int32_t *ids;
    size_t n;
    size_t cap;
} npl_tokens;

npl_status npl_tokens_push(npl_tokens *t, int32_t id, npl_error *err);
void npl_tokens_free(npl_tokens *t);

enum {
    NPL_TOKENIZE_ADD_BOS = 1u << 0,       /* prepend BOS if the model adds one */
    NPL_TOKENIZE_PARSE_SPECIAL = 1u << 1, /* recognise control-token text */
};

/* Builds the tokenizer from the model's metadata (copies what it needs, so
 * it does not reference g after returning... except token strings, which
 * stay views into g's mapping: g must outlive the tokenizer). */
npl_tokenizer *npl_tokenizer_from_gguf(const npl_gguf *g, npl_error *err);
void npl_tokenizer_free(npl_tokenizer *tok);

npl_tokenizer_kind npl_tokenizer_kind_of(const npl_tokenizer *tok);
const char *npl_tokenizer_kind_name(const npl_tokenizer *tok); /* "bpe"/"spm"/"wpm"/"ugm" */
const char *npl_tokenizer_pre_name(const npl_tokenizer *tok);  /* e.g. "llama-bpe" */
int32_t npl_tokenizer_n_vocab(const npl_tokenizer *tok);
int32_t npl_tokenizer_bos(const npl_tokenizer *tok);  /* -1 when none */
int32_t npl_tokenizer_eos(const npl_tokenizer *tok);  /* -1 when none */
bool npl_tokenizer_adds_bos(const npl_tokenizer *tok);
/* WordPiece: the [SEP] id that closes a text tokenized with
 * NPL_TOKENIZE_ADD_BOS; -1 when none is added. */
int32_t npl_tokenizer_sep(const npl_tokenizer *tok);
/* The id NPL_TOKENIZE_ADD_BOS appends last: [SEP], else the EOS of a model
 * that adds one (Qwen3-Embedding, XLM-RoBERTa); -1 when none is appended. */
int32_t npl_tokenizer_end(const npl_tokenizer *tok);
/* The id that goes between the two texts of a pair after the first one's
 * end, as the reference pairs them for reranking: the separator of a
 * unigram vocabulary that says add_sep_token (XLM-RoBERTa's </s>, making
 * "<s> A </s></s> B </s>"); -1 when none (WordPiece's [SEP] already ends
 * the first text). */
int32_t npl_tokenizer_pair_sep(const npl_tokenizer *tok);
/* End-of-generation: eos, eot, eom and the like from metadata. */
bool npl_tokenizer_is_eog(const npl_tokenizer *tok, int32_t id);
npl_token_type npl_tokenizer_token_type(const npl_tokenizer *tok, int32_t id);
/* Id of the token whose vocabulary text is exactly `text`, or -1. */
int32_t npl_tokenizer_find(const npl_tokenizer *tok, const char *text);

/* Appends the ids for text[0..len) to out. Invalid UTF-8 never fails:
 * each bad byte is tokenized as the replacement the reference uses. */
npl_status npl_tokenize(const npl_tokenizer *tok, const char *text, size_t len,
                        unsigned flags, npl_tokens *out, npl_error *err);

/* Like npl_tokenize, but a control token is only recognised where
 * mask[i] is 0 for all its bytes (mask NULL = all 0): the mask marks text
 * that came from a caller, which must never open or close a turn. */
npl_status npl_tokenize_masked(const npl_tokenizer *tok, const char *text, size_t len,
                               const uint8_t *mask, unsigned flags, npl_tokens *out, npl_error *err);

/* The bytes a token stands for once decoded (byte-level mapping undone,
 * U+2581 turned into a space, <0xNN> turned into that byte). Control tokens
 * decode to their text only when `render_special`. Returns the number of
 * bytes written (truncated to cap) or the full length when buf is NULL. */
size_t npl_token_to_bytes(const npl_tokenizer *tok, int32_t id, bool render_special,
                          char *buf, size_t cap);

/* Streaming detokenizer: feed token ids, receive only complete UTF-8
 * sequences. Bytes of an incomplete character are held back until the
 * rest arrives; invalid sequences are emitted as U+FFFD. */
typedef struct npl_detok {
    const npl_tokenizer *tok;
    bool render_special;
    unsigned char pending[8];
    size_t n_pending;
    bool at_start; /* SPM: strip the leading space of the first piece */
} npl_detok;

void npl_detok_init(npl_detok *d, const npl_tokenizer *tok, bool render_special);
/* Appends the complete UTF-8 produced by `id` to out. */
npl_status npl_detok_push(npl_detok *d, int32_t id, npl_buf *out, npl_error *err);
/* Emits whatever is still pending (as U+FFFD for an unfinished sequence). */
npl_status npl_detok_flush(npl_detok *d, npl_buf *out, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
