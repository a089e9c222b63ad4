/* npl_matmul: splits a product into tasks of 16 output rows (one packed
 * row group), quantizes the activations once, and runs the kernel of the
 * workspace's SIMD level on each thread's contiguous slice of tasks.
 * Also keeps the repacked copies of the integer matrices, keyed by their
 * data pointer. */
#include "matvec.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_features.h"
#include "ggml_types.h"
#include "huge_alloc.h"
#include "kernel_table.h"
#include "matmul_bf16.h"
#include "matmul_packed.h"
#include "matmul_ref.h"
#include "quant_act.h"

/* Output rows per task: one packed row group. 16 floats of output are a
 * cache line, so two threads share at most the line at the boundary of
 * their slices (none when the output is 64-byte aligned). */
#define ROWS_PER_TASK NPL_PACK_ROWS

/* Below this many activation elements, quantizing on the calling thread
 * is cheaper than waking the pool for it. */
#define QUANT_PARALLEL_MIN 65536

typedef struct pack_entry {
    const void *data; /* key; NULL = empty slot */
    uint32_t type;
    int64_t n_rows, n_cols;
    bool failed;      /* no memory: use the file layout */
    bool borrowed;    /* pk.data adopted (npl_matmul_ws_adopt_packed): not ours to free */
    size_t map_bytes; /* pk.data is a mapping of this many bytes (huge pages), else malloc'd */
    npl_packed_matrix pk;
} pack_entry;

struct npl_matmul_ws {
    int n_threads;
    int64_t max_cols;
    size_t max_vecs;
    npl_simd_level simd;
    bool packing;
    bool release_source; /* weights are a read-only file mapping */
    npl_act_q8 *act;   /* max_vecs * max_cols / 32 */
    npl_act_q8k *actk; /* max_vecs * max_cols / 256 */
    uint16_t *actb;    /* max_vecs * max_cols BF16 activations */
    float *rows;       /* n_threads * 4 * max_cols */
    float **out_ptrs;  /* NPL_MATMUL_MULTI_MAX * max_vecs, for the contiguous variants */
    pack_entry *packs; /* open addressing, pack_cap slots */
    size_t pack_cap, pack_count;
    size_t packed_bytes;
};

/* Types dotted against 8-bit activations: exactly the ones the packed
 * layout exists for. */
static bool is_quant(uint32_t type)
{
    return npl_pack_type_supported(type);
}

bool npl_matmul_type_supported(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_F32:
    case NPL_TYPE_F16:
    case NPL_TYPE_BF16:
        return true;
    case NPL_TYPE_Q2_K:
    case NPL_TYPE_Q3_K:
    case NPL_TYPE_IQ4_NL:
    case NPL_TYPE_IQ4_XS: {
        /* converted to floats by the reference dequantizer, a row at a time */
        const npl_type_traits *tr = npl_type_traits_get(type);
        return tr && tr->can_dequantize;
    }
    default:
        return is_quant(type);
    }
}

bool npl_matrix_init(npl_matrix *m, uint32_t type, const void *data, int64_t n_cols, int64_t n_rows)
{
    if (!npl_matmul_type_supported(type) || n_cols <= 0 || n_rows <= 0 || !data)
        return false;
    size_t rb = npl_type_row_size(type, n_cols);
    if (rb == 0)
        return false;
    /* Plain float rows are read through typed pointers. */
    size_t align = type == NPL_TYPE_F32 ? 4 : (type == NPL_TYPE_F16 || type == NPL_TYPE_BF16) ? 2 : 1;
    if ((uintptr_t)data % align != 0)
        return false;
    m->type = type;
    m->data = data;
    m->n_cols = n_cols;
    m->n_rows = n_rows;
    m->row_bytes = rb;
    return true;
}

npl_matmul_ws *npl_matmul_ws_create(int n_threads, int64_t max_cols, size_t max_vecs)
{
    if (n_threads < 1 || max_cols < 1 || max_vecs < 1)
        return NULL;
    npl_matmul_ws *ws = calloc(1, sizeof *ws);
    if (!ws)
        return NULL;
    ws->n_threads = n_threads;
    ws->max_cols = max_cols;
    ws->max_vecs = max_vecs;
    ws->simd = npl_simd_detect();
    ws->packing = true;
    size_t blocks = ((size_t)max_cols + NPL_ACT_QK - 1) / NPL_ACT_QK;
    size_t kblocks = ((size_t)max_cols + NPL_ACT_QKK - 1) / NPL_ACT_QKK;
    size_t per_thread = 4 * (size_t)max_cols;
    if (max_vecs > SIZE_MAX / sizeof(npl_act_q8) / blocks || max_vecs > SIZE_MAX / NPL_MATMUL_MULTI_MAX / sizeof(float *) ||
        max_vecs > SIZE_MAX / sizeof(uint16_t) / (size_t)max_cols ||
        (size_t)n_threads > SIZE_MAX / sizeof(float) / per_thread) {
        free(ws);
        return NULL;
    }
    ws->act = malloc(max_vecs * blocks * sizeof(npl_act_q8));
    ws->actk = malloc(max_vecs * kblocks * sizeof(npl_act_q8k));
    ws->actb = malloc(max_vecs * (size_t)max_cols * sizeof(uint16_t));
    ws->rows = malloc((size_t)n_threads * per_thread * sizeof(float));
    ws->out_ptrs = malloc(NPL_MATMUL_MULTI_MAX * max_vecs * sizeof *ws->out_ptrs);
    if (!ws->act || !ws->actk || !ws->actb || !ws->rows || !ws->out_ptrs) {
        npl_matmul_ws_free(ws);
        return NULL;
    }
    return ws;
}

void npl_matmul_ws_free(npl_matmul_ws *ws)
{
    if (!ws)
        return;
    for (size_t i = 0; i < ws->pack_cap; i++)
        if (!ws->packs[i].borrowed)
            npl_huge_free(ws->packs[i].pk.data, ws->packs[i].map_bytes);
    free(ws->packs);
    free(ws->act);
    free(ws->actk);
    free(ws->actb);
    free(ws->rows);
    free(ws->out_ptrs);
    free(ws);
}

void npl_matmul_ws_set_simd(npl_matmul_ws *ws, npl_simd_level level)
{
    ws->simd = level <= npl_simd_detect() ? level : NPL_SIMD_NONE;
}

void npl_matmul_ws_set_release_source(npl_matmul_ws *ws, bool enabled)
{
    ws->release_source = enabled;
}

void npl_matmul_ws_set_packing(npl_matmul_ws *ws, bool enabled)
{
    ws->packing = enabled;
}

size_t npl_matmul_ws_packed_bytes(const npl_matmul_ws *ws)
{
    return ws->packed_bytes;
}

/* ---- the registry of packed copies -------------------------------------------- */

static size_t slot_of(const void *data, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)data;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

static pack_entry *find_entry(npl_matmul_ws *ws, const void *data)
{
    if (ws->pack_cap == 0)
        return NULL;
    for (size_t i = slot_of(data, ws->pack_cap);; i = (i + 1) & (ws->pack_cap - 1)) {
        if (ws->packs[i].data == data)
            return &ws->packs[i];
        if (!ws->packs[i].data)
            return NULL;
    }
}

/* A new empty entry for data (which is not in the table). */
static pack_entry *add_entry(npl_matmul_ws *ws, const void *data)
{
    if ((ws->pack_count + 1) * 2 > ws->pack_cap) {
        size_t cap = ws->pack_cap ? ws->pack_cap * 2 : 64;
        pack_entry *t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < ws->pack_cap; i++) {
            if (!ws->packs[i].data)
                continue;
            size_t j = slot_of(ws->packs[i].data, cap);
            while (t[j].data)
                j = (j + 1) & (cap - 1);
            t[j] = ws->packs[i];
        }
        free(ws->packs);
        ws->packs = t;
        ws->pack_cap = cap;
    }
    size_t i = slot_of(data, ws->pack_cap);
    while (ws->packs[i].data)
        i = (i + 1) & (ws->pack_cap - 1);
    ws->pack_count++;
    ws->packs[i].data = data;
    return &ws->packs[i];
}

typedef struct pack_job {
    const npl_matrix *w;
    const npl_packed_matrix *pk;
} pack_job;

static void pack_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    pack_job *j = ctx;
    npl_pack_groups(j->w, j->pk, (int64_t)begin, (int64_t)end);
}

static bool wants_packing(const npl_matmul_ws *ws, const npl_matrix *w)
{
    return ws->packing && npl_kernels(ws->simd)->packed_matmul && npl_pack_type_supported(w->type);
}

/* Drops the whole pages inside [p, p + n) from the process (see
 * npl_matmul_ws_set_release_source); a hint, so failure is harmless. */
static void release_pages(const void *p, size_t n)
{
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~((uintptr_t)ps - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Bytes of the packed copy of a matrix of geometry pk. */
static size_t pack_alloc_bytes(const npl_packed_matrix *pk)
{
    size_t bytes = (size_t)pk->n_groups * pk->group_bytes;
    return (bytes + 63) & ~(size_t)63;
}

/* The packed copy of w, made now if needed; NULL = use the file layout. */
static const npl_packed_matrix *packed_for(npl_matmul_ws *ws, npl_threadpool *pool, const npl_matrix *w)
{
    if (!wants_packing(ws, w))
        return NULL;
    pack_entry *e = find_entry(ws, w->data);
    if (e) {
        if (e->failed || e->type != w->type || e->n_rows != w->n_rows || e->n_cols != w->n_cols)
            return NULL;
        return &e->pk;
    }
    e = add_entry(ws, w->data);
    if (!e)
        return NULL;
    e->type = w->type;
    e->n_rows = w->n_rows;
    e->n_cols = w->n_cols;
    if (!npl_packed_geometry(w, &e->pk)) {
        e->failed = true;
        return NULL;
    }
    size_t bytes = pack_alloc_bytes(&e->pk);
    e->pk.data = npl_huge_alloc(bytes, &e->map_bytes);
    if (!e->pk.data) {
        e->failed = true;
        return NULL;
    }
    pack_job j = {w, &e->pk};
    npl_threadpool_run(pool, (size_t)e->pk.n_groups, pack_task, &j);
    ws->packed_bytes += bytes;
    if (ws->release_source)
        release_pages(w->data, (size_t)w->n_rows * w->row_bytes);
    return &e->pk;
}

bool npl_matmul_ws_prepack(npl_matmul_ws *ws, npl_threadpool *pool, const npl_matrix *w)
{
    if (!wants_packing(ws, w))
        return true;
    return packed_for(ws, pool, w) != NULL;
}

uint32_t npl_matmul_pack_layout_version(void)
{
    return NPL_PACK_LAYOUT_VERSION;
}

size_t npl_matmul_ws_pack_size(const npl_matmul_ws *ws, const npl_matrix *w)
{
    npl_packed_matrix pk;
    if (!wants_packing(ws, w) || !npl_packed_geometry(w, &pk))
        return 0;
    return pack_alloc_bytes(&pk);
}

size_t npl_matmul_pack_first_group(const npl_matrix *w, void *dst, size_t cap)
{
    npl_packed_matrix pk;
    if (!npl_packed_geometry(w, &pk) || pk.group_bytes > cap)
        return 0;
    pk.data = dst;
    npl_pack_groups(w, &pk, 0, 1);
    return pk.group_bytes;
}

const void *npl_matmul_ws_packed(const npl_matmul_ws *ws, const npl_matrix *w)
{
    const pack_entry *e = find_entry((npl_matmul_ws *)ws, w->data);
    if (!e || e->failed || e->type != w->type || e->n_rows != w->n_rows || e->n_cols != w->n_cols)
        return NULL;
    return e->pk.data;
}

bool npl_matmul_ws_adopt_packed(npl_matmul_ws *ws, const npl_matrix *w, const void *data)
{
    npl_packed_matrix pk;
    if (!data || (uintptr_t)data % 64 != 0 || !wants_packing(ws, w) || !npl_packed_geometry(w, &pk)
        || find_entry(ws, w->data))
        return false;
    pack_entry *e = add_entry(ws, w->data);
    if (!e)
        return false;
    e->type = w->type;
    e->n_rows = w->n_rows;
    e->n_cols = w->n_cols;
    e->borrowed = true;
    e->pk = pk;
    e->pk.data = (uint8_t *)(uintptr_t)data; /* read only: the kernels never write it */
    return true;
}

/* ---- rows as floats (embedding look-ups) ----------------------------------------- */

bool npl_matrix_get_row(const npl_matrix *w, int64_t row, float *out)
{
    if (row < 0 || row >= w->n_rows)
        return false;
    const float *r = npl_row_as_f32(w, row, out);
    if (r != out)
        memcpy(out, r, (size_t)w->n_cols * sizeof *out);
    return true;
}

/* ---- the parallel jobs ------------------------------------------------------------ */

typedef struct mm_seg {
    const npl_matrix *w;
    const npl_packed_matrix *pk; /* or NULL */
    float *const *y;
    size_t first_task, n_tasks;
} mm_seg;

typedef struct mm_job {
    npl_matmul_ws *ws;
    mm_seg seg[NPL_MATMUL_MULTI_MAX];
    size_t n_seg;
    const float *x;
    size_t x_stride;
    size_t n_vec;
    bool need_q8, need_q8k, need_bf16;
} mm_job;

static void quantize_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    mm_job *job = ctx;
    npl_matmul_ws *ws = job->ws;
    int64_t n = job->seg[0].w->n_cols;
    for (size_t v = begin; v < end; v++) {
        const float *xv = job->x + v * job->x_stride;
        if (job->need_q8)
            npl_quantize_act_q8(ws->simd, xv, n, ws->act + v * (size_t)(n / NPL_ACT_QK));
        if (job->need_q8k)
            npl_quantize_act_q8k(ws->simd, xv, n, ws->actk + v * (size_t)(n / NPL_ACT_QKK));
        if (job->need_bf16)
            npl_act_to_bf16(ws->simd, xv, (size_t)n, ws->actb + v * (size_t)n);
    }
}

static void run_segment(const mm_job *job, const mm_seg *s, size_t t0, size_t t1, int thread)
{
    npl_matmul_ws *ws = job->ws;
    const npl_matrix *w = s->w;
    const void *act = npl_quant_kind_is_k(w->type) ? (const void *)ws->actk : (const void *)ws->act;
    const npl_kernel_table *k = npl_kernels(ws->simd);
    if (s->pk) {
        k->packed_matmul(s->pk, (int64_t)t0, (int64_t)t1, act, job->n_vec, s->y);
        return;
    }
    int64_t r0 = (int64_t)t0 * ROWS_PER_TASK;
    int64_t r1 = (int64_t)t1 * ROWS_PER_TASK;
    if (r1 > w->n_rows)
        r1 = w->n_rows;
    if (is_quant(w->type)) {
        npl_quant_rows_ref(w, r0, r1, act, job->n_vec, s->y);
        return;
    }
    if (w->type == NPL_TYPE_BF16) {
        k->bf16_matmul(w, r0, r1, ws->actb, (size_t)w->n_cols, job->n_vec, s->y);
        return;
    }
    float *buf = ws->rows + (size_t)thread * 4 * (size_t)ws->max_cols;
    k->float_matmul(w, r0, r1, job->x, job->x_stride, job->n_vec, s->y, buf);
}

static void matmul_task(void *ctx, size_t begin, size_t end, int thread)
{
    const mm_job *job = ctx;
    for (size_t i = 0; i < job->n_seg; i++) {
        const mm_seg *s = &job->seg[i];
        size_t lo = begin > s->first_task ? begin : s->first_task;
        size_t hi = end < s->first_task + s->n_tasks ? end : s->first_task + s->n_tasks;
        if (lo < hi)
            run_segment(job, s, lo - s->first_task, hi - s->first_task, thread);
    }
}

static void run_job(npl_threadpool *pool, mm_job *job)
{
    size_t n_tasks = 0;
    /* Packing a matrix may grow the registry, which moves its entries: the
     * job takes its pointers once every matrix has its entry. */
    for (size_t i = 0; i < job->n_seg; i++)
        packed_for(job->ws, pool, job->seg[i].w);
    for (size_t i = 0; i < job->n_seg; i++) {
        mm_seg *s = &job->seg[i];
        s->pk = packed_for(job->ws, pool, s->w);
        s->first_task = n_tasks;
        s->n_tasks = ((size_t)s->w->n_rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
        n_tasks += s->n_tasks;
        if (is_quant(s->w->type)) {
            if (npl_quant_kind_is_k(s->w->type))
                job->need_q8k = true;
            else
                job->need_q8 = true;
        }
        if (s->w->type == NPL_TYPE_BF16)
            job->need_bf16 = true;
    }
    if (job->need_q8 || job->need_q8k || job->need_bf16) {
        if (job->n_vec * (size_t)job->seg[0].w->n_cols < QUANT_PARALLEL_MIN)
            quantize_task(job, 0, job->n_vec, 0);
        else
            npl_threadpool_run(pool, job->n_vec, quantize_task, job);
    }
    npl_threadpool_run(pool, n_tasks, matmul_task, job);
}

void npl_matmul(npl_threadpool *pool, npl_matmul_ws *ws, const npl_matrix *w,
                const float *x, size_t x_stride, size_t n_vec, float *const *y)
{
    if (n_vec == 0)
        return;
    mm_job job = {.ws = ws, .n_seg = 1, .x = x, .x_stride = x_stride, .n_vec = n_vec};
    job.seg[0].w = w;
    job.seg[0].y = y;
    run_job(pool, &job);
}

void npl_matmul_contig(npl_threadpool *pool, npl_matmul_ws *ws, const npl_matrix *w,
                       const float *x, size_t x_stride, size_t n_vec, float *y, size_t y_stride)
{
    for (size_t v = 0; v < n_vec; v++)
        ws->out_ptrs[v] = y + v * y_stride;
    npl_matmul(pool, ws, w, x, x_stride, n_vec, ws->out_ptrs);
}

void npl_matmul_multi(npl_threadpool *pool, npl_matmul_ws *ws, size_t n_mats, const npl_matrix *const *w,
                      const float *x, size_t x_stride, size_t n_vec, float *const *y, const size_t *y_stride)
{
    if (n_vec == 0 || n_mats == 0)
        return;
    if (n_mats > NPL_MATMUL_MULTI_MAX)
        n_mats = NPL_MATMUL_MULTI_MAX; /* documented limit */
    mm_job job = {.ws = ws, .n_seg = n_mats, .x = x, .x_stride = x_stride, .n_vec = n_vec};
    for (size_t i = 0; i < n_mats; i++) {
        float **ptrs = ws->out_ptrs + i * ws->max_vecs;
        for (size_t v = 0; v < n_vec; v++)
            ptrs[v] = y[i] + v * y_stride[i];
        job.seg[i].w = w[i];
        job.seg[i].y = ptrs;
    }
    run_job(pool, &job);
}
