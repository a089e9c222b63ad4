/* Decoder embedders: a causal text model whose file names a pooling
 * (<arch>.pooling_type; Qwen3-Embedding: last) is an embedding model. Its
 * vector is the pooled output of the final norm, as llama.cpp takes it.
 *
 * Texts are packed into the forward steps of the text models (fw.rows rows
 * each): every text has a sequence of its own (positions 0..len-1, its own
 * small KV cache), so a row attends only to its own text's earlier rows.
 * A text that does not fit in what is left of a step goes on in the next
 * one, its cache keeping the positions already run; a bidirectional
 * model's text (gemma-embedding) waits for the next step instead, whole.
 * Its pooled vectors then go through the file's dense projections. */
#include <stdlib.h>
#include <string.h>

#include "embed_internal.h"
#include "model_internal.h"

typedef struct dec_state {
    npl_model *m;
    const int32_t *ids;
    const size_t *starts;
    size_t n;
    float *pooled;  /* n * n_embd */
    npl_seq **seqs; /* of the texts in flight */
    size_t *row_text;
    int32_t *step_tok;
    float *hidden;  /* fw.rows * n_embd */
} dec_state;

/* Folds the step's rows into their texts' vectors; frees the sequences of
 * the texts that ended in it. */
static void pool_step(dec_state *d, size_t rows)
{
    npl_model *m = d->m;
    size_t e = m->hp.n_embd;
    for (size_t i = 0; i < rows; i++) {
        size_t t = d->row_text[i], len = d->starts[t + 1] - d->starts[t];
        uint32_t pos = m->fw.row_pos[i];
        npl_seq *s = d->seqs[t];
        s->hist[pos] = d->step_tok[i];
        s->pos = pos + 1;
        const float *h = d->hidden + i * e;
        float *out = d->pooled + t * e;
        if (m->enc.pooling == NPL_POOLING_MEAN) {
            for (size_t j = 0; j < e; j++)
                out[j] += h[j];
        } else if ((m->enc.pooling == NPL_POOLING_CLS && pos == 0) ||
                   ((m->enc.pooling == NPL_POOLING_LAST || m->enc.pooling == NPL_POOLING_RANK) &&
                    pos + 1 == len)) {
            memcpy(out, h, e * sizeof *out);
        }
        if (pos + 1 == len) {
            if (m->enc.pooling == NPL_POOLING_MEAN)
                for (size_t j = 0; j < e; j++)
                    out[j] /= (float)len;
            npl_seq_free(s);
            d->seqs[t] = NULL;
        }
    }
}

static npl_status run_texts(dec_state *d, size_t *n_steps, npl_error *err)
{
    npl_model *m = d->m;
    size_t rows = m->fw.rows, text = 0, off = 0;
    while (text < d->n) {
        size_t r = 0;
        while (r < rows && text < d->n) {
            size_t len = d->starts[text + 1] - d->starts[text];
            if (m->enc.bidirectional && len > rows - r)
                break; /* r > 0: a text is at most fw.rows long */
            if (!d->seqs[text] && !(d->seqs[text] = npl_seq_create_any(m, (uint32_t)len, err)))
                return err ? err->code : NPL_ERR_NOMEM;
            size_t take = len - off < rows - r ? len - off : rows - r;
            for (size_t i = 0; i < take; i++, r++) {
                m->fw.row_seq[r] = d->seqs[text];
                m->fw.row_pos[r] = (uint32_t)(off + i);
                d->step_tok[r] = d->ids[d->starts[text] + off + i];
                d->row_text[r] = text;
            }
            off += take;
            if (off == len)
                text++, off = 0;
        }
        npl_cpu_forward_hidden(m, d->step_tok, r, d->hidden);
        pool_step(d, r);
        (*n_steps)++;
    }
    return NPL_OK;
}

/* pooled = dense3 (dense2 pooled), each present one, in runs of fw.rows
 * vectors through mid (fw.rows * dense_mid(m) floats). */
static size_t dense_mid(const npl_model *m)
{
    return m->enc.dense2.data ? (size_t)m->enc.dense2.n_rows : m->hp.n_embd;
}

static void dense_out(npl_model *m, float *pooled, size_t n, float *mid)
{
    const npl_encoder *enc = &m->enc;
    size_t e = m->hp.n_embd, rows = m->fw.rows;
    for (size_t r = 0; r < n; r += rows) {
        size_t k = n - r < rows ? n - r : rows;
        float *v = pooled + r * e;
        if (enc->dense2.data)
            npl_matmul_contig(m->pool, m->mm_ws, &enc->dense2, v, e, k, mid, dense_mid(m));
        else
            memcpy(mid, v, k * e * sizeof *v);
        if (enc->dense3.data)
            npl_matmul_contig(m->pool, m->mm_ws, &enc->dense3, mid, dense_mid(m), k, v, e);
        else
            memcpy(v, mid, k * e * sizeof *v);
    }
}

npl_status npl_embed_decoder(npl_model *m, const int32_t *ids, const size_t *starts, size_t n, float *pooled,
                             size_t *n_steps, npl_error *err)
{
    size_t e = m->hp.n_embd, rows = m->fw.rows;
    for (size_t i = 0; i < n; i++) {
        size_t len = starts[i + 1] - starts[i];
        if (len > m->hp.n_ctx_train || (m->enc.bidirectional && len > rows))
            return npl_error_set(err, NPL_ERR_INTERNAL, "embed: text %zu is longer than the context", i);
    }
    dec_state d = {.m = m, .ids = ids, .starts = starts, .n = n, .pooled = pooled};
    d.seqs = calloc(n, sizeof *d.seqs);
    d.row_text = malloc(rows * sizeof *d.row_text);
    d.step_tok = malloc(rows * sizeof *d.step_tok);
    d.hidden = malloc(rows * e * sizeof *d.hidden);
    bool dense = m->enc.dense2.data || m->enc.dense3.data;
    float *mid = dense ? malloc(rows * dense_mid(m) * sizeof *mid) : NULL;
    npl_status st;
    if (!d.seqs || !d.row_text || !d.step_tok || !d.hidden || (dense && !mid)) {
        st = npl_error_set(err, NPL_ERR_NOMEM, "embed: out of memory for %zu texts", n);
    } else {
        memset(pooled, 0, n * e * sizeof *pooled);
        st = run_texts(&d, n_steps, err);
        if (!st && dense)
            dense_out(m, pooled, n, mid);
    }
    for (size_t i = 0; d.seqs && i < n; i++)
        npl_seq_free(d.seqs[i]);
    free(d.seqs), free(d.row_text), free(d.step_tok), free(d.hidden), free(mid);
    return st;
}
