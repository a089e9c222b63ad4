/* npullm-run: run a GGUF model from the command line with the engine
 * alone (no service, no GLib). Generates text for a prompt (chat template
 * applied unless --raw), tokenizes text, or describes a model file.
 *
 * Exit status: 0 success, 2 bad usage or a file that is malformed or not
 * something the engine runs, 1 any other failure. Errors are one line on
 * stderr: "npullm-run: MESSAGE". */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ggml_types.h"
#include "gguf.h"
#include "grammar.h"
#include "npullm.h"
#include "tokenizer.h"
#include "chat_prompt.h"
#include "run-messages.h"
#include "unicode_utf8.h"
#include "run-embed.h"
#include "run-rerank.h"

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2
#define DEFAULT_MAX_TOKENS 256u
#define MAX_TOP_LOGPROBS 100u

static const char usage_text[] =
    "usage: npullm-run MODEL.gguf --prompt TEXT [options]\n"
    "       npullm-run MODEL.gguf --tokenize TEXT\n"
    "       npullm-run MODEL.gguf --info [--json]\n"
    "       npullm-run MODEL.gguf --embed TEXT [--embed TEXT ...] [--json]\n"
    "       npullm-run MODEL.gguf --rerank QUERY --document TEXT [--document TEXT ...] [--json]\n"
    "\n"
    "Generation:\n"
    "  --prompt TEXT         the user message (or the whole prompt with --raw)\n"
    "  --raw                 no chat template: tokenize TEXT as is (BOS as the model says)\n"
    "  --system TEXT         a system message (chat template only)\n"
    "  --messages JSON|@FILE the whole conversation instead of --prompt: a JSON array\n"
    "                        of {\"role\", \"content\"} (as Chat takes it); @FILE reads a file\n"
    "  --print-prompt        print the prompt the chat template renders and stop\n"
    "                        (--json: with its token ids)\n"
    "  -n N                  at most N generated tokens (default 256)\n"
    "  --temperature T       0 = greedy (default 0.8)\n"
    "  --seed S              sampling seed (default 0)\n"
    "  --top-k K             0 = off (default 40)\n"
    "  --top-p P             1 = off (default 0.95)\n"
    "  --min-p P             0 = off (default 0.05)\n"
    "  --repeat-penalty R    1 = off (default 1)\n"
    "  --stop S              stop when S is generated (repeatable)\n"
    "  --format json|FILE    constrain the output to any JSON value, or to the JSON\n"
    "                        Schema in FILE (docs/chat-and-sampling.md)\n"
    "  --grammar FILE        constrain the output to the grammar in FILE\n"
    "  --top-logprobs K      report the K most likely tokens per step (--json)\n"
    "  --threads N           compute threads (default: online CPUs)\n"
    "  --ctx N               context size in tokens (default: the model's, at most 4096)\n"
    "  --prefill-chunk N     prompt tokens per forward pass (default 256)\n"
    "  --kv f16|q8_0         KV cache format (default f16; q8_0: about half the memory)\n"
    "  --device D            cpu (default), npu-emu, npu or auto (see docs/npu.md)\n"
    "  --weight-cache DIR    keep the CPU's repacked weights in DIR and map them on\n"
    "                        the next run (the file's fate is said on stderr)\n"
    "  --json                print one JSON object instead of streaming text\n"
    "\n"
    "Embeddings (an embedding model, docs/embeddings.md):\n"
    "  --embed TEXT          a text to embed (repeatable: one forward pass for all);\n"
    "                        prints one line of values per text (--json: one object)\n"
    "  --dimensions N        keep the first N values (Matryoshka), then normalize\n"
    "  --no-truncate         a text longer than the context is an error, not cut\n"
    "\n"
    "Reranking (a reranker, pooling rank; docs/embeddings.md):\n"
    "  --rerank QUERY        score each --document against QUERY; prints one score\n"
    "                        per document in their order (--json: one object)\n"
    "  --document TEXT       a document to score (repeatable)\n"
    "  --help                this text\n";

typedef struct options {
    const char *model;
    const char *prompt;
    const char *system;
    const char *messages; /* --messages argument (JSON or @FILE) */
    bool print_prompt;
    const char *tokenize;
    bool raw;
    bool info;
    bool json;
    uint32_t max_tokens;
    npl_sampler_params sp;
    const char **stops;
    size_t n_stops;
    uint32_t top_logprobs;
    const char *format;  /* --format: "json" or a schema file */
    const char *grammar; /* --grammar FILE */
    int threads;
    uint32_t ctx;
    uint32_t prefill_chunk;
    const char *kv_type; /* NULL: the engine's default */
    const char *device;  /* NULL: the CPU */
    const char *weight_cache; /* --weight-cache DIR, or NULL */
    const char **embed;       /* --embed texts */
    size_t n_embed;
    const char *rerank;       /* --rerank query */
    const char **docs;        /* --document texts */
    size_t n_docs;
    npl_embed_options embed_opts;
} options;

/* ---- errors ------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static int fail(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line, whatever the message holds. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fflush(stdout);
    fprintf(stderr, "npullm-run: %s\n", msg);
    return code;
}

/* Malformed or unsupported input files and bad arguments are the user's
 * to fix (2); running out of memory or context is a runtime failure (1). */
static int exit_code_for(npl_status st)
{
    switch (st) {
    case NPL_ERR_IO:
    case NPL_ERR_FORMAT:
    case NPL_ERR_UNSUPPORTED:
    case NPL_ERR_INVALID_ARG:
        return EXIT_USAGE;
    default:
        return EXIT_RUNTIME;
    }
}

/* ---- argument parsing ---------------------------------------------------- */

static bool parse_u32(const char *s, uint32_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static bool parse_float(const char *s, float *out)
{
    if (!s || !*s)
        return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return false;
    *out = (float)v;
    return true;
}

/* Returns 0 to go on, or an exit status (-1 for a clean --help exit). */
/* Options that take a value, in groups: each helper returns NOT_MINE
 * when a is none of its options, 0 when it took a and its value, else
 * the exit code. */
#define NOT_MINE (-2)
#define BAD_VALUE(what) fail(EXIT_USAGE, "%s expects %s, got '%s'", a, what, val)
#define NEED_VALUE()                                                        \
    do {                                                                    \
        if (!val)                                                           \
            return fail(EXIT_USAGE, "%s needs a value (see --help)", a);   \
    } while (0)

/* Sampling. */
static int parse_sampling_option(const char *a, const char *val, options *o)
{
    if (!strcmp(a, "--temperature") || !strcmp(a, "--temp")) {
        NEED_VALUE();
        if (!parse_float(val, &o->sp.temperature) || o->sp.temperature < 0)
            return BAD_VALUE("a number >= 0");
    } else if (!strcmp(a, "--seed")) {
        NEED_VALUE();
        if (!parse_u64(val, &o->sp.seed))
            return BAD_VALUE("a non-negative integer");
    } else if (!strcmp(a, "--top-k")) {
        NEED_VALUE();
        if (!parse_u32(val, &o->sp.top_k))
            return BAD_VALUE("a non-negative integer");
    } else if (!strcmp(a, "--top-p")) {
        NEED_VALUE();
        if (!parse_float(val, &o->sp.top_p) || o->sp.top_p <= 0 || o->sp.top_p > 1)
            return BAD_VALUE("a number in (0, 1]");
    } else if (!strcmp(a, "--min-p")) {
        NEED_VALUE();
        if (!parse_float(val, &o->sp.min_p) || o->sp.min_p < 0 || o->sp.min_p > 1)
            return BAD_VALUE("a number in [0, 1]");
    } else if (!strcmp(a, "--repeat-penalty")) {
        NEED_VALUE();
        if (!parse_float(val, &o->sp.repeat_penalty) || o->sp.repeat_penalty <= 0)
            return BAD_VALUE("a number > 0");
    } else {
        return NOT_MINE;
    }
    return 0;
}

/* The model's threads and context, the device and the caches. */
static int parse_engine_option(const char *a, const char *val, options *o)
{
    if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
        NEED_VALUE();
        uint32_t t;
        if (!parse_u32(val, &t) || t > 1024)
            return BAD_VALUE("an integer in [0, 1024]");
        o->threads = (int)t;
    } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
        NEED_VALUE();
        if (!parse_u32(val, &o->ctx))
            return BAD_VALUE("a non-negative integer");
    } else if (!strcmp(a, "--prefill-chunk")) {
        NEED_VALUE();
        if (!parse_u32(val, &o->prefill_chunk) || o->prefill_chunk == 0 || o->prefill_chunk > 65536)
            return BAD_VALUE("an integer in [1, 65536]");
    } else if (!strcmp(a, "--kv")) {
        NEED_VALUE();
        if (strcmp(val, "f16") != 0 && strcmp(val, "q8_0") != 0)
            return BAD_VALUE("f16 or q8_0");
        o->kv_type = val;
    } else if (!strcmp(a, "--device")) {
        NEED_VALUE();
        if (strcmp(val, "cpu") && strcmp(val, "npu-emu") && strcmp(val, "npu") && strcmp(val, "auto"))
            return BAD_VALUE("cpu, npu-emu, npu or auto");
        o->device = val;
    } else if (!strcmp(a, "--weight-cache")) {
        NEED_VALUE();
        if (!val[0])
            return BAD_VALUE("a directory");
        o->weight_cache = val;
    } else {
        return NOT_MINE;
    }
    return 0;
}

/* Embedding and reranking: the texts, the query and the documents. */
static int parse_embed_option(const char *a, const char *val, options *o)
{
    if (!strcmp(a, "--embed")) {
        NEED_VALUE();
        o->embed[o->n_embed++] = val;
    } else if (!strcmp(a, "--rerank")) {
        NEED_VALUE();
        o->rerank = val;
    } else if (!strcmp(a, "--document")) {
        NEED_VALUE();
        o->docs[o->n_docs++] = val;
    } else if (!strcmp(a, "--dimensions")) {
        NEED_VALUE();
        if (!parse_u32(val, &o->embed_opts.dimensions) || o->embed_opts.dimensions == 0)
            return BAD_VALUE("a positive number");
    } else {
        return NOT_MINE;
    }
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = DEFAULT_MAX_TOKENS;
    npl_sampler_params_default(&o->sp);
    npl_embed_options_default(&o->embed_opts);
    o->stops = calloc((size_t)argc, sizeof *o->stops);
    o->embed = calloc((size_t)argc, sizeof *o->embed);
    o->docs = calloc((size_t)argc, sizeof *o->docs);
    if (!o->stops || !o->embed || !o->docs)
        return fail(EXIT_RUNTIME, "out of memory");

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE_VALUE()  \
    do {              \
        NEED_VALUE(); \
        i++;          \
    } while (0)

        int taken = parse_sampling_option(a, val, o);
        if (taken == NOT_MINE)
            taken = parse_engine_option(a, val, o);
        if (taken == NOT_MINE)
            taken = parse_embed_option(a, val, o);
        if (taken != NOT_MINE) {
            if (taken)
                return taken;
            i++;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            return -1;
        } else if (!strcmp(a, "--prompt") || !strcmp(a, "-p")) {
            TAKE_VALUE();
            o->prompt = val;
        } else if (!strcmp(a, "--messages")) {
            TAKE_VALUE();
            o->messages = val;
        } else if (!strcmp(a, "--print-prompt")) {
            o->print_prompt = true;
        } else if (!strcmp(a, "--system")) {
            TAKE_VALUE();
            o->system = val;
        } else if (!strcmp(a, "--tokenize")) {
            TAKE_VALUE();
            o->tokenize = val;
        } else if (!strcmp(a, "--raw")) {
            o->raw = true;
        } else if (!strcmp(a, "--no-truncate")) {
            o->embed_opts.truncate = false;
        } else if (!strcmp(a, "--info")) {
            o->info = true;
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--max-tokens")) {
            TAKE_VALUE();
            if (!parse_u32(val, &o->max_tokens) || o->max_tokens == 0)
                return BAD_VALUE("a positive integer");
        } else if (!strcmp(a, "--stop")) {
            TAKE_VALUE();
            o->stops[o->n_stops++] = val;
        } else if (!strcmp(a, "--format")) {
            TAKE_VALUE();
            if (!val[0])
                return BAD_VALUE("json or a JSON Schema file");
            o->format = val;
        } else if (!strcmp(a, "--grammar")) {
            TAKE_VALUE();
            if (!val[0])
                return BAD_VALUE("a grammar file");
            o->grammar = val;
        } else if (!strcmp(a, "--top-logprobs")) {
            TAKE_VALUE();
            if (!parse_u32(val, &o->top_logprobs) || o->top_logprobs > MAX_TOP_LOGPROBS)
                return BAD_VALUE("an integer in [0, 100]");
        } else if (a[0] == '-' && a[1] != '\0') {
            return fail(EXIT_USAGE, "unknown option '%s' (see --help)", a);
        } else if (!o->model) {
            o->model = a;
        } else {
            return fail(EXIT_USAGE, "unexpected argument '%s' (see --help)", a);
        }
#undef TAKE_VALUE
    }

    if (!o->model)
        return fail(EXIT_USAGE, "no model file given (see --help)");
    int modes = (o->prompt != NULL) + (o->messages != NULL) + (o->tokenize != NULL) + o->info + (o->n_embed > 0) +
                (o->rerank != NULL);
    if (modes == 0)
        return fail(EXIT_USAGE,
                    "nothing to do: give --prompt, --messages, --tokenize, --embed, --rerank or --info (see --help)");
    if (modes > 1)
        return fail(EXIT_USAGE, "--prompt, --messages, --tokenize, --embed, --rerank and --info exclude each other");
    if ((o->rerank != NULL) != (o->n_docs > 0))
        return fail(EXIT_USAGE, "--rerank QUERY and --document TEXT go together");
    if (o->messages && (o->system || o->raw))
        return fail(EXIT_USAGE, "--messages holds the whole conversation: drop --system/--raw");
    if (o->print_prompt && o->raw)
        return fail(EXIT_USAGE, "--print-prompt shows the chat template's prompt (drop --raw)");
    if (o->system && o->raw)
        return fail(EXIT_USAGE, "--system needs the chat template (drop --raw)");
    if (o->format && o->grammar)
        return fail(EXIT_USAGE, "--format and --grammar exclude each other");
    if (o->top_logprobs && !o->json)
        return fail(EXIT_USAGE, "--top-logprobs is reported with --json only");
    return 0;
}
#undef NEED_VALUE
#undef BAD_VALUE
#undef NOT_MINE

/* ---- JSON output ------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_valid_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    int k = npl_utf8_decode_strict(s, n, &cp);
    return k > 0 ? (size_t)k : 0;
}

/* A JSON string; bytes that are not valid UTF-8 become U+FFFD. */
static void json_string(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
            i++;
        } else if (c == '\n') {
            fputs("\\n", f);
            i++;
        } else if (c == '\r') {
            fputs("\\r", f);
            i++;
        } else if (c == '\t') {
            fputs("\\t", f);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            fprintf(f, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_valid_len(p + i, n - i);
            if (len == 0) {
                fputs("\\ufffd", f);
                i++;
            } else {
                fwrite(p + i, 1, len, f);
                i += len;
            }
        }
    }
    fputc('"', f);
}

static void json_cstring(FILE *f, const char *s)
{
    json_string(f, s ? s : "", s ? strlen(s) : 0);
}

static void json_number(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

/* ---- --tokenize ------------------------------------------------------------- */

static int run_tokenize(const options *o)
{
    npl_error err;
    npl_error_clear(&err);
    npl_gguf *g = npl_gguf_open(o->model, &err);
    if (!g)
        return fail(exit_code_for(err.code), "%s", err.message);
    npl_tokenizer *tok = npl_tokenizer_from_gguf(g, &err);
    if (!tok) {
        npl_gguf_close(g);
        return fail(exit_code_for(err.code), "%s", err.message);
    }
    npl_tokens ids = {0};
    npl_status st = npl_tokenize(tok, o->tokenize, strlen(o->tokenize), NPL_TOKENIZE_ADD_BOS, &ids, &err);
    int rc = 0;
    if (st) {
        rc = fail(exit_code_for(st), "%s", err.message);
    } else {
        putchar('[');
        for (size_t i = 0; i < ids.n; i++)
            printf(i ? ", %d" : "%d", ids.ids[i]);
        puts("]");
    }
    npl_tokens_free(&ids);
    npl_tokenizer_free(tok);
    npl_gguf_close(g);
    return rc;
}

/* ---- --info ------------------------------------------------------------------ */

typedef struct type_count {
    uint32_t type;
    size_t count;
    uint64_t bytes;
} type_count;

static size_t tensor_type_histogram(const npl_gguf *g, type_count *out)
{
    size_t n = 0;
    for (size_t i = 0; i < npl_gguf_n_tensors(g); i++) {
        const npl_gguf_tensor *t = npl_gguf_tensor_at(g, i);
        size_t j = 0;
        while (j < n && out[j].type != t->type)
            j++;
        if (j == n) {
            out[n].type = t->type;
            out[n].count = 0;
            out[n].bytes = 0;
            n++;
        }
        out[j].count++;
        out[j].bytes += t->size;
    }
    return n;
}

static const char *type_name(uint32_t type)
{
    const npl_type_traits *tr = npl_type_traits_get(type);
    return tr ? tr->name : "unknown";
}

static int run_info(const options *o, npl_model *m)
{
    const npl_model_info *in = npl_model_get_info(m);
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    const npl_gguf *g = npl_model_gguf(m);
    type_count hist[NPL_TYPE_COUNT_MAX + 1];
    size_t n_hist = tensor_type_histogram(g, hist);

    if (o->json) {
        printf("{\"architecture\": ");
        json_cstring(stdout, in->architecture);
        printf(", \"name\": ");
        json_cstring(stdout, in->name);
        printf(", \"n_vocab\": %u, \"n_embd\": %u, \"n_layer\": %u, \"n_head\": %u, \"n_head_kv\": %u, "
               "\"head_dim\": %u, \"n_ff\": %u, \"n_ctx_train\": %u, \"n_params\": %llu, \"quantization\": ",
               in->n_vocab, in->n_embd, in->n_layer, in->n_head, in->n_head_kv, in->head_dim, in->n_ff,
               in->n_ctx_train, (unsigned long long)in->n_params);
        json_cstring(stdout, in->quantization);
        printf(", \"tensor_types\": {");
        for (size_t i = 0; i < n_hist; i++) {
            printf(i ? ", " : "");
            json_cstring(stdout, type_name(hist[i].type));
            printf(": {\"tensors\": %zu, \"bytes\": %llu}", hist[i].count, (unsigned long long)hist[i].bytes);
        }
        printf("}, \"tokenizer\": ");
        json_cstring(stdout, npl_tokenizer_kind_name(tok));
        printf(", \"tokenizer_pre\": ");
        json_cstring(stdout, npl_tokenizer_pre_name(tok));
        printf(", \"bos\": %d, \"eos\": %d, \"adds_bos\": %s, \"chat_format\": ", npl_tokenizer_bos(tok),
               npl_tokenizer_eos(tok), npl_tokenizer_adds_bos(tok) ? "true" : "false");
        json_cstring(stdout, npl_chat_format_name(in->chat_format));
        printf(", \"chat_format_guessed\": %s", in->chat_format_guessed ? "true" : "false");
        printf(", \"embedding_pooling\": ");
        json_cstring(stdout, npl_model_is_embedding(m) ? npl_model_pooling_name(m) : "");
        printf("}\n");
        return 0;
    }

    printf("file:          %s\n", npl_gguf_path(g));
    printf("architecture:  %s\n", in->architecture);
    printf("name:          %s\n", in->name);
    printf("parameters:    %llu (%.2f M)\n", (unsigned long long)in->n_params, (double)in->n_params / 1e6);
    printf("quantization:  %s\n", in->quantization);
    printf("vocabulary:    %u\n", in->n_vocab);
    printf("embedding:     %u\n", in->n_embd);
    printf("layers:        %u\n", in->n_layer);
    printf("heads:         %u query, %u key/value, %u dims each\n", in->n_head, in->n_head_kv, in->head_dim);
    printf("feed-forward:  %u\n", in->n_ff);
    printf("context:       %u (training)\n", in->n_ctx_train);
    printf("tokenizer:     %s (pre-tokenizer %s), bos %d, eos %d%s\n", npl_tokenizer_kind_name(tok),
           npl_tokenizer_pre_name(tok), npl_tokenizer_bos(tok), npl_tokenizer_eos(tok),
           npl_tokenizer_adds_bos(tok) ? ", adds BOS" : "");
    printf("chat format:   %s%s\n", npl_chat_format_name(in->chat_format),
           in->chat_format_guessed ? " (guessed: template not recognised)" : "");
    if (npl_model_is_embedding(m))
        printf("embeddings:    %u values, %s pooling (an embedding model: --embed)\n", npl_model_embedding_dim(m),
               npl_model_pooling_name(m));
    printf("tensor types:");
    for (size_t i = 0; i < n_hist; i++)
        printf("%s %s x%zu (%.1f MiB)", i ? "," : "", type_name(hist[i].type), hist[i].count,
               (double)hist[i].bytes / (1024.0 * 1024.0));
    printf("\n");
    return 0;
}

/* ---- generation ------------------------------------------------------------ */

typedef struct gen_token {
    int32_t id;
    size_t n_top;
    int32_t *top_ids; /* --top-logprobs entries, into one shared array */
    float *top_lp;
} gen_token;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *finish_name(npl_finish_reason r)
{
    return r == NPL_FINISH_LENGTH ? "length" : "stop";
}

/* The prompt's ids; *text (when not NULL) gets the rendered chat prompt. */
static npl_status build_prompt(const options *o, npl_model *m, npl_tokens *out, char **text, npl_error *err)
{
    if (o->raw)
        return npl_tokenize(npl_model_tokenizer(m), o->prompt, strlen(o->prompt), NPL_TOKENIZE_ADD_BOS, out, err);
    char *json = o->messages ? run_messages_read(o->messages) : npl_chat_turn_json(o->system, o->prompt, false);
    if (!json)
        return npl_error_set(err, o->messages ? NPL_ERR_INVALID_ARG : NPL_ERR_NOMEM, "cannot read the conversation");
    npl_chat_options co = {.add_generation_prompt = true, .enable_thinking = -1, .tools_in_user_message = -1};
    npl_status st = npl_chat_tokenize_json(m, json, &co, out, text, err);
    free(json);
    return st;
}

/* --print-prompt: the rendered prompt (and with --json its ids). */
static void print_prompt(const options *o, const npl_tokens *prompt, const char *text)
{
    if (!o->json) {
        fputs(text ? text : "", stdout);
        fputc('\n', stdout);
        return;
    }
    printf("{\"prompt\": ");
    json_cstring(stdout, text);
    printf(", \"prompt_tokens\": [");
    for (size_t i = 0; i < prompt->n; i++)
        printf(i ? ", %d" : "%d", prompt->ids[i]);
    printf("]}\n");
}

static void print_json_result(const options *o, const npl_model *m, const npl_tokens *prompt,
                              const gen_token *toks, size_t n_toks, const npl_buf *text,
                              npl_finish_reason reason, double prompt_ms, double gen_ms)
{
    const npl_tokenizer *tok = npl_model_tokenizer(m);
    printf("{\"prompt_tokens\": [");
    for (size_t i = 0; i < prompt->n; i++)
        printf(i ? ", %d" : "%d", prompt->ids[i]);
    printf("], \"tokens\": [");
    for (size_t i = 0; i < n_toks; i++) {
        char piece[256];
        size_t len = npl_token_to_bytes(tok, toks[i].id, false, piece, sizeof piece);
        if (len > sizeof piece)
            len = sizeof piece;
        printf("%s{\"id\": %d, \"text\": ", i ? ", " : "", toks[i].id);
        json_string(stdout, piece, len);
        if (o->top_logprobs) {
            printf(", \"top\": [");
            for (size_t j = 0; j < toks[i].n_top; j++) {
                printf("%s[%d, ", j ? ", " : "", toks[i].top_ids[j]);
                json_number(stdout, toks[i].top_lp[j]);
                printf("]");
            }
            printf("]");
        }
        printf("}");
    }
    printf("], \"text\": ");
    json_string(stdout, text->data ? text->data : "", text->len);
    size_t n_gen_steps = n_toks > 0 ? n_toks - 1 : 0;
    printf(", \"finish_reason\": \"%s\", \"timings\": {\"prompt_ms\": ", finish_name(reason));
    json_number(stdout, prompt_ms);
    printf(", \"prompt_tps\": ");
    json_number(stdout, prompt_ms > 0 ? (double)prompt->n * 1e3 / prompt_ms : 0.0);
    printf(", \"gen_ms\": ");
    json_number(stdout, gen_ms);
    printf(", \"gen_tps\": ");
    json_number(stdout, gen_ms > 0 ? (double)n_gen_steps * 1e3 / gen_ms : 0.0);
    printf("}}\n");
}

static bool write_out(const npl_buf *b, size_t from)
{
    if (b->len > from && fwrite(b->data + from, 1, b->len - from, stdout) != b->len - from)
        return false;
    return fflush(stdout) == 0;
}

/* The grammar of --format or --grammar (NULL with a message when refused). */
static npl_grammar *load_grammar(const options *o, npl_error *err)
{
    if (o->format && !strcmp(o->format, "json"))
        return npl_grammar_json_any(err);
    const char *path = o->format ? o->format : o->grammar;
    char *arg = malloc(strlen(path) + 2);
    if (!arg) {
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    arg[0] = '@';
    strcpy(arg + 1, path);
    char *text = run_messages_read(arg);
    free(arg);
    if (!text) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "cannot read %s", path);
        return NULL;
    }
    npl_grammar *g = o->format ? npl_grammar_compile_schema(text, strlen(text), err)
                               : npl_grammar_compile_text(text, strlen(text), err);
    free(text);
    return g;
}

/* One generation's state, from the prompt to the printed result. */
typedef struct gen_run {
    npl_tokens prompt;
    npl_seq *seq;
    npl_sampler *sampler;
    npl_stream *stream;
    gen_token *toks;
    size_t n_toks;
    int32_t *top_ids;
    float *top_lp;
    npl_buf text;
    npl_grammar *grammar;
    npl_vocab_index *vocab;
    npl_grammar_matcher *matcher;
    npl_finish_reason reason;
    double prompt_ms, gen_ms;
} gen_run;

static void gen_run_free(gen_run *g)
{
    npl_grammar_matcher_free(g->matcher);
    npl_vocab_index_free(g->vocab);
    npl_grammar_free(g->grammar);
    npl_buf_free(&g->text);
    free(g->toks);
    free(g->top_ids);
    free(g->top_lp);
    npl_stream_free(g->stream);
    npl_sampler_free(g->sampler);
    npl_seq_free(g->seq);
    npl_tokens_free(&g->prompt);
}

/* The KV cache sized to the prompt and --max-tokens, the sampler (held
 * to the grammar, when one was given) and the output stream, and room for
 * the generated tokens. 0, or the exit code after a message. */
static int gen_setup(const options *o, npl_model *m, gen_run *g, npl_error *err)
{
    g->seq = npl_seq_create(m, o->ctx, err);
    if (!g->seq)
        return fail(exit_code_for(err->code), "%s", err->message);
    uint32_t n_ctx = npl_seq_n_ctx(g->seq);
    if (g->prompt.n > n_ctx || o->max_tokens > n_ctx - g->prompt.n)
        return fail(EXIT_RUNTIME, "context overflow: %zu prompt tokens + %u to generate exceed the context of %u tokens",
                    g->prompt.n, o->max_tokens, n_ctx);
    g->sampler = npl_sampler_create(&o->sp, npl_model_get_info(m)->n_vocab, err);
    g->stream = g->sampler ? npl_stream_create(m, o->stops, o->n_stops, o->max_tokens, err) : NULL;
    if (!g->sampler || !g->stream)
        return fail(exit_code_for(err->code), "%s", err->message);
    g->toks = calloc(o->max_tokens, sizeof *g->toks);
    if (o->top_logprobs) {
        g->top_ids = calloc((size_t)o->max_tokens * o->top_logprobs, sizeof *g->top_ids);
        g->top_lp = calloc((size_t)o->max_tokens * o->top_logprobs, sizeof *g->top_lp);
    }
    if (!g->toks || (o->top_logprobs && (!g->top_ids || !g->top_lp)))
        return fail(EXIT_RUNTIME, "out of memory for %u generated tokens", o->max_tokens);
    if (g->grammar) {
        g->vocab = npl_vocab_index_create(npl_model_tokenizer(m), err);
        g->matcher = g->vocab ? npl_grammar_matcher_create(g->grammar, g->vocab, err) : NULL;
        if (!g->matcher || npl_sampler_set_grammar(g->sampler, g->matcher, err))
            return fail(exit_code_for(err->code), "%s", err->message);
    }
    for (size_t i = 0; i < g->prompt.n; i++)
        npl_sampler_accept(g->sampler, g->prompt.ids[i]);
    return 0;
}

/* Samples, streams (without --json: writes as it goes) and decodes until
 * the stream finishes or --max-tokens. 0, or the exit code after a
 * message. */
static int gen_decode(const options *o, npl_model *m, gen_run *g, npl_error *err)
{
    uint32_t n_vocab = npl_model_get_info(m)->n_vocab;
    g->reason = NPL_FINISH_NONE;
    while (g->reason == NPL_FINISH_NONE && g->n_toks < o->max_tokens) {
        const float *logits = npl_seq_logits(g->seq);
        gen_token *gt = &g->toks[g->n_toks];
        gt->top_ids = g->top_ids + g->n_toks * o->top_logprobs;
        gt->top_lp = g->top_lp + g->n_toks * o->top_logprobs;
        if (o->top_logprobs)
            gt->n_top = npl_top_logprobs(logits, n_vocab, o->top_logprobs, gt->top_ids, gt->top_lp);
        gt->id = npl_sampler_sample(g->sampler, logits);
        if (gt->id < 0) {
            /* the grammar allows nothing more: complete without an end token */
            if (g->matcher && npl_grammar_matcher_is_complete(g->matcher)) {
                g->reason = NPL_FINISH_STOP;
                break;
            }
            return fail(EXIT_RUNTIME, "the grammar allows no token of this vocabulary here");
        }
        g->n_toks++;

        size_t before = g->text.len;
        g->reason = npl_stream_push(g->stream, gt->id, &g->text, err);
        if (err->code != NPL_OK)
            return fail(EXIT_RUNTIME, "%s", err->message);
        if (!o->json && !write_out(&g->text, before))
            return fail(EXIT_RUNTIME, "cannot write the output: %s", strerror(errno));
        if (g->reason == NPL_FINISH_NONE && g->n_toks < o->max_tokens && npl_decode(m, &g->seq, &gt->id, 1, err))
            return fail(EXIT_RUNTIME, "%s", err->message);
    }
    if (g->reason == NPL_FINISH_NONE)
        g->reason = NPL_FINISH_LENGTH;
    return 0;
}

/* The prompt through prefill, then the generation; the stream's rest,
 * then the result (the text's rest, or --json's whole record). */
static int gen_generate(const options *o, npl_model *m, gen_run *g, npl_error *err)
{
    double t0 = now_ms();
    if (npl_prefill(m, g->seq, g->prompt.ids, g->prompt.n, 0, NULL, err))
        return fail(EXIT_RUNTIME, "%s", err->message);
    double t1 = now_ms();
    int rc = gen_decode(o, m, g, err);
    if (rc)
        return rc;
    size_t before = g->text.len;
    if (npl_stream_finish(g->stream, &g->text, err))
        return fail(EXIT_RUNTIME, "%s", err->message);
    g->prompt_ms = t1 - t0;
    g->gen_ms = now_ms() - t1;
    if (o->json) {
        print_json_result(o, m, &g->prompt, g->toks, g->n_toks, &g->text, g->reason, g->prompt_ms, g->gen_ms);
        if (fflush(stdout) != 0)
            return fail(EXIT_RUNTIME, "cannot write the output: %s", strerror(errno));
        return 0;
    }
    if (!write_out(&g->text, before))
        return fail(EXIT_RUNTIME, "cannot write the output: %s", strerror(errno));
    if (isatty(STDOUT_FILENO))
        putchar('\n');
    return 0;
}

/* The grammar and the prompt (--print-prompt stops there), then
 * gen_setup and gen_generate. */
static int run_generate(const options *o, npl_model *m)
{
    npl_error err;
    npl_error_clear(&err);
    gen_run g = {0};
    int rc = 0;
    char *prompt_text = NULL;
    if ((o->format || o->grammar) && !(g.grammar = load_grammar(o, &err)))
        rc = fail(EXIT_USAGE, "%s", err.message);
    else if (build_prompt(o, m, &g.prompt, o->print_prompt ? &prompt_text : NULL, &err))
        rc = fail(exit_code_for(err.code), "%s", err.message);
    else if (o->print_prompt)
        print_prompt(o, &g.prompt, prompt_text);
    else if (g.prompt.n == 0)
        rc = fail(EXIT_USAGE, "the prompt is empty after tokenization");
    else if (!(rc = gen_setup(o, m, &g, &err)))
        rc = gen_generate(o, m, &g, &err);
    free(prompt_text);
    gen_run_free(&g);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        free(o.stops);
        free(o.embed);
        free(o.docs);
        return rc < 0 ? 0 : rc;
    }
    if (o.tokenize) {
        rc = run_tokenize(&o);
        free(o.stops);
        free(o.embed);
        free(o.docs);
        return rc;
    }

    npl_model_params mp;
    npl_model_params_default(&mp);
    mp.n_threads = o.threads;
    if (o.prefill_chunk)
        mp.prefill_chunk = o.prefill_chunk;
    mp.kv_type = o.kv_type;
    mp.device = o.device;
    mp.weight_cache_dir = o.weight_cache;
    if (o.weight_cache) /* past a file size limit: EFBIG, the cache skipped, not a SIGXFSZ death */
        signal(SIGXFSZ, SIG_IGN);
    npl_error err;
    npl_error_clear(&err);
    npl_model *m = npl_model_load(o.model, &mp, &err);
    if (!m) {
        rc = fail(exit_code_for(err.code), "%s", err.message);
        free(o.stops);
        free(o.embed);
        free(o.docs);
        return rc;
    }
    if (o.weight_cache) {
        npl_weight_cache_stats wc;
        npl_model_weight_cache_stats(m, &wc);
        if (wc.note[0])
            fprintf(stderr, "npullm-run: %s\n", wc.note);
    }
    if (o.info)
        rc = run_info(&o, m);
    else if (o.n_embed)
        rc = run_embed(m, o.embed, o.n_embed, &o.embed_opts, o.json);
    else if (o.rerank)
        rc = run_rerank(m, o.rerank, o.docs, o.n_docs, o.embed_opts.truncate, o.json);
    else if (npl_model_is_reranker(m))
        rc = fail(EXIT_USAGE, "%s is a reranker: it scores documents, not text (use --rerank)", o.model);
    else if (npl_model_is_embedding(m))
        rc = fail(EXIT_USAGE, "%s is an embedding model: it makes vectors, not text (use --embed)", o.model);
    else
        rc = run_generate(&o, m);
    if (o.weight_cache && npl_model_weight_cache_wait(m)) {
        npl_weight_cache_stats wc;
        npl_model_weight_cache_stats(m, &wc);
        fprintf(stderr, "npullm-run: %s\n", wc.note);
    }
    npl_model_free(m);
    free(o.stops);
    free(o.embed);
    free(o.docs);
    return rc;
}
