/* Token sampling: repetition penalty, top-k, temperature softmax, top-p,
 * min-p, then a seeded draw (or plain argmax when greedy).
 *
 * Vocabularies reach 262k entries, so nothing here sorts the whole
 * vocabulary: top-k is a partial selection, min-p is a linear filter, and
 * top-p a selection by probability mass (quickselect that partitions by
 * the mass on the better side of each pivot). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "npullm.h"
#include "sampler_rng.h"

/* A window longer than any context we can run is a caller mistake, and
 * rejecting it keeps one bad parameter from allocating gigabytes. */
#define NPL_SAMPLER_MAX_REPEAT_LAST_N (1u << 20)

typedef struct npl_candidate {
    int32_t id;
    float logit; /* penalised; replaced by the unnormalised probability */
} npl_candidate;

struct npl_sampler {
    npl_sampler_params params;
    uint32_t n_vocab;
    npl_rng rng;
    npl_candidate *cand; /* n_vocab scratch entries */
    /* Ring of the last repeat_last_n accepted tokens. */
    int32_t *recent;
    uint32_t n_recent;
    uint32_t recent_head;
    /* One bit per vocab entry: "already penalised in this step". */
    uint8_t *penalised;
    /* Constrained output: the borrowed matcher and its mask. */
    npl_grammar_matcher *grammar;
    uint32_t *grammar_mask;
    uint32_t grammar_n_vocab;
};

void npl_sampler_params_default(npl_sampler_params *p)
{
    if (!p)
        return;
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0;
}

npl_sampler *npl_sampler_create(const npl_sampler_params *p, uint32_t n_vocab, npl_error *err)
{
    if (!p) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "sampler: parameters are NULL");
        return NULL;
    }
    if (n_vocab == 0 || n_vocab > (uint32_t)INT32_MAX) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "sampler: vocabulary size %u is out of range", n_vocab);
        return NULL;
    }
    if (isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p)) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "sampler: temperature, top_p and min_p must be numbers");
        return NULL;
    }
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty)) {
        npl_error_set(err, NPL_ERR_INVALID_ARG,
                      "sampler: repeat_penalty must be a finite number > 0 (1 = off), got %g",
                      (double)p->repeat_penalty);
        return NULL;
    }
    if (p->repeat_last_n > NPL_SAMPLER_MAX_REPEAT_LAST_N) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "sampler: repeat_last_n %u exceeds the maximum %u",
                      p->repeat_last_n, NPL_SAMPLER_MAX_REPEAT_LAST_N);
        return NULL;
    }

    npl_sampler *s = calloc(1, sizeof(*s));
    if (!s) {
        npl_error_set(err, NPL_ERR_NOMEM, "sampler: out of memory");
        return NULL;
    }
    s->params = *p;
    s->n_vocab = n_vocab;
    npl_rng_seed(&s->rng, p->seed);
    s->cand = malloc((size_t)n_vocab * sizeof(*s->cand));
    s->penalised = calloc(((size_t)n_vocab + 7) / 8, 1);
    if (p->repeat_last_n > 0)
        s->recent = malloc((size_t)p->repeat_last_n * sizeof(*s->recent));
    if (!s->cand || !s->penalised || (p->repeat_last_n > 0 && !s->recent)) {
        npl_sampler_free(s);
        npl_error_set(err, NPL_ERR_NOMEM, "sampler: out of memory for a %u-token vocabulary", n_vocab);
        return NULL;
    }
    return s;
}

void npl_sampler_free(npl_sampler *s)
{
    if (!s)
        return;
    free(s->cand);
    free(s->recent);
    free(s->penalised);
    free(s->grammar_mask);
    free(s);
}

npl_status npl_sampler_set_grammar(npl_sampler *s, npl_grammar_matcher *m, npl_error *err)
{
    if (!s)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "sampler: NULL");
    s->grammar = m;
    if (!m)
        return NPL_OK;
    /* the mask covers the matcher's vocabulary; ids past it are refused */
    uint32_t nv = npl_grammar_matcher_n_vocab(m);
    if (!s->grammar_mask || s->grammar_n_vocab != nv) {
        free(s->grammar_mask);
        s->grammar_mask = calloc(((size_t)nv + 31) / 32, sizeof *s->grammar_mask);
        s->grammar_n_vocab = s->grammar_mask ? nv : 0;
        if (!s->grammar_mask) {
            s->grammar = NULL;
            return npl_error_set(err, NPL_ERR_NOMEM, "sampler: out of memory for a grammar mask");
        }
    }
    return NPL_OK;
}

/* Keeps the candidates the grammar allows (in id order); returns how many. */
static size_t keep_allowed(npl_sampler *s)
{
    npl_grammar_matcher_mask(s->grammar, s->grammar_mask);
    size_t k = 0;
    uint32_t n = s->n_vocab < s->grammar_n_vocab ? s->n_vocab : s->grammar_n_vocab;
    for (uint32_t i = 0; i < n; i++)
        if ((s->grammar_mask[i >> 5] >> (i & 31)) & 1)
            s->cand[k++] = s->cand[i];
    return k;
}

void npl_sampler_accept(npl_sampler *s, int32_t id)
{
    if (!s || id < 0 || (uint32_t)id >= s->n_vocab || s->params.repeat_last_n == 0)
        return;
    uint32_t window = s->params.repeat_last_n;
    s->recent[s->recent_head] = id;
    s->recent_head = (s->recent_head + 1) % window;
    if (s->n_recent < window)
        s->n_recent++;
}

/* ---- candidate ordering ------------------------------------------------ */

/* Strict total order: higher logit first, then lower id. Ties broken by id
 * make every selection below deterministic whatever algorithm it uses. */
static inline bool cand_before(const npl_candidate *a, const npl_candidate *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void cand_swap(npl_candidate *a, npl_candidate *b)
{
    npl_candidate t = *a;
    *a = *b;
    *b = t;
}

static int cand_compare(const void *pa, const void *pb)
{
    const npl_candidate *a = pa, *b = pb;
    if (cand_before(a, b))
        return -1;
    return cand_before(b, a) ? 1 : 0;
}

/* Median of three positions as the pivot value. */
static npl_candidate median_pivot(const npl_candidate *c, size_t n)
{
    npl_candidate a = c[0], b = c[n / 2], d = c[n - 1];
    if (cand_before(&b, &a)) {
        npl_candidate t = a;
        a = b;
        b = t;
    }
    if (cand_before(&d, &b)) {
        b = d;
        if (cand_before(&b, &a))
            b = a;
    }
    return b;
}

/* Hoare-style partition of c[lo..hi) around a median pivot; candidates are
 * distinct under cand_before (ids differ), so no three-way split is needed.
 * Returns split: c[lo..split) are not after the pivot, c[split..hi) not before. */
static size_t partition(npl_candidate *c, size_t lo, size_t hi)
{
    npl_candidate pivot = median_pivot(c + lo, hi - lo);
    size_t i = lo, j = hi - 1;
    for (;;) {
        while (cand_before(&c[i], &pivot))
            i++;
        while (cand_before(&pivot, &c[j]))
            j--;
        if (i >= j)
            return j + 1;
        cand_swap(&c[i], &c[j]);
        i++;
        j--;
    }
}

/* Rearranges c[0..n) so that its k best candidates (in cand_before order)
 * come first, in no particular order. Quickselect with a depth limit that
 * falls back to sorting, so adversarial inputs cost O(n log n) at worst. */
static void select_best(npl_candidate *c, size_t n, size_t k)
{
    if (k == 0 || k >= n)
        return;
    size_t lo = 0, hi = n; /* the k-th boundary lies in [lo, hi) */
    unsigned depth_left = 64;
    while (hi - lo > 16) {
        if (depth_left-- == 0) {
            qsort(c + lo, hi - lo, sizeof(*c), cand_compare);
            return;
        }
        size_t split = partition(c, lo, hi);
        if (k < split)
            hi = split;
        else if (k > split)
            lo = split;
        else
            return;
    }
    qsort(c + lo, hi - lo, sizeof(*c), cand_compare);
}

/* ---- sampling steps ---------------------------------------------------- */

static void load_candidates(npl_sampler *s, const float *logits)
{
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        float v = logits[i];
        /* NaN can never win; +inf is clamped so softmax stays finite. */
        if (isnan(v))
            v = -INFINITY;
        else if (v > FLT_MAX)
            v = FLT_MAX;
        s->cand[i].id = (int32_t)i;
        s->cand[i].logit = v;
    }
}

/* llama.cpp-style repetition penalty: each distinct recent token once. */
static void apply_repeat_penalty(npl_sampler *s)
{
    float penalty = s->params.repeat_penalty;
    if (penalty == 1.0f || s->n_recent == 0)
        return;
    for (uint32_t i = 0; i < s->n_recent; i++) {
        int32_t id = s->recent[i];
        uint8_t bit = (uint8_t)(1u << (id & 7));
        if (s->penalised[id >> 3] & bit)
            continue;
        s->penalised[id >> 3] |= bit;
        float *v = &s->cand[id].logit;
        if (*v > 0.0f)
            *v /= penalty;
        else
            *v *= penalty;
    }
    for (uint32_t i = 0; i < s->n_recent; i++)
        s->penalised[s->recent[i] >> 3] = 0;
}

static size_t best_index(const npl_candidate *c, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (cand_before(&c[i], &c[best]))
            best = i;
    return best;
}

static double mass_of(const npl_candidate *c, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m += (double)c[i].logit;
    return m;
}

/* Smallest k such that the k best candidates of c[0..n) hold at least
 * `target` probability mass; those k are moved to the front. Like
 * select_best, but each partition step decides by the mass of the better
 * side, so a large nucleus costs O(n) expected instead of a sort. */
static size_t select_mass(npl_candidate *c, size_t n, double target)
{
    size_t lo = 0, hi = n; /* c[0..lo) is in the answer, c[hi..n) is not */
    double acc = 0.0;      /* mass of c[0..lo) */
    unsigned depth_left = 64;
    while (hi - lo > 16 && depth_left-- > 0) {
        size_t split = partition(c, lo, hi);
        if (split >= hi)
            break; /* no progress: let the sort below finish the job */
        double upper = mass_of(c + lo, split - lo);
        if (acc + upper >= target) {
            hi = split;
        } else {
            acc += upper;
            lo = split;
        }
    }
    qsort(c + lo, hi - lo, sizeof(*c), cand_compare);
    for (size_t i = lo; i < hi; i++) {
        acc += (double)c[i].logit;
        if (acc >= target)
            return i + 1;
    }
    return hi; /* rounding kept the mass just short: keep the whole range */
}

/* Records the pick (penalty window, grammar). */
static int32_t sampled(npl_sampler *s, int32_t picked)
{
    if (s->grammar && !npl_grammar_matcher_accept_token(s->grammar, picked))
        return -1;
    npl_sampler_accept(s, picked);
    return picked;
}

int32_t npl_sampler_sample(npl_sampler *s, const float *logits)
{
    if (!s || !logits)
        return -1;
    const npl_sampler_params *p = &s->params;
    npl_candidate *c = s->cand;
    size_t n = s->n_vocab;

    load_candidates(s, logits);
    apply_repeat_penalty(s);
    if (s->grammar && p->temperature <= 0.0f) {
        /* Greedy: the best token, when the grammar takes it, is also the
         * best allowed one, so the mask is only needed when it refuses. */
        int32_t best = c[best_index(c, n)].id;
        if (npl_grammar_matcher_accept_token(s->grammar, best)) {
            npl_sampler_accept(s, best);
            return best;
        }
    }
    if (s->grammar) {
        n = keep_allowed(s);
        if (n == 0)
            return -1;
    }

    int32_t picked;
    if (p->temperature <= 0.0f) {
        picked = c[best_index(c, n)].id;
        return sampled(s, picked);
    }

    if (p->top_k > 0 && p->top_k < n) {
        select_best(c, n, p->top_k);
        n = p->top_k;
    }

    size_t best = best_index(c, n);
    float max_logit = c[best].logit;
    if (max_logit == -INFINITY) {
        /* Nothing is possible; answer deterministically rather than fail. */
        picked = c[best].id;
        return sampled(s, picked);
    }

    /* Unnormalised softmax: the best candidate gets weight 1, so min-p is a
     * fixed threshold and nothing can overflow. */
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        float w = expf((c[i].logit - max_logit) / p->temperature);
        c[i].logit = w;
        total += (double)w;
    }

    /* min-p and top-p each keep a best-first prefix, so the result is the
     * shorter of the two and the order of application does not matter;
     * filtering by min-p first keeps top-p's sort small. top-p's mass is
     * still measured against the full distribution. */
    size_t kept = n;
    if (p->min_p > 0.0f) {
        float threshold = p->min_p > 1.0f ? 1.0f : p->min_p;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].logit >= threshold)
                cand_swap(&c[k++], &c[i]);
        kept = k; /* >= 1: the best candidate has weight 1 */
    }
    if (p->top_p < 1.0f) {
        double target = (double)(p->top_p > 0.0f ? p->top_p : 0.0f) * total;
        size_t k = select_mass(c, kept, target);
        kept = k > 0 ? k : 1;
    }

    double kept_total = mass_of(c, kept);
    double u = npl_rng_next_double(&s->rng) * kept_total;
    picked = -1;
    double cum = 0.0;
    for (size_t i = 0; i < kept; i++) {
        cum += (double)c[i].logit;
        if (u < cum) {
            picked = c[i].id;
            break;
        }
    }
    if (picked < 0) {
        /* Rounding put u at the very top: take the last non-zero weight. */
        for (size_t i = kept; i-- > 0;)
            if (c[i].logit > 0.0f) {
                picked = c[i].id;
                break;
            }
        if (picked < 0)
            picked = c[0].id;
    }
    return sampled(s, picked);
}
