/* npullm engine: the public C API (no GLib), everything a host program
 * needs to run a GGUF model: load, tokenize, build chat prompts, prefill,
 * batched decode, sample, stream text.
 *
 * Threading: a model may be shared by many sequences, but calls that take
 * an npl_model (prefill, decode) must come from one thread at a time; the
 * engine parallelises internally. No global mutable state. Every fallible
 * call returns an npl_status and fills an npl_error. */
#ifndef NPULLM_H
#define NPULLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Public headers only: base/'s and the model probe beside this one. The
 * tokenizer (engine/tokenizer/tokenizer.h), the grammar
 * (engine/chat/grammar.h) and the GGUF reader (engine/gguf/gguf.h) appear
 * here as opaque handles; a program that calls their own functions
 * includes their headers itself. */
#include "model_probe.h"
#include "npl_buf.h"
#include "npl_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_gguf npl_gguf;
typedef struct npl_tokenizer npl_tokenizer;           /* tokenizer.h */
typedef struct npl_tokens npl_tokens;                 /* tokenizer.h: token ids and their count */
typedef struct npl_grammar_matcher npl_grammar_matcher; /* grammar.h */

/* ---- model ------------------------------------------------------------ */

typedef struct npl_model npl_model;

typedef struct npl_model_params {
    int n_threads;          /* 0 = number of online CPUs */
    uint32_t prefill_chunk; /* tokens per prefill chunk; 0 = default (256) */
    /* Where the layers run: "cpu" (also NULL), "npu-emu" (the NPU's kernel
     * groups emulated on the CPU), "npu" (fails when the NPU cannot be
     * used), or "auto" (the NPU when discovery finds everything in place,
     * else the CPU; npl_model_device_reason says why). */
    const char *device;
    /* Format of the KV cache the CPU layers keep: "f16" (also NULL) or
     * "q8_0" (34 bytes per 32 values instead of 64; needs a head size that
     * is a multiple of 32). An NPU device keeps its own cache. */
    const char *kv_type;
    /* Where an NPU device keeps the weights it repacked at load, so the
     * next load reads them instead (file <model basename>.q4nx): NULL =
     * the model's directory, "" = no cache, else this directory. A service
     * passes its own cache directory, never one a client chose. */
    const char *npu_cache_dir;
    /* Where the CPU keeps the weights it repacked for its SIMD kernels
     * (file <model basename>.cpuw, about the size of the model), so the
     * next load maps them read-only instead of repacking: NULL or "" = no
     * cache (repacked in memory on first use). A cache that cannot be
     * read or written never fails the load (npl_model_weight_cache_stats
     * says why). */
    const char *weight_cache_dir;
    /* The largest block of embedding rows that attend to each other
     * (npl_prefill_embeddings, bidirectional) the model must take: a
     * paired vision projector's npl_vision_info.max_tokens. They go
     * through one forward step, so the CPU's working rows become at least
     * this many (memory grows with them); text still prefills in chunks
     * of prefill_chunk. 0 = none beyond prefill_chunk. At most 65536. */
    uint32_t block_rows;
} npl_model_params;

void npl_model_params_default(npl_model_params *p);

typedef enum npl_chat_format {
    NPL_CHAT_LLAMA3 = 1,
    NPL_CHAT_GEMMA = 2,
    NPL_CHAT_CHATML = 3,
} npl_chat_format;

typedef struct npl_model_info {
    const char *architecture; /* "llama", "gemma3", ... */
    const char *name;         /* general.name or "" */
    uint32_t n_vocab;
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim;
    uint32_t n_ff;
    uint32_t n_ctx_train;
    uint64_t n_params;
    const char *quantization; /* dominant weight type name, e.g. "q4_0" */
    npl_chat_format chat_format;
    bool chat_format_guessed; /* template unknown: fell back to the default */
} npl_model_info;

npl_model *npl_model_load(const char *path, const npl_model_params *params, npl_error *err);
void npl_model_free(npl_model *m);
/* How many of the model's n_threads compute from now on (1 to n_threads;
 * <= 0: all of them); the others sleep. Output does not change. From the
 * thread that runs the model, between calls. Returns the number set. */
int npl_model_set_threads(npl_model *m, int n_threads);
const npl_model_info *npl_model_get_info(const npl_model *m);
const npl_tokenizer *npl_model_tokenizer(const npl_model *m);
const npl_gguf *npl_model_gguf(const npl_model *m);

/* ---- sequences and forward passes ----------------------------------- */

typedef struct npl_seq npl_seq;

/* A sequence owns its KV cache, sized for n_ctx tokens (0 = the model's
 * training context, capped by NPL_DEFAULT_CTX_MAX). */
#define NPL_DEFAULT_CTX_MAX 4096u
npl_seq *npl_seq_create(npl_model *m, uint32_t n_ctx, npl_error *err);
void npl_seq_free(npl_seq *s);
uint32_t npl_seq_n_ctx(const npl_seq *s);
uint32_t npl_seq_pos(const npl_seq *s); /* tokens already in the cache */

/* Feeds tokens into the sequence's cache, in chunks of the model's prefill
 * chunk size. At most `max_tokens_this_call` tokens are consumed (0 = all),
 * so a caller can interleave a long prompt with other work; *consumed says
 * how many were. Logits of the last consumed position are computed only
 * when all n tokens are consumed. NPL_ERR_CONTEXT_OVERFLOW when the cache
 * cannot hold them. */
npl_status npl_prefill(npl_model *m, npl_seq *s, const int32_t *tokens, size_t n,
                       size_t max_tokens_this_call, size_t *consumed, npl_error *err);

/* One decode step for a batch: tokens[i] is appended to seqs[i] and its
 * next-token logits computed. All sequences belong to m. */
npl_status npl_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n_seqs,
                      npl_error *err);

/* Logits (n_vocab floats) from the last prefill/decode of this sequence,
 * or NULL when none were computed yet. */
const float *npl_seq_logits(const npl_seq *s);

/* Embeddings in place of tokens (images: engine/vision/vision.h). Feeds n rows of
 * n_embd floats (npl_model_info.n_embd) into the sequence as the first
 * layer's input, as is: unlike token embeddings they are not scaled
 * (Gemma's sqrt(n_embd)), as llama.cpp does for image embeddings.
 * bidirectional: the rows attend to each other in both directions (the
 * image tokens of Gemma 3 and 4), which needs them in one forward step: n
 * must not exceed the larger of the model's prefill chunk and its
 * npl_model_params.block_rows (NPL_ERR_INVALID_ARG; an NPU whose kernels
 * are built for a fixed chunk refuses blocks over it). Otherwise
 * causal, in prefill chunks. Positions before the rows stay causal, and
 * sliding-window layers still see only their window behind each row.
 * Logits of the last row are computed. NPL_ERR_CONTEXT_OVERFLOW when the
 * rows do not fit. */
npl_status npl_prefill_embeddings(npl_model *m, npl_seq *s, const float *embd, size_t n, bool bidirectional,
                                  npl_error *err);

/* The first layer's input for tokens (n * n_embd floats): their embedding
 * rows times the model's scale. npl_prefill_embeddings of these rows
 * (causal) computes exactly what npl_prefill of the tokens does. */
npl_status npl_model_embed_tokens(const npl_model *m, const int32_t *tokens, size_t n, float *out,
                                  npl_error *err);

/* ---- Embeddings: encoder models (docs/embeddings.md) -----------------
 *
 * An embedding model (architecture `bert`) turns each text into one
 * vector: its tokens run through the encoder with bidirectional attention
 * and are pooled as the file says (mean, first token, last token), then
 * L2-normalised. Such a model does not generate: npl_seq_create on it is
 * NPL_ERR_UNSUPPORTED. Calls on a model are serialised, as for generation. */

/* Caps on one npl_embed call (the service caps lower). */
#define NPL_EMBED_MAX_TEXTS 65536u
#define NPL_EMBED_MAX_TEXT_BYTES (64u << 20)

typedef struct npl_embed_options {
    /* Matryoshka truncation: keep the first `dimensions` values of each
     * vector (before normalizing). 0 = all; more than the model has is
     * NPL_ERR_INVALID_ARG. */
    uint32_t dimensions;
    /* A text of more tokens than the model's context: cut to the context
     * (keeping its closing [SEP]) when true, NPL_ERR_CONTEXT_OVERFLOW
     * naming the text when false. Default true. */
    bool truncate;
    /* L2-normalise each vector (default true). */
    bool normalize;
} npl_embed_options;

void npl_embed_options_default(npl_embed_options *o);

typedef struct npl_embed_info {
    size_t n_tokens;    /* tokens run through the encoder, all texts */
    size_t n_truncated; /* texts cut to the context */
    size_t n_passes;    /* forward passes the texts were packed into */
} npl_embed_info;

/* Whether m makes embeddings (and does not generate). */
bool npl_model_is_embedding(const npl_model *m);
/* Values per vector (the model's n_embd); 0 for a model that does not
 * make embeddings. */
uint32_t npl_model_embedding_dim(const npl_model *m);
/* "mean", "cls", "last" or "rank"; NULL for a model that does not make embeddings. */
const char *npl_model_pooling_name(const npl_model *m);

/* Embeds texts[0..n): texts[i] has lens[i] bytes (lens NULL: NUL-ended
 * strings). out receives n vectors of `dimensions` (or
 * npl_model_embedding_dim) floats, one after the other. Many texts are
 * packed into each forward pass, each attending only to its own tokens
 * (no padding). Errors: NPL_ERR_UNSUPPORTED (not an embedding model),
 * NPL_ERR_INVALID_ARG (no texts, too many or too long, a text with no
 * tokens, bad dimensions), NPL_ERR_CONTEXT_OVERFLOW (too long and not
 * truncated), NPL_ERR_NOMEM. info may be NULL. */
npl_status npl_embed(npl_model *m, const char *const *texts, const size_t *lens, size_t n,
                     const npl_embed_options *opts, float *out, npl_embed_info *info, npl_error *err);

/* ---- Reranking: a cross-encoder scores query and document pairs --------
 *
 * A reranker is an encoder whose file says pooling rank (bge-reranker's
 * shape: `cls` / `cls.output` tensors). Each document is paired with the
 * query as the model was trained, [CLS] query [SEP] document [SEP], the
 * pairs packed into shared passes, and the first row of each goes through
 * the classification head: one relevance score per document (a logit:
 * higher is more relevant, not normalised). npl_embed on a reranker is
 * NPL_ERR_UNSUPPORTED, and npl_rerank on any other model. */

typedef struct npl_rerank_options {
    /* A pair of more tokens than the model's context: the document is cut
     * (the pair keeps its closing [SEP]) when true, NPL_ERR_CONTEXT_OVERFLOW
     * naming the document when false. Default true. */
    bool truncate;
} npl_rerank_options;

void npl_rerank_options_default(npl_rerank_options *o);

/* Whether m is a reranker (npl_rerank scores with it). */
bool npl_model_is_reranker(const npl_model *m);

/* Scores documents[0..n) (NUL-ended) against query into scores[0..n), in
 * the documents' order. Errors: NPL_ERR_UNSUPPORTED (not a reranker),
 * NPL_ERR_INVALID_ARG (no documents or more than NPL_EMBED_MAX_TEXTS, a
 * text over NPL_EMBED_MAX_TEXT_BYTES, a query too long to leave a document
 * room), NPL_ERR_CONTEXT_OVERFLOW, NPL_ERR_NOMEM. info (may be NULL)
 * counts the pairs' tokens, cut pairs and passes. */
npl_status npl_rerank(npl_model *m, const char *query, const char *const *documents, size_t n, float *scores,
                      const npl_rerank_options *opts, npl_embed_info *info, npl_error *err);

/* ---- KV cache pool: prefix reuse across requests ----------------------
 *
 * Finished sequences kept for later requests of the same owner (an
 * opaque number: the service uses the client's uid), within a budget of
 * bytes, least recently used first out. A new prompt starts from the
 * longest token prefix it shares with one of its owner's cached
 * sequences and prefills only the rest; greedy output is bit-identical
 * to a prefill from scratch (every row of a forward step is computed
 * independently). Sliding-window layers that a sequence keeps as a ring
 * (npl_seq) reuse a prefix only while the ring still holds the window
 * before its end; otherwise the prompt is prefilled from scratch.
 * On an NPU device the cached sequences keep their device KV buffers
 * (counted against the budget) and a prefix is copied between device
 * buffers; the rest of the prompt runs in the device's prefill chunks
 * from the first new position.
 * When a new sequence does not fit in memory (device memory on an NPU),
 * acquire frees cached sequences, least recently used first, until it does.
 * Not thread-safe: one thread uses a pool, like the model's forward. */
typedef struct npl_kv_pool npl_kv_pool;

npl_kv_pool *npl_kv_pool_create(npl_model *m, uint64_t budget_bytes, npl_error *err);
void npl_kv_pool_free(npl_kv_pool *p); /* frees every cached sequence; before the model */

/* A new sequence of n_ctx positions for the prompt tokens[0..n): its first
 * *reused positions (at most n - 1, so the prefill of the rest computes
 * the logits) already hold the prompt's prefix. */
npl_seq *npl_kv_pool_acquire(npl_kv_pool *p, uint64_t owner, const int32_t *tokens, size_t n, uint32_t n_ctx,
                             uint32_t *reused, npl_error *err);

/* Hands a finished sequence of owner to the pool (which frees it, or a
 * cached one it extends, or the least recently used ones over budget). */
void npl_kv_pool_release(npl_kv_pool *p, uint64_t owner, npl_seq *s);

/* Frees every cached sequence of owner; returns how many. */
size_t npl_kv_pool_forget(npl_kv_pool *p, uint64_t owner);

/* Labels positions [from, from + n) of s, which were prefilled from
 * embeddings (an image), with keys (negative: never a token id), so that
 * a pool matches them as part of the prefix of a later prompt that holds
 * the same keys there (npl_vision_image_keys). NPL_ERR_INVALID_ARG when
 * the positions are not all filled or a key is not negative. */
npl_status npl_seq_key_positions(npl_seq *s, uint32_t from, const int32_t *keys, size_t n, npl_error *err);

size_t npl_kv_pool_count(const npl_kv_pool *p);
uint64_t npl_kv_pool_bytes(const npl_kv_pool *p); /* held by the cached sequences (KV arrays whole) */

/* ---- chat prompts ----------------------------------------------------- */

typedef struct npl_chat_message {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} npl_chat_message;

/* Appends the token ids of the formatted conversation (BOS included when
 * the model adds one, generation prompt appended when asked). User content
 * is tokenized without special-token parsing. */
npl_status npl_chat_tokenize(const npl_model *m, const npl_chat_message *msgs, size_t n_msgs,
                             bool add_generation_prompt, npl_tokens *out, npl_error *err);

const char *npl_chat_format_name(npl_chat_format f);

typedef struct npl_chat_options {
    bool add_generation_prompt;
    const char *tools_json; /* JSON array of tool definitions, or NULL */
    int enable_thinking;    /* -1: template's default, 0 off, 1 on */
    int tools_in_user_message; /* -1: template's default, 0 no, 1 yes (Llama 3.1+) */
    const char *reasoning_effort; /* gpt-oss's template: "low", "medium", "high"; NULL: its default */
} npl_chat_options;

/* Like npl_chat_tokenize for a conversation given as JSON: an array of
 * objects with "role" and "content" (a string, or a list of parts such as
 * {"type":"text","text":...}) plus whatever else the model's template
 * reads (tool_calls, ...). The model's own chat template renders it; a
 * template that is missing, fails to parse or raises falls back to the
 * built-in format (npl_model_info.chat_format), said once on stderr.
 * *prompt (when prompt is not NULL) receives the rendered text (malloc'd;
 * for the built-in format, the tokens' text). */
npl_status npl_chat_tokenize_json(const npl_model *m, const char *messages_json, const npl_chat_options *opts,
                                  npl_tokens *out, char **prompt, npl_error *err);

/* npl_chat_tokenize_json for plain messages (checked as npl_chat_tokenize
 * checks them), with options (NULL: generation prompt, template
 * defaults) and the rendered prompt. */
npl_status npl_chat_tokenize_messages(const npl_model *m, const npl_chat_message *msgs, size_t n_msgs,
                                      const npl_chat_options *opts, npl_tokens *out, char **prompt, npl_error *err);

/* ---- tool calls ------------------------------------------------------- */

/* How a model family writes tool calls in its output (docs/chat-and-sampling.md,
 * "Tool calls"). */
typedef enum npl_tool_family {
    NPL_TOOLS_GENERIC = 0,      /* {"tool_calls": [...]} / {"tool_call": ...} / {"response": ...} */
    NPL_TOOLS_LLAMA3,           /* {"name": .., "parameters": ..} at the start; <|python_tag|> */
    NPL_TOOLS_HERMES,           /* <tool_call>{..}</tool_call> (Qwen 2.5/3, QwQ, Hermes) */
    NPL_TOOLS_MISTRAL,          /* [TOOL_CALLS][{..}, ..] (Mistral 7B v0.3, Nemo, Small 3) */
    NPL_TOOLS_MISTRAL_ARGS,     /* [TOOL_CALLS]name[ARGS]{..} (Mistral Small 3.2) */
    NPL_TOOLS_GRANITE,          /* <|tool_call|>[{..}] */
    NPL_TOOLS_PHI4_MINI,        /* <|tool_call|>[{..}]<|/tool_call|> */
    NPL_TOOLS_COMMAND_R7B,      /* <|START_ACTION|>[{"tool_name": .., "parameters": ..}]<|END_ACTION|> */
    NPL_TOOLS_FUNCTIONARY_V31,  /* <function=name>{..}</function>; <|python_tag|> */
    NPL_TOOLS_FUNCTIONARY_V32,  /* name\n{..} then >>>name\n{..}; "all" is text */
    NPL_TOOLS_FIREFUNCTION_V2,  /*  functools[{..}] */
    NPL_TOOLS_DEEPSEEK_R1,      /* <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>name ... */
    NPL_TOOLS_NEMOTRON,         /* <TOOLCALL>[{..}]</TOOLCALL> */
    NPL_TOOLS_COUNT
} npl_tool_family;

const char *npl_tool_family_name(npl_tool_family f); /* "hermes", ... ("?" when out of range) */

/* The family from the chat template's text and, through has_token (may be
 * NULL), the vocabulary's control tokens (e.g. "[TOOL_CALLS]"). Templates
 * that match no family get NPL_TOOLS_GENERIC. */
npl_tool_family npl_tool_family_detect(const char *template_src, bool (*has_token)(const char *text, void *ctx),
                                       void *ctx);

/* npl_tool_family_detect on the model's own template and vocabulary. */
npl_tool_family npl_model_tool_family(const npl_model *m);

/* The literals the parser looks for in the output (triggers and markers,
 * e.g. "[TOOL_CALLS]", "<|python_tag|>", "<｜tool▁call▁begin｜>"), up to cap of
 * them into out; returns how many there are. Many are control tokens, which
 * the output stream leaves out of its text: the text fed to the parser must
 * keep the tokens whose text is one of these. */
size_t npl_tool_family_markers(npl_tool_family f, const char **out, size_t cap);

/* What a call must look like, as data for a grammar (tool_choice required
 * or a named function). Output with calls is
 *   section_prefix call (separator call)* section_suffix
 * (one call only when !parallel), and each call is
 *   call_prefix BODY call_suffix
 * where BODY is, for NPL_TOOL_CALL_OBJECT, one JSON object whose keys are,
 * in this order, id_key (when not NULL: a string), name_key (the function's
 * name as a JSON string) and args_key (the arguments object); for
 * NPL_TOOL_CALL_NAME_ARGS, the bare name, name_suffix, then the arguments
 * object. Literals are exact; JSON may hold the usual whitespace. */
typedef enum npl_tool_call_layout { NPL_TOOL_CALL_OBJECT, NPL_TOOL_CALL_NAME_ARGS } npl_tool_call_layout;

typedef struct npl_tool_call_shape {
    const char *section_prefix, *section_suffix;
    const char *call_prefix, *call_suffix, *separator;
    npl_tool_call_layout layout;
    const char *id_key, *name_key, *args_key; /* NPL_TOOL_CALL_OBJECT */
    const char *name_suffix;                  /* NPL_TOOL_CALL_NAME_ARGS */
    bool parallel;    /* the family may write several calls in one turn */
    bool text_before; /* free text may come before the calls */
} npl_tool_call_shape;

const npl_tool_call_shape *npl_tool_call_shape_of(npl_tool_family f); /* NULL when out of range */

/* One parsed call: arguments is a JSON object's text (compact,
 * json.dumps separators); id is the model's own when it wrote one, else
 * id_prefix + the call's index in the output. */
typedef struct npl_tool_call {
    const char *id, *name, *arguments;
} npl_tool_call;

/* Streamed output -> plain text and complete calls. Each call is handed to
 * on_call as soon as its last byte arrives; text as soon as it cannot be
 * the start of a call. Output that looks like a call but is not one
 * (malformed JSON, no name, over NPL_TOOL_CALL_MAX bytes) is passed on as
 * text. The pointers given to the callbacks are valid during the call. */
#define NPL_TOOL_CALL_MAX (1u << 20)
typedef struct npl_tool_parser npl_tool_parser;
typedef void (*npl_tool_text_fn)(const char *text, size_t len, void *ctx);
typedef void (*npl_tool_call_fn)(const npl_tool_call *call, void *ctx);

/* id_prefix: NULL = "call_" (copied, at most 64 bytes). NULL when out of memory
 * or the family is out of range. */
npl_tool_parser *npl_tool_parser_new(npl_tool_family f, const char *id_prefix, npl_tool_text_fn on_text,
                                     npl_tool_call_fn on_call, void *ctx);
npl_status npl_tool_parser_feed(npl_tool_parser *p, const char *text, size_t len, npl_error *err);
/* End of output: what is still held is decided (a call cut short is text). */
npl_status npl_tool_parser_finish(npl_tool_parser *p, npl_error *err);
size_t npl_tool_parser_calls(const npl_tool_parser *p); /* calls emitted so far */
void npl_tool_parser_free(npl_tool_parser *p);

/* ---- sampling --------------------------------------------------------- */

typedef struct npl_sampler_params {
    float temperature;     /* <= 0: greedy */
    uint32_t top_k;        /* 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    uint32_t repeat_last_n;/* window for the penalty */
    uint64_t seed;
} npl_sampler_params;

void npl_sampler_params_default(npl_sampler_params *p);

typedef struct npl_sampler npl_sampler;

npl_sampler *npl_sampler_create(const npl_sampler_params *p, uint32_t n_vocab, npl_error *err);
void npl_sampler_free(npl_sampler *s);
/* Picks a token from logits (not modified) and records it for the
 * repetition penalty. */
int32_t npl_sampler_sample(npl_sampler *s, const float *logits);
/* Records a token (e.g. from the prompt) for the repetition penalty. */
void npl_sampler_accept(npl_sampler *s, int32_t id);

/* Constrained output (engine/chat/grammar.h): with a matcher set, each
 * npl_sampler_sample first drops the tokens the grammar does not allow
 * (after the repetition penalty, before top-k, min-p, top-p and
 * temperature; an end-of-generation token only once the output is
 * complete), then advances the matcher by the picked token. Greedy
 * output stays deterministic. The sampler borrows the matcher (NULL
 * removes it); npl_sampler_sample returns -1 when the grammar allows no
 * token (after the end, or a vocabulary that cannot spell what it needs). */
npl_status npl_sampler_set_grammar(npl_sampler *s, npl_grammar_matcher *m, npl_error *err);

/* log-softmax top-k of raw logits, highest first (for --top-logprobs). */
size_t npl_top_logprobs(const float *logits, uint32_t n_vocab, size_t k, int32_t *ids, float *logprobs);

/* ---- generation: sampling + stop conditions + streaming text ------------ */

typedef enum npl_finish_reason {
    NPL_FINISH_NONE = 0,   /* still going */
    NPL_FINISH_STOP = 1,   /* end-of-generation token or stop string */
    NPL_FINISH_LENGTH = 2, /* max_tokens reached */
} npl_finish_reason;

/* Turns sampled tokens into text a caller may show: holds back text that
 * could still become a stop string and never emits the stop string itself;
 * emits only complete UTF-8. */
typedef struct npl_stream npl_stream;

npl_stream *npl_stream_create(const npl_model *m, const char *const *stop_strings, size_t n_stop,
                              uint32_t max_tokens, npl_error *err);
void npl_stream_free(npl_stream *st);
/* Feeds one sampled token; appends showable text to out and returns the
 * finish reason (NONE while generation should continue). */
npl_finish_reason npl_stream_push(npl_stream *st, int32_t id, npl_buf *out, npl_error *err);
/* At the end (any reason), appends whatever held-back text is not part of a
 * stop string. */
npl_status npl_stream_finish(npl_stream *st, npl_buf *out, npl_error *err);
/* Control tokens spelled by one of texts (e.g. npl_tool_family_markers:
 * "[TOOL_CALLS]", "<|python_tag|>") are kept in the text as their
 * spelling instead of being dropped, so that a tool-call parser sees them.
 * Texts that are no control token of the vocabulary are ignored; at most
 * NPL_STREAM_MAX_KEEP tokens. */
#define NPL_STREAM_MAX_KEEP 16
npl_status npl_stream_keep_tokens(npl_stream *st, const char *const *texts, size_t n, npl_error *err);

/* ---- devices ---------------------------------------------------------- */

/* What the model runs on: "cpu", "npu-emu", "npu:xdna1" or "npu:xdna2". */
const char *npl_model_device(const npl_model *m);
/* Why, in one line: what was requested, or for "auto" falling back to the
 * CPU, the check that failed (e.g. "auto: NPU not used (no-driver: ...)"). */
const char *npl_model_device_reason(const npl_model *m);

/* Traffic between host and NPU device over a phase of the model's life. */
typedef struct npl_device_traffic {
    uint64_t dispatches;           /* kernel group runs */
    uint64_t submissions;          /* run lists submitted (one host wait each) */
    uint64_t h2d_weight_bytes;     /* weights uploaded */
    uint64_t h2d_activation_bytes; /* activations and shape parameters to the device */
    uint64_t d2h_activation_bytes; /* logits (and any activation) read back */
} npl_device_traffic;

typedef struct npl_device_stats {
    npl_device_traffic load;    /* npl_model_load: the weight upload */
    npl_device_traffic prefill; /* every npl_prefill since load */
    npl_device_traffic decode;  /* every npl_decode since load */
    uint64_t prefill_tokens;
    uint64_t prefill_chunks;
    uint64_t prefill_prompts;      /* prefills that ended a prompt: LM head run, logits read */
    uint64_t decode_tokens;        /* sequence-steps decoded */
    uint64_t weight_bytes;         /* resident on the device (read once per decoded token) */
    uint64_t kv_bytes;             /* KV caches of the live sequences */
    uint64_t kv_reused_tokens;     /* positions sequences took from cached ones (npl_kv_pool) */
    uint64_t kv_copy_bytes;        /* K and V bytes those copies moved on the device */
    uint64_t kv_moved_sequences;   /* caches handed to the CPU (npl_model_set_decode_device) */
    uint64_t kv_moved_bytes;       /* K and V bytes those moves read from the device */
    uint64_t activation_bytes;     /* the other device buffers */
    uint32_t prefill_chunk;        /* rows per prefill chunk (fixed shape) */
    uint32_t groups_per_layer_decode; /* 2 with the fused attention + O/FFN group */
    /* The Q4NX weight cache at load (npl_model_params.npu_cache_dir). A
     * cache that cannot be read or written never fails the load. */
    uint32_t load_matrices_repacked;  /* 0 when the cache held them all */
    uint32_t load_matrices_cached;    /* read from the cache file */
    bool load_cache_written;          /* a new cache file was written */
    char load_cache_note[400];        /* one line: which file, used or written, or why not */
} npl_device_stats;

/* The CPU's packed-weight cache at load (npl_model_params.weight_cache_dir). */
typedef struct npl_weight_cache_stats {
    uint32_t matrices_packed; /* repacked at load (0 when the cache held them all) */
    uint32_t matrices_cached; /* mapped from the cache file */
    bool writing;             /* a new cache file is being written in the background */
    bool written;             /* a new cache file was written */
    char note[400];           /* one line: which file, used or written, or why not */
} npl_weight_cache_stats;

/* All zero with an empty note for a model without a cache or on an NPU. */
void npl_model_weight_cache_stats(const npl_model *m, npl_weight_cache_stats *out);

/* A new cache file is written by a thread of the engine while the model
 * runs (the first load does not wait for the disk). This waits for it to
 * end; the stats then say whether it was written. False when no write was
 * under way. npl_model_free waits too. */
bool npl_model_weight_cache_wait(npl_model *m);

/* A mixture-of-experts model's feed-forward since load (engine/models/moe.h):
 * what its steps read of the experts, for the bytes a decoded token reads
 * against the active parameters' (npullm-bench). */
typedef struct npl_moe_stats {
    uint32_t n_expert, n_used;  /* per layer: experts, and experts a token uses */
    uint32_t n_moe_layers;      /* layers with experts */
    uint64_t rows;              /* token rows through the MoE layers, summed over them */
    uint64_t expert_bytes_read; /* bytes of the experts' matrices those steps read (an expert once per step) */
    uint64_t expert_bytes_all;  /* bytes of every expert matrix of the file */
} npl_moe_stats;

/* False, and *out zeroed, for a model without experts. */
bool npl_model_moe_stats(const npl_model *m, npl_moe_stats *out);

/* Counters of a model running on an NPU device (npu-emu or npu); false,
 * and *out zeroed, for a model on the CPU. */
bool npl_model_device_stats(const npl_model *m, npl_device_stats *out);

/* The phase split: a model on an NPU device (npu-emu or npu) prefills
 * there and, with device "cpu", decodes on the CPU. A sequence's KV cache
 * and logits move once, at its first npl_decode after the switch: the
 * device's bf16 K/V rows are read back and stored in the CPU's cache
 * format (f16 holds every bf16 value of its range exactly; a q8_0 cache
 * quantizes them as it does its own rows). From then on every call on
 * that sequence runs on the CPU, which computes with the file's weights;
 * the NPU computes with their Q4NX copy and bf16 activations, so the
 * split's greedy output equals one device's alone only as far as the two
 * devices agree (docs/npu.md, "Prefill on the NPU, decode on the CPU").
 * device NULL (or the model's own device) keeps new sequences decoding on
 * the device; moved ones stay on the CPU. Takes effect at the next
 * npl_decode; NPL_ERR_INVALID_ARG for another device, NPL_ERR_UNSUPPORTED
 * when the model's device cannot hand its caches to the CPU. A model on
 * the CPU accepts "cpu" (nothing to move). */
npl_status npl_model_set_decode_device(npl_model *m, const char *device, npl_error *err);
/* Where new decode steps run: "cpu" while split, else npl_model_device. */
const char *npl_model_decode_device(const npl_model *m);

/* Where a sequence's last prefill and last decode step ran ("" for none
 * yet; the model's device name, or "cpu" after a move) and how often its
 * cache moved. Read while its model is loaded. */
typedef struct npl_seq_devices {
    const char *prefill;
    const char *decode;
    uint32_t kv_moves;
} npl_seq_devices;
void npl_seq_devices_get(const npl_seq *s, npl_seq_devices *out);

/* What a device request resolves to, decided once before loading models
 * (a service shows it before any model is loaded). */
typedef struct npl_device_plan {
    char device[32];     /* "cpu", "npu-emu", "npu:xdna1" or "npu:xdna2" */
    char reason[640];    /* one line, as npl_model_device_reason words it */
    const char *load_as; /* npl_model_params.device for the models: "cpu", "npu-emu" or "npu" */
} npl_device_plan;

/* Resolves request ("cpu", "npu-emu", "npu", "auto"; NULL = "cpu") as
 * npl_model_load would, without opening a device: "auto" and "npu" run
 * NPU discovery. Fails like npl_model_load for an unknown request
 * (NPL_ERR_INVALID_ARG) or an unusable "npu" (NPL_ERR_UNSUPPORTED, with
 * discovery's reason). */
npl_status npl_device_resolve(const char *request, npl_device_plan *out, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
