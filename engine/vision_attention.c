/* The encoder's attention on the fast path: every patch attends to every
 * patch (no mask), computed by the online-softmax kernel of the text
 * model's decode (kernels/cpu/attention.h) with many queries per call:
 * the queries of one head in a chunk of patches share that head's keys
 * and values the way grouped query heads share a KV head, so each block
 * of keys is converted once per chunk and the scores of all patches never
 * exist at once. Tasks are (head, chunk of queries) pairs spread over the
 * whole pool, every thread with its own scratch.
 *
 * Keys and values are stored per head as halves (the kernel's cache
 * format, as llama.cpp's flash attention casts them), rows padded with
 * zeros to a multiple of 16 so the kernel's inner loops have no scalar
 * tail (72-wide SigLIP heads become 80). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "vision_internal.h"

npl_status npl_vision_attn_alloc(const npl_vision *v, npl_vision_attn *a, npl_error *err)
{
    memset(a, 0, sizeof *a);
    size_t N = v->n_patches, H = v->info.n_head, hp = v->head_pad;
    size_t T = (size_t)npl_threadpool_size(v->pool);
    a->scratch_floats = NPL_VISION_ATTN_QUERIES * hp + npl_attention_scratch_floats(NPL_VISION_ATTN_QUERIES, hp);
    /* zeroed: the padding columns are never written */
    a->qh = calloc(H * N * hp, sizeof *a->qh);
    a->kh = calloc(H * N * hp, sizeof *a->kh);
    a->vh = calloc(H * N * hp, sizeof *a->vh);
    a->scratch = malloc(T * a->scratch_floats * sizeof *a->scratch);
    if (!a->qh || !a->kh || !a->vh || !a->scratch) {
        npl_vision_attn_free(a);
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the vision attention (%zu patches)", N);
    }
    return NPL_OK;
}

void npl_vision_attn_free(npl_vision_attn *a)
{
    free(a->qh);
    free(a->kh);
    free(a->vh);
    free(a->scratch);
    memset(a, 0, sizeof *a);
}

typedef struct attn_job {
    const npl_vision *v;
    npl_vision_attn *a;
    const float *q, *k, *val;
    float *out;
} attn_job;

/* Patches [begin, end): Q, K, V rows into the per-head layouts. */
static void split_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const attn_job *j = ctx;
    const npl_vision *v = j->v;
    size_t N = v->n_patches, E = v->info.n_embd, hd = v->head_dim, hp = v->head_pad;
    for (size_t p = begin; p < end; p++)
        for (size_t h = 0; h < v->info.n_head; h++) {
            size_t src = p * E + h * hd, dst = (h * N + p) * hp;
            memcpy(j->a->qh + dst, j->q + src, hd * sizeof(float));
            npl_f32_to_f16_row(v->simd, j->k + src, j->a->kh + dst, hd);
            npl_f32_to_f16_row(v->simd, j->val + src, j->a->vh + dst, hd);
        }
}

static size_t chunks_per_head(const npl_vision *v)
{
    return (v->n_patches + NPL_VISION_ATTN_QUERIES - 1) / NPL_VISION_ATTN_QUERIES;
}

/* Tasks [begin, end) of (head, query chunk). */
static void attn_task(void *ctx, size_t begin, size_t end, int thread)
{
    const attn_job *j = ctx;
    const npl_vision *v = j->v;
    size_t N = v->n_patches, E = v->info.n_embd, hd = v->head_dim, hp = v->head_pad;
    size_t per_head = chunks_per_head(v);
    float scale = 1.0f / sqrtf((float)hd);
    float *o = j->a->scratch + (size_t)thread * j->a->scratch_floats;
    float *s = o + NPL_VISION_ATTN_QUERIES * hp;
    for (size_t t = begin; t < end; t++) {
        size_t h = t / per_head, r0 = (t % per_head) * NPL_VISION_ATTN_QUERIES;
        size_t n = N - r0 < NPL_VISION_ATTN_QUERIES ? N - r0 : NPL_VISION_ATTN_QUERIES;
        const uint16_t *k = j->a->kh + h * N * hp, *val = j->a->vh + h * N * hp;
        npl_attention(v->simd, j->a->qh + (h * N + r0) * hp, hp, n, k, val, hp, N, hp, scale, o, hp, s);
        for (size_t i = 0; i < n; i++)
            memcpy(j->out + (r0 + i) * E + h * hd, o + i * hp, hd * sizeof *o);
    }
}

void npl_vision_attention_fast(const npl_vision *v, npl_vision_attn *a, const float *q, const float *k,
                               const float *val, float *out)
{
    attn_job j = {.v = v, .a = a, .q = q, .k = k, .val = val, .out = out};
    npl_threadpool_run(v->pool, v->n_patches, split_task, &j);
    npl_threadpool_run(v->pool, v->info.n_head * chunks_per_head(v), attn_task, &j);
}
