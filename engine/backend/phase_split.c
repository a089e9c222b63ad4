/* The phase split: a model on an NPU prefills there and decodes on the
 * CPU (npl_model_set_decode_device, npullm.h). A sequence's cache moves
 * once, at its first npl_decode after the switch, through its entry's
 * seq_export (engine/backend/backend.h); from then on every call on it
 * goes to the CPU's entry. Switching back leaves moved sequences where
 * they are: only new ones decode on the device again. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model_internal.h"

npl_status npl_model_set_decode_device(npl_model *m, const char *device, npl_error *err)
{
    if (!m)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_model_set_decode_device: no model");
    const npl_backend *own = npl_model_backend(m);
    if (!device || !*device || strcmp(device, own->name) == 0 || strcmp(device, npl_model_device(m)) == 0) {
        if (m->device)
            m->device->decode_ops = NULL;
        return NPL_OK;
    }
    const npl_backend *to = npl_backend_named(device);
    if (!to || !to->host_layers)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "decode device '%.32s': expected cpu or the model's own device (%s)", device,
                             npl_model_device(m));
    /* Only entries that can hand their cache to the host get here (the
     * CPU's own name was taken above). */
    if (!own->seq_export || !m->device)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "decode device %s: %s cannot move its sequences", device,
                             own->name);
    m->device->decode_ops = to;
    return NPL_OK;
}

const char *npl_model_decode_device(const npl_model *m)
{
    return m && m->device && m->device->decode_ops ? m->device->decode_ops->name : npl_model_device(m);
}

/* The device an entry of s's model stands for: the model's own device
 * name ("npu:xdna2") or the entry's ("cpu"). */
static const char *entry_device(const npl_seq *s, const npl_backend *be)
{
    if (!be)
        return "";
    return be == npl_model_backend(s->model) ? npl_model_device(s->model) : be->name;
}

void npl_seq_devices_get(const npl_seq *s, npl_seq_devices *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->prefill = out->decode = "";
    if (!s)
        return;
    out->prefill = entry_device(s, s->prefill_backend);
    out->decode = entry_device(s, s->decode_backend);
    out->kv_moves = s->kv_moves;
}

/* The whole batch is checked before any cache moves or any group runs,
 * so a bad entry leaves every sequence as it was (the entries check the
 * same again). */
static npl_status check_batch(const npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n,
                              npl_error *err)
{
    npl_status st = NPL_OK;
    size_t i = 0;
    for (; i < n && st == NPL_OK; i++) {
        npl_seq *s = seqs[i];
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= m->hp.n_vocab)
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "token %zu has id %d, outside the vocabulary [0, %u)", i,
                               tokens[i], m->hp.n_vocab);
        else if (!s || s->model != m)
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_decode: sequence %zu is NULL or of another model", i);
        else if (s->in_batch)
            st = npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_decode: sequence %zu appears twice in the batch", i);
        else if (s->pos >= s->n_ctx)
            st = npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                               "npl_decode: sequence %zu is full (context of %u tokens)", i, s->n_ctx);
        else
            s->in_batch = true;
    }
    size_t marked = st == NPL_OK ? i : i - 1;
    for (size_t j = 0; j < marked; j++)
        seqs[j]->in_batch = false;
    return st;
}

/* s's cache from its device to the host, where `to` computes from it. */
static npl_status seq_move(npl_seq *s, const npl_backend *to, npl_error *err)
{
    npl_status st = s->backend->seq_export(s, err);
    if (st != NPL_OK)
        return st; /* the sequence stays on its device, whole */
    s->backend = to;
    s->kv_moves++;
    return NPL_OK;
}

/* Each entry's sequences of the batch as one call, in batch order. */
static npl_status decode_groups(npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n,
                                npl_error *err)
{
    npl_seq **sub = malloc(n * sizeof *sub);
    int32_t *sub_tokens = malloc(n * sizeof *sub_tokens);
    bool *done = calloc(n, sizeof *done);
    npl_status st = sub && sub_tokens && done ? NPL_OK : npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    for (size_t first = 0; first < n && st == NPL_OK; first++) {
        if (done[first])
            continue;
        const npl_backend *be = seqs[first]->backend;
        size_t k = 0;
        for (size_t i = first; i < n; i++)
            if (!done[i] && seqs[i]->backend == be) {
                sub[k] = seqs[i];
                sub_tokens[k++] = tokens[i];
                done[i] = true;
            }
        if ((st = be->decode(m, sub, sub_tokens, k, err)) == NPL_OK)
            for (size_t i = 0; i < k; i++)
                sub[i]->decode_backend = be;
    }
    free(sub);
    free(sub_tokens);
    free(done);
    return st;
}

npl_status npl_phase_split_decode(npl_model *m, npl_seq *const *seqs, const int32_t *tokens, size_t n_seqs,
                                  npl_error *err)
{
    const npl_backend *own = npl_model_backend(m);
    const npl_backend *to = m && m->device ? m->device->decode_ops : NULL;
    bool elsewhere = false;
    for (size_t i = 0; seqs && i < n_seqs; i++)
        elsewhere |= seqs[i] && seqs[i]->model == m && seqs[i]->backend && seqs[i]->backend != own;
    if (!to && !elsewhere) {
        npl_status st = own->decode(m, seqs, tokens, n_seqs, err);
        for (size_t i = 0; st == NPL_OK && i < n_seqs; i++)
            seqs[i]->decode_backend = own;
        return st;
    }
    if (n_seqs == 0)
        return NPL_OK;
    if (!seqs || !tokens)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npl_decode: missing sequences or tokens");
    npl_status st = check_batch(m, seqs, tokens, n_seqs, err);
    for (size_t i = 0; to && st == NPL_OK && i < n_seqs; i++)
        if (seqs[i]->backend != to && seqs[i]->backend->seq_export)
            st = seq_move(seqs[i], to, err);
    return st == NPL_OK ? decode_groups(m, seqs, tokens, n_seqs, err) : st;
}
