#include "npu_types.h"

#include <string.h>

const char *npl_npu_buf_class_name(npl_npu_buf_class cls)
{
    switch (cls) {
    case NPL_NPU_BUF_STATIC: return "static";
    case NPL_NPU_BUF_INTERMEDIATE: return "intermediate";
    case NPL_NPU_BUF_OUTPUT: return "output";
    case NPL_NPU_BUF_IO: return "io";
    }
    return "unknown";
}

const char *npl_npu_elem_type_name(npl_npu_elem_type type)
{
    switch (type) {
    case NPL_NPU_ELEM_F32: return "f32";
    case NPL_NPU_ELEM_BF16: return "bf16";
    case NPL_NPU_ELEM_Q4NX: return "q4nx";
    case NPL_NPU_ELEM_I32: return "i32";
    case NPL_NPU_ELEM_U8: return "u8";
    case NPL_NPU_ELEM_PACK: return "pack";
    }
    return "unknown";
}

static uint32_t float_word(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float word_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void npl_npu_shape_pack(const npl_npu_shape *s, uint32_t w[NPL_NPU_SHAPE_WORDS])
{
    const uint32_t v[NPL_NPU_SHAPE_WORDS] = {
        s->n_embd, s->n_head, s->n_head_kv, s->head_dim, s->n_ff, s->n_vocab,
        s->n_tokens, s->pos, s->n_ctx, s->window, s->rope_dims, s->chunk,
        s->rope_style, s->act, s->causal, s->qk_norm, s->post_norms, s->qkv_bias,
        float_word(s->rms_eps), float_word(s->rope_theta),
        float_word(s->rope_freq_scale), float_word(s->attn_scale),
    };
    memcpy(w, v, sizeof v);
}

void npl_npu_shape_unpack(const uint32_t w[NPL_NPU_SHAPE_WORDS], npl_npu_shape *s)
{
    s->n_embd = w[0];
    s->n_head = w[1];
    s->n_head_kv = w[2];
    s->head_dim = w[3];
    s->n_ff = w[4];
    s->n_vocab = w[5];
    s->n_tokens = w[6];
    s->pos = w[7];
    s->n_ctx = w[8];
    s->window = w[9];
    s->rope_dims = w[10];
    s->chunk = w[11];
    s->rope_style = w[12];
    s->act = w[13];
    s->causal = w[14];
    s->qk_norm = w[15];
    s->post_norms = w[16];
    s->qkv_bias = w[17];
    s->rms_eps = word_float(w[18]);
    s->rope_theta = word_float(w[19]);
    s->rope_freq_scale = word_float(w[20]);
    s->attn_scale = word_float(w[21]);
}

const char *const npl_npu_shape_symbol_names[] = {
    "n_embd", "n_head", "n_head_kv", "head_dim", "n_ff", "n_vocab", "n_tokens",
    "pos", "n_ctx", "window", "rope_dims", "chunk", "qk_norm", "post_norms", "qkv_bias",
    NULL,
};

bool npl_npu_shape_symbol(const npl_npu_shape *s, const char *name, uint32_t *value)
{
    const uint32_t v[] = {
        s->n_embd, s->n_head, s->n_head_kv, s->head_dim, s->n_ff, s->n_vocab,
        s->n_tokens, s->pos, s->n_ctx, s->window, s->rope_dims, s->chunk,
        s->qk_norm, s->post_norms, s->qkv_bias,
    };
    for (size_t i = 0; npl_npu_shape_symbol_names[i]; i++)
        if (strcmp(npl_npu_shape_symbol_names[i], name) == 0) {
            *value = v[i];
            return true;
        }
    return false;
}
