/* npullm-bench --embed (bench_embed.h). The texts are made of common
 * English words that are one WordPiece token each, 126 of them, so with
 * [CLS] and [SEP] each text is 128 tokens (checked: the count is printed
 * from what the engine tokenized). Texts differ from one another. */
#include "bench_embed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "npullm.h"

#define WORDS_PER_TEXT 126
#define MAX_BATCH 64

static const char *const words[] = {"the", "of", "and", "to", "in", "is", "was", "for", "on", "that",
                                    "with", "as", "by", "at", "from", "his", "it", "an", "were", "are"};
#define N_WORDS (sizeof words / sizeof words[0])

static char *make_text(unsigned seed)
{
    char *t = malloc(WORDS_PER_TEXT * 8 + 1), *p = t;
    if (!t)
        return NULL;
    for (unsigned i = 0; i < WORDS_PER_TEXT; i++) {
        seed = seed * 1103515245u + 12345u;
        p += sprintf(p, "%s%s", i ? " " : "", words[(seed >> 16) % N_WORDS]);
    }
    return t;
}

int bench_embed(const char *model, int n_threads, long reps, bool json)
{
    static const size_t batches[] = {1, 16, 64};
    npl_error err;
    npl_error_clear(&err);
    double t0 = bench_now_s();
    npl_model *m = bench_load_model(model, n_threads, 0, &err);
    if (!m) {
        fprintf(stderr, "npullm-bench: %s\n", err.message);
        return 1;
    }
    double load_s = bench_now_s() - t0;
    int rc = 1;
    char *texts[MAX_BATCH] = {0};
    uint32_t dim = npl_model_embedding_dim(m);
    float *out = malloc((size_t)MAX_BATCH * (dim ? dim : 1) * sizeof *out);
    for (unsigned i = 0; i < MAX_BATCH; i++)
        if (!(texts[i] = make_text(i + 1)))
            goto done;
    if (!out)
        goto done;
    npl_embed_info info;
    t0 = bench_now_s();
    if (npl_embed(m, (const char *const *)texts, NULL, MAX_BATCH, NULL, out, &info, &err)) {
        fprintf(stderr, "npullm-bench: %s\n", err.message);
        goto done;
    }
    double warm_s = bench_now_s() - t0;
    size_t tokens_per_text = info.n_tokens / MAX_BATCH;
    if (json)
        printf("{\"model\": \"%s\", \"load_s\": %.3f, \"warmup_s\": %.3f, \"tokens_per_text\": %zu, \"batches\": [",
               npl_model_get_info(m)->name, load_s, warm_s, tokens_per_text);
    else
        printf("%s: %u dimensions, %zu tokens per text, load %.2f s, warm-up (%d texts) %.2f s\n",
               npl_model_get_info(m)->name, dim, tokens_per_text, load_s, MAX_BATCH, warm_s);
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
        size_t b = batches[bi];
        double best = 0, sum = 0;
        for (long r = 0; r < reps; r++) {
            t0 = bench_now_s();
            if (npl_embed(m, (const char *const *)texts, NULL, b, NULL, out, NULL, &err)) {
                fprintf(stderr, "npullm-bench: %s\n", err.message);
                goto done;
            }
            double tps = (double)b / (bench_now_s() - t0);
            sum += tps;
            if (tps > best)
                best = tps;
        }
        double mean = sum / (double)reps;
        if (json)
            printf("%s{\"batch\": %zu, \"texts_per_s\": %.2f, \"best_texts_per_s\": %.2f, \"tokens_per_s\": %.1f}",
                   bi ? ", " : "", b, mean, best, mean * (double)tokens_per_text);
        else
            printf("  batch %2zu: %8.2f texts/s (best %8.2f), %9.1f tokens/s\n", b, mean, best,
                   mean * (double)tokens_per_text);
    }
    if (json)
        printf("]}\n");
    rc = 0;
done:
    for (unsigned i = 0; i < MAX_BATCH; i++)
        free(texts[i]);
    free(out);
    npl_model_free(m);
    return rc;
}
