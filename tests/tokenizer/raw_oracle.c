/* Byte-exact access to the llama.cpp tokenizer of the oracle package.
 *
 * tests/oracle/oracle.mjs goes through JavaScript strings, which cannot
 * carry invalid UTF-8 and always parse special tokens. This helper loads
 * the very same llama.cpp build (the @fugood/node-llama-linux-x64 addon,
 * which exports the llama.cpp C API) with dlopen and calls llama_tokenize
 * on raw bytes, with explicit add_special / parse_special.
 *
 *   raw_oracle ADDON.node MODEL.gguf [--add-special] [--parse-special]
 *
 * stdin: one text per line, hex encoded; stdout: one line per text with
 * the ids separated by spaces.
 *
 *   raw_oracle ADDON.node MODEL.gguf --pieces
 *
 * prints, for every token id, its piece without and with special tokens
 * rendered (hex, "-" when empty) and whether it ends generation. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "npl_test.h"

typedef void (*backend_init_fn)(void);
typedef struct llama_model_params (*default_params_fn)(void);
typedef struct llama_model *(*load_fn)(const char *, struct llama_model_params);
typedef const struct llama_vocab *(*get_vocab_fn)(const struct llama_model *);
typedef int32_t (*tokenize_fn)(const struct llama_vocab *, const char *, int32_t, llama_token *, int32_t, bool,
                               bool);
typedef void (*log_set_fn)(ggml_log_callback, void *);
typedef int32_t (*n_tokens_fn)(const struct llama_vocab *);
typedef int32_t (*piece_fn)(const struct llama_vocab *, llama_token, char *, int32_t, int32_t, bool);
typedef bool (*is_eog_fn)(const struct llama_vocab *, llama_token);
typedef void (*model_free_fn)(struct llama_model *);

static void print_hex(const char *p, int32_t n)
{
    if (n <= 0)
        printf("-");
    for (int32_t i = 0; i < n; i++)
        printf("%02x", (unsigned char)p[i]);
}

static void print_pieces(void *lib, const struct llama_vocab *vocab)
{
    n_tokens_fn n_tokens = (n_tokens_fn)dlsym(lib, "llama_vocab_n_tokens");
    piece_fn piece = (piece_fn)dlsym(lib, "llama_token_to_piece");
    is_eog_fn is_eog = (is_eog_fn)dlsym(lib, "llama_vocab_is_eog");
    if (!n_tokens || !piece || !is_eog) {
        fprintf(stderr, "raw_oracle: piece functions not found in the addon\n");
        exit(1);
    }
    char buf[512];
    int32_t n = n_tokens(vocab);
    for (int32_t id = 0; id < n; id++) {
        for (int special = 0; special < 2; special++) {
            int32_t k = piece(vocab, id, buf, sizeof buf, 0, special);
            if (k < 0 || k > (int32_t)sizeof buf) {
                fprintf(stderr, "raw_oracle: piece of %d too long\n", id);
                exit(1);
            }
            print_hex(buf, k);
            printf(" ");
        }
        printf("%d\n", is_eog(vocab, id) ? 1 : 0);
    }
}

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)level;
    (void)text;
    (void)user;
}

static void *need(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "raw_oracle: %s not found in the addon\n", name);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: raw_oracle ADDON.node MODEL.gguf [--add-special] [--parse-special]\n");
        return 2;
    }
    bool add_special = false, parse_special = false, pieces = false;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--add-special"))
            add_special = true;
        else if (!strcmp(argv[i], "--parse-special"))
            parse_special = true;
        else if (!strcmp(argv[i], "--pieces"))
            pieces = true;
    }

    /* Lazy binding: the addon's Node-API imports are never called. */
    void *lib = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "raw_oracle: %s\n", dlerror());
        return 1;
    }
    ((log_set_fn)need(lib, "llama_log_set"))(quiet, NULL);
    ((backend_init_fn)need(lib, "llama_backend_init"))();
    struct llama_model_params mp = ((default_params_fn)need(lib, "llama_model_default_params"))();
    mp.vocab_only = true;
    mp.n_gpu_layers = 0;
    struct llama_model *model = ((load_fn)need(lib, "llama_model_load_from_file"))(argv[2], mp);
    if (!model) {
        fprintf(stderr, "raw_oracle: cannot load %s\n", argv[2]);
        return 1;
    }
    const struct llama_vocab *vocab = ((get_vocab_fn)need(lib, "llama_model_get_vocab"))(model);
    model_free_fn model_free = (model_free_fn)need(lib, "llama_model_free");
    if (pieces) {
        print_pieces(lib, vocab);
        model_free(model);
        return 0;
    }
    tokenize_fn tokenize = (tokenize_fn)need(lib, "llama_tokenize");

    size_t cap = 0;
    char *line = NULL;
    ssize_t got;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        long n = nt_unhex(line, (size_t)got);
        if (n < 0) {
            fprintf(stderr, "raw_oracle: bad hex input\n");
            return 1;
        }
        const char *text = line;
        int32_t max = (int32_t)n * 2 + 8;
        llama_token *ids = malloc((size_t)max * sizeof *ids);
        int32_t k = tokenize(vocab, text, (int32_t)n, ids, max, add_special, parse_special);
        if (k < 0) {
            max = -k;
            ids = realloc(ids, (size_t)max * sizeof *ids);
            k = tokenize(vocab, text, (int32_t)n, ids, max, add_special, parse_special);
        }
        for (int32_t i = 0; i < k; i++)
            printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
        fflush(stdout);
        free(ids);
    }
    free(line);
    model_free(model);
    return 0;
}
