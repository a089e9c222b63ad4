/* npl_embed and the embedding model's place in the engine:
 *
 *   packing    texts embedded together give the same bits as each alone
 *              (rows of a pass never see other texts), in any order, and
 *              across pass boundaries (many texts, more than one pass)
 *   options    dimensions (the normalised prefix), normalize off, truncate
 *              on and off, invalid UTF-8 and empty texts
 *   errors     bad arguments, a chat model, generation on an embedding model
 *   probe      npl_model_probe says embedding for bert, not for a chat model
 *   rerank     npl_rerank: pairs scored together give the same bits as each
 *              alone, truncation on and off, errors (an embedding model, a
 *              chat model, npl_embed on a reranker), the probe's flag; on a
 *              cross-encoder and on a decoder reranker (Qwen3-Reranker)
 *
 *   test-embed CASE BERT.gguf CHAT.gguf
 *   test-embed rerank RERANKER.gguf EMBEDDER.gguf CHAT.gguf */
#include <math.h>

#include "model_probe.h"
#include "npl_test.h"
#include "npullm.h"

static npl_model *load(const char *path)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 2;
    npl_error err;
    npl_error_clear(&err);
    npl_model *m = npl_model_load(path, &p, &err);
    if (!m)
        nt_note("load %s: %s", path, err.message);
    return m;
}

static const char *const texts[] = {
    "Hello world", "", "café au lait", "\xff\xfe broken \xc3", "你好世界",
    "a much longer text about semantic search, vector databases and retrieval augmented generation",
};
#define N_TEXTS (sizeof texts / sizeof texts[0])

static void test_packing(void)
{
    npl_model *m = load(nt_arg(0));
    REQUIRE(m);
    uint32_t d = npl_model_embedding_dim(m);
    REQUIRE(d > 0);
    float *all = malloc(N_TEXTS * d * sizeof *all), *one = malloc(d * sizeof *one);
    npl_error err;
    npl_embed_info info;
    CHECK_OK(npl_embed(m, texts, NULL, N_TEXTS, NULL, all, &info, &err), &err);
    CHECK(info.n_passes == 1 && info.n_truncated == 0 && info.n_tokens > N_TEXTS * 2);
    for (size_t i = 0; i < N_TEXTS && !nt_failures(); i++) {
        /* alone, and last of a reversed batch */
        CHECK_OK(npl_embed(m, &texts[i], NULL, 1, NULL, one, NULL, &err), &err);
        for (uint32_t j = 0; j < d; j++)
            CHECK_FLOAT_BITS(one[j], all[i * d + j], j);
        double sq = 0;
        for (uint32_t j = 0; j < d; j++)
            sq += (double)one[j] * one[j];
        CHECKF(fabs(sq - 1.0) < 1e-5, "text %zu: |v|^2 = %g", i, sq);
    }
    /* 3000 texts of ~5 tokens: more than one pass of 2048 rows */
    enum { MANY = 3000 };
    const char **many = malloc(MANY * sizeof *many);
    float *mv = malloc((size_t)MANY * d * sizeof *mv);
    for (size_t i = 0; i < MANY; i++)
        many[i] = texts[i % N_TEXTS];
    CHECK_OK(npl_embed(m, many, NULL, MANY, NULL, mv, &info, &err), &err);
    CHECKF(info.n_passes > 1, "%zu passes", info.n_passes);
    for (size_t i = 0; i < MANY && !nt_failures(); i += 97)
        for (uint32_t j = 0; j < d; j++)
            CHECK_FLOAT_BITS(mv[i * d + j], all[(i % N_TEXTS) * d + j], j);
    free(mv);
    free(many);
    free(all);
    free(one);
    npl_model_free(m);
}

static void test_options(void)
{
    npl_model *m = load(nt_arg(0));
    REQUIRE(m);
    uint32_t d = npl_model_embedding_dim(m);
    float *full = malloc(d * sizeof *full), *cut = malloc(d * sizeof *cut), *raw = malloc(d * sizeof *raw);
    npl_error err;
    npl_embed_options o;
    npl_embed_options_default(&o);
    CHECK(o.truncate && o.normalize && o.dimensions == 0);
    CHECK_OK(npl_embed(m, texts, NULL, 1, &o, full, NULL, &err), &err);
    o.dimensions = d / 4;
    CHECK_OK(npl_embed(m, texts, NULL, 1, &o, cut, NULL, &err), &err);
    o.dimensions = 0;
    o.normalize = false;
    CHECK_OK(npl_embed(m, texts, NULL, 1, &o, raw, NULL, &err), &err);
    double n_cut = 0, n_raw = 0;
    for (uint32_t j = 0; j < d / 4; j++)
        n_cut += (double)raw[j] * raw[j];
    for (uint32_t j = 0; j < d; j++)
        n_raw += (double)raw[j] * raw[j];
    for (uint32_t j = 0; j < d / 4; j++)
        CHECKF(fabs(cut[j] - raw[j] / sqrt(n_cut)) < 1e-6, "dimension %u", j);
    for (uint32_t j = 0; j < d; j++)
        CHECKF(fabs(full[j] - raw[j] / sqrt(n_raw)) < 1e-6, "value %u", j);

    /* lens: a text with a NUL inside is embedded whole, not cut there */
    const char *nul = "ab\0cd";
    size_t len = 5;
    CHECK_OK(npl_embed(m, &nul, &len, 1, NULL, cut, NULL, &err), &err);

    /* A text longer than the context: cut (ending in [SEP]) or refused. */
    size_t big = 20000;
    char *long_text = malloc(big + 1);
    for (size_t i = 0; i < big; i++)
        long_text[i] = i % 5 == 4 ? ' ' : 'a' + (char)(i % 5);
    long_text[big] = '\0';
    const char *lt = long_text;
    npl_embed_info info;
    CHECK_OK(npl_embed(m, &lt, NULL, 1, NULL, full, &info, &err), &err);
    CHECK(info.n_truncated == 1 && info.n_tokens == npl_model_get_info(m)->n_ctx_train);
    npl_embed_options_default(&o);
    o.truncate = false;
    CHECK_FAILS(npl_embed(m, &lt, NULL, 1, &o, full, NULL, &err), NPL_ERR_CONTEXT_OVERFLOW, &err,
                "more than the model's context");
    free(long_text);
    free(full);
    free(cut);
    free(raw);
    npl_model_free(m);
}

static void test_errors(void)
{
    npl_model *m = load(nt_arg(0));
    REQUIRE(m);
    float v[4096];
    npl_error err;
    npl_embed_options o;
    npl_embed_options_default(&o);
    CHECK_FAILS(npl_embed(m, texts, NULL, 0, NULL, v, NULL, &err), NPL_ERR_INVALID_ARG, &err, "0 texts");
    CHECK_FAILS(npl_embed(m, NULL, NULL, 1, NULL, v, NULL, &err), NPL_ERR_INVALID_ARG, &err, "NULL");
    CHECK_FAILS(npl_embed(m, texts, NULL, 1, NULL, NULL, NULL, &err), NPL_ERR_INVALID_ARG, &err, "NULL");
    const char *null_text = NULL;
    CHECK_FAILS(npl_embed(m, &null_text, NULL, 1, NULL, v, NULL, &err), NPL_ERR_INVALID_ARG, &err, "text 0 is NULL");
    o.dimensions = npl_model_embedding_dim(m) + 1;
    CHECK_FAILS(npl_embed(m, texts, NULL, 1, &o, v, NULL, &err), NPL_ERR_INVALID_ARG, &err, "dimensions");
    CHECK_FAILS(npl_embed(m, texts, NULL, NPL_EMBED_MAX_TEXTS + 1, NULL, v, NULL, &err), NPL_ERR_INVALID_ARG, &err,
                "texts");
    size_t huge = (size_t)NPL_EMBED_MAX_TEXT_BYTES + 1;
    CHECK_FAILS(npl_embed(m, texts, &huge, 1, NULL, v, NULL, &err), NPL_ERR_INVALID_ARG, &err, "longer than");
    npl_error_clear(&err);
    CHECK(npl_seq_create(m, 0, &err) == NULL && err.code == NPL_ERR_UNSUPPORTED &&
          strstr(err.message, "embedding model"));
    npl_model_free(m);

    npl_model *chat = load(nt_arg(1));
    REQUIRE(chat);
    CHECK(!npl_model_is_embedding(chat) && npl_model_embedding_dim(chat) == 0 && !npl_model_pooling_name(chat));
    CHECK_FAILS(npl_embed(chat, texts, NULL, 1, NULL, v, NULL, &err), NPL_ERR_UNSUPPORTED, &err,
                "not an embedding model");
    npl_model_free(chat);
}

static void test_probe(void)
{
    npl_model_facts f;
    npl_error err;
    CHECK_OK(npl_model_probe(nt_arg(0), &f, &err), &err);
    CHECKF(f.supported && f.embedding && !strcmp(f.architecture, "bert"), "bert: supported %d embedding %d (%s)",
           f.supported, f.embedding, f.reason);
    CHECK_OK(npl_model_probe(nt_arg(1), &f, &err), &err);
    CHECK(f.supported && !f.embedding);
}

/* Scores of docs alone and together, truncation, refusals. */
static void test_rerank(void)
{
    npl_model *m = load(nt_arg(0));
    REQUIRE(m);
    static const char *const docs[] = {"the quick brown fox", "", "café au lait", "\xff\xfe broken", "你好世界"};
    size_t n = sizeof docs / sizeof docs[0];
    float all[8], one, v[4096];
    npl_error err;
    npl_embed_info info;
    CHECK(npl_model_is_reranker(m) && npl_model_is_embedding(m) && !strcmp(npl_model_pooling_name(m), "rank"));
    CHECK_OK(npl_rerank(m, "what is a fox", docs, n, all, NULL, &info, &err), &err);
    CHECK(info.n_passes >= 1 && info.n_truncated == 0);
    for (size_t i = 0; i < n; i++) {
        CHECK_OK(npl_rerank(m, "what is a fox", docs + i, 1, &one, NULL, NULL, &err), &err);
        CHECKF(memcmp(&one, &all[i], sizeof one) == 0 && isfinite(one), "doc %zu: %g alone, %g together", i,
               (double)one, (double)all[i]);
    }
    /* a document longer than the context: cut (keeping [SEP], or the
     * prompt's end) or refused */
    char *long_doc = malloc(20001);
    REQUIRE(long_doc);
    for (size_t i = 0; i < 20000; i++)
        long_doc[i] = i % 2 ? ' ' : 'a';
    long_doc[20000] = '\0';
    const char *two[] = {long_doc, docs[0]};
    CHECK_OK(npl_rerank(m, "fox", two, 2, all, NULL, &info, &err), &err);
    CHECK(info.n_truncated == 1 && isfinite(all[0]));
    npl_rerank_options o;
    npl_rerank_options_default(&o);
    o.truncate = false;
    CHECK_FAILS(npl_rerank(m, "fox", two, 2, all, &o, NULL, &err), NPL_ERR_CONTEXT_OVERFLOW, &err, "document 0");
    CHECK_FAILS(npl_rerank(m, long_doc, docs, 1, all, NULL, NULL, &err), NPL_ERR_INVALID_ARG, &err, "the query is");
    free(long_doc);
    CHECK_FAILS(npl_rerank(m, "q", docs, 0, all, NULL, NULL, &err), NPL_ERR_INVALID_ARG, &err, "0 documents");
    CHECK_FAILS(npl_rerank(m, NULL, docs, 1, all, NULL, NULL, &err), NPL_ERR_INVALID_ARG, &err, "NULL");
    const char *null_doc = NULL;
    CHECK_FAILS(npl_rerank(m, "q", &null_doc, 1, all, NULL, NULL, &err), NPL_ERR_INVALID_ARG, &err,
                "document 0 is NULL");
    CHECK_FAILS(npl_embed(m, docs, NULL, 1, NULL, v, NULL, &err), NPL_ERR_UNSUPPORTED, &err, "is a reranker");
    npl_model_free(m);

    for (int i = 1; i <= 2; i++) {
        npl_model *other = load(nt_arg(i));
        REQUIRE(other);
        CHECK(!npl_model_is_reranker(other));
        CHECK_FAILS(npl_rerank(other, "q", docs, 1, all, NULL, NULL, &err), NPL_ERR_UNSUPPORTED, &err,
                    "not a reranker");
        npl_model_free(other);
    }
    npl_model_facts f;
    CHECK_OK(npl_model_probe(nt_arg(0), &f, &err), &err);
    CHECK(f.supported && f.embedding && f.rerank);
    CHECK_OK(npl_model_probe(nt_arg(1), &f, &err), &err);
    CHECK(f.supported && f.embedding && !f.rerank);
}

NT_MAIN({"rerank", test_rerank}, {"packing", test_packing}, {"options", test_options}, {"errors", test_errors}, {"probe", test_probe})
