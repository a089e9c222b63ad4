/* act_gelu.h: the activations with a bias (the vision encoder) and gated
 * (SwiGLU, GEGLU: the text models' feed-forward) against double precision,
 * and every SIMD level against the portable version, bit for bit. */
#include <math.h>

#include "act_gelu.h"
#include "npl_test.h"

enum { N = 4099 };

static double want(npl_act_kind k, double x)
{
    double z = k == NPL_ACT_GELU_TANH ? 2.0 * 0.79788456080286535588 * x * (1.0 + 0.044715 * x * x)
               : k == NPL_ACT_GELU_QUICK ? 1.702 * x
                                         : x;
    return x / (1.0 + exp(-z));
}

static void fill(float *x, float *b)
{
    nt_splitmix r = {33};
    for (int i = 0; i < N; i++) {
        x[i] = nt_splitmix_float(&r) * (i % 3 == 0 ? 12.0f : 3.0f);
        b[i] = nt_splitmix_float(&r) * 0.1f;
    }
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = 200.0f;
    x[3] = -200.0f;
    x[4] = INFINITY;
    x[5] = NAN;
}

static void test_accuracy(void)
{
    static float x[N], b[N], y[N];
    fill(x, b);
    for (int k = NPL_ACT_GELU_TANH; k <= NPL_ACT_SILU; k++) {
        memcpy(y, x, sizeof x);
        npl_act_bias_f32(NPL_SIMD_NONE, (npl_act_kind)k, y, b, N);
        double worst = 0.0;
        for (int i = 6; i < N; i++) {
            double w = want((npl_act_kind)k, (double)(x[i] + b[i]));
            /* relative, absolute near zero: far in the negative tail the
             * result is exp(z) of a large |z|, whose rounding in float
             * is amplified by |z| */
            double err = fabs(y[i] - w) / (fabs(w) + 1e-3);
            if (err > worst)
                worst = err;
        }
        fprintf(stderr, "activation %d: worst error %.3g\n", k, worst);
        CHECK(worst < 2e-6);
        CHECK(y[2] == 200.0f + b[2] && y[3] == 0.0f && y[4] == INFINITY && isnan(y[5]));
    }
    /* no bias */
    memcpy(y, x, sizeof x);
    npl_act_bias_f32(NPL_SIMD_NONE, NPL_ACT_SILU, y, NULL, N);
    CHECK(fabs(y[10] - want(NPL_ACT_SILU, x[10])) <= 2e-6 * fabs(want(NPL_ACT_SILU, x[10])) + 1e-30);
}

static void test_levels_exact(void)
{
    static float x[N], b[N], y0[N], y1[N];
    fill(x, b);
    for (int k = NPL_ACT_GELU_TANH; k <= NPL_ACT_SILU; k++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *bias = with_bias ? b : NULL;
            memcpy(y0, x, sizeof x);
            npl_act_bias_f32(NPL_SIMD_NONE, (npl_act_kind)k, y0, bias, N);
            for (int lv = 1; lv <= (int)npl_simd_detect(); lv++)
                for (size_t n = 0; n <= 40; n += 1 + n / 8) {
                    memcpy(y1, x, sizeof x);
                    npl_act_bias_f32((npl_simd_level)lv, (npl_act_kind)k, y1, bias, N - n);
                    CHECKF(memcmp(y0, y1, (N - n) * sizeof(float)) == 0,
                           "activation %d, bias %d, level %d, n %zu: differs from the portable version", k,
                           with_bias, lv, (size_t)N - n);
                }
        }
}

/* gate = act(gate) * up: within 1e-6 of double precision (SiLU relative,
 * GELU with test_accuracy's measure), SiLU with SwiGLU's exact steps
 * (g * sigmoid(g)) * u, the edges, and the same bits at every level and
 * length. */
static void test_gated(void)
{
    static float g[N], u[N], y0[N], y1[N];
    nt_splitmix r = {21};
    for (int i = 0; i < N; i++) {
        g[i] = nt_splitmix_float(&r) * (i % 3 == 0 ? 30.0f : 3.0f);
        u[i] = nt_splitmix_float(&r);
    }
    g[0] = 0.0f;
    g[1] = -0.0f;
    g[2] = 200.0f;
    g[3] = -200.0f;
    g[4] = INFINITY;
    g[5] = -INFINITY;
    g[6] = NAN;
    const npl_act_kind kinds[2] = {NPL_ACT_SILU, NPL_ACT_GELU_TANH};
    for (int ki = 0; ki < 2; ki++) {
        npl_act_kind k = kinds[ki];
        memcpy(y0, g, sizeof g);
        npl_act_gated_f32(NPL_SIMD_NONE, k, y0, u, N);
        double worst = 0.0;
        for (int i = 7; i < N; i++) {
            double w = want(k, (double)g[i]) * u[i];
            /* SiLU relative; GELU as in test_accuracy: absolute near zero,
             * where the far negative tail amplifies exp's rounding */
            double err = fabs(y0[i] - w) / (fabs(w) + (k == NPL_ACT_SILU ? 1e-30 : 1e-3));
            if (fabs(w) > 1e-30 && err > worst)
                worst = err;
            if (k == NPL_ACT_SILU) {
                float e = npl_exp_neg(-fabsf(g[i]));
                float sig = (g[i] >= 0.0f ? 1.0f : e) / (1.0f + e);
                CHECKF(y0[i] == (g[i] * sig) * u[i], "silu %d: %.9g", i, (double)y0[i]);
            }
        }
        fprintf(stderr, "gated activation %d: worst relative error %.3g\n", (int)k, worst);
        CHECK(worst < 1e-6);
        CHECK(y0[0] == 0.0f && y0[2] == 200.0f * u[2] && y0[3] == 0.0f && y0[4] == INFINITY * u[4] && isnan(y0[6]));
        for (int lv = 1; lv <= (int)npl_simd_detect(); lv++)
            for (size_t n = 0; n <= 40; n += 1 + n / 8) {
                memcpy(y1, g, sizeof g);
                npl_act_gated_f32((npl_simd_level)lv, k, y1, u, N - n);
                CHECKF(memcmp(y0, y1, (N - n) * sizeof(float)) == 0,
                       "gated activation %d, level %d, n %zu: differs from the portable version", (int)k, lv,
                       (size_t)N - n);
            }
    }
}

NT_MAIN({"accuracy", test_accuracy}, {"levels_exact", test_levels_exact}, {"gated", test_gated})
