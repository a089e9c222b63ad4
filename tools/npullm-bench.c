/* npullm-bench: how fast the CPU engine runs a model, in the terms of
 * llama.cpp's llama-bench so the two can be put side by side:
 *  - pp: prompt processing, one sequence prefilled with P random tokens
 *    from an empty cache (tokens/s);
 *  - tg: generation, one sequence decoding N tokens one step at a time
 *    from an empty cache (tokens/s);
 *  - batch: B sequences decoding N steps together, every step one token
 *    for each (aggregate tokens/s, B * N per elapsed time);
 *  - with -d D, each of them from a context depth of D random tokens
 *    prefilled first, untimed (llama-bench's -d), instead of an empty cache;
 * plus the load time and resident memory after load, the time of the
 * first forward pass (a 16-token prefill, which also repacks the integer
 * weights for the SIMD kernels) and resident memory after it (anonymous =
 * repacked weights and buffers; file = mapped pages), and the peak
 * resident set. Each test runs after that warm-up, -r times; the mean
 * and the best run are reported. On a mixture-of-experts model tg also
 * reports the bytes a token read, the experts counted by the engine,
 * against the active parameters' (bench_moe.c).
 *
 * --barrier measures the thread pool instead: the cost of one empty
 * parallel section (the wake-up and join every kernel call pays);
 * --matmul the matrix kernels alone (bench_matmul.c); --attention a
 * follow-up turn's prefill attention alone (bench_attention.c); --peak
 * the cores' multiply-add ceiling per kind of arithmetic (bench_peak.c);
 * --grammar the cost of constrained output (bench_grammar.c); --embed an
 * embedding model's texts per second (bench_embed.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_attention.h"
#include "bench_common.h"
#include "bench_grammar.h"
#include "bench_embed.h"
#include "bench_peak.h"
#include "bench_record.h"
#include "bench_image.h"
#include "bench_matmul.h"
#include "bench_moe.h"
#include "gguf.h"
#include "npullm.h"
#include "threadpool.h"

static const char usage_text[] =
    "usage: npullm-bench MODEL.gguf [-p 512] [-n 128] [-d 0] [-t THREADS] [-b BATCH] [-r REPS] [--json]\n"
    "       npullm-bench --barrier [-t THREADS] [--json]\n"
    "       npullm-bench --matmul [-t THREADS] [-r REPS] [--json]\n"
    "       npullm-bench --attention [-t THREADS] [-r REPS] [--json]\n"
    "       npullm-bench --peak [-t THREADS] [-r REPS] [--json]\n"
    "       npullm-bench MODEL.gguf --embed [-t THREADS] [-r REPS] [--json]\n"
    "       npullm-bench --image FILE MMPROJ [MODEL.gguf] [-t THREADS] [-r REPS] [--exact|--bf16|--q8] [--json]\n"
    "       npullm-bench --grammar [MODEL.gguf] [--vocab VOCAB.gguf] [-n 128] [-t THREADS] [-r REPS] [--json]\n"
    "\n"
    "  -p N        prompt tokens for the prompt-processing test (0 = skip; default 512)\n"
    "  -n N        generated tokens for the generation tests (0 = skip; default 128)\n"
    "  -d D        context depth: D random tokens prefilled (untimed) into each test's\n"
    "              sequences before it is timed (default 0)\n"
    "  -t N        compute threads (default: online CPUs)\n"
    "  -b B        concurrent sequences for the batched generation test (1 = skip; default 4)\n"
    "  -r R        repetitions of each test (default 3)\n"
    "  --chunk N   prefill chunk (default: the engine's, 256)\n"
    "  --kv F      KV cache format: f16 (default) or q8_0\n"
    "  --device D  cpu (default), npu-emu, npu or auto; on an NPU device the counted\n"
    "              dispatches and host<->device bytes per token are printed too\n"
    "  --json      one JSON object on stdout\n"
    "  --record F  --json, and the object appended to the results file F as one line with\n"
    "              the date, CPU, load and command (bench/results-<machine kind>.jsonl)\n"
    "  --barrier   time an empty parallel section of the thread pool\n"
    "  --matmul    time the matrix kernels alone (Q4_0, Q8_0, Q4_K, Q6_K; 1 and 64 vectors)\n"
    "  --attention time a follow-up turn's prefill attention alone, per-query against multi-position kernel\n"
    "  --peak      the cores' multiply-add ceiling per kind of arithmetic (registers only)\n"
    "  --embed     an embedding model: texts/s at batch 1, 16 and 64, 128-token texts\n"
    "  --image     time the vision tower on one image (per stage; with a Gemma 3 MODEL\n"
    "              also the prompt's prefill: the time to the first token); -r default 1\n"
    "  --exact     with --image: the exact path (npl_vision_params.exact)\n"
    "  --bf16      with --image: F16 weights as BF16 (npl_vision_params.bf16_weights)\n"
    "  --q8        with --image: F16 weights quantized to Q8_0 at load (npl_vision_params.q8_weights)\n"
    "  --grammar   constrained output: the token mask's cost per step on the tokenizer of\n"
    "              --vocab (or the model's), and greedy decode with a nested JSON Schema vs\n"
    "              without on MODEL, in alternating rounds\n";

typedef struct options {
    const char *model;
    const char *device;
    const char *kv; /* KV cache format, NULL: the engine's default */
    long p, n, d, t, b, r, chunk;
    bool json, barrier, matmul, attention, peak, exact, bf16, q8, grammar, embed;
    const char *vocab; /* --vocab for --grammar */
    const char *record; /* --record FILE */
    const char *image, *mmproj; /* --image FILE MMPROJ */
    bool reps_given;
} options;

typedef struct stat {
    double mean, best, sd; /* tokens per second */
} stat;

static void die(const char *msg, const char *detail)
{
    fprintf(stderr, "npullm-bench: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static void usage_error(const char *msg)
{
    fprintf(stderr, "npullm-bench: %s\n%s", msg, usage_text);
    exit(2);
}

static options parse(int argc, char **argv)
{
    options o = {.p = 512, .n = 128, .t = 0, .b = 4, .r = 3, .chunk = 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long *target = NULL;
        long lo = 0, hi = 1 << 20;
        if (!strcmp(a, "-p")) {
            target = &o.p;
        } else if (!strcmp(a, "-n")) {
            target = &o.n;
        } else if (!strcmp(a, "-d")) {
            target = &o.d;
        } else if (!strcmp(a, "-t")) {
            target = &o.t;
            hi = 1024;
        } else if (!strcmp(a, "-b")) {
            target = &o.b;
            lo = 1;
            hi = 4096;
        } else if (!strcmp(a, "-r")) {
            target = &o.r;
            o.reps_given = true;
            lo = 1;
            hi = 1000;
        } else if (!strcmp(a, "--chunk")) {
            target = &o.chunk;
            lo = 1;
            hi = 65536;
        } else if (!strcmp(a, "--device")) {
            if (i + 1 >= argc)
                usage_error("--device needs a value");
            o.device = argv[++i];
        } else if (!strcmp(a, "--kv")) {
            if (i + 1 >= argc || (strcmp(argv[i + 1], "f16") != 0 && strcmp(argv[i + 1], "q8_0") != 0))
                usage_error("--kv needs f16 or q8_0");
            o.kv = argv[++i];
        } else if (!strcmp(a, "--json")) {
            o.json = true;
        } else if (!strcmp(a, "--record")) {
            if (i + 1 >= argc)
                usage_error("--record needs a results file");
            o.record = argv[++i];
            o.json = true;
        } else if (!strcmp(a, "--barrier")) {
            o.barrier = true;
        } else if (!strcmp(a, "--attention")) {
            o.attention = true;
        } else if (!strcmp(a, "--peak")) {
            o.peak = true;
        } else if (!strcmp(a, "--embed")) {
            o.embed = true;
        } else if (!strcmp(a, "--matmul")) {
            o.matmul = true;
        } else if (!strcmp(a, "--image")) {
            if (i + 2 >= argc)
                usage_error("--image needs an image file and a projector (mmproj) file");
            o.image = argv[++i];
            o.mmproj = argv[++i];
        } else if (!strcmp(a, "--grammar")) {
            o.grammar = true;
        } else if (!strcmp(a, "--vocab")) {
            if (i + 1 >= argc)
                usage_error("--vocab needs a GGUF file");
            o.vocab = argv[++i];
        } else if (!strcmp(a, "--exact")) {
            o.exact = true;
        } else if (!strcmp(a, "--bf16")) {
            o.bf16 = true;
        } else if (!strcmp(a, "--q8")) {
            o.q8 = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage_text, stdout);
            exit(0);
        } else if (a[0] == '-') {
            usage_error("unknown option");
        } else if (!o.model) {
            o.model = a;
        } else {
            usage_error("more than one model given");
        }
        if (target) {
            if (i + 1 >= argc || !parse_long(argv[++i], lo, hi, target))
                usage_error("bad or missing number after an option");
        }
    }
    if (!o.model && !o.barrier && !o.matmul && !o.attention && !o.peak && !o.image && !(o.grammar && o.vocab))
        usage_error("no model given");
    return o;
}

static stat summarize(const double *tps, long r)
{
    stat s = {0, 0, 0};
    for (long i = 0; i < r; i++) {
        s.mean += tps[i];
        if (tps[i] > s.best)
            s.best = tps[i];
    }
    s.mean /= (double)r;
    for (long i = 0; i < r; i++)
        s.sd += (tps[i] - s.mean) * (tps[i] - s.mean);
    s.sd = r > 1 ? sqrt(s.sd / (double)(r - 1)) : 0.0;
    return s;
}

/* kB of a "Name:" line of /proc/self/status, or -1. */
static long status_kb(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(name);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, name, n) && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static void random_tokens(int32_t *ids, size_t n, uint32_t n_vocab, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((*state >> 33) % n_vocab);
    }
}

static npl_seq *new_seq(npl_model *m, uint32_t n_ctx)
{
    npl_error err;
    npl_seq *s = npl_seq_create(m, n_ctx, &err);
    if (!s)
        die("cannot create a sequence", err.message);
    return s;
}

/* A fresh sequence with depth random tokens prefilled (untimed). */
static npl_seq *new_seq_at(npl_model *m, uint32_t n_ctx, size_t depth, uint32_t n_vocab, uint64_t *rng)
{
    npl_seq *s = new_seq(m, n_ctx);
    if (depth == 0)
        return s;
    int32_t *ids = malloc(depth * sizeof *ids);
    if (!ids)
        die("out of memory", NULL);
    random_tokens(ids, depth, n_vocab, rng);
    npl_error err;
    if (npl_prefill(m, s, ids, depth, 0, NULL, &err) != NPL_OK)
        die("prefill to the context depth failed", err.message);
    free(ids);
    return s;
}

/* Seconds to prefill n tokens into a fresh sequence at the given depth. */
static double run_pp(npl_model *m, uint32_t n_ctx, size_t depth, const int32_t *ids, size_t n, uint64_t *rng)
{
    npl_seq *s = new_seq_at(m, n_ctx, depth, npl_model_get_info(m)->n_vocab, rng);
    npl_error err;
    double t0 = bench_now_s();
    if (npl_prefill(m, s, ids, n, 0, NULL, &err) != NPL_OK)
        die("prefill failed", err.message);
    double t = bench_now_s() - t0;
    npl_seq_free(s);
    return t;
}

/* Seconds for n decode steps of b fresh sequences together, each from
 * the given depth. */
static double run_tg(npl_model *m, uint32_t n_ctx, size_t depth, size_t b, size_t n, uint32_t n_vocab, uint64_t *rng)
{
    npl_seq **seqs = calloc(b, sizeof *seqs);
    int32_t *tok = calloc(b, sizeof *tok);
    if (!seqs || !tok)
        die("out of memory", NULL);
    for (size_t i = 0; i < b; i++)
        seqs[i] = new_seq_at(m, n_ctx, depth, n_vocab, rng);
    npl_error err;
    double t0 = bench_now_s();
    for (size_t step = 0; step < n; step++) {
        random_tokens(tok, b, n_vocab, rng);
        if (npl_decode(m, seqs, tok, b, &err) != NPL_OK)
            die("decode failed", err.message);
    }
    double t = bench_now_s() - t0;
    for (size_t i = 0; i < b; i++)
        npl_seq_free(seqs[i]);
    free(seqs);
    free(tok);
    return t;
}

typedef struct barrier_job {
    volatile int sink[1024 * 16];
} barrier_job;

static void empty_task(void *ctx, size_t begin, size_t end, int thread)
{
    barrier_job *j = ctx;
    j->sink[thread * 16] += (int)(end - begin);
}

static int bench_barrier(const options *o)
{
    npl_threadpool *pool = npl_threadpool_create((int)o->t);
    barrier_job *job = calloc(1, sizeof *job);
    if (!pool || !job)
        die("cannot start the thread pool", strerror(errno));
    int nt = npl_threadpool_size(pool);
    enum { ITER = 20000 };
    double best = 1e9, sum = 0.0;
    for (long r = 0; r < o->r; r++) {
        for (int i = 0; i < 1000; i++) /* warm-up: workers spinning */
            npl_threadpool_run(pool, (size_t)nt, empty_task, job);
        double t0 = bench_now_s();
        for (int i = 0; i < ITER; i++)
            npl_threadpool_run(pool, (size_t)nt, empty_task, job);
        double us = (bench_now_s() - t0) / ITER * 1e6;
        sum += us;
        if (us < best)
            best = us;
    }
    if (o->json)
        printf("{\"threads\": %d, \"section_us_mean\": %.3f, \"section_us_best\": %.3f}\n", nt, sum / (double)o->r,
               best);
    else
        printf("threads %d: one empty parallel section costs %.2f us (best %.2f us, %ld runs of %d)\n", nt,
               sum / (double)o->r, best, o->r, ITER);
    npl_threadpool_free(pool);
    free(job);
    return 0;
}

/* Bytes of weights one decode step reads: every matrix of the file
 * (tensors of 2 or more dimensions) except the token embeddings when the
 * model has its own output matrix (then only a row of them is read).
 * Times tokens/s, the rate to compare with npullm-bench --matmul. */
static uint64_t decode_weight_bytes(const npl_model *m)
{
    const npl_gguf *g = npl_model_gguf(m);
    if (!g)
        return 0;
    bool own_output = npl_gguf_find_tensor(g, "output.weight") != NULL;
    uint64_t bytes = 0;
    for (size_t i = 0; i < npl_gguf_n_tensors(g); i++) {
        const npl_gguf_tensor *t = npl_gguf_tensor_at(g, i);
        if (t->n_dims >= 2 && !(own_output && npl_str_eq(t->name, "token_embd.weight")))
            bytes += t->size;
    }
    return bytes;
}

/* Per token and per chunk, from the device's counters over every run
 * above (warm-up included): what the NPU performance model needs. */
static double per(uint64_t v, uint64_t n)
{
    return n ? (double)v / (double)n : 0.0;
}

static void print_device_stats(const npl_device_stats *d)
{
    const npl_device_traffic *dec = &d->decode, *pre = &d->prefill;
    printf("decode       per token: %.2f dispatches (%u groups per layer + LM head), %.2f submissions,\n"
           "             %.0f B to the device, %.0f B back, %.0f weight B  (%llu tokens)\n",
           per(dec->dispatches, d->decode_tokens), d->groups_per_layer_decode,
           per(dec->submissions, d->decode_tokens), per(dec->h2d_activation_bytes, d->decode_tokens),
           per(dec->d2h_activation_bytes, d->decode_tokens), per(dec->h2d_weight_bytes, d->decode_tokens),
           (unsigned long long)d->decode_tokens);
    printf("prefill      %u-row chunks: %.2f dispatches, %.0f B to the device per chunk (%.0f B per token);\n"
           "             per prompt: LM head once, %.0f B back; %.0f weight B  (%llu tokens, %llu chunks, %llu prompts)\n",
           d->prefill_chunk, per(pre->dispatches - d->prefill_prompts, d->prefill_chunks),
           per(pre->h2d_activation_bytes, d->prefill_chunks), per(pre->h2d_activation_bytes, d->prefill_tokens),
           per(pre->d2h_activation_bytes, d->prefill_prompts), per(pre->h2d_weight_bytes, d->prefill_chunks),
           (unsigned long long)d->prefill_tokens, (unsigned long long)d->prefill_chunks,
           (unsigned long long)d->prefill_prompts);
    printf("weights      %.1f MiB resident, %llu B uploaded at load, %llu B after load\n",
           (double)d->weight_bytes / 1048576.0, (unsigned long long)d->load.h2d_weight_bytes,
           (unsigned long long)(dec->h2d_weight_bytes + pre->h2d_weight_bytes));
}

static void print_traffic_json(const char *name, const npl_device_traffic *t)
{
    printf(", \"%s\": {\"dispatches\": %llu, \"submissions\": %llu, \"h2d_weight_bytes\": %llu, "
           "\"h2d_activation_bytes\": %llu, \"d2h_activation_bytes\": %llu}",
           name, (unsigned long long)t->dispatches, (unsigned long long)t->submissions,
           (unsigned long long)t->h2d_weight_bytes, (unsigned long long)t->h2d_activation_bytes,
           (unsigned long long)t->d2h_activation_bytes);
}

static void print_device_stats_json(const npl_device_stats *d)
{
    printf(", \"device_stats\": {\"weight_bytes\": %llu, \"prefill_chunk\": %u, "
           "\"groups_per_layer_decode\": %u, \"decode_tokens\": %llu, \"prefill_tokens\": %llu, "
           "\"prefill_chunks\": %llu, \"prefill_prompts\": %llu",
           (unsigned long long)d->weight_bytes, d->prefill_chunk, d->groups_per_layer_decode,
           (unsigned long long)d->decode_tokens, (unsigned long long)d->prefill_tokens,
           (unsigned long long)d->prefill_chunks, (unsigned long long)d->prefill_prompts);
    print_traffic_json("load", &d->load);
    print_traffic_json("prefill", &d->prefill);
    print_traffic_json("decode", &d->decode);
    printf(", \"decode_per_token\": {\"dispatches\": %.3f, \"submissions\": %.3f, \"h2d_bytes\": %.1f, "
           "\"d2h_bytes\": %.1f, \"h2d_weight_bytes\": %.1f}}",
           per(d->decode.dispatches, d->decode_tokens), per(d->decode.submissions, d->decode_tokens),
           per(d->decode.h2d_activation_bytes, d->decode_tokens), per(d->decode.d2h_activation_bytes, d->decode_tokens),
           per(d->decode.h2d_weight_bytes, d->decode_tokens));
}

/* The other benchmarks than a model's speed (--barrier, --matmul, ...):
 * their exit code, or -1 when none was asked for. */
static int run_other_bench(const options *o)
{
    if (o->barrier)
        return bench_barrier(o);
    if (o->matmul)
        return bench_matmul((int)o->t, o->r, o->json);
    if (o->attention)
        return bench_attention((int)o->t, o->r, o->json);
    if (o->peak)
        return bench_peak((int)o->t, o->r, o->json);
    if (o->embed)
        return bench_embed(o->model, (int)o->t, o->r, o->json);
    if (o->image) {
        bench_image_opts io = {.image = o->image, .mmproj = o->mmproj, .model = o->model, .n_threads = (int)o->t,
                               .reps = o->reps_given ? o->r : 1, .exact = o->exact, .bf16 = o->bf16, .q8 = o->q8,
                               .json = o->json};
        return bench_image(&io);
    }
    if (o->grammar) {
        bench_grammar_opts go = {.model = o->model, .vocab = o->vocab, .n_threads = (int)o->t, .n = o->n,
                                 .reps = o->r, .json = o->json};
        return bench_grammar(&go);
    }
    return -1;
}

/* What a model's run measured. */
typedef struct model_result {
    int threads;
    double load_s, first_s;
    long rss_anon, rss_file;   /* after loading */
    long warm_anon, warm_file; /* after the first forward pass */
    long peak;
    stat pp, tg, bt;
    double step_gb; /* GB of weights per decode step */
    bench_moe moe;  /* the experts a decode step read (a mixture-of-experts model) */
    npl_device_stats ds;
    bool on_device;
} model_result;

/* The warm-up, then each rate o->r times: prompt processing, one
 * sequence's generation, o->b sequences' batched generation. */
static void measure_model(const options *o, npl_model *m, model_result *res)
{
    const npl_model_info *info = npl_model_get_info(m);
    size_t depth = (size_t)o->d, ctx_needed = depth + (size_t)(o->p > o->n ? o->p : o->n) + 16;
    uint32_t n_ctx = (uint32_t)(ctx_needed < 256 ? 256 : ctx_needed);
    uint64_t rng = 42;
    int32_t *ids = malloc(((size_t)o->p + 16) * sizeof *ids);
    double *tps = calloc((size_t)o->r, sizeof *tps);
    if (!ids || !tps)
        die("out of memory", NULL);

    /* warm-up: every code path once, pages of the weights touched. The
     * first forward pass also repacks the integer weights for the SIMD
     * kernels: its time and the memory after it are that cost. */
    random_tokens(ids, 16, info->n_vocab, &rng);
    res->first_s = run_pp(m, n_ctx, 0, ids, 16, &rng);
    res->warm_anon = status_kb("RssAnon");
    res->warm_file = status_kb("RssFile");
    run_tg(m, n_ctx, 0, (size_t)o->b, 2, info->n_vocab, &rng);

    if (o->p > 0) {
        for (long r = 0; r < o->r; r++) {
            random_tokens(ids, (size_t)o->p, info->n_vocab, &rng);
            tps[r] = (double)o->p / run_pp(m, n_ctx, depth, ids, (size_t)o->p, &rng);
        }
        res->pp = summarize(tps, o->r);
    }
    if (o->n > 0) {
        bench_moe_begin(m, &res->moe);
        for (long r = 0; r < o->r; r++)
            tps[r] = (double)o->n / run_tg(m, n_ctx, depth, 1, (size_t)o->n, info->n_vocab, &rng);
        res->tg = summarize(tps, o->r);
        bench_moe_end(m, (uint64_t)(o->n * o->r), decode_weight_bytes(m), &res->moe);
        if (o->b > 1) {
            for (long r = 0; r < o->r; r++)
                tps[r] = (double)(o->n * o->b) / run_tg(m, n_ctx, depth, (size_t)o->b, (size_t)o->n, info->n_vocab, &rng);
            res->bt = summarize(tps, o->r);
        }
    }
    res->peak = peak_rss_kb();
    res->step_gb = (double)decode_weight_bytes(m) * 1e-9;
    if (res->moe.tokens) /* the experts a token chose, not all of them */
        res->step_gb = bench_moe_read_bytes(&res->moe) * 1e-9;
    res->on_device = npl_model_device_stats(m, &res->ds);
    free(ids);
    free(tps);
}

static void print_result_json(const options *o, const npl_model *m, const model_result *res)
{
    const npl_model_info *info = npl_model_get_info(m);
    printf("{\"model\": \"%s\", \"quantization\": \"%s\", \"n_params\": %llu, \"threads\": %d, "
           "\"load_s\": %.3f, \"rss_anon_mib\": %.1f, \"rss_file_mib\": %.1f, \"first_pp16_s\": %.3f, "
           "\"warm_rss_anon_mib\": %.1f, \"warm_rss_file_mib\": %.1f, \"peak_rss_mib\": %.1f",
           info->name, info->quantization, (unsigned long long)info->n_params, res->threads, res->load_s,
           (double)res->rss_anon / 1024.0, (double)res->rss_file / 1024.0, res->first_s,
           (double)res->warm_anon / 1024.0, (double)res->warm_file / 1024.0, (double)res->peak / 1024.0);
    if (o->p > 0)
        printf(", \"pp\": {\"tokens\": %ld, \"tps_mean\": %.2f, \"tps_best\": %.2f, \"tps_sd\": %.2f}", o->p,
               res->pp.mean, res->pp.best, res->pp.sd);
    if (o->n > 0)
        printf(", \"tg\": {\"tokens\": %ld, \"tps_mean\": %.2f, \"tps_best\": %.2f, \"tps_sd\": %.2f, "
               "\"weight_gb_per_step\": %.4f, \"weight_gbs_mean\": %.2f, \"weight_gbs_best\": %.2f}",
               o->n, res->tg.mean, res->tg.best, res->tg.sd, res->step_gb, res->step_gb * res->tg.mean,
               res->step_gb * res->tg.best);
    if (o->n > 0)
        bench_moe_print_json(stdout, &res->moe, res->tg.mean);
    if (o->n > 0 && o->b > 1)
        printf(", \"batch\": {\"sequences\": %ld, \"tokens_each\": %ld, \"tps_mean\": %.2f, \"tps_best\": %.2f, "
               "\"tps_sd\": %.2f, \"vs_tg\": %.2f}",
               o->b, o->n, res->bt.mean, res->bt.best, res->bt.sd,
               res->tg.mean > 0 ? res->bt.mean / res->tg.mean : 0.0);
    if (o->d > 0)
        printf(", \"depth\": %ld", o->d);
    printf(", \"kv\": \"%s\"", o->kv ? o->kv : "f16");
    printf(", \"device\": \"%s\"", npl_model_device(m));
    if (res->on_device)
        print_device_stats_json(&res->ds);
    printf(", \"reps\": %ld}\n", o->r);
}

static void print_result_text(const options *o, const npl_model *m, const model_result *res)
{
    const npl_model_info *info = npl_model_get_info(m);
    printf("model        %s (%s, %.2f B parameters)\n", info->name, info->quantization,
           (double)info->n_params * 1e-9);
    printf("threads      %d\n", res->threads);
    printf("kv cache     %s\n", o->kv ? o->kv : "f16");
    printf("load         %.2f s; resident after load: %.1f MiB anonymous, %.1f MiB file\n", res->load_s,
           (double)res->rss_anon / 1024.0, (double)res->rss_file / 1024.0);
    printf("first pp16   %.2f s (repacks the weights); resident after: %.1f MiB anonymous, %.1f MiB file\n",
           res->first_s, (double)res->warm_anon / 1024.0, (double)res->warm_file / 1024.0);
    if (o->d > 0)
        printf("depth        %ld tokens prefilled (untimed) before each run\n", o->d);
    if (o->p > 0)
        printf("pp%-5ld      %8.2f tokens/s  (best %.2f, sd %.2f)\n", o->p, res->pp.mean, res->pp.best, res->pp.sd);
    if (o->n > 0)
        printf("tg%-5ld      %8.2f tokens/s  (best %.2f, sd %.2f); weights read: %.1f MiB per step, "
               "%.2f GB/s (best %.2f)\n",
               o->n, res->tg.mean, res->tg.best, res->tg.sd, res->step_gb * 1e9 / 1048576.0,
               res->step_gb * res->tg.mean, res->step_gb * res->tg.best);
    if (o->n > 0)
        bench_moe_print_text(stdout, &res->moe, res->tg.mean);
    if (o->n > 0 && o->b > 1)
        printf("tg%ld x %-4ld %8.2f tokens/s aggregate (best %.2f, sd %.2f; %.2fx one sequence)\n", o->n, o->b,
               res->bt.mean, res->bt.best, res->bt.sd, res->tg.mean > 0 ? res->bt.mean / res->tg.mean : 0.0);
    printf("peak RSS     %.1f MiB\n", (double)res->peak / 1024.0);
    printf("device       %s (%s)\n", npl_model_device(m), npl_model_device_reason(m));
    if (res->on_device)
        print_device_stats(&res->ds);
}

int main(int argc, char **argv)
{
    options o = parse(argc, argv);
    if (o.record && !bench_record_start(o.record, argc, argv))
        die("cannot record the result", strerror(errno));
    int rc = run_other_bench(&o);
    if (rc >= 0)
        return rc;

    npl_model_params mp;
    npl_model_params_default(&mp);
    mp.n_threads = (int)o.t;
    if (o.chunk)
        mp.prefill_chunk = (uint32_t)o.chunk;
    mp.device = o.device;
    mp.kv_type = o.kv;
    npl_error err;
    model_result res = {.threads = o.t ? (int)o.t : npl_cpu_count()};
    double t0 = bench_now_s();
    npl_model *m = npl_model_load(o.model, &mp, &err);
    res.load_s = bench_now_s() - t0;
    if (!m)
        die("cannot load the model", err.message);
    res.rss_anon = status_kb("RssAnon");
    res.rss_file = status_kb("RssFile");
    measure_model(&o, m, &res);
    if (o.json)
        print_result_json(&o, m, &res);
    else
        print_result_text(&o, m, &res);
    npl_model_free(m);
    return 0;
}
