/* npl_rerank: a cross-encoder's relevance score per (query, document)
 * pair (docs/embeddings.md, "Reranking").
 *
 * Pair tokens as BERT-family cross-encoders are trained (and as llama.cpp
 * feeds them, token types all 0): [CLS] query [SEP] document [SEP]. The
 * pairs run through the encoder packed like npl_embed's texts; the first
 * row of each pair goes through the head:
 *   h = tanh(cls x + cls_b)          (when the file has cls.weight)
 *   score = (cls_out h + cls_out_b)[0]
 * Decoder rerankers (Qwen3-Reranker) build their pairs from the file's
 * prompt, pool the last row and take the softmax of the outputs
 * (rerank_decoder.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "embed_internal.h"
#include "model_internal.h"

static const npl_rerank_options default_options = {.truncate = true};

void npl_rerank_options_default(npl_rerank_options *o)
{
    *o = default_options;
}

bool npl_model_is_reranker(const npl_model *m)
{
    return npl_model_is_embedding(m) && m->enc.pooling == NPL_POOLING_RANK;
}

/* y[0..rows) = W x + b for one vector (a head's small matrix). */
static void head_matvec(const npl_matrix *w, const float *b, const float *x, float *y, float *row)
{
    size_t in = (size_t)w->n_cols;
    for (size_t r = 0; r < (size_t)w->n_rows; r++) {
        npl_matrix_get_row(w, (int32_t)r, row);
        double d = b ? b[r] : 0.0;
        for (size_t j = 0; j < in; j++)
            d += (double)row[j] * x[j];
        y[r] = (float)d;
    }
}

static float head_score(const npl_encoder *enc, const float *x, size_t e, float *h, float *row)
{
    if (enc->cls.data) {
        head_matvec(&enc->cls, enc->cls_b, x, h, row);
        for (size_t j = 0; j < e; j++)
            h[j] = tanhf(h[j]);
        x = h;
    }
    float out[16];
    head_matvec(&enc->cls_out, enc->cls_out_b, x, out, row);
    if (!enc->decoder)
        return out[0];
    double sum = 0; /* softmax, its first output: 1 / sum exp(out[k] - out[0]) */
    for (int32_t k = 0; k < enc->cls_out.n_rows; k++)
        sum += exp((double)out[k] - out[0]);
    return (float)(1.0 / sum);
}

/* Pair i: query's tokens (with [CLS] and [SEP], or <s> and </s>), the
 * pair separator of a vocabulary that has one (XLM-RoBERTa's </s>), the
 * document's, then [SEP] (</s>); the document cut to the context when
 * allowed. */
static npl_status check_document(const char *doc, size_t i, size_t *len, npl_error *err)
{
    if (!doc)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "rerank: document %zu is NULL", i);
    *len = strnlen(doc, (size_t)NPL_EMBED_MAX_TEXT_BYTES + 1);
    if (*len > NPL_EMBED_MAX_TEXT_BYTES)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "rerank: document %zu is longer than %u bytes", i,
                             NPL_EMBED_MAX_TEXT_BYTES);
    return NPL_OK;
}

static npl_status decoder_pair(npl_model *m, const char *query, const char *doc, size_t i,
                               const npl_rerank_options *o, npl_tokens *all, npl_embed_info *info, npl_error *err)
{
    size_t len;
    npl_status st = check_document(doc, i, &len, err);
    return st ? st : npl_rerank_decoder_pair(m, query, doc, len, i, o->truncate, all, info, err);
}

static npl_status tokenize_pair(npl_model *m, const npl_tokens *q, const char *doc, size_t i,
                                const npl_rerank_options *o, npl_tokens *all, npl_embed_info *info, npl_error *err)
{
    uint32_t ctx = m->hp.n_ctx_train;
    int32_t sep = npl_tokenizer_end(m->tok), mid = npl_tokenizer_pair_sep(m->tok);
    size_t len;
    npl_status st = check_document(doc, i, &len, err);
    if (st)
        return st;
    size_t start = all->n;
    for (size_t j = 0; !st && j < q->n; j++)
        st = npl_tokens_push(all, q->ids[j], err);
    if (!st && mid >= 0)
        st = npl_tokens_push(all, mid, err);
    if (!st)
        st = npl_tokenize(m->tok, doc, len, 0, all, err);
    if (!st)
        st = npl_tokens_push(all, sep, err);
    if (st)
        return st;
    size_t nt = all->n - start;
    if (nt > ctx) {
        if (!o->truncate)
            return npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                                 "rerank: document %zu with the query is %zu tokens, more than the model's context "
                                 "of %u", i, nt, ctx);
        all->n = start + ctx;
        all->ids[all->n - 1] = sep;
        info->n_truncated++;
    }
    return NPL_OK;
}

static npl_status check_args(const npl_model *m, const char *query, const char *const *docs, size_t n,
                             const float *scores, npl_error *err)
{
    if (!m || !query || !scores || (!docs && n))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "rerank: NULL argument");
    if (!npl_model_is_reranker(m))
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "%s is not a reranker (pooling rank with a classification head): %s", m->name,
                             npl_model_is_embedding(m) ? "it makes embeddings" : "it generates text");
    if (!m->enc.decoder && npl_tokenizer_end(m->tok) < 0)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "%s: the tokenizer has no [SEP] (or EOS) to pair texts with",
                             m->name);
    if (n == 0 || n > NPL_EMBED_MAX_TEXTS)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "rerank: %zu documents (from 1 to %u)", n,
                             NPL_EMBED_MAX_TEXTS);
    if (strnlen(query, (size_t)NPL_EMBED_MAX_TEXT_BYTES + 1) > NPL_EMBED_MAX_TEXT_BYTES)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "rerank: the query is longer than %u bytes",
                             NPL_EMBED_MAX_TEXT_BYTES);
    return NPL_OK;
}

static npl_status score_pairs(npl_model *m, const npl_tokens *all, const size_t *starts, size_t n, float *scores,
                              npl_embed_info *info, npl_error *err)
{
    size_t e = m->hp.n_embd;
    float *pooled = malloc(n * e * sizeof *pooled), *h = malloc(2 * e * sizeof *h);
    npl_status st = !pooled || !h ? npl_error_set(err, NPL_ERR_NOMEM, "rerank: out of memory for %zu pairs", n)
                    : m->enc.decoder ? npl_embed_decoder(m, all->ids, starts, n, pooled, &info->n_passes, err)
                                     : npl_encoder_pool(m, all->ids, starts, n, pooled, &info->n_passes, err);
    for (size_t i = 0; !st && i < n; i++)
        scores[i] = head_score(&m->enc, pooled + i * e, e, h, h + e);
    free(pooled);
    free(h);
    return st;
}

npl_status npl_rerank(npl_model *m, const char *query, const char *const *documents, size_t n, float *scores,
                      const npl_rerank_options *opts, npl_embed_info *info, npl_error *err)
{
    if (!opts)
        opts = &default_options;
    npl_embed_info local;
    info = npl_embed_info_start(info, &local);
    npl_status st = check_args(m, query, documents, n, scores, err);
    if (st)
        return st;
    npl_tokens q = {0}, all = {0};
    size_t *starts = malloc((n + 1) * sizeof *starts);
    if (!starts)
        return npl_error_set(err, NPL_ERR_NOMEM, "rerank: out of memory for %zu documents", n);
    if (!m->enc.decoder) {
        st = npl_tokenize(m->tok, query, strlen(query), NPL_TOKENIZE_ADD_BOS, &q, err);
        /* room for the pair separator, the document's closing [SEP] and at
         * least one of its tokens */
        size_t room = 2 + (npl_tokenizer_pair_sep(m->tok) >= 0);
        if (!st && q.n + room > m->hp.n_ctx_train)
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "rerank: the query is %zu tokens, the model's context %u",
                               q.n, m->hp.n_ctx_train);
    }
    for (size_t i = 0; !st && i < n; i++) {
        starts[i] = all.n;
        st = m->enc.decoder ? decoder_pair(m, query, documents[i], i, opts, &all, info, err)
                            : tokenize_pair(m, &q, documents[i], i, opts, &all, info, err);
    }
    if (!st) {
        starts[n] = all.n;
        info->n_tokens = all.n;
        st = score_pairs(m, &all, starts, n, scores, info, err);
    }
    free(starts);
    npl_tokens_free(&q);
    npl_tokens_free(&all);
    return st;
}
