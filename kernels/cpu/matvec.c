#include "matvec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_blocks.h"
#include "ggml_types.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define NPL_HAVE_X86 1
#define AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
#endif

/* Rows handled together: their float copies (or their quantized bytes)
 * stay in L1 while every vector of the batch passes over them. */
#define ROW_TILE 4
/* Rows per pool task; keeps the task count (and slice boundaries) coarse. */
#define ROWS_PER_TASK 16

#define QK 32 /* elements per block of the legacy quant types */

/* Activations quantized to 8 bits per block of 32: d is the scale,
 * s = d * sum(q) serves the offset term of Q4_1/Q5_1. */
typedef struct act_block {
    float d;
    float s;
    int8_t q[QK];
} act_block;

typedef enum row_kind {
    ROW_FLOAT, /* converted to f32, dotted in f32 */
    ROW_QUANT, /* integer dot against act_block */
} row_kind;

struct npl_matmul_ws {
    int n_threads;
    int64_t max_cols;
    size_t max_vecs;
    npl_simd_level simd;
    act_block *act;  /* max_vecs * max_cols / QK */
    float *rows;     /* n_threads * ROW_TILE * max_cols */
    float **out_ptrs; /* max_vecs, for npl_matmul_contig */
};

static row_kind kind_of(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_Q4_0:
    case NPL_TYPE_Q4_1:
    case NPL_TYPE_Q5_0:
    case NPL_TYPE_Q5_1:
    case NPL_TYPE_Q8_0:
        return ROW_QUANT;
    default:
        return ROW_FLOAT;
    }
}

bool npl_matmul_type_supported(uint32_t type)
{
    switch (type) {
    case NPL_TYPE_F32:
    case NPL_TYPE_F16:
    case NPL_TYPE_BF16:
    case NPL_TYPE_Q4_0:
    case NPL_TYPE_Q4_1:
    case NPL_TYPE_Q5_0:
    case NPL_TYPE_Q5_1:
    case NPL_TYPE_Q8_0:
        return true;
    case NPL_TYPE_Q2_K:
    case NPL_TYPE_Q3_K:
    case NPL_TYPE_Q4_K:
    case NPL_TYPE_Q5_K:
    case NPL_TYPE_Q6_K:
    case NPL_TYPE_IQ4_NL:
    case NPL_TYPE_IQ4_XS:
    case NPL_TYPE_MXFP4: {
        /* converted to floats by the reference dequantizer, a row at a time */
        const npl_type_traits *tr = npl_type_traits_get(type);
        return tr && tr->can_dequantize;
    }
    default:
        return false;
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
    size_t blocks = ((size_t)max_cols + QK - 1) / QK;
    if (max_vecs > SIZE_MAX / sizeof(act_block) / blocks) {
        free(ws);
        return NULL;
    }
    ws->act = malloc(max_vecs * blocks * sizeof(act_block));
    size_t per_thread = (size_t)ROW_TILE * (size_t)max_cols;
    ws->rows = malloc((size_t)n_threads * per_thread * sizeof(float));
    ws->out_ptrs = malloc(max_vecs * sizeof *ws->out_ptrs);
    if (!ws->act || !ws->rows || !ws->out_ptrs) {
        npl_matmul_ws_free(ws);
        return NULL;
    }
    return ws;
}

void npl_matmul_ws_free(npl_matmul_ws *ws)
{
    if (!ws)
        return;
    free(ws->act);
    free(ws->rows);
    free(ws->out_ptrs);
    free(ws);
}

void npl_matmul_ws_set_simd(npl_matmul_ws *ws, npl_simd_level level)
{
    ws->simd = level <= npl_simd_detect() ? level : NPL_SIMD_NONE;
}

static inline uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* ---- activation quantization ------------------------------------------ */

static void quantize_act(const float *x, int64_t n, act_block *out)
{
    for (int64_t b = 0; b < n / QK; b++) {
        const float *xb = x + b * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            float a = fabsf(xb[j]);
            if (a > amax)
                amax = a;
        }
        float d = amax / 127.0f;
        float id = d > 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK; j++) {
            int q = (int)lrintf(xb[j] * id);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            out[b].q[j] = (int8_t)q;
            sum += q;
        }
        /* The scale is kept at half precision, as the reference kernels
         * of the quantized formats do. */
        out[b].d = npl_fp16_to_fp32(npl_fp32_to_fp16(d));
        out[b].s = out[b].d * (float)sum;
    }
}

/* ---- portable integer dots ------------------------------------------------ */

static float dot_q4_0_c(const uint8_t *row, const act_block *a, size_t nb)
{
    float sum = 0.0f;
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q4_0)) {
        const uint8_t *qs = row + offsetof(npl_block_q4_0, qs);
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += ((qs[j] & 0x0F) - 8) * a[b].q[j] + ((qs[j] >> 4) - 8) * a[b].q[j + 16];
        sum += npl_fp16_to_fp32(load_u16(row)) * a[b].d * (float)sumi;
    }
    return sum;
}

static float dot_q4_1_c(const uint8_t *row, const act_block *a, size_t nb)
{
    float sum = 0.0f;
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q4_1)) {
        const uint8_t *qs = row + offsetof(npl_block_q4_1, qs);
        int sumi = 0;
        for (int j = 0; j < 16; j++)
            sumi += (qs[j] & 0x0F) * a[b].q[j] + (qs[j] >> 4) * a[b].q[j + 16];
        float d = npl_fp16_to_fp32(load_u16(row));
        float m = npl_fp16_to_fp32(load_u16(row + offsetof(npl_block_q4_1, m)));
        sum += d * a[b].d * (float)sumi + m * a[b].s;
    }
    return sum;
}

static float dot_q5_0_c(const uint8_t *row, const act_block *a, size_t nb)
{
    float sum = 0.0f;
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q5_0)) {
        uint32_t qh = load_u32(row + offsetof(npl_block_q5_0, qh));
        const uint8_t *qs = row + offsetof(npl_block_q5_0, qs);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
            int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            sumi += (lo - 16) * a[b].q[j] + (hi - 16) * a[b].q[j + 16];
        }
        sum += npl_fp16_to_fp32(load_u16(row)) * a[b].d * (float)sumi;
    }
    return sum;
}

static float dot_q5_1_c(const uint8_t *row, const act_block *a, size_t nb)
{
    float sum = 0.0f;
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q5_1)) {
        uint32_t qh = load_u32(row + offsetof(npl_block_q5_1, qh));
        const uint8_t *qs = row + offsetof(npl_block_q5_1, qs);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            int lo = (qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
            int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            sumi += lo * a[b].q[j] + hi * a[b].q[j + 16];
        }
        float d = npl_fp16_to_fp32(load_u16(row));
        float m = npl_fp16_to_fp32(load_u16(row + offsetof(npl_block_q5_1, m)));
        sum += d * a[b].d * (float)sumi + m * a[b].s;
    }
    return sum;
}

static float dot_q8_0_c(const uint8_t *row, const act_block *a, size_t nb)
{
    float sum = 0.0f;
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q8_0)) {
        const int8_t *qs = (const int8_t *)(row + offsetof(npl_block_q8_0, qs));
        int sumi = 0;
        for (int j = 0; j < QK; j++)
            sumi += qs[j] * a[b].q[j];
        sum += npl_fp16_to_fp32(load_u16(row)) * a[b].d * (float)sumi;
    }
    return sum;
}

/* ---- AVX2 integer dots ---------------------------------------------------- */

#ifdef NPL_HAVE_X86
AVX2_TARGET static inline float hsum256(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    __m128 s = _mm_add_ps(lo, hi);
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sum of the products of 32 signed bytes, as 8 int32 lanes: multiply
 * |w| (unsigned) by x carrying w's sign, then add the int16 pairs. */
AVX2_TARGET static inline __m256i dot_i8x32(__m256i w, __m256i x)
{
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles first, then high ones. */
AVX2_TARGET static inline __m256i unpack_nibbles(const uint8_t *qs)
{
    __m128i packed = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(packed), _mm_srli_epi16(packed, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

AVX2_TARGET static float dot_q4_0_avx2(const uint8_t *row, const act_block *a, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    const __m256i eight = _mm256_set1_epi8(8);
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q4_0)) {
        __m256i w = _mm256_sub_epi8(unpack_nibbles(row + offsetof(npl_block_q4_0, qs)), eight);
        __m256i x = _mm256_loadu_si256((const __m256i *)a[b].q);
        float d = _cvtsh_ss(load_u16(row)) * a[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(dot_i8x32(w, x)), acc);
    }
    return hsum256(acc);
}

AVX2_TARGET static float dot_q4_1_avx2(const uint8_t *row, const act_block *a, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    float offs = 0.0f;
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q4_1)) {
        __m256i w = unpack_nibbles(row + offsetof(npl_block_q4_1, qs)); /* unsigned 0..15 */
        __m256i x = _mm256_loadu_si256((const __m256i *)a[b].q);
        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
        float d = _cvtsh_ss(load_u16(row)) * a[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc);
        offs += _cvtsh_ss(load_u16(row + offsetof(npl_block_q4_1, m))) * a[b].s;
    }
    return hsum256(acc) + offs;
}

AVX2_TARGET static float dot_q8_0_avx2(const uint8_t *row, const act_block *a, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q8_0)) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(row + offsetof(npl_block_q8_0, qs)));
        __m256i x = _mm256_loadu_si256((const __m256i *)a[b].q);
        float d = _cvtsh_ss(load_u16(row)) * a[b].d;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(dot_i8x32(w, x)), acc);
    }
    return hsum256(acc);
}

/* The same dots against four vectors at once: each weight block is
 * loaded and unpacked once for the four. Per vector the operations and
 * their order are exactly those of the one-vector kernels above, so a
 * vector's result does not depend on the vectors it is grouped with. */
AVX2_TARGET static void dot4_q4_0_avx2(const uint8_t *row, const act_block *const a[4], size_t nb, float out[4])
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    const __m256i eight = _mm256_set1_epi8(8);
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q4_0)) {
        __m256i w = _mm256_sub_epi8(unpack_nibbles(row + offsetof(npl_block_q4_0, qs)), eight);
        float dw = _cvtsh_ss(load_u16(row));
#define STEP(acc, v)                                                                   \
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[v][b].d),                              \
                          _mm256_cvtepi32_ps(dot_i8x32(w, _mm256_loadu_si256((const __m256i *)a[v][b].q))), acc)
        STEP(acc0, 0);
        STEP(acc1, 1);
        STEP(acc2, 2);
        STEP(acc3, 3);
#undef STEP
    }
    out[0] = hsum256(acc0);
    out[1] = hsum256(acc1);
    out[2] = hsum256(acc2);
    out[3] = hsum256(acc3);
}

AVX2_TARGET static void dot4_q8_0_avx2(const uint8_t *row, const act_block *const a[4], size_t nb, float out[4])
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++, row += sizeof(npl_block_q8_0)) {
        __m256i w = _mm256_loadu_si256((const __m256i *)(row + offsetof(npl_block_q8_0, qs)));
        float dw = _cvtsh_ss(load_u16(row));
#define STEP(acc, v)                                                                   \
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[v][b].d),                              \
                          _mm256_cvtepi32_ps(dot_i8x32(w, _mm256_loadu_si256((const __m256i *)a[v][b].q))), acc)
        STEP(acc0, 0);
        STEP(acc1, 1);
        STEP(acc2, 2);
        STEP(acc3, 3);
#undef STEP
    }
    out[0] = hsum256(acc0);
    out[1] = hsum256(acc1);
    out[2] = hsum256(acc2);
    out[3] = hsum256(acc3);
}
#endif

typedef float (*quant_dot_fn)(const uint8_t *row, const act_block *a, size_t nb);

typedef void (*quant_dot4_fn)(const uint8_t *row, const act_block *const a[4], size_t nb, float out[4]);

/* A four-vector kernel where one exists (else NULL: one vector at a time). */
static quant_dot4_fn quant_dot4_for(uint32_t type, npl_simd_level lv)
{
#ifdef NPL_HAVE_X86
    if (lv == NPL_SIMD_AVX2) {
        switch (type) {
        case NPL_TYPE_Q4_0: return dot4_q4_0_avx2;
        case NPL_TYPE_Q8_0: return dot4_q8_0_avx2;
        default: break;
        }
    }
#endif
    (void)type;
    (void)lv;
    return NULL;
}

static quant_dot_fn quant_dot_for(uint32_t type, npl_simd_level lv)
{
#ifdef NPL_HAVE_X86
    if (lv == NPL_SIMD_AVX2) {
        switch (type) {
        case NPL_TYPE_Q4_0: return dot_q4_0_avx2;
        case NPL_TYPE_Q4_1: return dot_q4_1_avx2;
        case NPL_TYPE_Q8_0: return dot_q8_0_avx2;
        default: break;
        }
    }
#endif
    (void)lv;
    switch (type) {
    case NPL_TYPE_Q4_0: return dot_q4_0_c;
    case NPL_TYPE_Q4_1: return dot_q4_1_c;
    case NPL_TYPE_Q5_0: return dot_q5_0_c;
    case NPL_TYPE_Q5_1: return dot_q5_1_c;
    case NPL_TYPE_Q8_0: return dot_q8_0_c;
    default: return NULL;
    }
}

/* ---- rows as floats -------------------------------------------------------- */

/* Returns the row as floats: the mapped row itself for F32, else a
 * conversion into buf. */
static const float *row_as_f32(const npl_matrix *w, int64_t r, float *buf, npl_simd_level lv)
{
    const uint8_t *src = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
    size_t n = (size_t)w->n_cols;
    switch (w->type) {
    case NPL_TYPE_F32:
        return (const float *)(const void *)src;
    case NPL_TYPE_F16:
        npl_f16_to_f32_row(lv, (const uint16_t *)(const void *)src, buf, n);
        return buf;
    case NPL_TYPE_BF16:
        npl_bf16_to_f32_row((const uint16_t *)(const void *)src, buf, n);
        return buf;
    default:
        if (!npl_dequantize_row_ref(w->type, src, buf, w->n_cols))
            memset(buf, 0, n * sizeof *buf); /* unreachable: type checked at init */
        return buf;
    }
}

bool npl_matrix_get_row(const npl_matrix *w, int64_t row, float *out)
{
    if (row < 0 || row >= w->n_rows)
        return false;
    const float *r = row_as_f32(w, row, out, npl_simd_detect());
    if (r != out)
        memcpy(out, r, (size_t)w->n_cols * sizeof *out);
    return true;
}

/* ---- the parallel jobs ------------------------------------------------------ */

typedef struct matmul_job {
    npl_matmul_ws *ws;
    const npl_matrix *w;
    const float *x;
    size_t x_stride;
    size_t n_vec;
    float *const *y;
    quant_dot_fn qdot;
    quant_dot4_fn qdot4;
} matmul_job;

static void quantize_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    matmul_job *job = ctx;
    size_t nb = (size_t)job->w->n_cols / QK;
    for (size_t v = begin; v < end; v++)
        quantize_act(job->x + v * job->x_stride, job->w->n_cols, job->ws->act + v * nb);
}

static void matmul_quant_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    matmul_job *job = ctx;
    const npl_matrix *w = job->w;
    size_t nb = (size_t)w->n_cols / QK;
    int64_t r_end = (int64_t)end * ROWS_PER_TASK;
    if (r_end > w->n_rows)
        r_end = w->n_rows;
    for (int64_t r0 = (int64_t)begin * ROWS_PER_TASK; r0 < r_end; r0 += ROW_TILE) {
        int64_t r1 = r0 + ROW_TILE < r_end ? r0 + ROW_TILE : r_end;
        size_t v = 0;
        if (job->qdot4) {
            for (; v + 4 <= job->n_vec; v += 4) {
                const act_block *a[4];
                for (int j = 0; j < 4; j++)
                    a[j] = job->ws->act + (v + (size_t)j) * nb;
                for (int64_t r = r0; r < r1; r++) {
                    float out[4];
                    job->qdot4((const uint8_t *)w->data + (size_t)r * w->row_bytes, a, nb, out);
                    for (int j = 0; j < 4; j++)
                        job->y[v + (size_t)j][r] = out[j];
                }
            }
        }
        for (; v < job->n_vec; v++) {
            const act_block *a = job->ws->act + v * nb;
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *row = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
                job->y[v][r] = job->qdot(row, a, nb);
            }
        }
    }
}

static void matmul_float_task(void *ctx, size_t begin, size_t end, int thread)
{
    matmul_job *job = ctx;
    const npl_matrix *w = job->w;
    npl_simd_level lv = job->ws->simd;
    size_t n = (size_t)w->n_cols;
    float *buf = job->ws->rows + (size_t)thread * ROW_TILE * (size_t)job->ws->max_cols;
    int64_t r_end = (int64_t)end * ROWS_PER_TASK;
    if (r_end > w->n_rows)
        r_end = w->n_rows;
    for (int64_t r0 = (int64_t)begin * ROWS_PER_TASK; r0 < r_end; r0 += ROW_TILE) {
        int64_t r1 = r0 + ROW_TILE < r_end ? r0 + ROW_TILE : r_end;
        const float *rows[ROW_TILE];
        for (int64_t r = r0; r < r1; r++)
            rows[r - r0] = row_as_f32(w, r, buf + (size_t)(r - r0) * n, lv);
        for (size_t v = 0; v < job->n_vec; v++) {
            const float *xv = job->x + v * job->x_stride;
            for (int64_t r = r0; r < r1; r++)
                job->y[v][r] = npl_dot_f32(lv, rows[r - r0], xv, n);
        }
    }
}

void npl_matmul(npl_threadpool *pool, npl_matmul_ws *ws, const npl_matrix *w,
                const float *x, size_t x_stride, size_t n_vec, float *const *y)
{
    if (n_vec == 0)
        return;
    matmul_job job = {
        .ws = ws, .w = w, .x = x, .x_stride = x_stride, .n_vec = n_vec, .y = y,
        .qdot = NULL,
        .qdot4 = NULL,
    };
    size_t n_tasks = ((size_t)w->n_rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    if (kind_of(w->type) == ROW_QUANT) {
        job.qdot = quant_dot_for(w->type, ws->simd);
        job.qdot4 = quant_dot4_for(w->type, ws->simd);
        npl_threadpool_run(pool, n_vec, quantize_task, &job);
        npl_threadpool_run(pool, n_tasks, matmul_quant_task, &job);
    } else {
        npl_threadpool_run(pool, n_tasks, matmul_float_task, &job);
    }
}

void npl_matmul_contig(npl_threadpool *pool, npl_matmul_ws *ws, const npl_matrix *w,
                       const float *x, size_t x_stride, size_t n_vec, float *y, size_t y_stride)
{
    for (size_t v = 0; v < n_vec; v++)
        ws->out_ptrs[v] = y + v * y_stride;
    npl_matmul(pool, ws, w, x, x_stride, n_vec, ws->out_ptrs);
}
