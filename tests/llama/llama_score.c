/* llama-score: teacher-forced scoring for the correctness gate.
 *
 *   llama-score MODEL REQUESTS [--top K] [--threads N] [--prefill-chunk N] [--ctx N]
 *
 * Each line of REQUESTS is "PROMPT_IDS | FORCED_IDS" (space-separated
 * token ids). For every request the prompt is prefilled, then the forced
 * tokens are fed one by one; the output (one JSON line per request) holds
 * the top-K log-probabilities before each forced token: step i is the
 * distribution after the prompt and forced[0..i). All requests advance
 * together through batched decode steps.
 *
 *   llama-score MODEL --vocab-hex
 *
 * prints the bytes of every token id (hex, one line per id), so the gate
 * can tell which tokens are not valid UTF-8 on their own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "npullm.h"
#include "tokenizer.h"

typedef struct request {
    npl_tokens prompt;
    npl_tokens forced;
    npl_seq *seq;
    float *lp;   /* forced.n * top */
    int32_t *ids;
    size_t *n_top;
} request;

static int die(const char *msg, const char *detail)
{
    fprintf(stderr, "llama-score: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static int print_vocab(const char *path)
{
    npl_error err;
    npl_gguf *g = npl_gguf_open(path, &err);
    if (!g)
        return die(err.message, NULL);
    npl_tokenizer *tok = npl_tokenizer_from_gguf(g, &err);
    if (!tok)
        return die(err.message, NULL);
    char buf[512];
    for (int32_t id = 0; id < npl_tokenizer_n_vocab(tok); id++) {
        size_t n = npl_token_to_bytes(tok, id, true, buf, sizeof buf);
        if (n > sizeof buf)
            n = sizeof buf;
        for (size_t i = 0; i < n; i++)
            printf("%02x", (unsigned char)buf[i]);
        putchar('\n');
    }
    npl_tokenizer_free(tok);
    npl_gguf_close(g);
    return 0;
}

static bool parse_line(char *line, request *r)
{
    bool forced = false;
    for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        if (!strcmp(tok, "|")) {
            forced = true;
            continue;
        }
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v < 0 || v > INT32_MAX)
            return false;
        if (npl_tokens_push(forced ? &r->forced : &r->prompt, (int32_t)v, NULL))
            return false;
    }
    return forced && r->prompt.n > 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return die("usage: llama-score MODEL REQUESTS [--top K] [--threads N] [--prefill-chunk N] [--ctx N]", NULL);
    if (!strcmp(argv[2], "--vocab-hex"))
        return print_vocab(argv[1]);
    size_t top = 5;
    npl_model_params mp;
    npl_model_params_default(&mp);
    uint32_t n_ctx = 2048;
    for (int i = 3; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--top") && v > 0 && v <= 100)
            top = (size_t)v;
        else if (!strcmp(argv[i], "--threads") && v >= 0)
            mp.n_threads = (int)v;
        else if (!strcmp(argv[i], "--prefill-chunk") && v > 0)
            mp.prefill_chunk = (uint32_t)v;
        else if (!strcmp(argv[i], "--ctx") && v > 0)
            n_ctx = (uint32_t)v;
        else
            return die("bad option", argv[i]);
    }

    FILE *f = fopen(argv[2], "r");
    if (!f)
        return die("cannot open", argv[2]);
    request *reqs = NULL;
    size_t n_reqs = 0;
    char line[1 << 16];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '\n' || line[0] == '#')
            continue;
        request *grown = realloc(reqs, (n_reqs + 1) * sizeof *reqs);
        if (!grown)
            return die("out of memory", NULL);
        reqs = grown;
        memset(&reqs[n_reqs], 0, sizeof reqs[n_reqs]);
        if (!parse_line(line, &reqs[n_reqs]))
            return die("malformed request line", NULL);
        n_reqs++;
    }
    fclose(f);

    npl_error err;
    npl_error_clear(&err);
    npl_model *m = npl_model_load(argv[1], &mp, &err);
    if (!m)
        return die(err.message, NULL);
    uint32_t n_vocab = npl_model_get_info(m)->n_vocab;

    size_t max_steps = 0;
    for (size_t i = 0; i < n_reqs; i++) {
        request *r = &reqs[i];
        r->seq = npl_seq_create(m, n_ctx, &err);
        r->lp = calloc(r->forced.n * top + 1, sizeof *r->lp);
        r->ids = calloc(r->forced.n * top + 1, sizeof *r->ids);
        r->n_top = calloc(r->forced.n + 1, sizeof *r->n_top);
        if (!r->seq || !r->lp || !r->ids || !r->n_top)
            return die("cannot create a sequence", err.message);
        if (npl_prefill(m, r->seq, r->prompt.ids, r->prompt.n, 0, NULL, &err))
            return die("prefill failed", err.message);
        if (r->forced.n > max_steps)
            max_steps = r->forced.n;
    }

    npl_seq **batch = calloc(n_reqs + 1, sizeof *batch);
    int32_t *toks = calloc(n_reqs + 1, sizeof *toks);
    if (!batch || !toks)
        return die("out of memory", NULL);
    for (size_t step = 0; step < max_steps; step++) {
        size_t nb = 0;
        for (size_t i = 0; i < n_reqs; i++) {
            request *r = &reqs[i];
            if (step >= r->forced.n)
                continue;
            r->n_top[step] = npl_top_logprobs(npl_seq_logits(r->seq), n_vocab, top, r->ids + step * top,
                                              r->lp + step * top);
            if (step + 1 < r->forced.n) {
                batch[nb] = r->seq;
                toks[nb++] = r->forced.ids[step];
            }
        }
        if (nb && npl_decode(m, batch, toks, nb, &err))
            return die("decode failed", err.message);
    }

    for (size_t i = 0; i < n_reqs; i++) {
        request *r = &reqs[i];
        printf("{\"top\": [");
        for (size_t s = 0; s < r->forced.n; s++) {
            printf("%s[", s ? ", " : "");
            for (size_t j = 0; j < r->n_top[s]; j++)
                printf("%s[%d, %.7g]", j ? ", " : "", r->ids[s * top + j], (double)r->lp[s * top + j]);
            printf("]");
        }
        printf("]}\n");
        npl_seq_free(r->seq);
        npl_tokens_free(&r->prompt);
        npl_tokens_free(&r->forced);
        free(r->lp);
        free(r->ids);
        free(r->n_top);
    }
    free(batch);
    free(toks);
    free(reqs);
    npl_model_free(m);
    return 0;
}
