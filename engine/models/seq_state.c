/* A sequence's recurrent state and its checkpoints (seq_state.h). The
 * live state is one zeroed buffer of npl_model.state_floats: every
 * recurrent layer's convolution tail then its matrix state, layer after
 * layer. A checkpoint is a copy of it with the position it belongs to. */
#include "seq_state.h"

#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

void npl_seq_state_layout(npl_model *m)
{
    size_t off = 0;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        npl_layer *L = &m->layers[l];
        L->state_off = off;
        off += L->state_conv + L->state_mat;
    }
    m->state_floats = off;
}

npl_seq_state *npl_seq_state_create(const npl_model *m, npl_error *err)
{
    if (!m->state_floats)
        return NULL;
    npl_seq_state *st = calloc(1, sizeof *st);
    if (st)
        st->live = calloc(m->state_floats, sizeof *st->live);
    if (!st || !st->live) {
        npl_seq_state_free(st);
        npl_error_set(err, NPL_ERR_NOMEM, "out of memory for a recurrent state of %zu KiB",
                      m->state_floats * sizeof(float) >> 10);
        return NULL;
    }
    return st;
}

void npl_seq_state_free(npl_seq_state *st)
{
    if (!st)
        return;
    for (uint32_t i = 0; i < st->n_ckpt; i++)
        free(st->ckpt[i]);
    free(st->live);
    free(st);
}

size_t npl_seq_state_bytes(const npl_model *m, const npl_seq_state *st)
{
    return st ? (1 + (size_t)st->n_ckpt) * m->state_floats * sizeof(float) : 0;
}

float *npl_seq_state_layer(const npl_seq *s, uint32_t layer)
{
    return s->state->live + s->model->layers[layer].state_off;
}

/* Drops checkpoint i. */
static void drop_checkpoint(npl_seq_state *st, uint32_t i)
{
    free(st->ckpt[i]);
    memmove(st->ckpt + i, st->ckpt + i + 1, (st->n_ckpt - i - 1) * sizeof *st->ckpt);
    memmove(st->ckpt_pos + i, st->ckpt_pos + i + 1, (st->n_ckpt - i - 1) * sizeof *st->ckpt_pos);
    st->n_ckpt--;
}

/* Appends a copy of state at pos (after any checkpoint before it), or
 * nothing when out of memory. */
static void add_checkpoint(npl_seq_state *st, size_t floats, const float *state, uint32_t pos)
{
    while (st->n_ckpt && st->ckpt_pos[st->n_ckpt - 1] >= pos)
        drop_checkpoint(st, st->n_ckpt - 1);
    if (st->n_ckpt == NPL_SEQ_STATE_CHECKPOINTS)
        drop_checkpoint(st, 0);
    float *c = malloc(floats * sizeof *c);
    if (!c)
        return;
    memcpy(c, state, floats * sizeof *c);
    st->ckpt[st->n_ckpt] = c;
    st->ckpt_pos[st->n_ckpt++] = pos;
}

void npl_seq_state_checkpoint(npl_seq *s)
{
    if (s->state && s->pos > 0)
        add_checkpoint(s->state, s->model->state_floats, s->state->live, s->pos);
}

uint32_t npl_seq_state_prefix(const npl_seq *src, uint32_t n)
{
    const npl_seq_state *st = src->state;
    if (!st || n >= src->pos)
        return !st || n == src->pos ? n : 0;
    uint32_t best = 0;
    for (uint32_t i = 0; i < st->n_ckpt; i++)
        if (st->ckpt_pos[i] <= n)
            best = st->ckpt_pos[i];
    return best;
}

void npl_seq_state_copy(npl_seq *dst, const npl_seq *src, uint32_t n)
{
    const npl_seq_state *from = src->state;
    npl_seq_state *to = dst->state;
    if (!from || !to || n == 0)
        return;
    size_t floats = src->model->state_floats;
    for (uint32_t i = 0; i < from->n_ckpt && from->ckpt_pos[i] < n; i++)
        add_checkpoint(to, floats, from->ckpt[i], from->ckpt_pos[i]);
    const float *at = from->live;
    for (uint32_t i = 0; n != src->pos && i < from->n_ckpt; i++)
        if (from->ckpt_pos[i] == n)
            at = from->ckpt[i];
    memcpy(to->live, at, floats * sizeof *to->live);
}
