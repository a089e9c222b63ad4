/* The sampler: parameter validation, greedy == argmax, determinism per
 * seed, the sampled distribution against the exact softmax (chi-square),
 * the effect of each filter, repetition penalty, degenerate logits (NaN,
 * infinities, everything impossible) and speed on a 262k vocabulary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npl_test.h"
#include "npullm.h"
#include "sampler_rng.h"


/* ---- helpers ------------------------------------------------------------ */

static npl_sampler_params plain_params(float temperature, uint64_t seed)
{
    npl_sampler_params p;
    npl_sampler_params_default(&p);
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

static npl_sampler *make(const npl_sampler_params *p, uint32_t n_vocab)
{
    npl_error err = {0};
    npl_sampler *s = npl_sampler_create(p, n_vocab, &err);
    CHECKF(s != NULL, "%s", err.message);
    if (!s)
        exit(1);
    return s;
}

static void random_logits(npl_rng *r, float *l, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        l[i] = (float)((npl_rng_next_double(r) * 2.0 - 1.0) * scale);
}

static int32_t argmax(const float *l, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (l[i] > l[best])
            best = i;
    return (int32_t)best;
}

/* Exact softmax of logits / temperature over the allowed ids. */
static void softmax(const float *l, size_t n, float temperature, double *p)
{
    double max = -INFINITY, sum = 0.0;
    for (size_t i = 0; i < n; i++)
        if (l[i] > max)
            max = l[i];
    for (size_t i = 0; i < n; i++) {
        p[i] = exp(((double)l[i] - max) / temperature);
        sum += p[i];
    }
    for (size_t i = 0; i < n; i++)
        p[i] /= sum;
}

/* Pearson chi-square of observed counts against expected probabilities;
 * bins whose expected probability is 0 must stay empty. */
static double chi_square(const unsigned *count, const double *p, size_t n, unsigned total,
                         unsigned *df)
{
    double chi = 0.0;
    *df = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == 0.0) {
            if (count[i] != 0)
                return INFINITY;
            continue;
        }
        double e = p[i] * total;
        chi += ((double)count[i] - e) * ((double)count[i] - e) / e;
        (*df)++;
    }
    if (*df > 0)
        (*df)--;
    return chi;
}

/* 99.9th percentile of chi-square for 1..15 degrees of freedom: with a
 * fixed seed the test is deterministic, the bound only has to be fair. */
static const double CHI2_999[16] = {0,     10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32,
                                    26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70};

static void check_distribution(const char *what, npl_sampler *s, const float *logits, size_t n,
                               const double *expected, unsigned draws)
{
    unsigned count[16] = {0};
    for (unsigned i = 0; i < draws; i++) {
        int32_t id = npl_sampler_sample(s, logits);
        CHECK(id >= 0 && (size_t)id < n);
        if (id >= 0 && (size_t)id < n)
            count[id]++;
    }
    unsigned df;
    double chi = chi_square(count, expected, n, draws, &df);
    CHECKF(df < 16 && chi <= CHI2_999[df], "%s: chi-square %.2f with %u degrees of freedom", what,
           chi, df);
}

/* ---- tests --------------------------------------------------------------- */

static void test_params(void)
{
    npl_sampler_params p;
    npl_sampler_params_default(&p);
    CHECK(p.temperature > 0.0f && p.top_k > 0 && p.top_p <= 1.0f && p.min_p >= 0.0f);
    CHECK(p.repeat_penalty == 1.0f);

    npl_error err = {0};
    CHECK(npl_sampler_create(NULL, 10, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    CHECK(npl_sampler_create(&p, 0, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    npl_sampler_params bad = p;
    bad.temperature = NAN;
    CHECK(npl_sampler_create(&bad, 10, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    bad = p;
    bad.top_p = NAN;
    CHECK(npl_sampler_create(&bad, 10, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    bad = p;
    bad.repeat_penalty = 0.0f;
    CHECK(npl_sampler_create(&bad, 10, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    bad = p;
    bad.repeat_penalty = INFINITY;
    CHECK(npl_sampler_create(&bad, 10, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    bad = p;
    bad.repeat_last_n = 0xffffffffu;
    CHECK(npl_sampler_create(&bad, 10, &err) == NULL && err.code == NPL_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "repeat_last_n") != NULL);

    /* NULL arguments never crash. */
    CHECK(npl_sampler_sample(NULL, NULL) == -1);
    npl_sampler *s = make(&p, 4);
    CHECK(npl_sampler_sample(s, NULL) == -1);
    npl_sampler_accept(s, -5); /* out of range: ignored */
    npl_sampler_accept(s, 4);
    npl_sampler_accept(NULL, 1);
    npl_sampler_free(s);
    npl_sampler_free(NULL);
}

static void test_greedy(void)
{
    npl_rng r;
    npl_rng_seed(&r, 42);
    const uint32_t sizes[] = {1, 2, 7, 1000, 262144};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint32_t n = sizes[k];
        float *l = malloc(n * sizeof(float));
        if (!l)
            exit(1);
        npl_sampler_params p = plain_params(0.0f, 1);
        p.top_k = 40; /* filters do not matter when greedy */
        npl_sampler *s = make(&p, n);
        for (int t = 0; t < 5; t++) {
            random_logits(&r, l, n, 10.0f);
            CHECK(npl_sampler_sample(s, l) == argmax(l, n));
        }
        /* Ties go to the lowest id. */
        for (uint32_t i = 0; i < n; i++)
            l[i] = 1.0f;
        CHECK(npl_sampler_sample(s, l) == 0);
        npl_sampler_free(s);
        free(l);
    }
    /* Negative temperature is greedy too. */
    float l[5] = {0.1f, 3.0f, -2.0f, 2.9f, 0.0f};
    npl_sampler_params p = plain_params(-1.0f, 1);
    npl_sampler *s = make(&p, 5);
    for (int t = 0; t < 10; t++)
        CHECK(npl_sampler_sample(s, l) == 1);
    npl_sampler_free(s);
}

static void test_determinism(void)
{
    enum { N = 5000, STEPS = 300 };
    float *l = malloc(N * sizeof(float));
    if (!l)
        exit(1);
    npl_sampler_params p;
    npl_sampler_params_default(&p);
    p.top_k = 0; /* keep many candidates so differences would show */
    p.min_p = 0.0f;
    p.temperature = 1.5f;
    p.repeat_penalty = 1.1f;
    p.seed = 1234;
    npl_sampler *a = make(&p, N), *b = make(&p, N);
    p.seed = 1235;
    npl_sampler *c = make(&p, N);
    npl_rng r;
    npl_rng_seed(&r, 7);
    unsigned same_ab = 0, same_ac = 0;
    for (int t = 0; t < STEPS; t++) {
        random_logits(&r, l, N, 3.0f);
        int32_t x = npl_sampler_sample(a, l), y = npl_sampler_sample(b, l);
        int32_t z = npl_sampler_sample(c, l);
        same_ab += x == y;
        same_ac += x == z;
    }
    CHECK(same_ab == STEPS);
    CHECKF(same_ac < STEPS / 10, "a different seed matched %u of %d draws", same_ac, STEPS);
    npl_sampler_free(a);
    npl_sampler_free(b);
    npl_sampler_free(c);
    free(l);
}

static void test_distribution(void)
{
    const float logits[8] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f, -1.0f, 0.25f};
    double expected[8];
    const float temps[] = {1.0f, 0.5f, 2.0f};
    for (size_t k = 0; k < 3; k++) {
        npl_sampler_params p = plain_params(temps[k], 99 + k);
        npl_sampler *s = make(&p, 8);
        softmax(logits, 8, temps[k], expected);
        char what[64];
        snprintf(what, sizeof what, "softmax at temperature %.1f", (double)temps[k]);
        check_distribution(what, s, logits, 8, expected, 20000);
        npl_sampler_free(s);
    }
}

static void test_top_k(void)
{
    /* Top-3 of 8: the others never appear, the three keep their ratios. */
    const float logits[8] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, 1.5f, -1.0f, 0.25f};
    float kept[8];
    for (int i = 0; i < 8; i++)
        kept[i] = (i == 4 || i == 5 || i == 0) ? logits[i] : -INFINITY;
    double expected[8];
    softmax(kept, 8, 1.0f, expected);
    npl_sampler_params p = plain_params(1.0f, 5);
    p.top_k = 3;
    npl_sampler *s = make(&p, 8);
    check_distribution("top-k 3", s, logits, 8, expected, 20000);
    npl_sampler_free(s);

    /* top_k larger than the vocabulary (or equal to it) is no filter. */
    softmax(logits, 8, 1.0f, expected);
    const uint32_t ks[] = {8, 9, 1000000};
    for (int i = 0; i < 3; i++) {
        p.top_k = ks[i];
        p.seed = 77 + (uint64_t)i;
        s = make(&p, 8);
        check_distribution("top-k >= vocab", s, logits, 8, expected, 20000);
        npl_sampler_free(s);
    }

    /* top_k 1 is greedy whatever the temperature. */
    p.top_k = 1;
    p.temperature = 100.0f;
    s = make(&p, 8);
    for (int t = 0; t < 100; t++)
        CHECK(npl_sampler_sample(s, logits) == 4);
    npl_sampler_free(s);

    /* Large vocabulary: only the 50 best ids ever come out, ties broken
     * towards lower ids. */
    enum { N = 100000 };
    float *l = malloc(N * sizeof(float));
    if (!l)
        exit(1);
    npl_rng r;
    npl_rng_seed(&r, 3);
    random_logits(&r, l, N, 1.0f);
    for (int i = 0; i < 20; i++)
        l[1000 + i * 37] = 5.0f; /* 20 clear winners */
    for (int i = 0; i < 60; i++)
        l[50000 + i] = 4.0f; /* 60-way tie for the last 30 places */
    p = plain_params(1.0f, 11);
    p.top_k = 50;
    s = make(&p, N);
    unsigned bad = 0, tied_hit_high = 0;
    for (int t = 0; t < 1000; t++) {
        int32_t id = npl_sampler_sample(s, l);
        bool winner = id >= 1000 && id < 1000 + 20 * 37 && (id - 1000) % 37 == 0;
        bool tied_low = id >= 50000 && id < 50030;
        if (!winner && !tied_low)
            bad++;
        tied_hit_high += id >= 50030 && id < 50060;
    }
    CHECK(bad == 0);
    CHECK(tied_hit_high == 0);
    npl_sampler_free(s);
    free(l);
}

static void test_top_p(void)
{
    /* Probabilities 0.5 0.3 0.15 0.05 (as logits). */
    const float logits[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    struct {
        float top_p;
        bool allowed[4];
    } cases[] = {
        {0.0f, {false, true, false, false}},
        {0.4f, {false, true, false, false}},
        {0.75f, {false, true, false, true}},
        {0.9f, {true, true, false, true}},
        {0.99f, {true, true, true, true}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        float masked[4];
        for (int i = 0; i < 4; i++)
            masked[i] = cases[c].allowed[i] ? logits[i] : -INFINITY;
        double expected[4];
        softmax(masked, 4, 1.0f, expected);
        npl_sampler_params p = plain_params(1.0f, 21 + c);
        p.top_p = cases[c].top_p;
        npl_sampler *s = make(&p, 4);
        char what[64];
        snprintf(what, sizeof what, "top-p %.2f", (double)cases[c].top_p);
        check_distribution(what, s, logits, 4, expected, 10000);
        npl_sampler_free(s);
    }

    /* A nucleus far larger than top-p's first sorted chunk: 3000 equally
     * likely ids hold 90% of the mass, the rest shares 10%. top_p 0.85
     * must keep only (most of) the 3000. */
    enum { N = 100000, HEAD = 3000 };
    float *l = malloc(N * sizeof(float));
    if (!l)
        exit(1);
    double tail_weight = 0.1 / 0.9 * HEAD / (N - HEAD); /* relative to a head id */
    for (int i = 0; i < N; i++)
        l[i] = (float)log(tail_weight);
    for (int i = 0; i < HEAD; i++)
        l[(i * 61) % N] = 0.0f;
    npl_sampler_params p = plain_params(1.0f, 8);
    p.top_p = 0.85f;
    npl_sampler *s = make(&p, N);
    unsigned outside = 0;
    bool *seen = calloc(N, sizeof(bool));
    if (!seen)
        exit(1);
    unsigned distinct = 0;
    for (int t = 0; t < 1000; t++) {
        int32_t id = npl_sampler_sample(s, l);
        if (id < 0 || l[id] != 0.0f)
            outside++;
        else if (!seen[id]) {
            seen[id] = true;
            distinct++;
        }
    }
    CHECK(outside == 0);
    /* ~2833 ids kept (0.85/0.9 of the head): 1000 draws see ~850 of
     * them (a kept set of a few dozen would show far fewer). */
    CHECKF(distinct > 600, "only %u distinct head ids", distinct);
    npl_sampler_free(s);
    free(seen);
    free(l);

    /* Exact boundary on a vocabulary large enough to be partitioned: 20
     * tied head ids of weight 1 (scattered), one id of weight 0.5 and 979
     * of weight 0.01; total 30.29. */
    enum { M = 1000 };
    float lm[M];
    for (int i = 0; i < M; i++)
        lm[i] = logf(0.01f);
    int heads[20];
    for (int i = 0; i < 20; i++) {
        heads[i] = (i * 397 + 13) % M;
        lm[heads[i]] = 0.0f;
    }
    const int boundary = 500;
    lm[boundary] = logf(0.5f);
    double total = 20.0 + 0.5 + 979 * 0.01;

    /* Mass 20.25 needs the 20 heads and the 0.5 id. */
    p = plain_params(1.0f, 9);
    p.top_p = (float)(20.25 / total);
    s = make(&p, M);
    unsigned hits_boundary = 0, others = 0;
    for (int t = 0; t < 2000; t++) {
        int32_t id = npl_sampler_sample(s, lm);
        if (id == boundary)
            hits_boundary++;
        else if (id < 0 || lm[id] != 0.0f)
            others++;
    }
    CHECK(others == 0);
    CHECKF(hits_boundary > 15, "boundary id drawn %u times", hits_boundary);
    npl_sampler_free(s);

    /* Mass 10.5 needs 11 of the 20 tied heads: the 11 lowest ids. */
    int sorted_heads[20];
    memcpy(sorted_heads, heads, sizeof heads);
    for (int i = 1; i < 20; i++)
        for (int j = i; j > 0 && sorted_heads[j - 1] > sorted_heads[j]; j--) {
            int t = sorted_heads[j];
            sorted_heads[j] = sorted_heads[j - 1];
            sorted_heads[j - 1] = t;
        }
    p.top_p = (float)(10.5 / total);
    s = make(&p, M);
    unsigned bad = 0, seen_mask = 0;
    for (int t = 0; t < 2000; t++) {
        int32_t id = npl_sampler_sample(s, lm);
        int rank = -1;
        for (int i = 0; i < 20; i++)
            if (sorted_heads[i] == id)
                rank = i;
        if (rank < 0 || rank >= 11)
            bad++;
        else
            seen_mask |= 1u << rank;
    }
    CHECK(bad == 0);
    CHECK(seen_mask == (1u << 11) - 1);
    npl_sampler_free(s);
}

static void test_min_p(void)
{
    /* Probabilities 0.5 0.3 0.15 0.05: min_p 0.2 keeps p >= 0.1. */
    const float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    float masked[4] = {logits[0], logits[1], logits[2], -INFINITY};
    double expected[4];
    softmax(masked, 4, 1.0f, expected);
    npl_sampler_params p = plain_params(1.0f, 31);
    p.min_p = 0.2f;
    npl_sampler *s = make(&p, 4);
    check_distribution("min-p 0.2", s, logits, 4, expected, 10000);
    npl_sampler_free(s);

    /* min_p 1 (or more) keeps only the best. */
    p.min_p = 1.5f;
    s = make(&p, 4);
    for (int t = 0; t < 100; t++)
        CHECK(npl_sampler_sample(s, logits) == 0);
    npl_sampler_free(s);

    /* min-p is measured after temperature: at 0.5 the weights are squared
     * (0.25 0.09 0.0225 0.0025 relative 1 0.36 0.09 0.01), min_p 0.2
     * keeps only the first two. */
    p.min_p = 0.2f;
    p.temperature = 0.5f;
    s = make(&p, 4);
    float masked2[4] = {logits[0], logits[1], -INFINITY, -INFINITY};
    softmax(masked2, 4, 0.5f, expected);
    check_distribution("min-p 0.2 at temperature 0.5", s, logits, 4, expected, 10000);
    npl_sampler_free(s);

    /* Combined with top-p: the shorter prefix wins either way round. */
    p = plain_params(1.0f, 33);
    p.min_p = 0.2f;  /* keeps 0,1,2 */
    p.top_p = 0.75f; /* keeps 0,1 */
    s = make(&p, 4);
    softmax(masked2, 4, 1.0f, expected);
    check_distribution("top-p 0.75 + min-p 0.2", s, logits, 4, expected, 10000);
    npl_sampler_free(s);
    p.min_p = 0.5f; /* keeps p >= 0.25: 0,1 */
    p.top_p = 0.9f; /* keeps 0,1,2 */
    s = make(&p, 4);
    check_distribution("top-p 0.95 + min-p 0.5", s, logits, 4, expected, 10000);
    npl_sampler_free(s);
}

static void test_repeat_penalty(void)
{
    npl_sampler_params p = plain_params(0.0f, 1);
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;

    /* Positive logits are divided. */
    float pos[4] = {2.0f, 1.9f, -1.0f, -1.1f};
    npl_sampler *s = make(&p, 4);
    CHECK(npl_sampler_sample(s, pos) == 0); /* records 0 */
    CHECK(npl_sampler_sample(s, pos) == 1); /* 2.0 / 1.5 < 1.9 */
    /* Window of 2 now holds {0, 1}: both penalised (1.33, 1.27). */
    CHECK(npl_sampler_sample(s, pos) == 0);
    npl_sampler_free(s);

    /* Negative logits are multiplied. */
    float neg[3] = {-1.0f, -1.2f, -5.0f};
    s = make(&p, 3);
    npl_sampler_accept(s, 0);
    CHECK(npl_sampler_sample(s, neg) == 1); /* -1.5 < -1.2 */
    npl_sampler_free(s);

    /* Tokens that left the window are no longer penalised. */
    s = make(&p, 4);
    npl_sampler_accept(s, 0);
    npl_sampler_accept(s, 2);
    npl_sampler_accept(s, 3);
    CHECK(npl_sampler_sample(s, pos) == 0);
    npl_sampler_free(s);

    /* A token repeated in the window is penalised once, not per copy. */
    p.repeat_last_n = 8;
    float once[3] = {2.0f, 1.0f, 0.0f};
    s = make(&p, 3);
    for (int i = 0; i < 5; i++)
        npl_sampler_accept(s, 0);
    CHECK(npl_sampler_sample(s, once) == 0); /* 1.33 > 1.0 */
    npl_sampler_free(s);

    /* Window 0 disables it. */
    p.repeat_last_n = 0;
    s = make(&p, 4);
    npl_sampler_accept(s, 0);
    CHECK(npl_sampler_sample(s, pos) == 0);
    CHECK(npl_sampler_sample(s, pos) == 0);
    npl_sampler_free(s);

    /* Penalty applies before sampling at temperature > 0 as well. */
    p = plain_params(1.0f, 41);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 4;
    float l[4] = {2.0f, 1.0f, 0.5f, -1.0f};
    float penalised[4] = {1.0f, 1.0f, 0.5f, -2.0f};
    double expected[4];
    softmax(penalised, 4, 1.0f, expected);
    /* The sampler records its own picks, which would move the window: use
     * the first draw of many seeds instead. */
    unsigned count[4] = {0};
    for (uint64_t seed = 0; seed < 8000; seed++) {
        p.seed = seed;
        s = make(&p, 4);
        npl_sampler_accept(s, 0);
        npl_sampler_accept(s, 3);
        int32_t id = npl_sampler_sample(s, l);
        if (id >= 0 && id < 4)
            count[id]++;
        npl_sampler_free(s);
    }
    unsigned df;
    double chi = chi_square(count, expected, 4, 8000, &df);
    CHECKF(chi < CHI2_999[df], "penalised distribution: chi-square %.2f", chi);
}

static void test_degenerate_logits(void)
{
    enum { N = 1000 };
    float l[N];
    npl_sampler_params variants[4];
    variants[0] = plain_params(1.0f, 1);
    npl_sampler_params_default(&variants[1]);
    variants[2] = plain_params(0.0f, 1);
    variants[3] = plain_params(1.0f, 1);
    variants[3].top_p = 0.5f;
    variants[3].repeat_penalty = 1.3f;

    for (int v = 0; v < 4; v++) {
        npl_sampler *s = make(&variants[v], N);
        /* All impossible but one. */
        for (int i = 0; i < N; i++)
            l[i] = -INFINITY;
        l[777] = -50.0f;
        for (int t = 0; t < 20; t++)
            CHECK(npl_sampler_sample(s, l) == 777);
        /* NaN everywhere but one. */
        for (int i = 0; i < N; i++)
            l[i] = NAN;
        l[5] = 0.0f;
        for (int t = 0; t < 20; t++)
            CHECK(npl_sampler_sample(s, l) == 5);
        /* Some NaN among finite logits: never picked. */
        npl_rng r;
        npl_rng_seed(&r, (uint64_t)v);
        random_logits(&r, l, N, 0.1f);
        for (int i = 0; i < N; i += 2)
            l[i] = NAN;
        for (int t = 0; t < 200; t++) {
            int32_t id = npl_sampler_sample(s, l);
            CHECK(id >= 0 && id < N && (id & 1));
        }
        /* +inf wins (first one on a tie). */
        random_logits(&r, l, N, 1.0f);
        l[321] = INFINITY;
        l[600] = INFINITY;
        for (int t = 0; t < 20; t++) {
            int32_t id = npl_sampler_sample(s, l);
            CHECK(id == 321 || id == 600);
        }
        /* Everything impossible: still a valid id, deterministically. */
        for (int i = 0; i < N; i++)
            l[i] = (i & 1) ? -INFINITY : NAN;
        int32_t first = npl_sampler_sample(s, l);
        CHECK(first >= 0 && first < N);
        CHECK(npl_sampler_sample(s, l) == first);
        npl_sampler_free(s);
    }

    /* Extreme temperatures stay finite. */
    float small[4] = {1.0f, 3.0f, 2.0f, -4.0f};
    npl_sampler_params p = plain_params(1e-30f, 1);
    npl_sampler *s = make(&p, 4);
    for (int t = 0; t < 20; t++)
        CHECK(npl_sampler_sample(s, small) == 1);
    npl_sampler_free(s);
    p = plain_params(1e30f, 2);
    s = make(&p, 4);
    double uniform[4] = {0.25, 0.25, 0.25, 0.25};
    check_distribution("huge temperature", s, small, 4, uniform, 8000);
    npl_sampler_free(s);

    /* Huge logits of both signs. */
    float huge[3] = {3e38f, -3e38f, 3e38f};
    p = plain_params(0.7f, 3);
    s = make(&p, 3);
    for (int t = 0; t < 20; t++) {
        int32_t id = npl_sampler_sample(s, huge);
        CHECK(id == 0 || id == 2);
    }
    npl_sampler_free(s);

    /* A one-token vocabulary. */
    float one[1] = {NAN};
    p = plain_params(1.0f, 4);
    s = make(&p, 1);
    CHECK(npl_sampler_sample(s, one) == 0);
    npl_sampler_free(s);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void test_large_vocab_speed(void)
{
    enum { N = 262144, STEPS = 40 };
    float *l = malloc(N * sizeof(float));
    if (!l)
        exit(1);
    npl_rng r;
    npl_rng_seed(&r, 17);
    random_logits(&r, l, N, 8.0f);

    struct {
        const char *name;
        uint32_t top_k;
        float top_p, min_p;
    } configs[] = {
        {"defaults (top-k 40)", 40, 0.95f, 0.05f},
        {"top-p 0.95 only", 0, 0.95f, 0.0f},
        {"min-p 0.05 only", 0, 1.0f, 0.05f},
        {"no filters", 0, 1.0f, 0.0f},
    };
    for (size_t c = 0; c < sizeof(configs) / sizeof(configs[0]); c++) {
        npl_sampler_params p = plain_params(1.0f, 5);
        p.top_k = configs[c].top_k;
        p.top_p = configs[c].top_p;
        p.min_p = configs[c].min_p;
        p.repeat_penalty = 1.1f;
        npl_sampler *s = make(&p, N);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int t = 0; t < STEPS; t++) {
            int32_t id = npl_sampler_sample(s, l);
            CHECK(id >= 0 && id < N);
        }
        printf("  262144-token vocabulary, %-20s %.3f ms per token\n", configs[c].name,
               seconds_since(&t0) * 1e3 / STEPS);
        npl_sampler_free(s);
    }
    free(l);
}

int main(void)
{
    test_params();
    test_greedy();
    test_determinism();
    test_distribution();
    test_top_k();
    test_top_p();
    test_min_p();
    test_repeat_penalty();
    test_degenerate_logits();
    test_large_vocab_speed();
    return nt_report("test_sampler");
}
