/* npullm-run --rerank (tools/run-rerank.h). */
#include "run-rerank.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run-embed.h"

int run_rerank(npl_model *m, const char *query, const char *const *docs, size_t n, bool truncate, bool json)
{
    float *scores = malloc((n ? n : 1) * sizeof *scores);
    if (!scores) {
        fprintf(stderr, "npullm-run: out of memory for %zu scores\n", n);
        return 1;
    }
    npl_rerank_options opts;
    npl_rerank_options_default(&opts);
    opts.truncate = truncate;
    npl_error err;
    npl_error_clear(&err);
    npl_embed_info info;
    npl_status st = npl_rerank(m, query, docs, n, scores, &opts, &info, &err);
    if (st) {
        fprintf(stderr, "npullm-run: %s\n", err.message);
        free(scores);
        return st == NPL_ERR_NOMEM || st == NPL_ERR_INTERNAL ? 1 : 2;
    }
    if (json) {
        printf("{\"model\":");
        run_print_json_string(npl_model_get_info(m)->name);
        printf(",\"tokens\":%zu,\"truncated\":%zu,\"scores\":[", info.n_tokens, info.n_truncated);
    }
    for (size_t i = 0; i < n; i++)
        printf(json ? "%s%.9g" : "%s%.7g\n", json && i ? "," : "", (double)scores[i]);
    if (json)
        puts("]}");
    free(scores);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "npullm-run: cannot write the output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}
