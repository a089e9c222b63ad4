/* The emulator's kernel groups. Each follows the contract in
 * npu_emu_manifest.c with the NPU's numerics: whatever enters a
 * multiply-accumulate is bf16 (activations rounded, Q4NX weights
 * dequantized to bf16), sums are f32 (the residual additions too, on the
 * tile), and what goes between groups is bf16: the residual stream x,
 * Q, the attention output and K/V. Decode and prefill share the row loops; decode
 * groups are simply fixed to one row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "npu_bf16.h"
#include "npu_emu.h"
#include "q4nx.h"

/* Keys per step of the online softmax: the KV rows one tile streams. */
#define EMU_ATTN_CHUNK 32u

typedef struct dims {
    uint32_t T, E, F, QD, KD, V;
} dims;

static npl_status check_shape(const npl_npu_emu_call *c, bool heads, dims *d, npl_error *err)
{
    const npl_npu_shape *s = c->shape;
    const char *g = c->spec->name;
    if (s->n_tokens == 0)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: n_tokens is 0", g);
    if (s->chunk && s->n_tokens > s->chunk)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: %u rows exceed the chunk of %u",
                             g, s->n_tokens, s->chunk);
    if (s->n_embd == 0)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: n_embd is 0", g);
    if (!(s->rms_eps >= 0.0f))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: rms_eps must be >= 0", g);
    if (heads) {
        if (s->n_head == 0 || s->n_head_kv == 0 || s->head_dim == 0
            || s->n_head % s->n_head_kv != 0)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "%s: heads %u/%u of %u dims are not a valid GQA shape",
                                 g, s->n_head, s->n_head_kv, s->head_dim);
        if ((uint64_t)s->pos + s->n_tokens > s->n_ctx)
            return npl_error_set(err, NPL_ERR_CONTEXT_OVERFLOW,
                                 "%s: rows %u..%u do not fit a KV cache of %u", g, s->pos,
                                 s->pos + s->n_tokens - 1, s->n_ctx);
    }
    d->T = s->n_tokens;
    d->E = s->n_embd;
    d->F = s->n_ff;
    d->QD = s->n_head * s->head_dim;
    d->KD = s->n_head_kv * s->head_dim;
    d->V = s->n_vocab;
    return NPL_OK;
}

static void *arg_or_null(const npl_npu_emu_call *c, const char *name)
{
    return npl_npu_emu_arg(c, name);
}

static npl_status need(const void *p, const npl_npu_emu_call *c, const char *name, npl_error *err)
{
    if (p)
        return NPL_OK;
    return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: argument '%s' is missing", c->spec->name,
                         name);
}

static float rms_scale(const float *x, uint32_t n, float eps)
{
    float ss = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / (float)n + eps);
}

/* out = x * rms_scale(x) * w, in f32 (out may alias x). */
static void rms_norm(const float *x, uint32_t n, float eps, const uint16_t *w, float *out)
{
    float r = rms_scale(x, n, eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = x[i] * r * npu_bf16_to_f32(w[i]);
}

/* n bf16 values as f32. */
static void bf16_row(const uint16_t *x, uint32_t n, float *out)
{
    for (uint32_t i = 0; i < n; i++)
        out[i] = npu_bf16_to_f32(x[i]);
}

/* The normed activation as it enters the MACs: bf16. */
static void rms_norm_bf16(const float *x, uint32_t n, float eps, const uint16_t *w, uint16_t *out)
{
    float r = rms_scale(x, n, eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = npu_f32_to_bf16(x[i] * r * npu_bf16_to_f32(w[i]));
}

/* y[T][rows] = W x[T][cols] with W in Q4NX. */
static npl_status matmul(const void *w, uint32_t rows, uint32_t cols, const uint16_t *x,
                         uint32_t T, float *y, npl_error *err)
{
    npl_q4nx_layout l;
    npl_status st = npl_q4nx_layout_init(&l, rows, cols, err);
    if (st != NPL_OK)
        return st;
    return npl_q4nx_matmul_ref(w, &l, x, cols, T, y, rows, err);
}

/* x += bias in f32, when there is one. */
static void add_bias(float *x, const float *bias, uint32_t n)
{
    for (uint32_t i = 0; bias && i < n; i++)
        x[i] += bias[i];
}

static void rope(float *v, uint32_t n_heads, const npl_npu_shape *s, uint32_t position,
                 const float *freqs)
{
    uint32_t half = s->rope_dims / 2;
    for (uint32_t i = 0; i < half; i++) {
        double inv_freq = pow((double)s->rope_theta, -2.0 * (double)i / (double)s->rope_dims);
        if (freqs)
            inv_freq /= (double)freqs[i];
        double angle = (double)position * (double)s->rope_freq_scale * inv_freq;
        float c = (float)cos(angle), sn = (float)sin(angle);
        uint32_t a = s->rope_style == NPL_NPU_ROPE_NEOX ? i : 2 * i;
        uint32_t b = s->rope_style == NPL_NPU_ROPE_NEOX ? i + half : 2 * i + 1;
        for (uint32_t h = 0; h < n_heads; h++) {
            float *base = v + (size_t)h * s->head_dim;
            float x0 = base[a], x1 = base[b];
            base[a] = x0 * c - x1 * sn;
            base[b] = x0 * sn + x1 * c;
        }
    }
}

static npl_status group_rms_qkv_rope(const npl_npu_emu_call *c, npl_error *err)
{
    dims d;
    npl_status st = check_shape(c, true, &d, err);
    if (st != NPL_OK)
        return st;
    const npl_npu_shape *s = c->shape;
    if (s->rope_dims % 2 || s->rope_dims > s->head_dim)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: rope_dims %u must be even and <= %u",
                             c->spec->name, s->rope_dims, s->head_dim);
    if (s->rope_dims && (!(s->rope_theta > 0.0f) || !(s->rope_freq_scale > 0.0f)
                         || s->rope_style > NPL_NPU_ROPE_NEOX))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "%s: RoPE needs theta > 0, freq_scale > 0 and a known style",
                             c->spec->name);
    const uint16_t *x = arg_or_null(c, "x");
    const uint16_t *norm = arg_or_null(c, "attn_norm");
    const void *wq = arg_or_null(c, "wq"), *wk = arg_or_null(c, "wk"), *wv = arg_or_null(c, "wv");
    uint16_t *q_out = arg_or_null(c, "q");
    uint16_t *kc = arg_or_null(c, "k_cache"), *vc = arg_or_null(c, "v_cache");
    if ((st = need(x, c, "x", err)) || (st = need(norm, c, "attn_norm", err))
        || (st = need(wq, c, "wq", err)) || (st = need(wk, c, "wk", err))
        || (st = need(wv, c, "wv", err)) || (st = need(q_out, c, "q", err))
        || (st = need(kc, c, "k_cache", err)) || (st = need(vc, c, "v_cache", err)))
        return st;
    const uint16_t *q_norm = arg_or_null(c, "q_norm"), *k_norm = arg_or_null(c, "k_norm");
    /* Biases (f32, present when the shape says qkv_bias) go onto the f32
     * sums before the norms and RoPE, as the CPU engine adds them. */
    const float *q_bias = arg_or_null(c, "q_bias"), *k_bias = arg_or_null(c, "k_bias"),
                *v_bias = arg_or_null(c, "v_bias");
    if (s->qkv_bias && (!q_bias || !k_bias || !v_bias))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "%s: qkv_bias is set, but the contract has no q_bias, k_bias and "
                             "v_bias parts", c->spec->name);
    const float *freqs = arg_or_null(c, "rope_freqs");

    uint16_t *xn = malloc((size_t)d.T * d.E * sizeof *xn);
    float *xf = malloc((size_t)d.E * sizeof *xf);
    float *q = malloc((size_t)d.T * d.QD * sizeof *q);
    float *k = malloc((size_t)d.T * d.KD * sizeof *k);
    float *v = malloc((size_t)d.T * d.KD * sizeof *v);
    if (!xn || !xf || !q || !k || !v) {
        st = npl_error_set(err, NPL_ERR_NOMEM, "%s: no memory for activations", c->spec->name);
        goto out;
    }
    for (uint32_t t = 0; t < d.T; t++) {
        bf16_row(x + (size_t)t * d.E, d.E, xf);
        rms_norm_bf16(xf, d.E, s->rms_eps, norm, xn + (size_t)t * d.E);
    }
    if ((st = matmul(wq, d.QD, d.E, xn, d.T, q, err)) || (st = matmul(wk, d.KD, d.E, xn, d.T, k, err))
        || (st = matmul(wv, d.KD, d.E, xn, d.T, v, err)))
        goto out;
    for (uint32_t t = 0; t < d.T; t++) {
        float *qt = q + (size_t)t * d.QD, *kt = k + (size_t)t * d.KD, *vt = v + (size_t)t * d.KD;
        add_bias(qt, q_bias, d.QD);
        add_bias(kt, k_bias, d.KD);
        add_bias(vt, v_bias, d.KD);
        for (uint32_t h = 0; q_norm && h < s->n_head; h++)
            rms_norm(qt + (size_t)h * s->head_dim, s->head_dim, s->rms_eps, q_norm,
                     qt + (size_t)h * s->head_dim);
        for (uint32_t h = 0; k_norm && h < s->n_head_kv; h++)
            rms_norm(kt + (size_t)h * s->head_dim, s->head_dim, s->rms_eps, k_norm,
                     kt + (size_t)h * s->head_dim);
        uint32_t position = s->pos + t;
        if (s->rope_dims) {
            rope(qt, s->n_head, s, position, freqs);
            rope(kt, s->n_head_kv, s, position, freqs);
        }
        for (uint32_t i = 0; i < d.QD; i++)
            q_out[(size_t)t * d.QD + i] = npu_f32_to_bf16(qt[i]);
        for (uint32_t i = 0; i < d.KD; i++) {
            kc[(size_t)position * d.KD + i] = npu_f32_to_bf16(kt[i]);
            vc[(size_t)position * d.KD + i] = npu_f32_to_bf16(vt[i]);
        }
    }
    st = NPL_OK;
out:
    free(xn);
    free(xf);
    free(q);
    free(k);
    free(v);
    return st;
}

/* Attention of rows pos..pos+T-1 over the cache, one head at a time, with
 * keys streamed EMU_ATTN_CHUNK at a time through an online softmax. The
 * probabilities enter the P.V product as bf16, like on the device. */
static npl_status attention_rows(const npl_npu_emu_call *c, const dims *d, const uint16_t *q,
                                 const uint16_t *kc, const uint16_t *vc, uint16_t *out,
                                 npl_error *err)
{
    const npl_npu_shape *s = c->shape;
    uint32_t hd = s->head_dim, group = s->n_head / s->n_head_kv;
    float *acc = malloc((size_t)hd * sizeof *acc);
    float *qf = malloc((size_t)hd * sizeof *qf);
    if (!acc || !qf) {
        free(acc);
        free(qf);
        return npl_error_set(err, NPL_ERR_NOMEM, "%s: no memory", c->spec->name);
    }
    uint32_t last_row = s->pos + d->T - 1;
    for (uint32_t t = 0; t < d->T; t++) {
        uint32_t qpos = s->pos + t;
        uint32_t lo = (s->window && qpos + 1 > s->window) ? qpos + 1 - s->window : 0;
        uint32_t hi = qpos;
        if (!s->causal) {
            hi = last_row;
            if (s->window && (uint64_t)qpos + s->window - 1 < hi)
                hi = qpos + s->window - 1;
        }
        for (uint32_t h = 0; h < s->n_head; h++) {
            const uint16_t *qh = q + (size_t)t * d->QD + (size_t)h * hd;
            size_t kv_off = (size_t)(h / group) * hd;
            for (uint32_t i = 0; i < hd; i++) {
                qf[i] = npu_bf16_to_f32(qh[i]);
                acc[i] = 0.0f;
            }
            float m = -INFINITY, l = 0.0f;
            for (uint32_t k0 = lo; k0 <= hi; k0 += EMU_ATTN_CHUNK) {
                uint32_t k1 = hi - k0 + 1 < EMU_ATTN_CHUNK ? hi : k0 + EMU_ATTN_CHUNK - 1;
                float scores[EMU_ATTN_CHUNK];
                float cmax = -INFINITY;
                for (uint32_t j = k0; j <= k1; j++) {
                    const uint16_t *kr = kc + (size_t)j * d->KD + kv_off;
                    float dot = 0.0f;
                    for (uint32_t i = 0; i < hd; i++)
                        dot += qf[i] * npu_bf16_to_f32(kr[i]);
                    scores[j - k0] = dot * s->attn_scale;
                    cmax = scores[j - k0] > cmax ? scores[j - k0] : cmax;
                }
                float m_new = cmax > m ? cmax : m;
                float corr = m == -INFINITY ? 0.0f : expf(m - m_new);
                l *= corr;
                for (uint32_t i = 0; i < hd; i++)
                    acc[i] *= corr;
                for (uint32_t j = k0; j <= k1; j++) {
                    float p = expf(scores[j - k0] - m_new);
                    l += p;
                    float pb = npu_round_bf16(p);
                    const uint16_t *vr = vc + (size_t)j * d->KD + kv_off;
                    for (uint32_t i = 0; i < hd; i++)
                        acc[i] += pb * npu_bf16_to_f32(vr[i]);
                }
                m = m_new;
                if (k1 == hi)
                    break;
            }
            uint16_t *oh = out + (size_t)t * d->QD + (size_t)h * hd;
            for (uint32_t i = 0; i < hd; i++)
                oh[i] = npu_f32_to_bf16(l > 0.0f ? acc[i] / l : 0.0f);
        }
    }
    free(acc);
    free(qf);
    return NPL_OK;
}

static npl_status group_attention(const npl_npu_emu_call *c, npl_error *err)
{
    dims d;
    npl_status st = check_shape(c, true, &d, err);
    if (st != NPL_OK)
        return st;
    const uint16_t *q = arg_or_null(c, "q"), *kc = arg_or_null(c, "k_cache"),
                   *vc = arg_or_null(c, "v_cache");
    uint16_t *out = arg_or_null(c, "attn");
    if ((st = need(q, c, "q", err)) || (st = need(kc, c, "k_cache", err))
        || (st = need(vc, c, "v_cache", err)) || (st = need(out, c, "attn", err)))
        return st;
    return attention_rows(c, &d, q, kc, vc, out, err);
}

static float activation(uint32_t act, float g)
{
    if (act == NPL_NPU_ACT_GELU_TANH)
        return 0.5f * g * (1.0f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g)));
    return g / (1.0f + expf(-g));
}

/* O projection + residual + FFN + residual over T rows; attn is bf16. */
static npl_status o_ffn_rows(const npl_npu_emu_call *c, const dims *d, const uint16_t *attn,
                             npl_error *err)
{
    const npl_npu_shape *s = c->shape;
    uint16_t *x = arg_or_null(c, "x");
    const void *wo = arg_or_null(c, "wo"), *wg = arg_or_null(c, "w_gate"),
               *wu = arg_or_null(c, "w_up"), *wd = arg_or_null(c, "w_down");
    const uint16_t *ffn_norm = arg_or_null(c, "ffn_norm");
    const uint16_t *post_attn = arg_or_null(c, "post_attn_norm");
    const uint16_t *post_ffn = arg_or_null(c, "post_ffn_norm");
    npl_status st;
    if ((st = need(x, c, "x", err)) || (st = need(wo, c, "wo", err))
        || (st = need(ffn_norm, c, "ffn_norm", err)) || (st = need(wg, c, "w_gate", err))
        || (st = need(wu, c, "w_up", err)) || (st = need(wd, c, "w_down", err)))
        return st;
    if (d->F == 0 || s->act > NPL_NPU_ACT_GELU_TANH)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: needs n_ff > 0 and a known activation",
                             c->spec->name);
    float *o = malloc((size_t)d->T * d->E * sizeof *o);
    float *xs = malloc((size_t)d->T * d->E * sizeof *xs); /* the residual, f32 on the tile */
    uint16_t *hn = malloc((size_t)d->T * d->E * sizeof *hn);
    float *g = malloc((size_t)d->T * d->F * sizeof *g);
    float *u = malloc((size_t)d->T * d->F * sizeof *u);
    uint16_t *a = malloc((size_t)d->T * d->F * sizeof *a);
    if (!o || !xs || !hn || !g || !u || !a) {
        st = npl_error_set(err, NPL_ERR_NOMEM, "%s: no memory for activations", c->spec->name);
        goto out;
    }
    if ((st = matmul(wo, d->E, d->QD, attn, d->T, o, err)))
        goto out;
    for (uint32_t t = 0; t < d->T; t++) {
        float *ot = o + (size_t)t * d->E, *xt = xs + (size_t)t * d->E;
        if (post_attn)
            rms_norm(ot, d->E, s->rms_eps, post_attn, ot);
        bf16_row(x + (size_t)t * d->E, d->E, xt);
        for (uint32_t i = 0; i < d->E; i++)
            xt[i] += ot[i];
        rms_norm_bf16(xt, d->E, s->rms_eps, ffn_norm, hn + (size_t)t * d->E);
    }
    if ((st = matmul(wg, d->F, d->E, hn, d->T, g, err))
        || (st = matmul(wu, d->F, d->E, hn, d->T, u, err)))
        goto out;
    for (size_t i = 0; i < (size_t)d->T * d->F; i++)
        a[i] = npu_f32_to_bf16(activation(s->act, g[i]) * u[i]);
    if ((st = matmul(wd, d->E, d->F, a, d->T, o, err)))
        goto out;
    for (uint32_t t = 0; t < d->T; t++) {
        float *ot = o + (size_t)t * d->E, *xt = xs + (size_t)t * d->E;
        if (post_ffn)
            rms_norm(ot, d->E, s->rms_eps, post_ffn, ot);
        for (uint32_t i = 0; i < d->E; i++)
            x[(size_t)t * d->E + i] = npu_f32_to_bf16(xt[i] + ot[i]);
    }
    st = NPL_OK;
out:
    free(o);
    free(xs);
    free(hn);
    free(g);
    free(u);
    free(a);
    return st;
}

static npl_status group_o_ffn(const npl_npu_emu_call *c, npl_error *err)
{
    dims d;
    npl_status st = check_shape(c, false, &d, err);
    if (st != NPL_OK)
        return st;
    if (c->shape->n_head == 0 || c->shape->head_dim == 0)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "%s: needs n_head and head_dim",
                             c->spec->name);
    const uint16_t *attn = arg_or_null(c, "attn");
    if ((st = need(attn, c, "attn", err)))
        return st;
    return o_ffn_rows(c, &d, attn, err);
}

static npl_status group_attn_o_ffn(const npl_npu_emu_call *c, npl_error *err)
{
    dims d;
    npl_status st = check_shape(c, true, &d, err);
    if (st != NPL_OK)
        return st;
    const uint16_t *q = arg_or_null(c, "q"), *kc = arg_or_null(c, "k_cache"),
                   *vc = arg_or_null(c, "v_cache");
    if ((st = need(q, c, "q", err)) || (st = need(kc, c, "k_cache", err))
        || (st = need(vc, c, "v_cache", err)))
        return st;
    /* The attention output stays inside the group, as it would in the
     * tile's local memory. */
    uint16_t *attn = malloc((size_t)d.T * d.QD * sizeof *attn);
    if (!attn)
        return npl_error_set(err, NPL_ERR_NOMEM, "%s: no memory", c->spec->name);
    st = attention_rows(c, &d, q, kc, vc, attn, err);
    if (st == NPL_OK)
        st = o_ffn_rows(c, &d, attn, err);
    free(attn);
    return st;
}

static npl_status group_lm_head(const npl_npu_emu_call *c, npl_error *err)
{
    const npl_npu_shape *s = c->shape;
    const uint16_t *x = arg_or_null(c, "x");
    const uint16_t *norm = arg_or_null(c, "out_norm");
    const void *w = arg_or_null(c, "w_out");
    float *logits = arg_or_null(c, "logits");
    npl_status st;
    if ((st = need(x, c, "x", err)) || (st = need(norm, c, "out_norm", err))
        || (st = need(w, c, "w_out", err)) || (st = need(logits, c, "logits", err)))
        return st;
    if (s->n_embd == 0 || s->n_vocab == 0 || !(s->rms_eps >= 0.0f))
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "lm_head: needs n_embd, n_vocab, rms_eps");
    uint16_t *xn = malloc((size_t)s->n_embd * sizeof *xn);
    float *xf = malloc((size_t)s->n_embd * sizeof *xf);
    if (!xn || !xf) {
        free(xn);
        free(xf);
        return npl_error_set(err, NPL_ERR_NOMEM, "lm_head: no memory");
    }
    bf16_row(x, s->n_embd, xf);
    rms_norm_bf16(xf, s->n_embd, s->rms_eps, norm, xn);
    st = matmul(w, s->n_vocab, s->n_embd, xn, 1, logits, err);
    free(xn);
    free(xf);
    return st;
}

static const npl_npu_emu_group_def builtin_groups[] = {
    /* name, implementation, buffer arguments the kernel declares */
    { "rms_qkv_rope_mv", group_rms_qkv_rope, 5 },
    { "attention_decode", group_attention, 4 },
    { "o_ffn_mv", group_o_ffn, 3 },
    { "attn_o_ffn_mv", group_attn_o_ffn, 5 },
    { "lm_head", group_lm_head, 3 },
    { "rms_qkv_rope", group_rms_qkv_rope, 5 },
    { "attention", group_attention, 4 },
    { "o_ffn", group_o_ffn, 3 },
};

const npl_npu_emu_group_def *npl_npu_emu_builtin_groups(size_t *count)
{
    if (count)
        *count = sizeof builtin_groups / sizeof builtin_groups[0];
    return builtin_groups;
}
