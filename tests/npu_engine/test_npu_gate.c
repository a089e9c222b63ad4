/* The correctness gate of the emulated NPU against the CPU engine. A
 * case loads MODEL twice (cpu and npu-emu, 16-row prefill chunks on the
 * NPU so the long prompt spans several), and for each prompt runs greedy
 * decoding on the CPU's tokens (teacher-forced: both engines are fed the
 * CPU's argmax), checking at every step, both directions, that each
 * engine's argmax is in the other's top 5.
 *
 *   gate MODEL       the CPU runs the file's weights. Right for q4_0
 *                    sources, whose 4-bit codes Q4NX keeps (only the
 *                    scales are rounded to bf16).
 *   gate_twin MODEL  the CPU runs the weights the NPU holds: every matrix
 *                    replaced by its Q4NX copy dequantized to what the MAC
 *                    units see. Float sources are requantized to 4 bits,
 *                    which on these random-weight models moves the logits
 *                    far more than the runtime's bf16 numerics; the twin
 *                    separates the two (the direct comparison is printed
 *                    too, not checked). The requantizer's own error bound
 *                    is tested in tests/npu.
 *
 * The NPU computes with bf16 activations, the CPU with f32 (8-bit for
 * integer dots), so log-probabilities differ a little; the summary line
 * says by how much. */
#include <math.h>
#include <stdint.h>

#include "ggml_types.h"
#include "model_internal.h"
#include "npu_engine_test.h"
#include "npullm.h"
#include "q4nx.h"
#include "tokenizer.h"

enum { NPU_CHUNK = 16, STEPS = 12, TOP = 5, N_CTX = 512 };

static npl_model *load(const char *path, const char *device, uint32_t chunk)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 1;
    p.prefill_chunk = chunk;
    p.device = device;
    npl_error err;
    npl_model *m = npl_model_load(path, &p, &err);
    if (!m)
        fprintf(stderr, "cannot load %s on %s: %s\n", path ? path : "(no model given)", device,
                err.message);
    return m;
}

typedef struct prompt {
    const char *text;
    bool chat;
} prompt;

static const prompt prompts[] = {
    {"The capital of France is", false},
    {"Write a haiku about the sea.", true},
    {"1, 2, 3, 4, 5, 6,", false},
    /* Longer than several prefill chunks. */
    {"Once upon a time, in a kingdom by the sea, there lived a clockmaker who built "
     "small brass birds. Every morning she wound them, and every evening they sang the "
     "songs of the day back to her: the baker's shouting, the rain on the roofs, the bells "
     "of the harbour and the quarrels of the gulls. One winter a bird fell silent.",
     false},
};

static bool tokenize(const npl_model *m, const prompt *p, npl_tokens *out)
{
    npl_error err;
    npl_status st;
    if (p->chat) {
        npl_chat_message msg = {"user", p->text};
        st = npl_chat_tokenize(m, &msg, 1, true, out, &err);
    } else {
        st = npl_tokenize(npl_model_tokenizer(m), p->text, strlen(p->text),
                          NPL_TOKENIZE_ADD_BOS, out, &err);
    }
    if (st)
        fprintf(stderr, "tokenize: %s\n", err.message);
    return st == NPL_OK;
}

static bool in_top(const int32_t *ids, int32_t id)
{
    for (int i = 0; i < TOP; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static float logprob_of(const float *logits, uint32_t n_vocab, int32_t id)
{
    float mx = logits[0];
    for (uint32_t i = 1; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (uint32_t i = 0; i < n_vocab; i++)
        sum += exp((double)(logits[i] - mx));
    return (float)((double)(logits[id] - mx) - log(sum));
}

typedef struct gate_totals {
    int steps, argmax_agree, failures;
    float max_dlp; /* |logprob difference| of the CPU's token */
} gate_totals;

static void run_prompt(npl_model *cpu, npl_model *npu, const prompt *p, bool check,
                       gate_totals *t)
{
    uint32_t nv = npl_model_get_info(cpu)->n_vocab;
    npl_tokens toks = {0};
    npl_error err;
    npl_seq *sc = npl_seq_create(cpu, N_CTX, &err);
    npl_seq *sn = npl_seq_create(npu, N_CTX, &err);
    REQUIRE(sc && sn);
    REQUIRE(tokenize(cpu, p, &toks));
    CHECK(npl_prefill(cpu, sc, toks.ids, toks.n, 0, NULL, &err) == NPL_OK);
    CHECKF(npl_prefill(npu, sn, toks.ids, toks.n, 0, NULL, &err) == NPL_OK, "%s", err.message);
    int agree = 0;
    for (int step = 0; step < STEPS; step++) {
        const float *lc = npl_seq_logits(sc), *ln = npl_seq_logits(sn);
        REQUIRE(lc && ln);
        int32_t top_c[TOP], top_n[TOP];
        float lp_c[TOP], lp_n[TOP];
        npl_top_logprobs(lc, nv, TOP, top_c, lp_c);
        npl_top_logprobs(ln, nv, TOP, top_n, lp_n);
        bool ok = in_top(top_n, top_c[0]) && in_top(top_c, top_n[0]);
        CHECKF(ok || !check, "prompt '%.20s...' step %d: cpu argmax %d (lp %.3f) vs npu argmax %d (lp %.3f)",
               p->text, step, top_c[0], lp_c[0], top_n[0], lp_n[0]);
        t->failures += !ok;
        agree += top_c[0] == top_n[0];
        float d = fabsf(lp_c[0] - logprob_of(ln, nv, top_c[0]));
        t->max_dlp = d > t->max_dlp ? d : t->max_dlp;
        int32_t next = top_c[0];
        npl_seq *one;
        one = sc;
        CHECK(npl_decode(cpu, &one, &next, 1, &err) == NPL_OK);
        one = sn;
        CHECKF(npl_decode(npu, &one, &next, 1, &err) == NPL_OK, "%s", err.message);
    }
    t->steps += STEPS;
    t->argmax_agree += agree;
    fprintf(stderr, "  %3zu-token prompt '%.24s...': argmax agrees %d/%d\n", toks.n, p->text,
            agree, STEPS);
    npl_tokens_free(&toks);
    npl_seq_free(sc);
    npl_seq_free(sn);
}

static void run_gate(npl_model *cpu, npl_model *npu, const char *what, bool check)
{
    gate_totals t = {0};
    for (size_t i = 0; i < sizeof prompts / sizeof prompts[0]; i++)
        run_prompt(cpu, npu, &prompts[i], check, &t);
    fprintf(stderr,
            "%s: %d steps, top-%d both ways failed at %d, argmax agrees at %d, "
            "max |dlogprob| of the cpu token %.3f%s\n",
            what, t.steps, TOP, t.failures, t.argmax_agree, (double)t.max_dlp,
            check ? "" : " (not checked)");
}

static void test_gate(void)
{
    const char *path = nt_arg(0);
    npl_model *cpu = load(path, "cpu", 0);
    npl_model *npu = load(path, "npu-emu", NPU_CHUNK);
    if (cpu && npu) {
        CHECK(strcmp(npl_model_device(npu), "npu-emu") == 0);
        run_gate(cpu, npu, "gate against the file's weights", true);
    } else {
        CHECK(cpu && npu);
    }
    npl_model_free(cpu);
    npl_model_free(npu);
}

/* ---- the Q4NX twin ------------------------------------------------------ */

/* f32 copies of the twin's matrices, freed with the model. */
typedef struct twin {
    float **bufs;
    size_t n, cap;
} twin;

/* Replaces *w by an f32 matrix of its Q4NX weights as the MACs see them. */
static bool twin_matrix(twin *t, npl_matrix *w)
{
    npl_error err;
    npl_q4nx_layout l;
    if (npl_q4nx_layout_init(&l, w->n_rows, w->n_cols, &err)) {
        fprintf(stderr, "twin: %s\n", err.message);
        return false;
    }
    void *packed = malloc(l.bytes);
    float *f = malloc((size_t)l.rows * l.cols * sizeof *f);
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        float **nb = realloc(t->bufs, t->cap * sizeof *nb);
        if (nb)
            t->bufs = nb;
        else
            t->cap = t->n;
    }
    bool ok = packed && f && t->n < t->cap &&
              npl_q4nx_repack(&l, w->type, w->data, w->row_bytes * (size_t)w->n_rows, packed,
                              l.bytes, NULL, &err) == NPL_OK;
    if (ok) {
        for (uint32_t r = 0; r < l.rows; r++)
            npl_q4nx_dequantize_row_bf16(packed, &l, r, f + (size_t)r * l.cols);
        ok = npl_matrix_init(w, NPL_TYPE_F32, f, l.cols, l.rows);
    }
    free(packed);
    if (!ok) {
        free(f);
        return false;
    }
    t->bufs[t->n++] = f;
    return true;
}

static bool make_twin(npl_model *m, twin *t)
{
    bool ok = true;
    for (uint32_t l = 0; l < m->hp.n_layer && ok; l++) {
        npl_layer *L = &m->layers[l];
        npl_matrix *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0] && ok; i++)
            ok = twin_matrix(t, ws[i]);
    }
    /* The LM head only: embeddings are looked up in the file's rows by
     * both engines. */
    return ok && twin_matrix(t, &m->output);
}

static void test_gate_twin(void)
{
    const char *path = nt_arg(0);
    npl_model *cpu = load(path, "cpu", 0);
    npl_model *npu = load(path, "npu-emu", NPU_CHUNK);
    twin t = {0};
    if (cpu && npu) {
        run_gate(cpu, npu, "direct, against the file's weights", false);
        REQUIRE(make_twin(cpu, &t));
        run_gate(cpu, npu, "gate against the Q4NX twin", true);
    } else {
        CHECK(cpu && npu);
    }
    npl_model_free(cpu);
    npl_model_free(npu);
    for (size_t i = 0; i < t.n; i++)
        free(t.bufs[i]);
    free(t.bufs);
}

NT_MAIN({"gate", test_gate}, {"gate_twin", test_gate_twin})
