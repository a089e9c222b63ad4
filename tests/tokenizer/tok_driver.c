/* Tokenizes texts with our tokenizer, for the exactness gate.
 *
 *   tok_driver MODEL.gguf [--add-bos] [--parse-special]
 *
 * stdin: one text per line, hex encoded; stdout: one line per text with
 * the ids separated by spaces. stderr: build time and throughput.
 *
 *   tok_driver MODEL.gguf --pieces
 *
 * prints, for every token id, npl_token_to_bytes without and with special
 * tokens rendered (hex, "-" when empty) and npl_tokenizer_is_eog. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "npl_test.h"
#include "tokenizer.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void print_hex(const char *p, size_t n)
{
    if (n == 0)
        printf("-");
    for (size_t i = 0; i < n; i++)
        printf("%02x", (unsigned char)p[i]);
}

static int print_pieces(const npl_tokenizer *tok)
{
    char buf[512];
    for (int32_t id = 0; id < npl_tokenizer_n_vocab(tok); id++) {
        for (int special = 0; special < 2; special++) {
            size_t full = npl_token_to_bytes(tok, id, special, NULL, 0);
            size_t k = npl_token_to_bytes(tok, id, special, buf, sizeof buf);
            if (full > sizeof buf || k != full) {
                fprintf(stderr, "tok_driver: piece of %d: length %zu, wrote %zu\n", id, full, k);
                return 1;
            }
            print_hex(buf, k);
            printf(" ");
        }
        printf("%d\n", npl_tokenizer_is_eog(tok, id) ? 1 : 0);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tok_driver MODEL.gguf [--add-bos] [--parse-special]\n");
        return 2;
    }
    unsigned flags = 0;
    bool pieces = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--add-bos"))
            flags |= NPL_TOKENIZE_ADD_BOS;
        else if (!strcmp(argv[i], "--parse-special"))
            flags |= NPL_TOKENIZE_PARSE_SPECIAL;
        else if (!strcmp(argv[i], "--pieces"))
            pieces = true;
    }

    npl_error err = {0};
    npl_gguf *g = npl_gguf_open(argv[1], &err);
    if (!g) {
        fprintf(stderr, "tok_driver: %s\n", err.message);
        return 1;
    }
    double t0 = now_s();
    npl_tokenizer *tok = npl_tokenizer_from_gguf(g, &err);
    double t_build = now_s() - t0;
    if (!tok) {
        fprintf(stderr, "tok_driver: %s\n", err.message);
        return 1;
    }

    if (pieces) {
        int prc = print_pieces(tok);
        npl_tokenizer_free(tok);
        npl_gguf_close(g);
        return prc;
    }

    size_t cap = 0, bytes = 0;
    char *line = NULL;
    ssize_t got;
    double t_tok = 0;
    npl_tokens out = {0};
    int rc = 0;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        long decoded = nt_unhex(line, (size_t)got);
        if (decoded < 0) {
            fprintf(stderr, "tok_driver: bad hex input\n");
            return 1;
        }
        size_t n = (size_t)decoded;
        out.n = 0;
        double t1 = now_s();
        npl_status st = npl_tokenize(tok, line, n, flags, &out, &err);
        t_tok += now_s() - t1;
        bytes += n;
        if (st != NPL_OK) {
            printf("ERROR %s\n", err.message);
            rc = 1;
            continue;
        }
        for (size_t i = 0; i < out.n; i++)
            printf(i ? " %d" : "%d", out.ids[i]);
        printf("\n");
    }
    fprintf(stderr, "tok_driver: %s (%s, %d tokens): build %.1f ms, tokenized %zu bytes in %.1f ms\n", argv[1],
            npl_tokenizer_kind_name(tok), npl_tokenizer_n_vocab(tok), t_build * 1e3, bytes, t_tok * 1e3);
    npl_tokens_free(&out);
    free(line);
    npl_tokenizer_free(tok);
    npl_gguf_close(g);
    return rc;
}
