/* The vision tower's matrices made ready for the fast kernels at load, so
 * the first image pays nothing for it:
 *  - integer types (Q8_0 projectors) are repacked into the interleaved
 *    layout of the integer kernels now rather than on the first product;
 *  - with npl_vision_params.bf16_weights, F16 matrices (a real
 *    mmproj-model-f16.gguf) become BF16 copies when the CPU has
 *    VDPBF16PS: the BF16 kernel multiplies at twice the float rate, but
 *    the weights lose their 3 lowest mantissa bits and the activations are
 *    rounded to BF16 (llama.cpp rounds them to F16 only): docs/vision.md
 *    gives the cost. Without VDPBF16PS, F16 stays F16 (the float kernel
 *    widens it exactly, which there is faster than emulated BF16). */
#include <stdlib.h>

#include "cpu_features.h"
#include "ggml_types.h"
#include "matmul_bf16.h"
#include "vision_internal.h"

typedef struct convert_job {
    npl_matrix *m;
    uint16_t *dst;
    npl_simd_level simd;
    bool *failed; /* per thread */
} convert_job;

/* Rows [begin, end): F16 -> f32 (exact) -> BF16 rounded to nearest even. */
static void convert_task(void *ctx, size_t begin, size_t end, int thread)
{
    (void)thread;
    const convert_job *j = ctx;
    size_t n = (size_t)j->m->n_cols;
    float *row = malloc(n * sizeof *row);
    if (!row) { /* the copy's rows stay zero: flagged by the caller */
        j->failed[thread] = true;
        return;
    }
    for (size_t r = begin; r < end; r++) {
        const uint16_t *src = (const uint16_t *)((const uint8_t *)j->m->data + r * j->m->row_bytes);
        npl_f16_to_f32_row(j->simd, src, row, n);
        npl_act_to_bf16(j->simd, row, n, j->dst + r * n);
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
        npl_matrix *ms[] = {&B->wq, &B->wk, &B->wv, &B->wo, &B->w_up, &B->w_down};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
            if (out)
                out[n] = ms[i];
            n++;
        }
    }
    return n;
}

npl_status npl_vision_prepare_weights(npl_vision *v, npl_error *err)
{
    npl_cpu_features f;
    npl_cpu_features_detect(&f);
    bool to_bf16 = v->bf16_weights && f.avx512bf16 && v->simd >= NPL_SIMD_AVX512;

    size_t n = list_matrices(v, NULL);
    npl_matrix **ms = malloc(n * sizeof *ms);
    if (!ms)
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    list_matrices(v, ms);
    size_t bf16_elems = 0;
    for (size_t i = 0; i < n; i++)
        if (to_bf16 && ms[i]->type == NPL_TYPE_F16)
            bf16_elems += (size_t)ms[i]->n_rows * (size_t)ms[i]->n_cols;
    if (bf16_elems) {
        v->bf16 = malloc(bf16_elems * sizeof *v->bf16);
        if (!v->bf16) {
            free(ms);
            return npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the BF16 copy of the vision weights (%zu MiB)",
                                 bf16_elems * 2 >> 20);
        }
    }
    bool *failed = calloc((size_t)npl_threadpool_size(v->pool), sizeof *failed);
    if (!failed) {
        free(ms);
        return npl_error_set(err, NPL_ERR_NOMEM, "out of memory");
    }
    npl_status st = NPL_OK;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        npl_matrix *m = ms[i];
        if (to_bf16 && m->type == NPL_TYPE_F16) {
            convert_job j = {.m = m, .dst = v->bf16 + at, .simd = v->simd, .failed = failed};
            npl_threadpool_run(v->pool, (size_t)m->n_rows, convert_task, &j);
            for (int t = 0; t < npl_threadpool_size(v->pool); t++)
                if (failed[t])
                    st = npl_error_set(err, NPL_ERR_NOMEM, "out of memory converting the vision weights");
            npl_matrix b;
            if (st == NPL_OK && !npl_matrix_init(&b, NPL_TYPE_BF16, j.dst, m->n_cols, m->n_rows))
                st = npl_error_set(err, NPL_ERR_INTERNAL, "vision: BF16 matrix setup failed");
            if (st != NPL_OK)
                break;
            *m = b;
            at += (size_t)m->n_rows * (size_t)m->n_cols;
        } else if (!npl_matmul_ws_prepack(v->mm_ws, v->pool, m)) {
            st = npl_error_set(err, NPL_ERR_NOMEM, "out of memory for the repacked vision weights");
            break;
        }
    }
    free(failed);
    free(ms);
    return st;
}
