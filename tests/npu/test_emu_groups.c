/* The emulator's kernel groups against straightforward f32 references
 * written here (f32 weights from the same Q4NX data, f32 activations,
 * two-pass softmax, RoPE in double). The groups round what enters their
 * multiply-accumulates to bf16, so they agree to a few bf16 ulps of the
 * output's scale; the checks also make sure a wrong variant (other RoPE
 * style, missing norm) would not pass. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_types.h"
#include "npu_emu.h"
#include "npl_test.h"
#include "q4nx.h"

enum { E = 64, NH = 4, NKV = 2, HD = 16, FF = 96, CTX = 40, VOCAB = 100, QD = NH * HD, KD = NKV * HD };

typedef struct weight {
    npl_q4nx_layout l;
    uint8_t *q;      /* Q4NX bytes */
    float *f;        /* the same weights in f32, for the references */
} weight;

typedef struct layer {
    npl_npu_device *dev;
    weight wq, wk, wv, wo, wg, wu, wd, wout;
    uint16_t attn_norm[E], ffn_norm[E], post_attn[E], post_ffn[E], out_norm[E], q_norm[HD], k_norm[HD];
    float freqs[HD / 2], ones[HD / 2];
    float q_bias[QD], k_bias[KD], v_bias[KD]; /* f32, as in the pack */
    /* The packed weight arguments, laid out by the built-in contracts:
     * w_attn [qk_norm][rope factors][Q/K/V biases], w_ffn [post_norms],
     * w_head. */
    npl_npu_buffer *w_attn[2][2][2], *w_ffn[2], *w_head;
    npl_npu_buffer *x, *q, *kc, *vc, *attn, *logits;
} layer;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

static void weight_init(layer *L, weight *w, uint32_t rows, uint32_t cols, nt_rng *rng, const char *name)
{
    npl_error err;
    CHECK_OK(npl_q4nx_layout_init(&w->l, rows, cols, &err), &err);
    float *src = xmalloc(sizeof(float) * rows * cols);
    float scale = 1.0f / sqrtf((float)cols);
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        src[i] = nt_rng_uniform(rng, -2.0f, 2.0f) * scale;
    w->q = xmalloc(w->l.bytes);
    CHECK_OK(npl_q4nx_quantize_f32(&w->l, src, w->q, w->l.bytes, &err), &err);
    w->f = src;
    for (uint32_t r = 0; r < rows; r++)
        npl_q4nx_dequantize_row(w->q, &w->l, r, w->f + (size_t)r * cols);
    (void)L;
    (void)name;
}

static npl_npu_shape base_shape(void);

/* The bytes of a weight the test holds, by the contract's part name. */
static const void *part_data(const layer *L, const char *name, bool freqs)
{
    const struct { const char *name; const void *data; } t[] = {
        { "attn_norm", L->attn_norm }, { "wq", L->wq.q }, { "wk", L->wk.q }, { "wv", L->wv.q },
        { "q_bias", L->q_bias }, { "k_bias", L->k_bias }, { "v_bias", L->v_bias },
        { "q_norm", L->q_norm }, { "k_norm", L->k_norm },
        { "rope_freqs", freqs ? L->freqs : L->ones }, { "wo", L->wo.q },
        { "post_attn_norm", L->post_attn }, { "ffn_norm", L->ffn_norm }, { "w_gate", L->wg.q },
        { "w_up", L->wu.q }, { "w_down", L->wd.q }, { "post_ffn_norm", L->post_ffn },
        { "out_norm", L->out_norm }, { "w_out", L->wout.q },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].name, name))
            return t[i].data;
    return NULL;
}

/* A packed argument of group `group` as its contract lays it out for the
 * variant's flags, uploaded into a static buffer of its own. */
static npl_npu_buffer *upload_pack(layer *L, const char *group, const char *arg, bool qk_norm,
                                   bool post_norms, bool freqs, bool bias)
{
    npl_error err;
    const npl_npu_group_spec *g = npl_npu_manifest_find(npl_npu_device_manifest(L->dev), group);
    CHECK(g != NULL);
    npl_npu_shape s = base_shape();
    s.qk_norm = qk_norm;
    s.post_norms = post_norms;
    s.qkv_bias = bias;
    int a = npl_npu_group_arg_index(g, arg);
    CHECK(a >= 0);
    size_t bytes = 0;
    CHECK_OK(npl_npu_group_arg_bytes(g, (uint32_t)a, &s, &bytes, &err), &err);
    uint8_t *host = calloc(1, bytes);
    CHECK(host != NULL);
    for (uint32_t p = 0; p < g->n_parts; p++) {
        if (g->parts[p].arg != (uint32_t)a)
            continue;
        size_t off = 0, n = 0;
        CHECK_OK(npl_npu_part_place(g, p, &s, &off, &n, &err), &err);
        const void *src = part_data(L, g->parts[p].elem.name, freqs);
        CHECK(src != NULL);
        if (n && src)
            memcpy(host + off, src, n);
    }
    npl_npu_buffer *b = NULL;
    CHECK_OK(npl_npu_buffer_alloc(L->dev, bytes, NPL_NPU_BUF_STATIC, arg, &b, &err), &err);
    CHECK_OK(npl_npu_buffer_write(b, 0, host, bytes, &err), &err);
    free(host);
    return b;
}

/* x is bf16 between groups: written from f32 rows (rounded), read back. */
static void write_x(npl_npu_buffer *x, size_t row, const float *v, int n)
{
    uint16_t *h = xmalloc((size_t)n * 2);
    for (int i = 0; i < n; i++)
        h[i] = npl_fp32_to_bf16(v[i]);
    npl_error err;
    CHECK_OK(npl_npu_buffer_write(x, row * E * 2, h, (size_t)n * 2, &err), &err);
    free(h);
}

static void read_x(npl_npu_buffer *x, size_t row, float *v, int n)
{
    uint16_t *h = xmalloc((size_t)n * 2);
    npl_error err;
    CHECK_OK(npl_npu_buffer_read(x, row * E * 2, h, (size_t)n * 2, &err), &err);
    for (int i = 0; i < n; i++)
        v[i] = npl_bf16_to_fp32(h[i]);
    free(h);
}

static void random_norm(uint16_t *w, int n, nt_rng *rng)
{
    for (int i = 0; i < n; i++)
        w[i] = npl_fp32_to_bf16(nt_rng_uniform(rng, 0.5f, 1.5f));
}

static void layer_open(layer *L, uint64_t seed)
{
    npl_error err;
    memset(L, 0, sizeof *L);
    nt_rng rng = { seed };
    CHECK_OK(npl_npu_emu_open(NULL, &L->dev, &err), &err);
    weight_init(L, &L->wq, QD, E, &rng, "wq");
    weight_init(L, &L->wk, KD, E, &rng, "wk");
    weight_init(L, &L->wv, KD, E, &rng, "wv");
    weight_init(L, &L->wo, E, QD, &rng, "wo");
    weight_init(L, &L->wg, FF, E, &rng, "w_gate");
    weight_init(L, &L->wu, FF, E, &rng, "w_up");
    weight_init(L, &L->wd, E, FF, &rng, "w_down");
    weight_init(L, &L->wout, VOCAB, E, &rng, "w_out");
    random_norm(L->attn_norm, E, &rng);
    random_norm(L->ffn_norm, E, &rng);
    random_norm(L->post_attn, E, &rng);
    random_norm(L->post_ffn, E, &rng);
    random_norm(L->out_norm, E, &rng);
    random_norm(L->q_norm, HD, &rng);
    random_norm(L->k_norm, HD, &rng);
    for (int i = 0; i < HD / 2; i++) {
        L->freqs[i] = i < HD / 4 ? 1.0f : 8.0f;
        L->ones[i] = 1.0f;
    }
    /* Biases as large as the projections (as in Qwen 2.5's files). */
    for (int i = 0; i < QD; i++)
        L->q_bias[i] = nt_rng_uniform(&rng, -1.0f, 1.0f);
    for (int i = 0; i < KD; i++) {
        L->k_bias[i] = nt_rng_uniform(&rng, -1.0f, 1.0f);
        L->v_bias[i] = nt_rng_uniform(&rng, -1.0f, 1.0f);
    }
    for (int qk = 0; qk < 2; qk++)
        for (int f = 0; f < 2; f++)
            for (int b = 0; b < 2; b++)
                L->w_attn[qk][f][b] = upload_pack(L, "rms_qkv_rope_mv", "w_attn", qk, false, f, b);
    for (int post = 0; post < 2; post++)
        L->w_ffn[post] = upload_pack(L, "o_ffn_mv", "w_ffn", false, post, false, false);
    L->w_head = upload_pack(L, "lm_head", "w_head", false, false, false, false);
    CHECK_OK(npl_npu_buffer_alloc(L->dev, 2 * E * 8, NPL_NPU_BUF_IO, "x", &L->x, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(L->dev, 2 * QD * 8, NPL_NPU_BUF_INTERMEDIATE, "q", &L->q, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(L->dev, 2 * KD * CTX, NPL_NPU_BUF_INTERMEDIATE, "k_cache", &L->kc, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(L->dev, 2 * KD * CTX, NPL_NPU_BUF_INTERMEDIATE, "v_cache", &L->vc, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(L->dev, 2 * QD * 8, NPL_NPU_BUF_INTERMEDIATE, "attn", &L->attn, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(L->dev, sizeof(float) * VOCAB, NPL_NPU_BUF_OUTPUT, "logits", &L->logits, &err), &err);
    CHECK_OK(npl_npu_device_seal_weights(L->dev, &err), &err);
}

static void layer_close(layer *L)
{
    weight *ws[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd, &L->wout };
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        free(ws[i]->q);
        free(ws[i]->f);
    }
    npl_npu_device_destroy(L->dev);
}

static npl_npu_shape base_shape(void)
{
    npl_npu_shape s;
    memset(&s, 0, sizeof s);
    s.n_embd = E;
    s.n_head = NH;
    s.n_head_kv = NKV;
    s.head_dim = HD;
    s.n_ff = FF;
    s.n_vocab = VOCAB;
    s.n_tokens = 1;
    s.n_ctx = CTX;
    s.rope_dims = HD;
    s.rope_style = NPL_NPU_ROPE_NORM;
    s.act = NPL_NPU_ACT_SILU;
    s.causal = 1;
    s.rms_eps = 1e-5f;
    s.rope_theta = 10000.0f;
    s.rope_freq_scale = 1.0f;
    s.attn_scale = 0.25f;
    return s;
}

/* ---- f32 references ---- */

static void ref_rmsnorm(const float *x, const uint16_t *w, int n, float eps, float *out)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        out[i] = (float)(x[i] * r * npl_bf16_to_fp32(w[i]));
}

static void ref_matvec(const weight *w, const float *x, float *y)
{
    for (uint32_t r = 0; r < w->l.rows; r++) {
        double acc = 0.0;
        for (uint32_t c = 0; c < w->l.cols; c++)
            acc += (double)w->f[(size_t)r * w->l.cols + c] * x[c];
        y[r] = (float)acc;
    }
}

static void ref_rope(float *v, int heads, const npl_npu_shape *s, uint32_t pos, const float *freqs)
{
    int half = (int)s->rope_dims / 2;
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < half; i++) {
            double f = pow(s->rope_theta, -2.0 * i / s->rope_dims) / (freqs ? freqs[i] : 1.0);
            double a = pos * s->rope_freq_scale * f;
            int i0 = s->rope_style == NPL_NPU_ROPE_NEOX ? i : 2 * i;
            int i1 = s->rope_style == NPL_NPU_ROPE_NEOX ? i + half : 2 * i + 1;
            double x0 = v[h * HD + i0], x1 = v[h * HD + i1];
            v[h * HD + i0] = (float)(x0 * cos(a) - x1 * sin(a));
            v[h * HD + i1] = (float)(x0 * sin(a) + x1 * cos(a));
        }
}

typedef struct qkv_opts {
    bool qk_norm, freqs, bias;
} qkv_opts;

static void ref_add(float *x, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        x[i] += b[i];
}

static void ref_qkv(const layer *L, const float *x, const npl_npu_shape *s, uint32_t pos,
                    qkv_opts o, float *q, float *k, float *v)
{
    float xn[E];
    ref_rmsnorm(x, L->attn_norm, E, s->rms_eps, xn);
    ref_matvec(&L->wq, xn, q);
    ref_matvec(&L->wk, xn, k);
    ref_matvec(&L->wv, xn, v);
    if (o.bias) {
        ref_add(q, L->q_bias, QD);
        ref_add(k, L->k_bias, KD);
        ref_add(v, L->v_bias, KD);
    }
    for (int h = 0; o.qk_norm && h < NH; h++)
        ref_rmsnorm(q + h * HD, L->q_norm, HD, s->rms_eps, q + h * HD);
    for (int h = 0; o.qk_norm && h < NKV; h++)
        ref_rmsnorm(k + h * HD, L->k_norm, HD, s->rms_eps, k + h * HD);
    ref_rope(q, NH, s, pos, o.freqs ? L->freqs : NULL);
    ref_rope(k, NKV, s, pos, o.freqs ? L->freqs : NULL);
}

/* Attention of one query row over keys [lo, hi] of bf16 caches. */
static void ref_attention_row(const float *q, const uint16_t *kc, const uint16_t *vc, uint32_t lo,
                              uint32_t hi, float scale, float *out)
{
    for (int h = 0; h < NH; h++) {
        int kvh = h / (NH / NKV);
        double scores[CTX], mx = -1e300, sum = 0.0;
        for (uint32_t j = lo; j <= hi; j++) {
            double d = 0.0;
            for (int i = 0; i < HD; i++)
                d += (double)q[h * HD + i] * npl_bf16_to_fp32(kc[j * KD + kvh * HD + i]);
            scores[j] = d * scale;
            mx = scores[j] > mx ? scores[j] : mx;
        }
        for (uint32_t j = lo; j <= hi; j++)
            sum += exp(scores[j] - mx);
        for (int i = 0; i < HD; i++) {
            double acc = 0.0;
            for (uint32_t j = lo; j <= hi; j++)
                acc += exp(scores[j] - mx) / sum * npl_bf16_to_fp32(vc[j * KD + kvh * HD + i]);
            out[h * HD + i] = (float)acc;
        }
    }
}

static float act(uint32_t a, float g)
{
    if (a == NPL_NPU_ACT_GELU_TANH)
        return (float)(0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))));
    return (float)(g / (1.0 + exp(-g)));
}

static void ref_o_ffn(const layer *L, const float *attn, float *x, const npl_npu_shape *s, bool post)
{
    float o[E], hn[E], g[FF], u[FF], a[FF], d[E];
    ref_matvec(&L->wo, attn, o);
    if (post)
        ref_rmsnorm(o, L->post_attn, E, s->rms_eps, o);
    for (int i = 0; i < E; i++)
        x[i] += o[i];
    ref_rmsnorm(x, L->ffn_norm, E, s->rms_eps, hn);
    ref_matvec(&L->wg, hn, g);
    ref_matvec(&L->wu, hn, u);
    for (int i = 0; i < FF; i++)
        a[i] = act(s->act, g[i]) * u[i];
    ref_matvec(&L->wd, a, d);
    if (post)
        ref_rmsnorm(d, L->post_ffn, E, s->rms_eps, d);
    for (int i = 0; i < E; i++)
        x[i] += d[i];
}

/* Largest difference relative to the reference's RMS. */
static double rel_diff(const float *got, const float *want, int n)
{
    double rms = 0.0, worst = 0.0;
    for (int i = 0; i < n; i++) {
        rms += (double)want[i] * want[i];
        double d = fabs((double)got[i] - want[i]);
        worst = d > worst ? d : worst;
    }
    rms = sqrt(rms / n);
    return rms > 0 ? worst / rms : worst;
}

static void peek_bf16(npl_npu_buffer *b, size_t offset, float *out, int n)
{
    uint16_t tmp[CTX * KD];
    npl_error err;
    CHECK_OK(npl_npu_emu_peek(b, offset, tmp, (size_t)n * 2, &err), &err);
    for (int i = 0; i < n; i++)
        out[i] = npl_bf16_to_fp32(tmp[i]);
}

/* Random rows of x, as bf16 holds them. */
static void random_x(float *x, int n, nt_rng *rng)
{
    for (int i = 0; i < n; i++)
        x[i] = npl_bf16_to_fp32(npl_fp32_to_bf16(nt_rng_uniform(rng, -1.0f, 1.0f)));
}

/* ---- group runs ---- */

static npl_status run_qkv(layer *L, const char *group, const npl_npu_shape *s, qkv_opts o,
                          npl_error *err)
{
    npl_npu_group *g = NULL;
    npl_status st = npl_npu_group_load(L->dev, group, &g, err);
    if (st != NPL_OK)
        return st;
    npl_npu_arg a[NPL_NPU_MAX_ARGS];
    memset(a, 0, sizeof a);
    npl_npu_args_set(a, g, "x", L->x, 0, err);
    npl_npu_args_set(a, g, "w_attn", L->w_attn[o.qk_norm][o.freqs][o.bias], 0, err);
    npl_npu_args_set(a, g, "q", L->q, 0, err);
    npl_npu_args_set(a, g, "k_cache", L->kc, 0, err);
    npl_npu_args_set(a, g, "v_cache", L->vc, 0, err);
    npl_npu_shape shape = *s;
    shape.qk_norm = o.qk_norm;
    shape.qkv_bias = o.bias;
    return npl_npu_run(L->dev, g, a, &shape, err);
}

static npl_status run_attention(layer *L, const char *group, const npl_npu_shape *s, npl_error *err)
{
    npl_npu_group *g = NULL;
    npl_status st = npl_npu_group_load(L->dev, group, &g, err);
    if (st != NPL_OK)
        return st;
    npl_npu_arg a[NPL_NPU_MAX_ARGS];
    memset(a, 0, sizeof a);
    npl_npu_args_set(a, g, "q", L->q, 0, err);
    npl_npu_args_set(a, g, "k_cache", L->kc, 0, err);
    npl_npu_args_set(a, g, "v_cache", L->vc, 0, err);
    npl_npu_args_set(a, g, "attn", L->attn, 0, err);
    return npl_npu_run(L->dev, g, a, s, err);
}

/* o_ffn_mv / o_ffn / attn_o_ffn_mv (the latter reads q and the caches). */
static void set_ffn_args(layer *L, npl_npu_group *g, npl_npu_arg *a, bool post, npl_error *err)
{
    memset(a, 0, sizeof(npl_npu_arg) * NPL_NPU_MAX_ARGS);
    if (npl_npu_group_arg_index(npl_npu_group_spec_get(g), "attn") >= 0)
        npl_npu_args_set(a, g, "attn", L->attn, 0, err);
    else {
        npl_npu_args_set(a, g, "q", L->q, 0, err);
        npl_npu_args_set(a, g, "k_cache", L->kc, 0, err);
        npl_npu_args_set(a, g, "v_cache", L->vc, 0, err);
    }
    npl_npu_args_set(a, g, "x", L->x, 0, err);
    npl_npu_args_set(a, g, "w_ffn", L->w_ffn[post], 0, err);
}

static npl_status run_ffn(layer *L, const char *group, const npl_npu_shape *s, bool post, npl_error *err)
{
    npl_npu_group *g = NULL;
    npl_status st = npl_npu_group_load(L->dev, group, &g, err);
    if (st != NPL_OK)
        return st;
    npl_npu_arg a[NPL_NPU_MAX_ARGS];
    set_ffn_args(L, g, a, post, err);
    npl_npu_shape shape = *s;
    shape.post_norms = post;
    return npl_npu_run(L->dev, g, a, &shape, err);
}

/* ---- cases ---- */

static void check_qkv_variant(npl_npu_shape s, qkv_opts o, uint64_t seed)
{
    layer L;
    layer_open(&L, seed);
    nt_rng rng = { seed + 1 };
    npl_error err;
    float x[E], q[QD], k[KD], v[KD], got[QD];
    random_x(x, E, &rng);
    write_x(L.x, 0, x, (int)(sizeof x / sizeof x[0]));
    s.pos = 13;
    CHECK_OK(run_qkv(&L, "rms_qkv_rope_mv", &s, o, &err), &err);
    ref_qkv(&L, x, &s, 13, o, q, k, v);
    peek_bf16(L.q, 0, got, QD);
    double dq = rel_diff(got, q, QD);
    CHECK(dq < 0.03);
    peek_bf16(L.kc, (size_t)13 * KD * 2, got, KD);
    CHECK(rel_diff(got, k, KD) < 0.03);
    peek_bf16(L.vc, (size_t)13 * KD * 2, got, KD);
    CHECK(rel_diff(got, v, KD) < 0.03);
    /* Only row 13 of the caches was written. */
    float row[KD];
    peek_bf16(L.kc, (size_t)12 * KD * 2, row, KD);
    for (int i = 0; i < KD; i++)
        CHECK(row[i] == 0.0f);
    /* The check tells RoPE styles apart. */
    npl_npu_shape other = s;
    other.rope_style = s.rope_style == NPL_NPU_ROPE_NORM ? NPL_NPU_ROPE_NEOX : NPL_NPU_ROPE_NORM;
    ref_qkv(&L, x, &other, 13, o, q, k, v);
    peek_bf16(L.q, 0, got, QD);
    CHECK(rel_diff(got, q, QD) > 0.2);
    /* So does leaving the biases out, or adding them after the Q/K norms
     * instead of before. */
    if (o.bias) {
        qkv_opts none = o;
        none.bias = false;
        ref_qkv(&L, x, &s, 13, none, q, k, v);
        peek_bf16(L.vc, (size_t)13 * KD * 2, got, KD);
        CHECK(rel_diff(got, v, KD) > 0.2);
        peek_bf16(L.kc, (size_t)13 * KD * 2, got, KD);
        CHECK(rel_diff(got, k, KD) > 0.2);
        peek_bf16(L.q, 0, got, QD);
        CHECK(rel_diff(got, q, QD) > 0.2);
    }
    if (o.bias && o.qk_norm) {
        qkv_opts late = o;
        late.bias = false;
        ref_qkv(&L, x, &s, 13, late, q, k, v);
        /* Undo the reference's RoPE, add the biases, rotate again: the
         * biases after the norms. */
        npl_npu_shape back = s;
        back.rope_freq_scale = -s.rope_freq_scale;
        const float *f = o.freqs ? L.freqs : NULL;
        ref_rope(q, NH, &back, 13, f);
        ref_add(q, L.q_bias, QD);
        ref_rope(q, NH, &s, 13, f);
        peek_bf16(L.q, 0, got, QD);
        CHECK(rel_diff(got, q, QD) > 0.2);
    }
    if (nt_failures())
        nt_note("  q differs by %.4f of its RMS", dq);
    layer_close(&L);
}

static void rms_qkv_rope_mv_llama(void)
{
    qkv_opts o = { false, true, false };
    check_qkv_variant(base_shape(), o, 101);
}

static void rms_qkv_rope_mv_neox_with_norms(void)
{
    npl_npu_shape s = base_shape();
    s.rope_style = NPL_NPU_ROPE_NEOX;
    s.rope_theta = 1e6f;
    s.rope_freq_scale = 0.5f;
    qkv_opts o = { true, false, false };
    check_qkv_variant(s, o, 202);
}

/* Qwen 2: biases on Q, K and V, NEOX RoPE, no norms. */
static void rms_qkv_rope_mv_qwen2_biases(void)
{
    npl_npu_shape s = base_shape();
    s.rope_style = NPL_NPU_ROPE_NEOX;
    s.rope_theta = 1e6f;
    qkv_opts o = { false, false, true };
    check_qkv_variant(s, o, 212);
}

/* Biases and Q/K norms together: the biases go first. */
static void rms_qkv_rope_mv_biases_with_norms(void)
{
    npl_npu_shape s = base_shape();
    s.rope_style = NPL_NPU_ROPE_NEOX;
    qkv_opts o = { true, true, true };
    check_qkv_variant(s, o, 222);
}

/* Fills the caches for positions 0..n-1 through the decode group. */
static void fill_cache(layer *L, const npl_npu_shape *base, uint32_t n, nt_rng *rng)
{
    npl_error err;
    qkv_opts o = { false, false, false };
    for (uint32_t p = 0; p < n; p++) {
        float x[E];
        random_x(x, E, rng);
        write_x(L->x, 0, x, E);
        npl_npu_shape s = *base;
        s.pos = p;
        CHECK_OK(run_qkv(L, "rms_qkv_rope_mv", &s, o, &err), &err);
    }
}

static void attention_decode_matches_reference(void)
{
    layer L;
    layer_open(&L, 303);
    nt_rng rng = { 304 };
    npl_error err;
    npl_npu_shape s = base_shape();
    fill_cache(&L, &s, CTX, &rng);
    static uint16_t kc[CTX * KD], vc[CTX * KD];
    CHECK_OK(npl_npu_emu_peek(L.kc, 0, kc, sizeof kc, &err), &err);
    CHECK_OK(npl_npu_emu_peek(L.vc, 0, vc, sizeof vc, &err), &err);
    const struct { uint32_t pos, window; } cases[] = { { 0, 0 }, { 7, 0 }, { 39, 0 }, { 39, 5 }, { 20, 32 }, { 3, 8 } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        s.pos = cases[c].pos;
        s.window = cases[c].window;
        /* The query is whatever q holds: the last token's. */
        CHECK_OK(run_attention(&L, "attention_decode", &s, &err), &err);
        float q[QD], got[QD], want[QD];
        peek_bf16(L.q, 0, q, QD);
        peek_bf16(L.attn, 0, got, QD);
        uint32_t lo = s.window && s.pos + 1 > s.window ? s.pos + 1 - s.window : 0;
        ref_attention_row(q, kc, vc, lo, s.pos, s.attn_scale, want);
        double d = rel_diff(got, want, QD);
        CHECK(d < 0.02);
        if (d >= 0.02)
            nt_note("  pos %u window %u: %.4f", s.pos, s.window, d);
        /* A window of one key more would be caught. */
        if (lo > 0) {
            ref_attention_row(q, kc, vc, lo - 1, s.pos, s.attn_scale, want);
            CHECK(rel_diff(got, want, QD) > 0.005);
        }
    }
    layer_close(&L);
}

static void check_o_ffn(uint32_t activation, bool post, uint64_t seed)
{
    layer L;
    layer_open(&L, seed);
    nt_rng rng = { seed + 1 };
    npl_error err;
    npl_npu_shape s = base_shape();
    s.act = activation;
    fill_cache(&L, &s, 9, &rng);
    s.pos = 8;
    CHECK_OK(run_attention(&L, "attention_decode", &s, &err), &err);
    float attn[QD], x[E], want[E], got[E];
    peek_bf16(L.attn, 0, attn, QD);
    random_x(x, E, &rng);
    write_x(L.x, 0, x, (int)(sizeof x / sizeof x[0]));
    CHECK_OK(run_ffn(&L, "o_ffn_mv", &s, post, &err), &err);
    read_x(L.x, 0, got, E);
    memcpy(want, x, sizeof x);
    ref_o_ffn(&L, attn, want, &s, post);
    double d = rel_diff(got, want, E);
    CHECK(d < 0.02);
    /* Leaving out the post-norms (or using the other activation) shows. */
    memcpy(want, x, sizeof x);
    npl_npu_shape wrong = s;
    wrong.act = activation == NPL_NPU_ACT_SILU ? NPL_NPU_ACT_GELU_TANH : NPL_NPU_ACT_SILU;
    ref_o_ffn(&L, attn, want, post ? &s : &wrong, !post);
    CHECK(rel_diff(got, want, E) > 0.05);
    if (nt_failures())
        nt_note("  o_ffn differs by %.4f of its RMS", d);
    layer_close(&L);
}

static void o_ffn_mv_silu(void) { check_o_ffn(NPL_NPU_ACT_SILU, false, 404); }
static void o_ffn_mv_gelu_post_norms(void) { check_o_ffn(NPL_NPU_ACT_GELU_TANH, true, 505); }

/* The fused decode group computes exactly what the two groups do. */
static void attn_o_ffn_mv_equals_split_groups(void)
{
    layer A, B;
    layer_open(&A, 606);
    layer_open(&B, 606);
    nt_rng ra = { 607 }, rb = { 607 };
    npl_error err;
    npl_npu_shape s = base_shape();
    s.window = 4;
    fill_cache(&A, &s, 11, &ra);
    fill_cache(&B, &s, 11, &rb);
    s.pos = 10;
    float x[E];
    random_x(x, E, &ra);
    write_x(A.x, 0, x, (int)(sizeof x / sizeof x[0]));
    write_x(B.x, 0, x, E);
    CHECK_OK(run_attention(&A, "attention_decode", &s, &err), &err);
    CHECK_OK(run_ffn(&A, "o_ffn_mv", &s, true, &err), &err);
    CHECK_OK(run_ffn(&B, "attn_o_ffn_mv", &s, true, &err), &err);
    float xa[E], xb[E];
    read_x(A.x, 0, xa, (int)(sizeof xa / sizeof xa[0]));
    read_x(B.x, 0, xb, E);
    CHECK(memcmp(xa, xb, sizeof xa) == 0);
    layer_close(&A);
    layer_close(&B);
}

static void lm_head_matches_reference(void)
{
    layer L;
    layer_open(&L, 707);
    nt_rng rng = { 708 };
    npl_error err;
    float x[2 * E], xn[E], want[VOCAB], got[VOCAB];
    random_x(x, 2 * E, &rng);
    write_x(L.x, 0, x, (int)(sizeof x / sizeof x[0]));
    npl_npu_group *g = NULL;
    CHECK_OK(npl_npu_group_load(L.dev, "lm_head", &g, &err), &err);
    npl_npu_arg a[3] = { { L.x, E * 2 }, { L.w_head, 0 }, { L.logits, 0 } };
    npl_npu_shape s = base_shape();
    CHECK_OK(npl_npu_run(L.dev, g, a, &s, &err), &err);
    CHECK_OK(npl_npu_buffer_read(L.logits, 0, got, sizeof got, &err), &err);
    ref_rmsnorm(x + E, L.out_norm, E, s.rms_eps, xn); /* the second row: the offset */
    ref_matvec(&L.wout, xn, want);
    CHECK(rel_diff(got, want, VOCAB) < 0.02);
    ref_rmsnorm(x, L.out_norm, E, s.rms_eps, xn);
    ref_matvec(&L.wout, xn, want);
    CHECK(rel_diff(got, want, VOCAB) > 0.2);
    layer_close(&L);
}

/* A prefill chunk computes what the decode groups compute row by row,
 * bit for bit. */
static void check_prefill_matches_decode(qkv_opts o)
{
    enum { T = 5, P0 = 3 };
    layer A, B;
    layer_open(&A, 808);
    layer_open(&B, 808);
    nt_rng ra = { 809 }, rb = { 809 };
    npl_error err;
    npl_npu_shape s = base_shape();
    s.window = 6;
    fill_cache(&A, &s, P0, &ra);
    fill_cache(&B, &s, P0, &rb);
    float x[T * E];
    random_x(x, T * E, &ra);
    /* A: one chunk of T rows (the chunk is 8, rows past T are not computed). */
    npl_npu_shape c = s;
    c.chunk = 8;
    c.n_tokens = T;
    c.pos = P0;
    write_x(A.x, 0, x, (int)(sizeof x / sizeof x[0]));
    CHECK_OK(run_qkv(&A, "rms_qkv_rope", &c, o, &err), &err);
    CHECK_OK(run_attention(&A, "attention", &c, &err), &err);
    CHECK_OK(run_ffn(&A, "o_ffn", &c, true, &err), &err);
    /* B: T decode steps. */
    float xb[T * E];
    for (int t = 0; t < T; t++) {
        npl_npu_shape d = s;
        d.pos = P0 + (uint32_t)t;
        write_x(B.x, 0, x + t * E, E);
        CHECK_OK(run_qkv(&B, "rms_qkv_rope_mv", &d, o, &err), &err);
        CHECK_OK(run_attention(&B, "attention_decode", &d, &err), &err);
        CHECK_OK(run_ffn(&B, "o_ffn_mv", &d, true, &err), &err);
        read_x(B.x, 0, xb + t * E, E);
    }
    static uint16_t ka[CTX * KD], kb[CTX * KD];
    CHECK_OK(npl_npu_emu_peek(A.kc, 0, ka, sizeof ka, &err), &err);
    CHECK_OK(npl_npu_emu_peek(B.kc, 0, kb, sizeof kb, &err), &err);
    CHECK(memcmp(ka, kb, sizeof ka) == 0);
    CHECK_OK(npl_npu_emu_peek(A.vc, 0, ka, sizeof ka, &err), &err);
    CHECK_OK(npl_npu_emu_peek(B.vc, 0, kb, sizeof kb, &err), &err);
    CHECK(memcmp(ka, kb, sizeof ka) == 0);
    float xa[T * E];
    read_x(A.x, 0, xa, (int)(sizeof xa / sizeof xa[0]));
    CHECK(memcmp(xa, xb, sizeof xa) == 0);
    /* Rows past n_tokens were left alone. */
    float tail[E];
    read_x(A.x, T, tail, E);
    for (int i = 0; i < E; i++)
        CHECK(tail[i] == 0.0f);
    layer_close(&A);
    layer_close(&B);
}

static void prefill_groups_match_decode(void)
{
    qkv_opts o = { true, false, false };
    check_prefill_matches_decode(o);
}

static void prefill_groups_match_decode_biases(void)
{
    qkv_opts o = { false, true, true };
    check_prefill_matches_decode(o);
}

/* Non-causal prefill attention: every row sees the whole chunk. */
static void noncausal_attention(void)
{
    enum { T = 6 };
    layer L;
    layer_open(&L, 909);
    nt_rng rng = { 910 };
    npl_error err;
    npl_npu_shape s = base_shape();
    float x[T * E];
    random_x(x, T * E, &rng);
    write_x(L.x, 0, x, (int)(sizeof x / sizeof x[0]));
    s.chunk = 8;
    s.n_tokens = T;
    s.causal = 0;
    qkv_opts o = { false, false, false };
    CHECK_OK(run_qkv(&L, "rms_qkv_rope", &s, o, &err), &err);
    CHECK_OK(run_attention(&L, "attention", &s, &err), &err);
    static uint16_t kc[CTX * KD], vc[CTX * KD];
    CHECK_OK(npl_npu_emu_peek(L.kc, 0, kc, sizeof kc, &err), &err);
    CHECK_OK(npl_npu_emu_peek(L.vc, 0, vc, sizeof vc, &err), &err);
    for (int t = 0; t < T; t++) {
        float q[QD], got[QD], want[QD];
        peek_bf16(L.q, (size_t)t * QD * 2, q, QD);
        peek_bf16(L.attn, (size_t)t * QD * 2, got, QD);
        ref_attention_row(q, kc, vc, 0, T - 1, s.attn_scale, want);
        CHECK(rel_diff(got, want, QD) < 0.02);
        if (t < T - 1) {
            ref_attention_row(q, kc, vc, 0, (uint32_t)t, s.attn_scale, want);
            CHECK(rel_diff(got, want, QD) > 0.005); /* not the causal answer */
        }
    }
    layer_close(&L);
}

/* A two-layer decode loop through run lists: two dispatches per layer
 * plus the LM head, one submission per token, no weight bytes moved; the
 * host rewrites only the instruction words that follow the position and
 * rows: n_tokens, pos and causal in every group's parameters, the K/V row
 * offsets and lengths of rms_qkv_rope_mv (4) and the K/V lengths of
 * attn_o_ffn_mv (2): 12 words per layer and 3 for the LM head. */
static void decode_dispatch_and_traffic_budget(void)
{
    enum { LAYERS = 2, TOKENS = 4 };
    layer L;
    layer_open(&L, 1111);
    npl_error err;
    npl_npu_group *qkv = NULL, *ffn = NULL, *head = NULL;
    CHECK_OK(npl_npu_group_load(L.dev, "rms_qkv_rope_mv", &qkv, &err), &err);
    CHECK_OK(npl_npu_group_load(L.dev, "attn_o_ffn_mv", &ffn, &err), &err);
    CHECK_OK(npl_npu_group_load(L.dev, "lm_head", &head, &err), &err);
    /* Both layers share weights but have their own caches. */
    npl_npu_buffer *kc[LAYERS], *vc[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        CHECK_OK(npl_npu_buffer_alloc(L.dev, 2 * KD * CTX, NPL_NPU_BUF_INTERMEDIATE, "k", &kc[l], &err), &err);
        CHECK_OK(npl_npu_buffer_alloc(L.dev, 2 * KD * CTX, NPL_NPU_BUF_INTERMEDIATE, "v", &vc[l], &err), &err);
    }
    npl_npu_runlist *rl = NULL;
    CHECK_OK(npl_npu_runlist_create(L.dev, &rl, &err), &err);
    npl_npu_shape s = base_shape();
    for (int l = 0; l < LAYERS; l++) {
        npl_npu_arg a[NPL_NPU_MAX_ARGS];
        memset(a, 0, sizeof a);
        npl_npu_args_set(a, qkv, "x", L.x, 0, &err);
        npl_npu_args_set(a, qkv, "w_attn", L.w_attn[0][0][0], 0, &err);
        npl_npu_args_set(a, qkv, "q", L.q, 0, &err);
        npl_npu_args_set(a, qkv, "k_cache", kc[l], 0, &err);
        npl_npu_args_set(a, qkv, "v_cache", vc[l], 0, &err);
        CHECK_OK(npl_npu_runlist_add(rl, qkv, a, &s, &err), &err);
        set_ffn_args(&L, ffn, a, false, &err);
        npl_npu_args_set(a, ffn, "k_cache", kc[l], 0, &err);
        npl_npu_args_set(a, ffn, "v_cache", vc[l], 0, &err);
        CHECK_OK(npl_npu_runlist_add(rl, ffn, a, &s, &err), &err);
    }
    npl_npu_arg h[3] = { { L.x, 0 }, { L.w_head, 0 }, { L.logits, 0 } };
    CHECK_OK(npl_npu_runlist_add(rl, head, h, &s, &err), &err);
    nt_rng rng = { 1112 };
    npl_npu_device_stats_reset(L.dev);
    for (uint32_t t = 0; t < TOKENS; t++) {
        float x[E], logits[VOCAB];
        random_x(x, E, &rng); /* the host's embedding lookup */
        write_x(L.x, 0, x, (int)(sizeof x / sizeof x[0]));
        s.pos = t;
        for (size_t i = 0; i < npl_npu_runlist_count(rl); i++)
            CHECK_OK(npl_npu_runlist_set_shape(rl, i, &s, &err), &err);
        CHECK_OK(npl_npu_runlist_submit(rl, &err), &err);
        CHECK_OK(npl_npu_buffer_read(L.logits, 0, logits, sizeof logits, &err), &err);
        for (int i = 0; i < VOCAB; i++)
            CHECK(isfinite(logits[i]));
    }
    npl_npu_stats st;
    npl_npu_device_stats(L.dev, &st);
    CHECK(st.dispatches == TOKENS * (2 * LAYERS + 1));
    CHECK(st.submissions == TOKENS);
    CHECK(st.h2d_weight_bytes == 0 && st.d2h_weight_bytes == 0);
    CHECK(st.h2d_activation_bytes == TOKENS * (E * 2 + (12 * LAYERS + 3) * 4));
    CHECK(st.d2h_activation_bytes == TOKENS * VOCAB * 4);
    npl_npu_runlist_free(rl);
    layer_close(&L);
}

static void groups_reject_bad_shapes(void)
{
    layer L;
    layer_open(&L, 1212);
    npl_error err;
    qkv_opts o = { false, false, false };
    npl_npu_shape s = base_shape();
    /* A row past the cache: the device refuses the transfer. */
    s.pos = CTX;
    CHECK_FAILS(run_qkv(&L, "rms_qkv_rope_mv", &s, o, &err), NPL_ERR_INVALID_ARG, &err,
                "transfer out of 'k_cache' [2560, +64) runs past k_cache");
    s = base_shape();
    s.rope_dims = 7;
    CHECK_FAILS(run_qkv(&L, "rms_qkv_rope_mv", &s, o, &err), NPL_ERR_INVALID_ARG, &err,
                "7 / 2 is negative, inexact"); /* rope_freqs' size in w_attn */
    s = base_shape();
    s.rope_dims = 2 * HD;
    s.n_head = 2; /* w_attn the same size as with 16 rotated dims of 4 heads */
    CHECK_FAILS(run_qkv(&L, "rms_qkv_rope_mv", &s, o, &err), NPL_ERR_INVALID_ARG, &err,
                "rope_dims 32 must be even and <= 16");
    /* The bias flag with a pack that has no biases: the pack the
     * contract describes is larger than the buffer bound. */
    {
        npl_npu_group *g = NULL;
        CHECK_OK(npl_npu_group_load(L.dev, "rms_qkv_rope_mv", &g, &err), &err);
        npl_npu_arg a[NPL_NPU_MAX_ARGS];
        memset(a, 0, sizeof a);
        npl_npu_args_set(a, g, "x", L.x, 0, &err);
        npl_npu_args_set(a, g, "w_attn", L.w_attn[0][0][0], 0, &err);
        npl_npu_args_set(a, g, "q", L.q, 0, &err);
        npl_npu_args_set(a, g, "k_cache", L.kc, 0, &err);
        npl_npu_args_set(a, g, "v_cache", L.vc, 0, &err);
        s = base_shape();
        s.qkv_bias = 1;
        CHECK_FAILS(npl_npu_run(L.dev, g, a, &s, &err), NPL_ERR_INVALID_ARG, &err,
                    "rms_qkv_rope_mv: 'w_attn' needs");
    }
    s = base_shape();
    s.n_head = 3;
    CHECK_FAILS(run_attention(&L, "attention_decode", &s, &err), NPL_ERR_INVALID_ARG, &err,
                "not a valid GQA shape");
    s = base_shape();
    s.chunk = 4;
    s.n_tokens = 5;
    CHECK_FAILS(run_attention(&L, "attention", &s, &err), NPL_ERR_INVALID_ARG, &err,
                "transfer in of 'q' [0, +640) runs past q");
    s = base_shape();
    s.act = 9;
    CHECK_FAILS(run_ffn(&L, "o_ffn_mv", &s, false, &err), NPL_ERR_INVALID_ARG, &err,
                "known activation");
    layer_close(&L);
}

/* A kernel build whose contract has no bias parts (made before them):
 * the group runs models without biases and refuses the flag rather than
 * run without the biases. */
static void qkv_bias_needs_the_parts(void)
{
    static const char text[] =
        "npullm-npu-manifest 1\ndevice = emu\n[group rms_qkv_rope_mv]\n"
        "fixed = n_tokens=1\nparams = shape\n"
        "arg = x io bf16 [n_embd]\n"
        "arg = w_attn static pack\n"
        "part = w_attn attn_norm bf16 [n_embd]\n"
        "part = w_attn wq q4nx [n_head*head_dim, n_embd]\n"
        "part = w_attn wk q4nx [n_head_kv*head_dim, n_embd]\n"
        "part = w_attn wv q4nx [n_head_kv*head_dim, n_embd]\n"
        "arg = q intermediate bf16 [n_head*head_dim]\n"
        "arg = k_cache intermediate bf16 [n_ctx, n_head_kv*head_dim]\n"
        "arg = v_cache intermediate bf16 [n_ctx, n_head_kv*head_dim]\n";
    npl_error err;
    npl_npu_manifest *m = NULL;
    CHECK_OK(npl_npu_manifest_parse(text, strlen(text), "no biases", &m, &err), &err);
    REQUIRE(m);
    npl_npu_emu_config cfg = { m, NULL, 0, 0 };
    npl_npu_device *dev = NULL;
    CHECK_OK(npl_npu_emu_open(&cfg, &dev, &err), &err);
    REQUIRE(dev);
    npl_npu_group *g = NULL;
    CHECK_OK(npl_npu_group_load(dev, "rms_qkv_rope_mv", &g, &err), &err);
    REQUIRE(g);
    npl_npu_shape s = base_shape();
    size_t w_bytes = 0;
    CHECK_OK(npl_npu_group_arg_bytes(npl_npu_group_spec_get(g), 1, &s, &w_bytes, &err), &err);
    const struct { const char *name; npl_npu_buf_class cls; size_t bytes; } bufs[] = {
        { "x", NPL_NPU_BUF_IO, E * 2 }, { "w_attn", NPL_NPU_BUF_STATIC, w_bytes },
        { "q", NPL_NPU_BUF_INTERMEDIATE, QD * 2 },
        { "k_cache", NPL_NPU_BUF_INTERMEDIATE, CTX * KD * 2 },
        { "v_cache", NPL_NPU_BUF_INTERMEDIATE, CTX * KD * 2 },
    };
    npl_npu_arg a[NPL_NPU_MAX_ARGS];
    memset(a, 0, sizeof a);
    for (size_t i = 0; i < 5; i++) {
        npl_npu_buffer *b = NULL;
        CHECK_OK(npl_npu_buffer_alloc(dev, bufs[i].bytes, bufs[i].cls, bufs[i].name, &b, &err), &err);
        CHECK_OK(npl_npu_args_set(a, g, bufs[i].name, b, 0, &err), &err);
    }
    CHECK_OK(npl_npu_run(dev, g, a, &s, &err), &err);
    s.qkv_bias = 1;
    CHECK_FAILS(npl_npu_run(dev, g, a, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "qkv_bias is set, but the contract has no q_bias, k_bias and v_bias parts");
    npl_npu_device_destroy(dev);
    npl_npu_manifest_free(m);
}

static const nt_case cases[] = {
    { "rms_qkv_rope_mv_llama", rms_qkv_rope_mv_llama },
    { "rms_qkv_rope_mv_neox_with_norms", rms_qkv_rope_mv_neox_with_norms },
    { "rms_qkv_rope_mv_qwen2_biases", rms_qkv_rope_mv_qwen2_biases },
    { "rms_qkv_rope_mv_biases_with_norms", rms_qkv_rope_mv_biases_with_norms },
    { "attention_decode_matches_reference", attention_decode_matches_reference },
    { "o_ffn_mv_silu", o_ffn_mv_silu },
    { "o_ffn_mv_gelu_post_norms", o_ffn_mv_gelu_post_norms },
    { "attn_o_ffn_mv_equals_split_groups", attn_o_ffn_mv_equals_split_groups },
    { "lm_head_matches_reference", lm_head_matches_reference },
    { "prefill_groups_match_decode", prefill_groups_match_decode },
    { "prefill_groups_match_decode_biases", prefill_groups_match_decode_biases },
    { "noncausal_attention", noncausal_attention },
    { "decode_dispatch_and_traffic_budget", decode_dispatch_and_traffic_budget },
    { "groups_reject_bad_shapes", groups_reject_bad_shapes },
    { "qkv_bias_needs_the_parts", qkv_bias_needs_the_parts },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
