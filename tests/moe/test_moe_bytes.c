/* The experts' byte counter (npl_model_moe_stats) and npullm-bench's bytes
 * per decoded token from it (tools/bench_moe.c), on small generated MoE
 * models: a decoded token reads, per layer, exactly its k experts, so the
 * bytes per token are the stacked expert tensors' bytes times k / n_expert
 * (the active parameters'); a prefill chunk reads each chosen expert once;
 * a dense model has no counters.
 *
 *   usage: test-moe-bytes decode|prefill MOE.gguf
 *          test-moe-bytes dense DENSE.gguf */
#include <string.h>

#include "bench_moe.h"
#include "gguf.h"
#include "npl_test.h"
#include "npullm.h"

static npl_model *load(const char *path)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 1;
    npl_error err;
    npl_model *m = npl_model_load(path, &p, &err);
    CHECKF(m != NULL, "  %s: %s", path, err.message);
    return m;
}

/* The bytes of the file's stacked expert matrices (ffn_*_exps.weight;
 * gpt-oss's expert biases are not matrices). */
static uint64_t exps_bytes(const npl_model *m)
{
    static const char suffix[] = "_exps.weight";
    const size_t n = sizeof suffix - 1;
    const npl_gguf *g = npl_model_gguf(m);
    uint64_t b = 0;
    for (size_t i = 0; i < npl_gguf_n_tensors(g); i++) {
        const npl_gguf_tensor *t = npl_gguf_tensor_at(g, i);
        if (t->name.len >= n && !memcmp(t->name.ptr + t->name.len - n, suffix, n))
            b += t->size;
    }
    return b;
}

static void test_decode(void)
{
    npl_model *m = load(nt_arg(0));
    REQUIRE(m);
    npl_error err;
    npl_seq *s = npl_seq_create(m, 64, &err);
    REQUIRE(s);
    bench_moe r;
    REQUIRE(bench_moe_begin(m, &r));
    uint64_t all = exps_bytes(m);
    CHECKF(r.start.expert_bytes_all == all, "  all experts %llu, the file's _exps tensors %llu",
           (unsigned long long)r.start.expert_bytes_all, (unsigned long long)all);
    enum { T = 12 };
    for (int32_t i = 0; i < T; i++)
        CHECK_OK(npl_decode(m, &s, &(int32_t){100 + 37 * i}, 1, &err), &err);
    npl_moe_stats now;
    REQUIRE(npl_model_moe_stats(m, &now));
    CHECK(now.rows - r.start.rows == (uint64_t)T * now.n_moe_layers);
    /* a step of 1000 dense bytes on top of the experts */
    bench_moe_end(m, T, all + 1000, &r);
    double expect = (double)all * r.start.n_used / r.start.n_expert;
    CHECKF(r.expert_bytes == expect, "  experts per token %.0f, expected %.0f", r.expert_bytes, expect);
    CHECK(r.dense_bytes == 1000.0 && r.active_bytes == 1000.0 + expect);
    CHECK(bench_moe_read_bytes(&r) == r.active_bytes);
    npl_seq_free(s);
    npl_model_free(m);
}

static void test_prefill(void)
{
    npl_model *m = load(nt_arg(0));
    REQUIRE(m);
    npl_error err;
    npl_seq *s = npl_seq_create(m, 128, &err);
    REQUIRE(s);
    npl_moe_stats a, b;
    REQUIRE(npl_model_moe_stats(m, &a));
    enum { P = 64 };
    int32_t ids[P];
    for (int i = 0; i < P; i++)
        ids[i] = 200 + 91 * i;
    CHECK_OK(npl_prefill(m, s, ids, P, 0, NULL, &err), &err);
    REQUIRE(npl_model_moe_stats(m, &b));
    /* one chunk: every chosen expert once, at least the k of one row per layer */
    uint64_t read = b.expert_bytes_read - a.expert_bytes_read;
    CHECK(b.rows - a.rows == (uint64_t)P * b.n_moe_layers);
    CHECKF(read <= b.expert_bytes_all && read >= b.expert_bytes_all / b.n_expert * b.n_used,
           "  a %d-token chunk read %llu of %llu expert bytes", P, (unsigned long long)read,
           (unsigned long long)b.expert_bytes_all);
    npl_seq_free(s);
    npl_model_free(m);
}

static void test_dense(void)
{
    npl_model *m = load(nt_arg(0));
    REQUIRE(m);
    bench_moe r;
    npl_moe_stats st;
    CHECK(!bench_moe_begin(m, &r) && !npl_model_moe_stats(m, &st) && st.expert_bytes_all == 0);
    bench_moe_end(m, 4, 1000, &r);
    CHECK(r.tokens == 0);
    npl_model_free(m);
}

NT_MAIN({"decode", test_decode}, {"prefill", test_prefill}, {"dense", test_dense})
