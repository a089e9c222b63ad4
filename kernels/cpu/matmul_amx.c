/* AMX matrix products: availability, buffers, the weights' packing (once
 * at load) and the split of the work over the thread pool. The tile code
 * itself is matmul_amx_tiles.c. */
#include "matmul_amx.h"

#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "ggml_types.h"
#include "matmul_amx_internal.h"
#include "vec_ops.h"

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

bool npl_amx_usable(void)
{
#ifdef NPL_HAVE_X86_KERNELS
    npl_cpu_features f;
    npl_cpu_features_detect(&f);
    return f.amx_bf16 && f.avx512f && f.avx512bw;
#else
    return false;
#endif
}

typedef struct pack_job {
    const npl_matrix *m;
    npl_amx_weights *w;
    npl_simd_level simd;
    bool *failed; /* per thread: no memory for a row */
} pack_job;

/* Row groups [begin, end): each F16 weight as its BF16 head wh (the top
 * 16 bits of its f32 value) and the exact rest wl. */
static void pack_task(void *ctx, size_t begin, size_t end, int thread)
{
    const pack_job *j = ctx;
    const npl_amx_weights *w = j->w;
    size_t steps = w->kp / NPL_AMX_TILE;
    float *row = malloc(w->n_cols * sizeof *row);
    if (!row) {
        j->failed[thread] = true;
        return;
    }
    for (size_t g = begin; g < end; g++) {
        uint16_t *tiles = w->tiles + g * steps * (NPL_AMX_TILE_BYTES / 2);
        for (size_t n = 0; n < NPL_AMX_TILE && g * NPL_AMX_TILE + n < w->n_rows; n++) {
            const void *src = (const uint8_t *)j->m->data + (g * NPL_AMX_TILE + n) * j->m->row_bytes;
            npl_f16_to_f32_row(j->simd, src, row, w->n_cols);
            for (size_t k = 0; k < w->n_cols; k++) {
                float v = row[k];
                uint32_t bits;
                memcpy(&bits, &v, sizeof bits);
                uint32_t hb = bits & 0xffff0000u;
                float h;
                memcpy(&h, &hb, sizeof h);
                float l = v - h; /* at most 3 significant bits: exact in BF16 */
                uint32_t lb;
                memcpy(&lb, &l, sizeof lb);
                uint16_t *at = tiles + (k / NPL_AMX_TILE) * (NPL_AMX_TILE_BYTES / 2) + (k % NPL_AMX_TILE) * 32 + n * 2;
                at[0] = (uint16_t)(hb >> 16);
                at[1] = (uint16_t)(lb >> 16);
            }
        }
    }
    free(row);
}

npl_amx_weights *npl_amx_weights_pack(npl_threadpool *pool, const npl_matrix *m)
{
    if (!m || m->type != NPL_TYPE_F16 || m->n_rows <= 0 || m->n_cols <= 0 || !npl_amx_usable())
        return NULL;
    npl_amx_weights *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->n_rows = (size_t)m->n_rows;
    w->n_cols = (size_t)m->n_cols;
    w->kp = round_up(w->n_cols, NPL_AMX_TILE);
    w->n_groups = round_up(w->n_rows, NPL_AMX_TILE) / NPL_AMX_TILE;
    size_t bytes = w->n_groups * (w->kp / NPL_AMX_TILE) * NPL_AMX_TILE_BYTES;
    w->tiles = aligned_alloc(64, bytes);
    if (!w->tiles) {
        free(w);
        return NULL;
    }
    memset(w->tiles, 0, bytes);
    bool *failed = calloc((size_t)npl_threadpool_size(pool), sizeof *failed);
    if (!failed) {
        npl_amx_weights_free(w);
        return NULL;
    }
    pack_job j = {.m = m, .w = w, .simd = npl_simd_detect(), .failed = failed};
    npl_threadpool_run(pool, w->n_groups, pack_task, &j);
    bool ok = true;
    for (int t = 0; t < npl_threadpool_size(pool); t++)
        ok = ok && !failed[t];
    free(failed);
    if (!ok) {
        npl_amx_weights_free(w);
        return NULL;
    }
    return w;
}

void npl_amx_weights_free(npl_amx_weights *w)
{
    if (!w)
        return;
    free(w->tiles);
    free(w);
}

size_t npl_amx_weights_bytes(const npl_amx_weights *w)
{
    return w ? w->n_groups * (w->kp / NPL_AMX_TILE) * NPL_AMX_TILE_BYTES : 0;
}

npl_amx_acts *npl_amx_acts_create(size_t max_rows, size_t max_cols)
{
    npl_amx_acts *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->max_rows = max_rows;
    a->max_cols = max_cols;
    size_t bytes = round_up(max_rows, NPL_AMX_TILE) * 2 * round_up(max_cols, NPL_AMX_TILE) * sizeof(uint16_t);
    for (int i = 0; i < 2; i++)
        if (!(a->part[i] = aligned_alloc(64, bytes ? bytes : 64))) {
            npl_amx_acts_free(a);
            return NULL;
        }
    return a;
}

void npl_amx_acts_free(npl_amx_acts *a)
{
    if (!a)
        return;
    for (int i = 0; i < 2; i++)
        free(a->part[i]);
    free(a);
}

#ifdef NPL_HAVE_X86_KERNELS
typedef struct split_job {
    const npl_amx_acts *a;
    const float *x;
    size_t x_stride;
} split_job;

static void split_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const split_job *j = ctx;
    npl_amx_split_rows(j->a, j->x, j->x_stride, begin, end);
}

typedef struct tiles_job {
    const npl_amx_acts *a;
    const npl_amx_weights *w;
    float *y;
    size_t y_stride;
    bool *failed; /* per thread */
} tiles_job;

static void tiles_task(void *ctx, size_t begin, size_t end, int thread)
{
    const tiles_job *j = ctx;
    if (!npl_amx_tiles_run(j->a, j->w, j->y, j->y_stride, begin, end))
        j->failed[thread] = true;
}
#endif

bool npl_amx_acts_load(npl_threadpool *pool, npl_amx_acts *a, const float *x, size_t x_stride, size_t n_rows,
                       size_t n_cols)
{
#ifdef NPL_HAVE_X86_KERNELS
    if (!a || !x || n_rows == 0 || n_rows > a->max_rows || n_cols == 0 || n_cols > a->max_cols || !npl_amx_usable())
        return false;
    a->n_rows = n_rows;
    a->n_cols = n_cols;
    a->mp = round_up(n_rows, NPL_AMX_TILE);
    a->kp = round_up(n_cols, NPL_AMX_TILE);
    split_job j = {.a = a, .x = x, .x_stride = x_stride};
    /* rows past n_rows come out zero */
    npl_threadpool_run(pool, a->mp, split_task, &j);
    return true;
#else
    (void)pool, (void)a, (void)x, (void)x_stride, (void)n_rows, (void)n_cols;
    return false;
#endif
}

bool npl_amx_matmul(npl_threadpool *pool, const npl_amx_acts *a, const npl_amx_weights *w, float *y, size_t y_stride)
{
#ifdef NPL_HAVE_X86_KERNELS
    if (!a || !w || !y || a->n_rows == 0 || a->n_cols != w->n_cols || y_stride < w->n_rows)
        return false;
    bool *failed = calloc((size_t)npl_threadpool_size(pool), sizeof *failed);
    if (!failed)
        return false;
    tiles_job j = {.a = a, .w = w, .y = y, .y_stride = y_stride, .failed = failed};
    npl_threadpool_run(pool, (w->n_groups + 1) / 2, tiles_task, &j);
    bool ok = true;
    for (int t = 0; t < npl_threadpool_size(pool); t++)
        ok = ok && !failed[t];
    free(failed);
    return ok;
#else
    (void)pool, (void)a, (void)w, (void)y, (void)y_stride;
    return false;
#endif
}
