/* The vision tower's matrices made ready for the fast kernels at load, so
 * the first image pays nothing for it:
 *  - integer types (Q8_0 projectors) are repacked into the interleaved
 *    layout of the integer kernels now rather than on the first product;
 *  - with npl_vision_params.q8_weights, F16 matrices whose rows are whole
 *    32-blocks (all but the patch kernel and fc2 in SigLIP) are quantized
 *    to Q8_0 copies and then take the integer path, as a Q8_0 file would;
 *  - with npl_vision_params.bf16_weights, the F16 matrices left become
 *    BF16 copies when the CPU has VDPBF16PS: the BF16 kernel multiplies at
 *    twice the float rate, but the weights lose their 3 lowest mantissa
 *    bits and the activations are rounded to BF16 (llama.cpp rounds them
 *    to F16 only). Without VDPBF16PS, F16 stays F16 (the float kernel
 *    widens it exactly, which there is faster than emulated BF16).
 *  - on CPUs with AMX-BF16 tiles (and without npl_vision_params.exact),
 *    the F16 matrices left are packed for matmul_amx.h, whose products
 *    equal the F16 float kernel's up to the order of the additions.
 * docs/vision.md gives the accuracy cost of the first two options. */
#include <stdlib.h>

#include "cpu_features.h"
#include "ggml_types.h"
#include "matmul_bf16.h"
#include "vision_internal.h"

struct npl_vision_amx {
    const npl_matrix *m;
    npl_amx_weights *w;
};

typedef struct convert_job {
    const npl_matrix *m;
    uint32_t to;      /* NPL_TYPE_BF16 or NPL_TYPE_Q8_0 */
    uint8_t *dst;
    size_t dst_row_bytes;
    npl_simd_level simd;
    bool *failed;     /* per thread */
} convert_job;

/* Rows [begin, end): F16 -> f32 (exact) -> BF16 (nearest even) or Q8_0
 * (the reference quantizer, as llama.cpp's). */
static void convert_task(void *ctx, size_t begin, size_t end, int thread)
{
    const convert_job *j = ctx;
    size_t n = (size_t)j->m->n_cols;
    float *row = malloc(n * sizeof *row);
    if (!row) { /* the copy's rows stay unset: flagged to the caller */
        j->failed[thread] = true;
        return;
    }
    for (size_t r = begin; r < end; r++) {
        const uint16_t *src = (const uint16_t *)((const uint8_t *)j->m->data + r * j->m->row_bytes);
        uint8_t *dst = j->dst + r * j->dst_row_bytes;
        npl_f16_to_f32_row(j->simd, src, row, n);
        if (j->to == NPL_TYPE_BF16)
            npl_act_to_bf16(j->simd, row, n, (uint16_t *)(void *)dst);
        else if (!npl_quantize_row_ref(j->to, row, dst, (int64_t)n))
            j->failed[thread] = true;
    }
    free(row);
}

/* The matrices of the encoder blocks and the patch embedding. */
static size_t list_matrices(npl_vision *v, npl_matrix **out)
{
    size_t n = 0;
    if (out)
        out[n] = &v->patch_embd;
    n++;
    for (uint32_t il = 0; il < v->info.n_layer; il++) {
        npl_vision_block *B = &v->blocks[il];
        npl_matrix *ms[] = {&B->wq, &B->wk, &B->wv, &B->wo, &B->w_up, &B->w_down, &B->w_gate};
        /* w_gate: gemma4v's gated FFN only */
        for (size_t i = 0; i < sizeof ms / sizeof ms[0] - (B->w_gate.n_rows == 0); i++) {
            if (out)
                out[n] = ms[i];
            n++;
        }
    }
    return n;
}

/* The type m is converted to at load, or m->type when it stays. */
static uint32_t target_type(const npl_vision *v, const npl_matrix *m, bool have_bf16)
{
    if (m->type != NPL_TYPE_F16)
        return m->type;
    if (v->q8_weights && m->n_cols % 32 == 0)
        return NPL_TYPE_Q8_0;
    if (v->bf16_weights && have_bf16)
        return NPL_TYPE_BF16;
    return m->type;
}

npl_status npl_vision_prepare_weights(npl_vision *v, npl_error *err)
{
    npl_cpu_features f;
    npl_cpu_features_detect(&f);
    bool have_bf16 = f.avx512bf16 && v->simd >= NPL_SIMD_AVX512;

    size_t n = list_matrices(v, NULL);
    npl_matrix **ms = malloc(n * sizeof *ms);
    bool *failed = calloc((size_t)npl_threadpool_size(v->pool), sizeof *failed);
    if (!ms || !failed) {
        free(ms);
        free(failed);
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    }
    list_matrices(v, ms);
    if (npl_amx_usable()) {
        size_t cols = (size_t)v->patch_embd.n_cols;
        if (v->info.n_embd > cols)
            cols = v->info.n_embd;
        if (v->info.n_ff > cols)
            cols = v->info.n_ff;
        v->amx = calloc(n, sizeof *v->amx);
        v->amx_acts = npl_amx_acts_create(NPL_VISION_ROW_CHUNK, cols);
        if (!v->amx || !v->amx_acts) {
            free(failed);
            free(ms);
            return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
        }
    }
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t to = target_type(v, ms[i], have_bf16);
        if (to != ms[i]->type)
            bytes += (size_t)ms[i]->n_rows * npl_type_row_size(to, ms[i]->n_cols);
    }
    npl_status st = NPL_OK;
    if (bytes && !(v->converted = malloc(bytes)))
        st = npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the converted vision weights (%zu MiB)", bytes >> 20);
    size_t at = 0;
    for (size_t i = 0; i < n && st == NPL_OK; i++) {
        npl_matrix *m = ms[i];
        uint32_t to = target_type(v, m, have_bf16);
        if (to != m->type) {
            convert_job j = {.m = m, .to = to, .dst = v->converted + at, .dst_row_bytes = npl_type_row_size(to, m->n_cols),
                             .simd = v->simd, .failed = failed};
            npl_threadpool_run(v->pool, (size_t)m->n_rows, convert_task, &j);
            for (int t = 0; t < npl_threadpool_size(v->pool); t++)
                if (failed[t])
                    st = npl_error_set(err, NPL_ERR_NOMEM, "out of memory converting the vision weights");
            npl_matrix c;
            if (st == NPL_OK && !npl_matrix_init(&c, to, j.dst, m->n_cols, m->n_rows))
                st = npl_error_set(err, NPL_ERR_INTERNAL, "vision: converted matrix setup failed");
            if (st != NPL_OK)
                break;
            *m = c;
            at += (size_t)m->n_rows * j.dst_row_bytes;
        }
        if (v->amx && m->type == NPL_TYPE_F16) {
            npl_amx_weights *w = npl_amx_weights_pack(v->pool, m);
            if (!w) {
                st = npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the vision weights' AMX copy");
                break;
            }
            v->amx[v->n_amx++] = (struct npl_vision_amx){.m = m, .w = w};
        } else if (!npl_matmul_ws_prepack(v->mm_ws, v->pool, m)) {
            st = npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the repacked vision weights");
        }
    }
    free(failed);
    free(ms);
    return st;
}

void npl_vision_free_weights(npl_vision *v)
{
    for (size_t i = 0; i < v->n_amx; i++)
        npl_amx_weights_free(v->amx[i].w);
    free(v->amx);
    v->amx = NULL;
    v->n_amx = 0;
    npl_amx_acts_free(v->amx_acts);
    v->amx_acts = NULL;
    free(v->converted);
    v->converted = NULL;
}

const npl_amx_weights *npl_vision_amx_weights(const npl_vision *v, const npl_matrix *m)
{
    for (size_t i = 0; i < v->n_amx; i++)
        if (v->amx[i].m == m)
            return v->amx[i].w;
    return NULL;
}
