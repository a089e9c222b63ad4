/* embd-probe: feeds a sequence made of token runs and embedding blocks to
 * the engine and writes the logits it computes, for comparison with
 * tests/gemma3/reference.py.
 *
 *   embd-probe MODEL SCRIPT OUT [--prefill-chunk N] [--threads N] [--ctx N]
 *
 * SCRIPT lines (one sequence, in order):
 *   tokens ID...               npl_prefill of these ids
 *   embd FILE ROWS causal|bidir  npl_prefill_embeddings of ROWS rows of
 *                              n_embd little-endian floats from FILE
 *   decode ID...               one npl_decode per id
 * After every tokens or embd line and after every decoded id, the
 * sequence's logits (n_vocab floats) are appended to OUT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npullm.h"
#include "tokenizer.h"

static int die(const char *msg, const char *detail)
{
    fprintf(stderr, "embd-probe: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static int parse_ids(char *rest, npl_tokens *ids)
{
    ids->n = 0;
    for (char *t = strtok(rest, " \t\r\n"); t; t = strtok(NULL, " \t\r\n")) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 0 || v > INT32_MAX || npl_tokens_push(ids, (int32_t)v, NULL))
            return -1;
    }
    return ids->n ? 0 : -1;
}

static float *read_rows(const char *path, size_t rows, size_t n_embd)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    float *buf = malloc(rows * n_embd * sizeof *buf);
    size_t got = buf ? fread(buf, sizeof *buf, rows * n_embd, f) : 0;
    fclose(f);
    if (got != rows * n_embd) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int write_logits(FILE *out, const npl_seq *s, uint32_t n_vocab)
{
    const float *lg = npl_seq_logits(s);
    if (!lg)
        return die("no logits", NULL);
    if (fwrite(lg, sizeof *lg, n_vocab, out) != n_vocab)
        return die("cannot write the logits", NULL);
    return 0;
}

static int run_line(npl_model *m, npl_seq *s, char *line, FILE *out, npl_tokens *ids)
{
    const npl_model_info *info = npl_model_get_info(m);
    npl_error err;
    char *cmd = strtok(line, " \t\r\n");
    char *rest = cmd ? cmd + strlen(cmd) + 1 : NULL;
    if (!cmd || cmd[0] == '#')
        return 0;
    if (!strcmp(cmd, "tokens")) {
        if (parse_ids(rest, ids))
            return die("bad tokens line", NULL);
        if (npl_prefill(m, s, ids->ids, ids->n, 0, NULL, &err))
            return die("prefill failed", err.message);
        return write_logits(out, s, info->n_vocab);
    }
    if (!strcmp(cmd, "decode")) {
        if (parse_ids(rest, ids))
            return die("bad decode line", NULL);
        for (size_t i = 0; i < ids->n; i++) {
            if (npl_decode(m, &s, &ids->ids[i], 1, &err))
                return die("decode failed", err.message);
            if (write_logits(out, s, info->n_vocab))
                return 1;
        }
        return 0;
    }
    if (!strcmp(cmd, "embd")) {
        char *path = strtok(rest, " \t\r\n");
        char *rows_s = strtok(NULL, " \t\r\n");
        char *mode = strtok(NULL, " \t\r\n");
        long rows = rows_s ? strtol(rows_s, NULL, 10) : 0;
        if (!path || rows <= 0 || !mode || (strcmp(mode, "causal") && strcmp(mode, "bidir")))
            return die("bad embd line", NULL);
        float *e = read_rows(path, (size_t)rows, info->n_embd);
        if (!e)
            return die("cannot read the embeddings", path);
        npl_status st = npl_prefill_embeddings(m, s, e, (size_t)rows, !strcmp(mode, "bidir"), &err);
        free(e);
        if (st)
            return die("embedding prefill failed", err.message);
        return write_logits(out, s, info->n_vocab);
    }
    return die("unknown script command", cmd);
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return die("usage: embd-probe MODEL SCRIPT OUT [--prefill-chunk N] [--threads N] [--ctx N]", NULL);
    npl_model_params mp;
    npl_model_params_default(&mp);
    uint32_t n_ctx = 1024;
    for (int i = 4; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--prefill-chunk") && v > 0)
            mp.prefill_chunk = (uint32_t)v;
        else if (!strcmp(argv[i], "--threads") && v >= 0)
            mp.n_threads = (int)v;
        else if (!strcmp(argv[i], "--ctx") && v > 0)
            n_ctx = (uint32_t)v;
        else
            return die("bad option", argv[i]);
    }
    npl_error err;
    npl_model *m = npl_model_load(argv[1], &mp, &err);
    if (!m)
        return die(err.message, NULL);
    npl_seq *s = npl_seq_create(m, n_ctx, &err);
    FILE *script = fopen(argv[2], "r");
    FILE *out = fopen(argv[3], "wb");
    int rc = !s ? die(err.message, NULL) : !script ? die("cannot open", argv[2]) : !out ? die("cannot open", argv[3]) : 0;
    npl_tokens ids = {0};
    char line[1 << 16];
    while (!rc && script && fgets(line, sizeof line, script))
        rc = run_line(m, s, line, out, &ids);
    if (out && fclose(out) && !rc)
        rc = die("cannot write", argv[3]);
    if (script)
        fclose(script);
    npl_tokens_free(&ids);
    npl_seq_free(s);
    npl_model_free(m);
    return rc;
}
