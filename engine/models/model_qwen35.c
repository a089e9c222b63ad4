/* The qwen35 family's hooks of the architecture table (engine/models/model_arch.c):
 * Qwen 3.5 / 3.6 dense, a hybrid as llama.cpp's qwen35 graph computes it.
 *
 * Every full_attention_interval-th layer (il + 1 divisible by it, default
 * 4) is attention: its Q projection holds, per head, the query then an
 * output gate (sigmoid(gate) times the attention output before wo), per-head
 * Q/K RMS norms, NEOX RoPE on the leading rope.dimension_count dims with
 * multi-section positions. The others are Gated DeltaNet layers
 * (engine/models/forward_dnet.c) with a fixed-size state per sequence
 * (engine/models/seq_state.h). Every layer's FFN input norm is
 * post_attention_norm.
 *
 * Multi-section RoPE (llama.cpp's IMROPE): each rotated pair takes one of
 * four position components by its section; a text token's first three are
 * its position and the fourth 0. The engine runs text only, so a pair whose
 * section is the fourth would not rotate: files where any pair maps there
 * are refused rather than run wrongly (Qwen 3.5's [11, 11, 10, 0] over 32
 * pairs never does). */
#include <stdio.h>

#include "ggml_types.h"

#include "model_arch.h"
#include "seq_state.h"

#define QWEN35_DEFAULT_INTERVAL 4u
#define QWEN35_MAX_CONV 64u

/* Whether IMROPE gives rotated pair i the fourth (extra) position component. */
static bool imrope_extra(uint32_t i, const int64_t sec[4])
{
    int64_t sum = sec[0] + sec[1] + sec[2] + sec[3];
    int64_t sector = (int64_t)i % sum;
    if (sector % 3 == 1 && sector < 3 * sec[1])
        return false;
    if (sector % 3 == 2 && sector < 3 * sec[2])
        return false;
    return !(sector % 3 == 0 && sector < 3 * sec[0]);
}

static npl_status read_sections(const npl_binder *b)
{
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", b->arch);
    const npl_gguf_value *a = npl_gguf_get_array(b->m->gguf, key, NPL_GGUF_INT32);
    if (!a)
        a = npl_gguf_get_array(b->m->gguf, key, NPL_GGUF_UINT32);
    if (!a || a->arr.count < 4)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: missing '%s' (four integers)", b->path, key);
    int64_t sec[4];
    for (int i = 0; i < 4; i++) {
        sec[i] = npl_gguf_array_i64(a, (uint64_t)i);
        if (sec[i] < 0 || sec[i] > NPL_MAX_HEAD_DIM)
            return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s[%d] = %lld is out of range", b->path, key, i,
                                 (long long)sec[i]);
    }
    if (sec[0] + sec[1] + sec[2] + sec[3] == 0)
        return npl_error_set(b->err, NPL_ERR_FORMAT, "%s: %s are all 0", b->path, key);
    for (uint32_t i = 0; i < b->m->hp.n_rot / 2; i++)
        if (imrope_extra(i, sec))
            return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                                 "%s: %s gives rotated pair %u the extra position component (images), which is not "
                                 "supported", b->path, key, i);
    return NPL_OK;
}

npl_status npl_qwen35_read_extra(npl_binder *b)
{
    npl_status st = npl_llama_read_extra(b);
    return st ? st : npl_qwen35_read_hybrid(b);
}

npl_status npl_qwen35_read_hybrid(npl_binder *b)
{
    npl_model *m = b->m;
    npl_hparams *hp = &m->hp;
    npl_status st;
    uint32_t inner = 0, nextn = 0, interval = 0;
    char key[96];
    if ((st = npl_llama_rope_plain(b)) || (st = read_sections(b)) ||
        (st = npl_bind_u32(b, "ssm.conv_kernel", true, 0, 2, QWEN35_MAX_CONV, &hp->ssm_d_conv)) ||
        (st = npl_bind_u32(b, "ssm.state_size", true, 0, 1, NPL_MAX_HEAD_DIM, &hp->ssm_d_state)) ||
        (st = npl_bind_u32(b, "ssm.time_step_rank", true, 0, 1, NPL_MAX_HEADS, &hp->ssm_n_v)) ||
        (st = npl_bind_u32(b, "ssm.group_count", true, 0, 1, hp->ssm_n_v, &hp->ssm_n_k)) ||
        (st = npl_bind_u32(b, "ssm.inner_size", true, 0, 1, UINT32_MAX, &inner)) ||
        (st = npl_bind_u32(b, "full_attention_interval", false, QWEN35_DEFAULT_INTERVAL, 1, NPL_MAX_LAYERS,
                           &interval)) ||
        (st = npl_bind_u32(b, "nextn_predict_layers", false, 0, 0, UINT32_MAX, &nextn)))
        return st;
    if (hp->ssm_n_v % hp->ssm_n_k != 0 || (uint64_t)inner != (uint64_t)hp->ssm_d_state * hp->ssm_n_v)
        return npl_error_set(b->err, NPL_ERR_FORMAT,
                             "%s: %s.ssm.time_step_rank (%u) must be a multiple of group_count (%u) and inner_size "
                             "(%u) equal time_step_rank * state_size (%u)", b->path, b->arch, hp->ssm_n_v,
                             hp->ssm_n_k, inner, hp->ssm_d_state);
    if (nextn)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED,
                             "%s: %u multi-token-prediction layers (%s.nextn_predict_layers) are not supported",
                             b->path, nextn, b->arch);
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", b->arch);
    if (npl_gguf_find(m->gguf, key))
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: '%s' is not supported (only full_attention_interval)",
                             b->path, key);
    b->full_attn_interval = interval;
    m->npu_refusal = "qwen35's Gated DeltaNet layers";
    return NPL_OK;
}

/* A Gated DeltaNet layer's weights and the size of its state. */
static npl_status bind_dnet(const npl_binder *b, uint32_t l, npl_layer *L)
{
    const npl_hparams *hp = &b->m->hp;
    uint64_t e = hp->n_embd, nv = hp->ssm_n_v, dk = hp->ssm_d_state;
    uint64_t vdim = nv * dk, conv = 2 * dk * hp->ssm_n_k + vdim;
    char n[9][96];
    const char *suffix[9] = {"attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight", "ssm_alpha.weight",
                             "ssm_out.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a", "ssm_norm.weight"};
    for (int i = 0; i < 9; i++)
        snprintf(n[i], sizeof n[i], "blk.%u.%s", l, suffix[i]);
    npl_matrix cw;
    npl_status st;
    if ((st = npl_bind_matrix(b, n[0], e, conv, "n_embd, 2 * key_dim + value_dim", &L->w_mix)) ||
        (st = npl_bind_matrix(b, n[1], e, vdim, "n_embd, value_dim", &L->w_z)) ||
        (st = npl_bind_matrix(b, n[2], e, nv, "n_embd, value heads", &L->w_beta)) ||
        (st = npl_bind_matrix(b, n[3], e, nv, "n_embd, value heads", &L->w_alpha)) ||
        (st = npl_bind_matrix(b, n[4], vdim, e, "value_dim, n_embd", &L->w_ssm_out)) ||
        (st = npl_bind_matrix(b, n[5], hp->ssm_d_conv, conv, "conv_kernel, channels", &cw)) ||
        (st = npl_bind_vector(b, n[6], nv, "value heads", &L->ssm_dt_bias)) ||
        (st = npl_bind_vector(b, n[7], nv, "value heads", &L->ssm_a)) ||
        (st = npl_bind_vector(b, n[8], dk, "state_size", &L->ssm_norm)))
        return st;
    if (cw.type != NPL_TYPE_F32)
        return npl_error_set(b->err, NPL_ERR_UNSUPPORTED, "%s: tensor '%s' must be f32", b->path, n[5]);
    L->ssm_conv = cw.data;
    L->state_conv = (size_t)(hp->ssm_d_conv - 1) * conv;
    L->state_mat = (size_t)nv * dk * dk;
    return NPL_OK;
}

npl_status npl_qwen35_finish(npl_binder *b)
{
    npl_model *m = b->m;
    uint32_t interval = b->full_attn_interval;
    npl_status st;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        npl_layer *L = &m->layers[l];
        if ((st = (l + 1) % interval ? bind_dnet(b, l, L) : npl_arch_bind_attention(b, l, L, 2)))
            return st;
    }
    npl_seq_state_layout(m);
    return NPL_OK;
}
