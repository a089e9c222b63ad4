/* attention_noncausal.h: many queries over one head, against a plain
 * softmax in double, and every SIMD level against the portable version,
 * bit for bit, on sizes that leave partial chunks, query tiles and
 * dimension registers. */
#include <math.h>

#include "attention_noncausal.h"
#include "npl_test.h"

typedef struct problem {
    size_t n_q, n_kv, hd, stride; /* rows of q, v, out are stride floats apart */
    float *q, *k, *v, *kt, *scratch;
} problem;

static bool make(problem *p, size_t n_q, size_t n_kv, size_t hd, uint64_t seed)
{
    p->n_q = n_q;
    p->n_kv = n_kv;
    p->hd = hd;
    p->stride = hd + 3;
    p->q = malloc(n_q * p->stride * sizeof(float));
    p->k = malloc(n_kv * hd * sizeof(float));
    p->v = malloc(n_kv * p->stride * sizeof(float));
    p->kt = calloc(npl_attention_nc_keys_floats(n_kv, hd), sizeof(float));
    p->scratch = malloc(npl_attention_nc_scratch_floats(n_q, hd) * sizeof(float));
    if (!p->q || !p->k || !p->v || !p->kt || !p->scratch)
        return false;
    nt_splitmix r = {seed};
    for (size_t i = 0; i < n_q * p->stride; i++)
        p->q[i] = nt_splitmix_float(&r) * 2.0f;
    for (size_t i = 0; i < n_kv * hd; i++)
        p->k[i] = nt_splitmix_float(&r) * 2.0f;
    for (size_t i = 0; i < n_kv * p->stride; i++)
        p->v[i] = nt_splitmix_float(&r);
    for (size_t j = 0; j < n_kv; j++)
        npl_attention_nc_store_key(p->k + j * hd, j, hd, p->kt);
    return true;
}

static void drop(problem *p)
{
    free(p->q);
    free(p->k);
    free(p->v);
    free(p->kt);
    free(p->scratch);
}

static void run(problem *p, npl_simd_level lv, float scale, float *out)
{
    npl_attention_nc(lv, p->q, p->stride, p->n_q, p->kt, p->v, p->stride, p->n_kv, p->hd, scale, out, p->stride,
                     p->scratch);
}

/* {queries, keys, head size}: the vision towers' head sizes 64, 72 and 80
 * among them (one block of dimension vectors at AVX-512, several at AVX2) */
static const size_t shapes[][3] = {{1, 1, 1},    {5, 63, 72},   {9, 130, 16}, {4, 64, 72},  {7, 200, 96},
                                   {3, 17, 100}, {70, 150, 72}, {6, 257, 64}, {13, 129, 80}, {2, 65, 33}};

static void test_matches_softmax(void)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        problem p;
        REQUIRE(make(&p, shapes[s][0], shapes[s][1], shapes[s][2], 40 + s));
        float scale = 1.0f / sqrtf((float)p.hd);
        float *out = malloc(p.n_q * p.stride * sizeof(float));
        double *w = malloc(p.n_kv * sizeof(double));
        REQUIRE(out && w);
        run(&p, NPL_SIMD_NONE, scale, out);
        double worst = 0.0;
        for (size_t i = 0; i < p.n_q; i++) {
            double mx = -INFINITY, sum = 0.0;
            for (size_t j = 0; j < p.n_kv; j++) {
                double d = 0.0;
                for (size_t c = 0; c < p.hd; c++)
                    d += (double)p.q[i * p.stride + c] * p.k[j * p.hd + c];
                w[j] = d * scale;
                mx = w[j] > mx ? w[j] : mx;
            }
            for (size_t j = 0; j < p.n_kv; j++)
                sum += (w[j] = exp(w[j] - mx));
            for (size_t c = 0; c < p.hd; c++) {
                double o = 0.0;
                for (size_t j = 0; j < p.n_kv; j++)
                    o += w[j] / sum * p.v[j * p.stride + c];
                double err = fabs(out[i * p.stride + c] - o);
                worst = err > worst ? err : worst;
            }
        }
        CHECKF(worst < 2e-6, "shape %zu: worst difference %.3g", s, worst);
        free(out);
        free(w);
        drop(&p);
    }
}

static void test_levels_exact(void)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        problem p;
        REQUIRE(make(&p, shapes[s][0], shapes[s][1], shapes[s][2], 70 + s));
        size_t n = p.n_q * p.stride;
        float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
        REQUIRE(ref && got);
        /* the gaps between output rows are left alone */
        for (size_t i = 0; i < n; i++)
            ref[i] = got[i] = 7.0f;
        run(&p, NPL_SIMD_NONE, 0.3f, ref);
        for (size_t i = 0; i < p.n_q; i++)
            CHECK(ref[i * p.stride + p.hd] == 7.0f);
        for (int lv = 1; lv <= (int)npl_simd_detect(); lv++) {
            run(&p, (npl_simd_level)lv, 0.3f, got);
            CHECKF(memcmp(ref, got, n * sizeof(float)) == 0, "shape %zu, level %d: differs from the portable version",
                   s, lv);
        }
        free(ref);
        free(got);
        drop(&p);
    }
}

NT_MAIN({"matches_softmax", test_matches_softmax}, {"levels_exact", test_levels_exact})
