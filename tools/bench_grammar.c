/* npullm-bench --grammar: what constrained output costs.
 *  - mask: the time of one token mask (npl_grammar_matcher_mask) per step
 *    while random allowed tokens spell outputs of a nested JSON Schema (half
 *    of the picks among the allowed one-byte tokens, so strings end and the
 *    outputs visit the whole schema), a fresh matcher (empty mask cache)
 *    per output, on the tokenizer of --vocab (e.g. Gemma 3's 262k tokens)
 *    or of the model;
 *  - decode: greedy generation of N tokens with the grammar and without,
 *    in alternating rounds (tokens/s each, and their ratio). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_grammar.h"
#include "bench_common.h"
#include "gguf.h"
#include "grammar.h"
#include "npullm.h"
#include "tokenizer.h"

#define MASK_OUTPUTS 12

static const char NESTED_SCHEMA[] =
    "{\"$defs\":{\"item\":{\"type\":\"object\",\"properties\":{"
    "\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
    "\"name\":{\"type\":\"string\",\"maxLength\":40},"
    "\"when\":{\"type\":\"string\",\"format\":\"date-time\"},"
    "\"price\":{\"type\":\"number\",\"minimum\":0,\"maximum\":10000},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"new\",\"used\",\"refurbished\"]},\"maxItems\":3},"
    "\"notes\":{\"type\":[\"string\",\"null\"]}},"
    "\"required\":[\"id\",\"name\",\"when\",\"price\",\"tags\"],\"additionalProperties\":false}},"
    "\"type\":\"object\",\"properties\":{"
    "\"order\":{\"type\":\"integer\",\"minimum\":1},"
    "\"customer\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
    "\"email\":{\"type\":\"string\",\"pattern\":\"^[a-z0-9.]+@[a-z0-9]+\\\\.[a-z]{2,4}$\"}},"
    "\"required\":[\"name\",\"email\"],\"additionalProperties\":false},"
    "\"items\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/item\"},\"minItems\":1,\"maxItems\":4}},"
    "\"required\":[\"order\",\"customer\",\"items\"],\"additionalProperties\":false}";

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The k-th allowed id of a mask. */
static int32_t kth_allowed(const uint32_t *mask, uint32_t n_vocab, size_t k)
{
    for (uint32_t w = 0; w < (n_vocab + 31) / 32; w++) {
        size_t c = (size_t)__builtin_popcount(mask[w]);
        if (k >= c) {
            k -= c;
            continue;
        }
        for (uint32_t b = 0; b < 32; b++)
            if (((mask[w] >> b) & 1) && k-- == 0)
                return (int32_t)(w * 32 + b);
    }
    return -1;
}

static int bench_mask(const npl_tokenizer *tok, const npl_grammar *g, bool json)
{
    npl_error err = {0};
    double t0 = bench_now_s();
    npl_vocab_index *vi = npl_vocab_index_create(tok, &err);
    double t_index = bench_now_s() - t0;
    if (!vi) {
        fprintf(stderr, "npullm-bench: %s\n", err.message);
        return 1;
    }
    uint32_t nv = npl_vocab_index_n_vocab(vi);
    size_t words = ((size_t)nv + 31) / 32;
    uint32_t *mask = malloc(words * sizeof *mask), *short_mask = calloc(words, sizeof *short_mask);
    uint32_t *one_byte = calloc(words, sizeof *one_byte);
    for (uint32_t id = 0; one_byte && id < nv; id++)
        if (npl_token_to_bytes(tok, (int32_t)id, false, NULL, 0) == 1)
            one_byte[id >> 5] |= 1u << (id & 31);
    size_t cap = 1u << 16, n = 0;
    double *steps = malloc(cap * sizeof *steps);
    double t_matcher = 0;
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    size_t outputs = 0, complete = 0;
    for (int o = 0; o < MASK_OUTPUTS && mask && steps && short_mask && one_byte; o++) {
        double tm = bench_now_s();
        npl_grammar_matcher *m = npl_grammar_matcher_create(g, vi, &err);
        t_matcher += bench_now_s() - tm;
        if (!m)
            break;
        for (int k = 0; k < 4000 && n < cap; k++) {
            double ts = bench_now_s();
            size_t allowed = npl_grammar_matcher_mask(m, mask);
            steps[n++] = bench_now_s() - ts;
            if (!allowed)
                break;
            size_t n_short = 0;
            for (size_t w = 0; w < words; w++) {
                short_mask[w] = mask[w] & one_byte[w];
                n_short += (size_t)__builtin_popcount(short_mask[w]);
            }
            uint64_t r = next_rand(&rng);
            int32_t id = (r & 1) && n_short ? kth_allowed(short_mask, nv, (r >> 1) % n_short)
                                            : kth_allowed(mask, nv, (r >> 1) % allowed);
            if (!npl_grammar_matcher_accept_token(m, id)) {
                fprintf(stderr, "npullm-bench: the mask allowed token %d that the matcher refuses\n", id);
                break;
            }
            if (npl_grammar_matcher_is_finished(m)) {
                complete++;
                break;
            }
        }
        outputs++;
        npl_grammar_matcher_free(m);
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += steps[i];
    qsort(steps, n, sizeof *steps, cmp_double);
    double mean = n ? sum / (double)n : 0, p50 = n ? steps[n / 2] : 0, p90 = n ? steps[n * 9 / 10] : 0,
           p99 = n ? steps[n * 99 / 100] : 0, max = n ? steps[n - 1] : 0;
    if (json)
        printf("\"mask\": {\"n_vocab\": %u, \"index_ms\": %.1f, \"matcher_create_ms\": %.2f, \"outputs\": %zu, "
               "\"complete\": %zu, \"steps\": %zu, \"mean_ms\": %.4f, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"max_ms\": %.4f}",
               nv, t_index * 1e3, outputs ? t_matcher * 1e3 / (double)outputs : 0, outputs, complete, n, mean * 1e3,
               p50 * 1e3, p90 * 1e3, p99 * 1e3, max * 1e3);
    else
        printf("mask         %u-token vocabulary: index %.0f ms once, matcher %.1f ms per output; "
               "%zu steps over %zu outputs (%zu complete): mean %.3f ms, p50 %.3f, p90 %.3f, p99 %.3f, max %.3f ms\n",
               nv, t_index * 1e3, outputs ? t_matcher * 1e3 / (double)outputs : 0, n, outputs, complete, mean * 1e3,
               p50 * 1e3, p90 * 1e3, p99 * 1e3, max * 1e3);
    free(steps);
    free(mask);
    free(short_mask);
    free(one_byte);
    npl_vocab_index_free(vi);
    return 0;
}

/* Greedy decode of n tokens; with a matcher, under its grammar (restarted
 * whenever an output ends). Returns tokens/s, < 0 on failure. */
static double decode_run(npl_model *m, npl_grammar_matcher *gm, long n)
{
    npl_error err = {0};
    const npl_model_info *info = npl_model_get_info(m);
    npl_sampler_params sp;
    npl_sampler_params_default(&sp);
    sp.temperature = 0;
    npl_sampler *s = npl_sampler_create(&sp, info->n_vocab, &err);
    npl_seq *seq = npl_seq_create(m, (uint32_t)n + 64, &err);
    if (!s || !seq || (gm && npl_sampler_set_grammar(s, gm, &err))) {
        npl_sampler_free(s);
        npl_seq_free(seq);
        return -1;
    }
    int32_t prompt[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    double rate = -1;
    if (npl_prefill(m, seq, prompt, 8, 0, NULL, &err) == NPL_OK) {
        double t0 = bench_now_s();
        long i = 0;
        for (; i < n; i++) {
            int32_t id = npl_sampler_sample(s, npl_seq_logits(seq));
            if (id < 0 && gm) {
                npl_grammar_matcher_reset(gm);
                id = npl_sampler_sample(s, npl_seq_logits(seq));
            }
            if (id < 0 || npl_decode(m, &seq, &id, 1, &err))
                break;
            if (gm && npl_grammar_matcher_is_finished(gm))
                npl_grammar_matcher_reset(gm);
        }
        if (i == n)
            rate = (double)n / (bench_now_s() - t0);
    }
    npl_sampler_free(s);
    npl_seq_free(seq);
    return rate;
}

int bench_grammar(const bench_grammar_opts *o)
{
    npl_error err = {0};
    npl_grammar *g = npl_grammar_compile_schema(NESTED_SCHEMA, strlen(NESTED_SCHEMA), &err);
    if (!g) {
        fprintf(stderr, "npullm-bench: %s\n", err.message);
        return 1;
    }
    npl_model *m = NULL;
    if (o->model) {
        m = bench_load_model(o->model, o->n_threads, 0, &err);
        if (!m) {
            fprintf(stderr, "npullm-bench: cannot load the model: %s\n", err.message);
            npl_grammar_free(g);
            return 1;
        }
    }
    if (o->json)
        printf("{");
    int rc = 0;
    npl_gguf *vg = NULL;
    npl_tokenizer *vt = NULL;
    const npl_tokenizer *tok = m ? npl_model_tokenizer(m) : NULL;
    if (o->vocab) {
        vg = npl_gguf_open(o->vocab, &err);
        vt = vg ? npl_tokenizer_from_gguf(vg, &err) : NULL;
        tok = vt;
        if (!vt) {
            fprintf(stderr, "npullm-bench: %s: %s\n", o->vocab, err.message);
            rc = 1;
        }
    }
    if (!rc && tok)
        rc = bench_mask(tok, g, o->json);
    if (!rc && m && o->n > 0) {
        npl_vocab_index *vi = npl_vocab_index_create(npl_model_tokenizer(m), &err);
        if (o->json)
            printf("%s\"decode\": {\"tokens\": %ld, \"rounds\": [", tok ? ", " : "", o->n);
        else
            printf("decode       %ld greedy tokens per run, nested schema vs free, alternating rounds:\n", o->n);
        for (long r = 0; r < o->reps && vi; r++) {
            double freer = decode_run(m, NULL, o->n);
            npl_grammar_matcher *gm = npl_grammar_matcher_create(g, vi, &err);
            double con = gm ? decode_run(m, gm, o->n) : -1;
            npl_grammar_matcher_free(gm);
            if (freer < 0 || con < 0) {
                fprintf(stderr, "npullm-bench: a decode run failed\n");
                rc = 1;
                break;
            }
            if (o->json)
                printf("%s{\"free\": %.2f, \"grammar\": %.2f}", r ? ", " : "", freer, con);
            else
                printf("  round %ld: free %.2f tok/s, grammar %.2f tok/s, ratio %.3f\n", r + 1, freer, con,
                       con / freer);
        }
        if (o->json)
            printf("]}");
        npl_vocab_index_free(vi);
    }
    if (o->json)
        printf("}\n");
    npl_tokenizer_free(vt);
    npl_gguf_close(vg);
    npl_model_free(m);
    npl_grammar_free(g);
    return rc;
}
