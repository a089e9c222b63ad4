/* The fixed-size recurrent state of a sequence, beside its KV cache.
 *
 * A layer of a hybrid model keeps either KV positions (attention) or a
 * state whose size does not grow with the context: a convolution's tail
 * (the last d_conv - 1 inputs of every channel: Gated DeltaNet, LFM2's
 * short convolutions, Mamba 2) and a matrix state (DeltaNet's per-head
 * value x key matrices, Mamba 2's SSM state). The model says per layer how
 * many floats of each (npl_layer.state_conv, state_mat; npl_model.state_floats
 * in all); the sequence owns one buffer of them, written in place by every
 * step it is in, batched or not, and freed with it.
 *
 * A recurrent state cannot be cut back to an earlier position, so a
 * sequence also keeps checkpoints: copies of the whole state at a few
 * positions (the end of each prompt it prefilled, i.e. a turn boundary).
 * A pool (engine/models/kv_pool.c) reuses a cached sequence's prefix only
 * up to one of them, or up to the cached sequence's own position. */
#ifndef NPL_SEQ_STATE_H
#define NPL_SEQ_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"

struct npl_model;
struct npl_seq;

/* Checkpoints a sequence keeps (the oldest goes first). */
#define NPL_SEQ_STATE_CHECKPOINTS 4

typedef struct npl_seq_state {
    float *live; /* state_floats: the state after the sequence's last position */
    uint32_t n_ckpt;
    uint32_t ckpt_pos[NPL_SEQ_STATE_CHECKPOINTS]; /* ascending */
    float *ckpt[NPL_SEQ_STATE_CHECKPOINTS];
} npl_seq_state;

/* After the layers are bound: each recurrent layer's offset in the state
 * (npl_layer.state_off) and the model's total (state_floats). */
void npl_seq_state_layout(struct npl_model *m);

/* A zeroed state for a new sequence of m, or NULL (NPL_ERR_NOMEM) when out
 * of memory; NULL with no error when m has no recurrent layer. */
npl_seq_state *npl_seq_state_create(const struct npl_model *m, npl_error *err);
void npl_seq_state_free(npl_seq_state *st);

/* Bytes it holds (live state and checkpoints), for a pool's budget. */
size_t npl_seq_state_bytes(const struct npl_model *m, const npl_seq_state *st);

/* Pointer to layer l's state in the live buffer: the convolution tail
 * first, then the matrix state. */
float *npl_seq_state_layer(const struct npl_seq *s, uint32_t layer);

/* Records the live state at position pos (the sequence's current one)
 * as a checkpoint; out of memory only costs the checkpoint. */
void npl_seq_state_checkpoint(struct npl_seq *s);

/* The longest prefix of src, at most n positions, after which its state is
 * known: n itself without recurrent layers, else src's position or its last
 * checkpoint up to n (0 when none). */
uint32_t npl_seq_state_prefix(const struct npl_seq *src, uint32_t n);

/* dst (fresh) takes src's state at position n, which npl_seq_state_prefix
 * returned, and src's checkpoints before it. */
void npl_seq_state_copy(struct npl_seq *dst, const struct npl_seq *src, uint32_t n);

#endif
