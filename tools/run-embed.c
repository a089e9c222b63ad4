/* npullm-run --embed (tools/run-embed.h). */
#include "run-embed.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void run_print_json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

int run_embed(npl_model *m, const char *const *texts, size_t n, const npl_embed_options *opts, bool json)
{
    uint32_t dim = opts->dimensions ? opts->dimensions : npl_model_embedding_dim(m);
    if (!npl_model_is_embedding(m))
        dim = 1; /* npl_embed says why it refuses */
    float *out = malloc(n * dim * sizeof *out);
    if (!out) {
        fprintf(stderr, "npullm-run: out of memory for %zu vectors\n", n);
        return 1;
    }
    npl_error err;
    npl_error_clear(&err);
    npl_embed_info info;
    npl_status st = npl_embed(m, texts, NULL, n, opts, out, &info, &err);
    if (st) {
        fprintf(stderr, "npullm-run: %s\n", err.message);
        free(out);
        return st == NPL_ERR_NOMEM || st == NPL_ERR_INTERNAL ? 1 : 2;
    }
    if (json) {
        printf("{\"model\":");
        run_print_json_string(npl_model_get_info(m)->name);
        printf(",\"dimensions\":%u,\"pooling\":\"%s\",\"tokens\":%zu,\"truncated\":%zu,\"embeddings\":[", dim,
               npl_model_pooling_name(m), info.n_tokens, info.n_truncated);
    }
    for (size_t i = 0; i < n; i++) {
        if (json)
            printf("%s[", i ? "," : "");
        for (uint32_t j = 0; j < dim; j++)
            printf(json ? "%s%.9g" : "%s%.7g", j ? (json ? "," : " ") : "", (double)out[(size_t)i * dim + j]);
        fputs(json ? "]" : "\n", stdout);
    }
    if (json)
        puts("]}");
    free(out);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "npullm-run: cannot write the output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
