/* The encoder's attention on the fast path: every patch attends to every
 * patch (no mask), through the non-causal many-query kernel
 * (kernels/cpu/attention_noncausal.h): an online softmax over chunks of
 * keys, so the scores of all patches never exist at once, in float
 * throughout. Queries are read in place from the projection's rows; keys
 * are rearranged per head (transposed in groups of 16) and so are values
 * (contiguous rows per head: a chunk's rows then share a few pages
 * instead of one page per row of the full width). Tasks are (head, chunk of queries) pairs spread over the whole
 * pool, every thread with its own scratch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_noncausal.h"
#include "vision_internal.h"

npl_status npl_vision_attn_alloc(const npl_vision *v, size_t n_patches, npl_vision_attn *a, npl_error *err)
{
    memset(a, 0, sizeof *a);
    size_t N = n_patches, H = v->info.n_head, hd = v->head_dim;
    size_t T = (size_t)npl_threadpool_size(v->pool);
    a->keys_floats = npl_attention_nc_keys_floats(N, hd);
    /* whole cache lines per thread */
    a->scratch_floats = (npl_attention_nc_scratch_floats(NPL_VISION_ATTN_QUERIES, hd) + 15) & ~(size_t)15;
    a->kt = npl_vision_floats(H * a->keys_floats);
    a->vh = npl_vision_floats(H * N * hd);
    a->scratch = npl_vision_floats(T * a->scratch_floats);
    if (a->kt)
        memset(a->kt, 0, H * a->keys_floats * sizeof *a->kt); /* padding keys stay finite */
    if (!a->kt || !a->vh || !a->scratch) {
        npl_vision_attn_free(a);
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the vision attention (%zu patches)", N);
    }
    return NPL_OK;
}

void npl_vision_attn_free(npl_vision_attn *a)
{
    free(a->kt);
    free(a->vh);
    free(a->scratch);
    memset(a, 0, sizeof *a);
}

typedef struct attn_job {
    const npl_vision *v;
    npl_vision_attn *a;
    const float *q, *k, *val;
    float *out;
    size_t n;    /* patches */
    float scale; /* of q.k */
} attn_job;

/* Patches [begin, end): their keys and values into each head's layout. */
static void keys_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const attn_job *j = ctx;
    const npl_vision *v = j->v;
    size_t N = j->n, E = v->info.n_embd, hd = v->head_dim;
    for (size_t p = begin; p < end; p++)
        for (size_t h = 0; h < v->info.n_head; h++) {
            npl_attention_nc_store_key(j->k + p * E + h * hd, p, hd, j->a->kt + h * j->a->keys_floats);
            memcpy(j->a->vh + (h * N + p) * hd, j->val + p * E + h * hd, hd * sizeof(float));
        }
}

static size_t chunks_per_head(size_t n_patches)
{
    return (n_patches + NPL_VISION_ATTN_QUERIES - 1) / NPL_VISION_ATTN_QUERIES;
}

/* Tasks [begin, end) of (head, query chunk). */
static void attn_task(void *ctx, size_t begin, size_t end, int thread)
{
    const attn_job *j = ctx;
    const npl_vision *v = j->v;
    size_t N = j->n, E = v->info.n_embd, hd = v->head_dim;
    size_t per_head = chunks_per_head(N);
    float scale = j->scale;
    float *scratch = j->a->scratch + (size_t)thread * j->a->scratch_floats;
    for (size_t t = begin; t < end; t++) {
        size_t h = t / per_head, r0 = (t % per_head) * NPL_VISION_ATTN_QUERIES;
        size_t n = N - r0 < NPL_VISION_ATTN_QUERIES ? N - r0 : NPL_VISION_ATTN_QUERIES;
        npl_attention_nc(v->simd, j->q + r0 * E + h * hd, E, n, j->a->kt + h * j->a->keys_floats, j->a->vh + h * N * hd,
                         hd, N, hd, scale, j->out + r0 * E + h * hd, E, scratch);
    }
}

void npl_vision_attention_fast(const npl_vision *v, npl_vision_attn *a, size_t n_patches, float scale, const float *q,
                               const float *k, const float *val, float *out)
{
    attn_job j = {.v = v, .a = a, .q = q, .k = k, .val = val, .out = out, .n = n_patches, .scale = scale};
    npl_threadpool_run(v->pool, n_patches, keys_task, &j);
    npl_threadpool_run(v->pool, v->info.n_head * chunks_per_head(n_patches), attn_task, &j);
}
