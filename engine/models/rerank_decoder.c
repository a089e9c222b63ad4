/* Decoder rerankers (Qwen3-Reranker), as llama.cpp runs them: a `qwen3`
 * file with pooling_type rank, a head cls.output.weight made of the LM
 * head's rows for "yes" and "no", and a prompt in
 * tokenizer.chat_template.rerank with {query} and {document}. Each pair is
 * that prompt (its special tokens parsed, nothing added), run through the
 * decoder like a decoder embedder's text (embed_decoder.c); its last row
 * goes through the head, and the score is the softmax's first output, the
 * probability of "yes" (rerank.c). */
#include <stdlib.h>
#include <string.h>

#include "embed_internal.h"
#include "model_arch.h"
#include "model_internal.h"

#define RERANK_PROMPT_KEY "tokenizer.chat_template.rerank"

static bool has_placeholder(npl_str s, const char *what)
{
    size_t n = strlen(what);
    for (uint64_t i = 0; i + n <= s.len; i++)
        if (memcmp(s.ptr + i, what, n) == 0)
            return true;
    return false;
}

npl_status npl_read_decoder_pooling(npl_binder *b, npl_encoder *enc)
{
    npl_status st = npl_read_pooling_rank(b, enc, true);
    if (st || enc->pooling != NPL_POOLING_RANK)
        return st;
    npl_str prompt;
    if (!npl_gguf_get_str(b->m->gguf, RERANK_PROMPT_KEY, &prompt) || !has_placeholder(prompt, "{query}") ||
        !has_placeholder(prompt, "{document}"))
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: a rank-pooling %s needs its prompt in '" RERANK_PROMPT_KEY
                             "' with {query} and {document}",
                             b->path, b->arch);
    enc->rerank_prompt = prompt.ptr;
    enc->rerank_prompt_len = (size_t)prompt.len;
    return npl_read_rank_head(b, enc);
}

/* The prompt with {query} and {document} filled in one pass (a query
 * that contains "{document}" stays as it is); [*doc_at, *doc_end) is
 * where the first document went. NULL when out of memory. */
static char *fill_prompt(const npl_encoder *enc, const char *query, const char *doc, size_t doc_len,
                         size_t *len, size_t *doc_at, size_t *doc_end)
{
    const char *t = enc->rerank_prompt;
    size_t n = enc->rerank_prompt_len, q_len = strlen(query), cap = n + 1, used = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] == '{') /* more than enough: a placeholder starts at most at each '{' */
            cap += q_len + doc_len;
    char *out = malloc(cap);
    *doc_at = *doc_end = SIZE_MAX;
    for (size_t i = 0; out && i < n;) {
        if (n - i >= 7 && memcmp(t + i, "{query}", 7) == 0) {
            memcpy(out + used, query, q_len), used += q_len, i += 7;
        } else if (n - i >= 10 && memcmp(t + i, "{document}", 10) == 0) {
            if (*doc_at == SIZE_MAX)
                *doc_at = used, *doc_end = used + doc_len;
            memcpy(out + used, doc, doc_len), used += doc_len, i += 10;
        } else {
            out[used++] = t[i++];
        }
    }
    *len = used;
    return out;
}

/* Over the context: the prompt's tokens before and after the document
 * whole, the document's cut to what is left. */
static npl_status truncated_pair(npl_model *m, const char *p, size_t len, size_t doc_at, size_t doc_end, size_t i,
                                 npl_tokens *all, size_t start, npl_error *err)
{
    npl_tokens doc = {0}, after = {0};
    all->n = start;
    npl_status st = npl_tokenize(m->tok, p, doc_at, NPL_TOKENIZE_PARSE_SPECIAL, all, err);
    if (!st)
        st = npl_tokenize(m->tok, p + doc_at, doc_end - doc_at, NPL_TOKENIZE_PARSE_SPECIAL, &doc, err);
    if (!st)
        st = npl_tokenize(m->tok, p + doc_end, len - doc_end, NPL_TOKENIZE_PARSE_SPECIAL, &after, err);
    size_t fixed = all->n - start + after.n, ctx = m->hp.n_ctx_train;
    if (!st && fixed + 1 > ctx)
        st = npl_error_set(err, NPL_ERR_INVALID_ARG,
                           "rerank: the prompt with the query is %zu tokens, which leaves no room for document %zu "
                           "in the model's context of %zu",
                           fixed, i, ctx);
    for (size_t j = 0; !st && j < ctx - fixed && j < doc.n; j++)
        st = npl_tokens_push(all, doc.ids[j], err);
    for (size_t j = 0; !st && j < after.n; j++)
        st = npl_tokens_push(all, after.ids[j], err);
    npl_tokens_free(&doc);
    npl_tokens_free(&after);
    return st;
}

npl_status npl_rerank_decoder_pair(npl_model *m, const char *query, const char *doc, size_t doc_len, size_t i,
                                   bool truncate, npl_tokens *all, npl_embed_info *info, npl_error *err)
{
    size_t len, doc_at, doc_end, start = all->n;
    char *p = fill_prompt(&m->enc, query, doc, doc_len, &len, &doc_at, &doc_end);
    if (!p)
        return npl_error_set(err, NPL_ERR_NOMEM, "rerank: out of memory for document %zu", i);
    npl_status st = npl_tokenize(m->tok, p, len, NPL_TOKENIZE_PARSE_SPECIAL, all, err);
    size_t nt = all->n - start, ctx = m->hp.n_ctx_train;
    if (!st && nt > ctx && !truncate)
        st = npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                           "rerank: document %zu in the prompt with the query is %zu tokens, more than the model's "
                           "context of %zu",
                           i, nt, ctx);
    else if (!st && nt > ctx) {
        st = truncated_pair(m, p, len, doc_at, doc_end, i, all, start, err);
        info->n_truncated++;
    } else if (!st && nt == 0) {
        st = npl_error_set(err, NPL_ERR_INVALID_ARG, "rerank: the prompt of document %zu has no tokens", i);
    }
    free(p);
    return st;
}
