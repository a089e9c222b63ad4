/* The phase split on the emulated NPU (`test-npu-phase-split CASE MODEL`):
 * prefill on npu-emu, decode on the CPU (npl_model_set_decode_device).
 *   greedy      for a few prompts, the split's greedy output against the
 *               CPU's alone and the NPU's alone: identical until a step
 *               where the device alone has a near tie (top two logits
 *               closer than TIE, which the two devices' numerics can
 *               flip: docs/npu.md), and at every step, fed the same
 *               tokens, each argmax in the other's top 5 and the logits
 *               within MAX_DIFF.
 *   moved_once  a sequence's cache leaves the device once, at its first
 *               decode step after the switch, and its device buffers are
 *               freed; the stats and npl_seq_devices say so; a moved
 *               sequence and one still on the device decode in one batch,
 *               each bit for bit as alone; switching back sends new
 *               sequences to the device only.
 *   layout      the moved K and V rows are the device's bf16 values
 *               exactly (f16 holds them) and, row by row, close to what
 *               the CPU computes for the same prompt (every layer, head
 *               and position where the CPU keeps it, rings included).
 *   pool        a moved sequence seeds the next turn through the KV pool
 *               while the split is on and it holds at least half of the
 *               prompt: the new sequence continues on the CPU, bit for
 *               bit as the moved one continuing itself; otherwise the
 *               device prefills.
 *   errors      bad devices and bad batches are refused, and a refused
 *               batch moves nothing. */
#include <math.h>
#include <stdint.h>

#include "backend.h"
#include "ggml_types.h"
#include "model_internal.h"
#include "npu_engine_test.h"
#include "npullm.h"
#include "tokenizer.h"

enum { NPU_CHUNK = 16, STEPS = 10, N_CTX = 256, TOP = 5 };
#define TIE 1.0f      /* top-two logit gap the devices' numerics may flip */
#define MAX_DIFF 1.0f /* largest logit difference between the devices */

static const char *const prompts[] = {
    "The capital of France is",
    "1, 2, 3, 4, 5, 6,",
    /* Longer than several prefill chunks. */
    "Once upon a time, in a kingdom by the sea, there lived a clockmaker who built small brass birds. "
    "Every morning she wound them, and every evening they sang the songs of the day back to her.",
};

static bool tokenize(const npl_model *m, const char *text, npl_tokens *out)
{
    npl_error err;
    if (npl_tokenize(npl_model_tokenizer(m), text, strlen(text), NPL_TOKENIZE_ADD_BOS, out, &err) == NPL_OK)
        return true;
    fprintf(stderr, "tokenize: %s\n", err.message);
    return false;
}

static npl_seq *prefilled(npl_model *m, const int32_t *ids, size_t n)
{
    npl_error err;
    npl_seq *s = npl_seq_create(m, N_CTX, &err);
    if (s && npl_prefill(m, s, ids, n, 0, NULL, &err) == NPL_OK)
        return s;
    fprintf(stderr, "prefill on %s: %s\n", npl_model_device(m), s ? err.message : "no sequence");
    npl_seq_free(s);
    return NULL;
}

static bool decode1(npl_model *m, npl_seq *s, int32_t token)
{
    npl_error err;
    if (npl_decode(m, &s, &token, 1, &err) == NPL_OK)
        return true;
    fprintf(stderr, "decode: %s\n", err.message);
    return false;
}

/* STEPS tokens of greedy decoding into out; with `forced`, those tokens
 * are fed instead of the argmax. Every step's logits into logits
 * [STEPS][n_vocab]. */
static bool greedy(npl_model *m, const npl_tokens *ids, const int32_t *forced, int32_t *out, float *logits)
{
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_seq *s = prefilled(m, ids->ids, ids->n);
    bool ok = s != NULL;
    for (int i = 0; ok && i < STEPS; i++) {
        const float *l = npl_seq_logits(s);
        if (!(ok = l != NULL))
            break;
        memcpy(logits + (size_t)i * nv, l, nv * sizeof *l);
        out[i] = nt_argmax(l, nv);
        ok = decode1(m, s, forced ? forced[i] : out[i]);
    }
    npl_seq_free(s);
    return ok;
}

static float gap_top2(const float *l, uint32_t n)
{
    float a = -INFINITY, b = -INFINITY;
    for (uint32_t i = 0; i < n; i++)
        if (l[i] > a) {
            b = a;
            a = l[i];
        } else if (l[i] > b) {
            b = l[i];
        }
    return a - b;
}

static bool in_top(const float *l, uint32_t n, int32_t id)
{
    int32_t top[TOP];
    float lp[TOP];
    npl_top_logprobs(l, n, TOP, top, lp);
    for (int i = 0; i < TOP; i++)
        if (top[i] == id)
            return true;
    return false;
}

/* The split's free-running tokens ts against one device's alone (tokens
 * t, logits l): the steps identical before the first difference, which
 * must come at a near tie of that device. */
static int same_until_tie(const char *who, const int32_t *ts, const int32_t *t, const float *l, uint32_t nv)
{
    for (int i = 0; i < STEPS; i++) {
        if (ts[i] == t[i])
            continue;
        float gap = gap_top2(l + (size_t)i * nv, nv);
        CHECKF(gap < TIE, "split and %s alone differ at step %d, where %s's top two are %.3f apart", who, i,
               who, (double)gap);
        return i;
    }
    return STEPS;
}

/* Fed the same tokens, a's and b's argmax in each other's top 5 at every
 * step, and their logits within MAX_DIFF; the largest difference. */
static float forced_agree(const char *who, const float *la, const float *lb, uint32_t nv)
{
    float d = 0.0f;
    for (int i = 0; i < STEPS; i++) {
        const float *a = la + (size_t)i * nv, *b = lb + (size_t)i * nv;
        CHECKF(in_top(a, nv, nt_argmax(b, nv)) && in_top(b, nv, nt_argmax(a, nv)),
               "step %d: split and %s alone disagree beyond their top %d", i, who, TOP);
        for (uint32_t j = 0; j < nv; j++)
            d = fmaxf(d, fabsf(a[j] - b[j]));
    }
    CHECKF(d < MAX_DIFF, "split and %s alone: logits %.3f apart", who, (double)d);
    return d;
}

static void test_greedy(void)
{
    npl_model *cpu = nt_load_model("cpu", 1, 0);
    npl_model *npu = nt_load_model("npu-emu", 1, NPU_CHUNK);
    REQUIRE(cpu && npu);
    uint32_t nv = npl_model_get_info(cpu)->n_vocab;
    size_t bytes = (size_t)STEPS * nv * sizeof(float);
    float *lc = malloc(bytes), *ln = malloc(bytes), *ls = malloc(bytes), *lf = malloc(bytes);
    REQUIRE(lc && ln && ls && lf);
    npl_error err;
    for (size_t p = 0; p < sizeof prompts / sizeof prompts[0] && !nt_failures(); p++) {
        npl_tokens ids = {0};
        REQUIRE(tokenize(cpu, prompts[p], &ids));
        int32_t tc[STEPS], tn[STEPS], ts[STEPS], tf[STEPS];
        CHECK(npl_model_set_decode_device(npu, NULL, &err) == NPL_OK);
        CHECK(greedy(cpu, &ids, NULL, tc, lc));
        CHECK(greedy(npu, &ids, tc, tn, ln)); /* on the CPU's tokens */
        CHECK(npl_model_set_decode_device(npu, "cpu", &err) == NPL_OK);
        CHECK(greedy(npu, &ids, tc, tf, lf));
        float d_cpu = forced_agree("cpu", lf, lc, nv), d_npu = forced_agree("npu", lf, ln, nv);
        /* free running: each device alone, and the split */
        CHECK(greedy(npu, &ids, NULL, ts, ls));
        CHECK(npl_model_set_decode_device(npu, NULL, &err) == NPL_OK);
        CHECK(greedy(npu, &ids, NULL, tn, ln));
        int same_cpu = same_until_tie("cpu", ts, tc, lc, nv), same_npu = same_until_tie("npu", ts, tn, ln, nv);
        fprintf(stderr,
                "  %3zu-token prompt '%.20s...': greedy output of the split = cpu alone for %d/%d tokens, = npu "
                "alone for %d/%d; fed the same tokens, logits within %.3f of the cpu's, %.3f of the npu's\n",
                ids.n, prompts[p], same_cpu, STEPS, same_npu, STEPS, (double)d_cpu, (double)d_npu);
        npl_tokens_free(&ids);
    }
    free(lc);
    free(ln);
    free(ls);
    free(lf);
    npl_model_free(cpu);
    npl_model_free(npu);
}

/* ---- moved once ---------------------------------------------------------- */

static npl_device_stats stats_of(const npl_model *m)
{
    npl_device_stats st;
    npl_model_device_stats(m, &st);
    return st;
}

static void check_devices(const npl_seq *s, const char *prefill, const char *decode, uint32_t moves)
{
    npl_seq_devices d;
    npl_seq_devices_get(s, &d);
    CHECKF(strcmp(d.prefill, prefill) == 0 && strcmp(d.decode, decode) == 0 && d.kv_moves == moves,
           "sequence devices: prefill '%s' decode '%s' moves %u, expected '%s' '%s' %u", d.prefill, d.decode,
           d.kv_moves, prefill, decode, moves);
}

static void test_moved_once(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, NPU_CHUNK);
    REQUIRE(m);
    const npl_model_info *info = npl_model_get_info(m);
    uint32_t nv = info->n_vocab;
    int32_t ids[20];
    ne_make_prompt(ids, 20, 7, nv);
    npl_error err;
    CHECK(strcmp(npl_model_decode_device(m), "npu-emu") == 0);
    CHECK(npl_model_set_decode_device(m, "cpu", &err) == NPL_OK);
    CHECK(strcmp(npl_model_decode_device(m), "cpu") == 0);

    /* a (split) and its twin a2 */
    npl_seq *a = prefilled(m, ids, 20), *a2 = prefilled(m, ids, 20);
    REQUIRE(a && a2);
    check_devices(a, "npu-emu", "", 0);
    npl_device_stats st = stats_of(m);
    CHECK(st.kv_moved_sequences == 0);
    uint64_t kv_two = st.kv_bytes;
    CHECK(decode1(m, a, 5) && decode1(m, a2, 5));
    st = stats_of(m);
    CHECKF(st.kv_moved_sequences == 2 && st.kv_bytes == 0, "moved %llu, device kv bytes %llu",
           (unsigned long long)st.kv_moved_sequences, (unsigned long long)st.kv_bytes);
    /* every layer's K and V rows of the 20 prompt positions, bf16 */
    uint64_t per_seq = 2ull * info->n_layer * 20 * info->n_head_kv * info->head_dim * 2;
    CHECKF(st.kv_moved_bytes == 2 * per_seq, "moved %llu bytes, expected %llu",
           (unsigned long long)st.kv_moved_bytes, (unsigned long long)(2 * per_seq));
    CHECK(kv_two > 0);
    CHECK(decode1(m, a, 6) && decode1(m, a, 7) && decode1(m, a2, 6) && decode1(m, a2, 7));
    CHECK(stats_of(m).kv_moved_sequences == 2);
    check_devices(a, "npu-emu", "cpu", 1);
    CHECK(npl_seq_pos(a) == 23);

    /* back: a new sequence stays on the device, the moved ones on the CPU */
    CHECK(npl_model_set_decode_device(m, NULL, &err) == NPL_OK);
    npl_seq *b = prefilled(m, ids, 12), *b2 = prefilled(m, ids, 12);
    REQUIRE(b && b2);
    CHECK(decode1(m, b, 9) && decode1(m, b2, 9));
    check_devices(b, "npu-emu", "npu-emu", 0);
    /* one batch across both: each as alone */
    npl_seq *batch[2] = {a, b};
    int32_t toks[2] = {11, 12};
    CHECK(npl_decode(m, batch, toks, 2, &err) == NPL_OK);
    CHECK(decode1(m, a2, 11) && decode1(m, b2, 12));
    CHECK(nt_same_logits(a, a2, nv) && nt_same_logits(b, b2, nv));
    check_devices(a, "npu-emu", "cpu", 1);
    check_devices(b, "npu-emu", "npu-emu", 0);
    CHECK(stats_of(m).kv_moved_sequences == 2);
    /* a moved sequence prefills on the CPU from then on */
    CHECK(npl_prefill(m, a, ids, 3, 0, NULL, &err) == NPL_OK);
    check_devices(a, "cpu", "cpu", 1);
    npl_seq_free(a);
    npl_seq_free(a2);
    npl_seq_free(b);
    npl_seq_free(b2);
    npl_model_free(m);
}

/* ---- layout -------------------------------------------------------------- */

static float f16_at(const npl_seq *s, const uint8_t *cache, uint32_t l, uint32_t g, uint32_t pos, size_t j)
{
    const uint16_t *row = (const uint16_t *)(const void *)(cache + npl_kv_head_offset(s, l, g) +
                                                           npl_kv_row(s, l, pos) * s->model->kv_row_bytes);
    return npl_fp16_to_fp32(row[j]);
}

/* a's row of head g at position pos against c's row of head cg at
 * position cpos: |a - c| / |c|; a's values bf16 exactly. */
typedef struct row_at {
    uint32_t l, g, pos;
} row_at;

static float row_error(const npl_seq *a, const npl_seq *c, bool k, row_at ra, row_at rc, bool *bf16_exact)
{
    const uint8_t *ka = k ? a->k_cache : a->v_cache, *kc = k ? c->k_cache : c->v_cache;
    double num = 0.0, den = 0.0;
    for (size_t j = 0; j < a->model->hp.head_dim; j++) {
        float x = f16_at(a, ka, ra.l, ra.g, ra.pos, j), y = f16_at(c, kc, rc.l, rc.g, rc.pos, j);
        *bf16_exact &= npl_bf16_to_fp32(npl_fp32_to_bf16(x)) == x;
        num += (double)(x - y) * (x - y);
        den += (double)y * y;
    }
    return (float)sqrt(num / (den > 0 ? den : 1.0));
}

/* How far a moved row is from the CPU's at its own place, against the
 * CPU's at the next place (position, or head): well below 1 when every
 * row went where it belongs, whatever the devices' numerics (float
 * weights requantized to 4 bits on the NPU put the rows further apart
 * than q4_0 codes). */
static float place_ratio(const npl_seq *a, const npl_seq *c, bool k, row_at r, uint32_t lo, uint32_t n, bool *exact,
                         float *own_err)
{
    uint32_t n_head_kv = a->model->hp.n_head_kv;
    float own = row_error(a, c, k, r, r, exact);
    row_at next_pos = {r.l, r.g, r.pos + 1 < n ? r.pos + 1 : lo};
    row_at next_head = {r.l, (r.g + 1) % n_head_kv, r.pos};
    float other = row_error(a, c, k, r, next_pos, exact);
    if (n_head_kv > 1)
        other = fminf(other, row_error(a, c, k, r, next_head, exact));
    *own_err = fmaxf(*own_err, own);
    return own / fmaxf(other, 1e-6f);
}

static void test_layout(void)
{
    npl_model *cpu = nt_load_model("cpu", 1, NPU_CHUNK);
    npl_model *npu = nt_load_model("npu-emu", 1, NPU_CHUNK);
    REQUIRE(cpu && npu);
    const npl_hparams *hp = &npu->hp;
    enum { N = 40 };
    int32_t ids[N];
    ne_make_prompt(ids, N, 3, hp->n_vocab);
    npl_seq *a = prefilled(npu, ids, N), *c = prefilled(cpu, ids, N);
    REQUIRE(a && c);
    npl_error err;
    REQUIRE(a->backend->seq_export(a, &err) == NPL_OK);
    a->backend = npl_backend_named("cpu");
    bool exact = true, ring = false;
    float worst = 0.0f, own = 0.0f;
    size_t rows = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        ring |= a->kv_ring && npu->layers[l].local;
        uint32_t lo = a->kv_ring && npu->layers[l].local ? N - a->kv_ring : 0;
        for (uint32_t g = 0; g < hp->n_head_kv; g++)
            for (uint32_t p = lo; p < N; p++, rows++)
                for (int k = 0; k < 2; k++)
                    worst = fmaxf(worst, place_ratio(a, c, k, (row_at){l, g, p}, lo, N, &exact, &own));
    }
    fprintf(stderr,
            "  %zu K and V rows moved%s: bf16 values %s; largest relative error against the CPU's row %.4f, "
            "%.3f of that against the next row\n",
            rows, ring ? " (ring layers included)" : "", exact ? "exact" : "NOT exact", (double)own,
            (double)worst);
    CHECK(exact);
    CHECKF(worst < 0.7f, "a moved row is %.3f as far from its own place as from the next", (double)worst);
    npl_seq_free(a);
    npl_seq_free(c);
    npl_model_free(cpu);
    npl_model_free(npu);
}

/* ---- the KV pool --------------------------------------------------------- */

static void test_pool(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, NPU_CHUNK);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_error err;
    npl_kv_pool *pool = npl_kv_pool_create(m, 1ull << 30, &err);
    REQUIRE(pool);
    CHECK(npl_model_set_decode_device(m, "cpu", &err) == NPL_OK);
    int32_t ids[30];
    ne_make_prompt(ids, 30, 11, nv);
    /* turn 1: 20 prompt tokens and 2 decoded (ids[20], ids[21]) */
    uint32_t reused = 99;
    npl_seq *s = npl_kv_pool_acquire(pool, 1, ids, 20, N_CTX, &reused, &err);
    REQUIRE(s && reused == 0);
    npl_seq *twin = prefilled(m, ids, 20);
    REQUIRE(twin);
    CHECK(nt_prefill_rest(m, s, ids, 20, 0));
    CHECK(decode1(m, s, ids[20]) && decode1(m, s, ids[21]));
    CHECK(decode1(m, twin, ids[20]) && decode1(m, twin, ids[21]));
    npl_kv_pool_release(pool, 1, s);
    /* turn 2: all 30; the moved sequence seeds it, the rest on the CPU */
    s = npl_kv_pool_acquire(pool, 1, ids, 30, N_CTX, &reused, &err);
    REQUIRE(s);
    CHECKF(reused == 22, "reused %u of 22", reused);
    CHECK(nt_prefill_rest(m, s, ids, 30, 0));
    CHECK(nt_prefill_rest(m, twin, ids, 30, 0));
    check_devices(s, "cpu", "", 0);
    CHECK(nt_same_logits(s, twin, nv));
    CHECK(stats_of(m).kv_moved_sequences == 2);
    npl_seq_free(s);
    /* the split off: the moved sequence seeds nothing (the device
     * prefills); on again, not a prompt it holds less than half of */
    CHECK(npl_model_set_decode_device(m, NULL, &err) == NPL_OK);
    s = npl_kv_pool_acquire(pool, 1, ids, 30, N_CTX, &reused, &err);
    REQUIRE(s);
    CHECK(reused == 0);
    check_devices(s, "", "", 0);
    CHECK(nt_prefill_rest(m, s, ids, 30, 0));
    check_devices(s, "npu-emu", "", 0);
    npl_seq_free(s);
    CHECK(npl_model_set_decode_device(m, "cpu", &err) == NPL_OK);
    int32_t other[30];
    memcpy(other, ids, 12 * sizeof *other);
    ne_make_prompt(other + 12, 18, 12, nv);
    s = npl_kv_pool_acquire(pool, 1, other, 30, N_CTX, &reused, &err);
    REQUIRE(s);
    CHECK(reused == 0);
    npl_seq_free(s);
    s = npl_kv_pool_acquire(pool, 1, other, 22, N_CTX, &reused, &err);
    REQUIRE(s);
    CHECK(reused == 12);
    npl_seq_free(s);
    npl_seq_free(twin);
    npl_kv_pool_free(pool);
    npl_model_free(m);
}

/* ---- errors -------------------------------------------------------------- */

static void test_errors(void)
{
    npl_model *cpu = nt_load_model("cpu", 1, 0);
    npl_model *npu = nt_load_model("npu-emu", 1, NPU_CHUNK);
    REQUIRE(cpu && npu);
    npl_error err;
    CHECK(npl_model_set_decode_device(npu, "gpu", &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_model_set_decode_device(cpu, "npu-emu", &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_model_set_decode_device(cpu, "cpu", &err) == NPL_OK);
    CHECK(strcmp(npl_model_decode_device(cpu), "cpu") == 0);
    CHECK(npl_model_set_decode_device(NULL, "cpu", &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_model_set_decode_device(npu, "npu-emu", &err) == NPL_OK);
    CHECK(strcmp(npl_model_decode_device(npu), "npu-emu") == 0);

    CHECK(npl_model_set_decode_device(npu, "cpu", &err) == NPL_OK);
    uint32_t nv = npl_model_get_info(npu)->n_vocab;
    int32_t ids[8];
    ne_make_prompt(ids, 8, 5, nv);
    npl_seq *a = prefilled(npu, ids, 8), *other = prefilled(cpu, ids, 8);
    REQUIRE(a && other);
    npl_seq *batch[3] = {a, NULL, a};
    int32_t toks[3] = {1, 2, 3};
    CHECK(npl_decode(npu, batch, toks, 2, &err) == NPL_ERR_INVALID_ARG); /* NULL */
    CHECK(npl_decode(npu, batch + 2, toks, 1, &err) == NPL_OK && npl_decode(npu, batch, toks, 0, &err) == NPL_OK);
    npl_seq *b = prefilled(npu, ids, 8);
    REQUIRE(b);
    npl_seq *dup[2] = {b, b}, *foreign[2] = {b, other};
    int32_t bad[2] = {1, (int32_t)nv};
    CHECK(npl_decode(npu, dup, toks, 2, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_decode(npu, foreign, toks, 2, &err) == NPL_ERR_INVALID_ARG);
    CHECK(npl_decode(npu, dup, bad, 1 + 1, &err) == NPL_ERR_INVALID_ARG);
    check_devices(b, "npu-emu", "", 0); /* none of these moved it */
    CHECK(stats_of(npu).kv_moved_sequences == 1);
    npl_seq_free(a);
    npl_seq_free(b);
    npl_seq_free(other);
    npl_model_free(cpu);
    npl_model_free(npu);
}

NT_MAIN({"greedy", test_greedy}, {"moved_once", test_moved_once}, {"layout", test_layout}, {"pool", test_pool},
        {"errors", test_errors});
