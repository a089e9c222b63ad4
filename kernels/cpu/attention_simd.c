/* npl_attention_kv written once over simd_vec.h: the arithmetic of
 * attention_internal.h on 16 lanes, so every level gives the portable
 * version's bits. Element-wise steps (rescaling, p * v, the final
 * division) are exact per element whatever the width; the sums over lanes
 * follow vf_hsum's order. */
#include <math.h>

#include "attention_internal.h"
#include "ggml_types.h"
#include "kernels_isa.h"

/* Query heads x 16-float parts of a head whose accumulators stay in
 * registers while a block of values passes. */
#define HEADS_AT_ONCE 4
#define DIM_REGS (NPL_V_TILE / HEADS_AT_ONCE)

/* scores[j] = dot16(q, keys[j]) * scale for the nj keys of a block,
 * NPL_V_HSUM_BATCH keys at a time. */
NPL_V_AI void block_scores(const float *q, const float *keys, size_t nj, size_t hd, float scale, float *scores)
{
    enum { K = NPL_V_HSUM_BATCH };
    size_t hd16 = hd & ~(size_t)15;
    for (size_t j0 = 0; j0 < nj; j0 += K) {
        size_t n = nj - j0 < K ? nj - j0 : K;
        vf a[K];
#pragma GCC unroll 16
        for (int j = 0; j < K; j++)
            a[j] = vf_zero();
        for (size_t c = 0; c < hd16; c += 16) {
            vf qc = vf_loadu(q + c);
#pragma GCC unroll 16
            for (int j = 0; j < K; j++)
                if ((size_t)j < n) /* rows past the block are not read */
                    a[j] = vf_fmadd(qc, vf_loadu(keys + (j0 + (size_t)j) * hd + c), a[j]);
        }
        float s[K];
        vf_hsum_batch(a, s);
        for (size_t j = 0; j < n; j++) {
            float t = s[j];
            for (size_t c = hd16; c < hd; c++)
                t = fmaf(q[c], keys[(j0 + j) * hd + c], t);
            scores[j0 + j] = t * scale;
        }
    }
}

/* The block's rows as floats, exactly: halves widened, Q8_0 values q * d. */
static void block_to_f32(npl_kv_format fmt, const void *rows, size_t stride, size_t j0, size_t nj, size_t hd,
                         float *dst)
{
    size_t hd16 = hd & ~(size_t)15;
    for (size_t j = 0; j < nj; j++) {
        const uint8_t *row = (const uint8_t *)rows + (j0 + j) * stride;
        float *o = dst + j * hd;
        if (fmt == NPL_KV_Q8_0) {
            for (size_t b = 0; b < hd / 32; b++) {
                const uint8_t *blk = row + 34 * b;
                uint16_t dh;
                memcpy(&dh, blk, sizeof dh);
                vf d = vf_set1(npl_fp16_to_fp32(dh));
                vf_storeu(o + 32 * b, vf_mul(vf_load_i8(blk + 2), d));
                vf_storeu(o + 32 * b + 16, vf_mul(vf_load_i8(blk + 18), d));
            }
        } else {
            const uint16_t *h = (const uint16_t *)(const void *)row;
            size_t c = 0;
            for (; c < hd16; c += 16)
                vf_storeu(o + c, vf_load_f16(h + c));
            for (; c < hd; c++)
                o[c] = npl_fp16_to_fp32(h[c]);
        }
    }
}

/* a[0..n) *= c (exact per element) */
static void scale_row(float *a, size_t n, float c)
{
    size_t n16 = n & ~(size_t)15, d = 0;
    vf cv = vf_set1(c);
    for (; d < n16; d += 16)
        vf_storeu(a + d, vf_mul(vf_loadu(a + d), cv));
    for (; d < n; d++)
        a[d] *= c;
}

/* The online-softmax step of one head over a block's scores s[0..nj):
 * new maximum (rescaling the running sum and acc when it grows), the
 * scores replaced by their weights, the weights' sum added. */
/* A head's new block maximum m: when it grows, the running sum and acc
 * rescaled by exp(old - m). */
NPL_V_AI void raise_max(float m, float *run_max, float *run_sum, float *acc, size_t head_dim)
{
    if (m > *run_max) {
        float c = npl_attn_exp(*run_max - m);
        *run_sum *= c;
        scale_row(acc, head_dim, c);
        *run_max = m;
    }
}

NPL_V_AI void softmax_step(float *s, size_t nj, float *run_max, float *run_sum, float *acc, size_t head_dim)
{
    size_t nj16 = nj & ~(size_t)15;
    /* (new, old) operand order: a NaN score leaves the maximum alone */
    vf mv = vf_set1(*run_max);
    for (size_t j = 0; j < nj16; j += 16)
        mv = vf_max(vf_loadu(s + j), mv);
    float m = vf_hmax(mv);
    for (size_t j = nj16; j < nj; j++)
        if (s[j] > m)
            m = s[j];
    raise_max(m, run_max, run_sum, acc, head_dim);
    vf lanes = vf_zero(), msub = vf_set1(m);
    for (size_t j = 0; j < nj16; j += 16) {
        vf p = vf_exp_neg(vf_sub(vf_loadu(s + j), msub));
        vf_storeu(s + j, p);
        lanes = vf_add(lanes, p);
    }
    if (nj16 == nj) { /* vf_hsum adds the lanes in npl_lane_sum16's order */
        *run_sum += vf_hsum(lanes);
        return;
    }
    float lane[16];
    vf_storeu(lane, lanes);
    for (size_t j = nj16; j < nj; j++) {
        s[j] = npl_attn_exp(s[j] - m);
        lane[j % 16] += s[j];
    }
    *run_sum += npl_lane_sum16(lane);
}

/* softmax_step for SOFTMAX_ROWS rows r over the same nj (a multiple of
 * 16): the rows' steps interleaved, so that one row's reductions and exp
 * chains overlap the others'; each row's operations are unchanged. */
#define SOFTMAX_ROWS NPL_V_TILE_ROWS
NPL_V_AI void softmax_rows(float *const s[SOFTMAX_ROWS], size_t nj, float *const run_max[SOFTMAX_ROWS],
                           float *const run_sum[SOFTMAX_ROWS], float *const acc[SOFTMAX_ROWS], size_t head_dim)
{
    vf mv[SOFTMAX_ROWS], lanes[SOFTMAX_ROWS], msub[SOFTMAX_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < SOFTMAX_ROWS; r++)
        mv[r] = vf_set1(*run_max[r]);
    for (size_t j = 0; j < nj; j += 16)
#pragma GCC unroll 8
        for (int r = 0; r < SOFTMAX_ROWS; r++)
            mv[r] = vf_max(vf_loadu(s[r] + j), mv[r]);
#pragma GCC unroll 8
    for (int r = 0; r < SOFTMAX_ROWS; r++) {
        float m = vf_hmax(mv[r]);
        raise_max(m, run_max[r], run_sum[r], acc[r], head_dim);
        lanes[r] = vf_zero();
        msub[r] = vf_set1(m);
    }
    for (size_t j = 0; j < nj; j += 16)
#pragma GCC unroll 8
        for (int r = 0; r < SOFTMAX_ROWS; r++) {
            vf p = vf_exp_neg(vf_sub(vf_loadu(s[r] + j), msub[r]));
            vf_storeu(s[r] + j, p);
            lanes[r] = vf_add(lanes[r], p);
        }
#pragma GCC unroll 8
    for (int r = 0; r < SOFTMAX_ROWS; r++)
        *run_sum[r] += vf_hsum(lanes[r]);
}

/* acc += p_j * v_j for the heads [h0, h0 + nh) over the block: up to
 * HEADS_AT_ONCE heads x DIM_REGS x 16 dimensions of accumulators in
 * registers, j in order for each. */
/* The whole tile (HEADS_AT_ONCE heads x DIM_REGS vectors from d0): fixed
 * bounds, so the accumulators stay in registers. */
NPL_V_AI void accumulate_tile(float *acc, const float *scores, const float *vals, size_t h0, size_t nj,
                              size_t head_dim, size_t d0)
{
    vf a[HEADS_AT_ONCE][DIM_REGS];
#pragma GCC unroll 8
    for (size_t h = 0; h < HEADS_AT_ONCE; h++)
#pragma GCC unroll 8
        for (size_t c = 0; c < DIM_REGS; c++)
            a[h][c] = vf_loadu(acc + (h0 + h) * head_dim + d0 + 16 * c);
    for (size_t j = 0; j < nj; j++) {
        const float *vr = vals + j * head_dim + d0;
        vf vv[DIM_REGS];
#pragma GCC unroll 8
        for (size_t c = 0; c < DIM_REGS; c++)
            vv[c] = vf_loadu(vr + 16 * c);
#pragma GCC unroll 8
        for (size_t h = 0; h < HEADS_AT_ONCE; h++) {
            vf p = vf_set1(scores[(h0 + h) * NPL_ATTN_BLOCK + j]);
#pragma GCC unroll 8
            for (size_t c = 0; c < DIM_REGS; c++)
                a[h][c] = vf_fmadd(p, vv[c], a[h][c]);
        }
    }
#pragma GCC unroll 8
    for (size_t h = 0; h < HEADS_AT_ONCE; h++)
#pragma GCC unroll 8
        for (size_t c = 0; c < DIM_REGS; c++)
            vf_storeu(acc + (h0 + h) * head_dim + d0 + 16 * c, a[h][c]);
}

static void accumulate_values(float *acc, const float *scores, const float *vals, size_t h0, size_t nh, size_t nj,
                              size_t head_dim)
{
    size_t hd16 = head_dim & ~(size_t)15;
    for (size_t d0 = 0; d0 < hd16; d0 += 16 * DIM_REGS) {
        size_t nc = (hd16 - d0) / 16 < DIM_REGS ? (hd16 - d0) / 16 : DIM_REGS;
        if (nh == HEADS_AT_ONCE && nc == DIM_REGS) {
            accumulate_tile(acc, scores, vals, h0, nj, head_dim, d0);
            continue;
        }
        vf a[HEADS_AT_ONCE][DIM_REGS];
        for (size_t h = 0; h < nh; h++)
            for (size_t c = 0; c < nc; c++)
                a[h][c] = vf_loadu(acc + (h0 + h) * head_dim + d0 + 16 * c);
        for (size_t j = 0; j < nj; j++) {
            const float *vr = vals + j * head_dim + d0;
            vf vv[DIM_REGS];
            for (size_t c = 0; c < nc; c++)
                vv[c] = vf_loadu(vr + 16 * c);
            for (size_t h = 0; h < nh; h++) {
                vf p = vf_set1(scores[(h0 + h) * NPL_ATTN_BLOCK + j]);
                for (size_t c = 0; c < nc; c++)
                    a[h][c] = vf_fmadd(p, vv[c], a[h][c]);
            }
        }
        for (size_t h = 0; h < nh; h++)
            for (size_t c = 0; c < nc; c++)
                vf_storeu(acc + (h0 + h) * head_dim + d0 + 16 * c, a[h][c]);
    }
    for (size_t d = hd16; d < head_dim; d++)
        for (size_t j = 0; j < nj; j++) {
            float vd = vals[j * head_dim + d];
            for (size_t h = h0; h < h0 + nh; h++)
                acc[h * head_dim + d] = fmaf(scores[h * NPL_ATTN_BLOCK + j], vd, acc[h * head_dim + d]);
        }
}

void NPL_ISA_FN(npl_attention)(npl_kv_format fmt, const float *q, size_t q_stride, size_t n_q, const void *k,
                               const void *v, size_t kv_stride_bytes, size_t n_kv, size_t head_dim, float scale,
                               const float *sinks, float *out, size_t out_stride, float *scratch)
{
    npl_attn_scratch sc = npl_attn_scratch_split(scratch, n_q, head_dim);
    for (size_t h = 0; h < n_q; h++) {
        sc.run_max[h] = -INFINITY;
        sc.run_sum[h] = 0.0f;
    }
    memset(sc.acc, 0, n_q * head_dim * sizeof *sc.acc);

    for (size_t j0 = 0; j0 < n_kv; j0 += NPL_ATTN_BLOCK) {
        size_t nj = n_kv - j0 < NPL_ATTN_BLOCK ? n_kv - j0 : NPL_ATTN_BLOCK;
        block_to_f32(fmt, k, kv_stride_bytes, j0, nj, head_dim, sc.keys);
        block_to_f32(fmt, v, kv_stride_bytes, j0, nj, head_dim, sc.vals);
        for (size_t h = 0; h < n_q; h++)
            block_scores(q + h * q_stride, sc.keys, nj, head_dim, scale, sc.scores + h * NPL_ATTN_BLOCK);
        for (size_t h = 0; h < n_q; h++)
            softmax_step(sc.scores + h * NPL_ATTN_BLOCK, nj, &sc.run_max[h], &sc.run_sum[h], sc.acc + h * head_dim,
                         head_dim);
        for (size_t h0 = 0; h0 < n_q; h0 += HEADS_AT_ONCE)
            accumulate_values(sc.acc, sc.scores, sc.vals, h0, n_q - h0 < HEADS_AT_ONCE ? n_q - h0 : HEADS_AT_ONCE,
                              nj, head_dim);
    }

    for (size_t h = 0; h < n_q; h++) {
        float inv = npl_attn_inv_sum(sc.run_max[h], sc.run_sum[h], sinks ? sinks + h : NULL);
        float *o = out + h * out_stride;
        memcpy(o, sc.acc + h * head_dim, head_dim * sizeof *o);
        scale_row(o, head_dim, inv);
    }
}

/* ---- npl_attention_rows: many positions against each converted block ---- */

/* The row after (active position p, head h) of the active list, with g
 * heads per position. */
NPL_V_AI void next_row(size_t *p, size_t *h, size_t g)
{
    if (++*h == g) {
        *h = 0;
        ++*p;
    }
}

/* Rows scored together (sharing each key load) x 16-key chunks per row. */
#define SCORE_ROWS NPL_V_TILE_ROWS
#define SCORE_CHUNKS (NPL_V_TILE_VECS / 2)

/* d = a + b over a score tile */
NPL_V_AI void add_tile(vf d[SCORE_ROWS][SCORE_CHUNKS], vf a[SCORE_ROWS][SCORE_CHUNKS],
                       vf b[SCORE_ROWS][SCORE_CHUNKS])
{
#pragma GCC unroll 8
    for (int r = 0; r < SCORE_ROWS; r++)
#pragma GCC unroll 4
        for (int k = 0; k < SCORE_CHUNKS; k++)
            d[r][k] = vf_add(a[r][k], b[r][k]);
}

/* One pass of score_tile: the fmadd chains of lanes l and l + 8 of
 * block_scores' accumulator (one lane per key, keys in lanes), added:
 * t8[r][k] = a_l + a_{l+8}. */
NPL_V_AI void score_pair(const float *const q[SCORE_ROWS], const float *kt, size_t hd16, size_t l,
                         vf t8[SCORE_ROWS][SCORE_CHUNKS])
{
    vf a[SCORE_ROWS][SCORE_CHUNKS], b[SCORE_ROWS][SCORE_CHUNKS];
#pragma GCC unroll 8
    for (int r = 0; r < SCORE_ROWS; r++)
#pragma GCC unroll 4
        for (int k = 0; k < SCORE_CHUNKS; k++)
            a[r][k] = b[r][k] = vf_zero();
    for (size_t c = 0; c < hd16; c += 16) {
        const float *ka = kt + (c + l) * NPL_ATTN_BLOCK, *kb = kt + (c + l + 8) * NPL_ATTN_BLOCK;
        vf x[SCORE_CHUNKS], y[SCORE_CHUNKS];
#pragma GCC unroll 4
        for (int k = 0; k < SCORE_CHUNKS; k++) {
            x[k] = vf_loadu(ka + 16 * k);
            y[k] = vf_loadu(kb + 16 * k);
        }
#pragma GCC unroll 8
        for (int r = 0; r < SCORE_ROWS; r++) {
            vf qa = vf_set1(q[r][c + l]), qb = vf_set1(q[r][c + l + 8]);
#pragma GCC unroll 4
            for (int k = 0; k < SCORE_CHUNKS; k++) {
                a[r][k] = vf_fmadd(qa, x[k], a[r][k]);
                b[r][k] = vf_fmadd(qb, y[k], b[r][k]);
            }
        }
    }
    add_tile(t8, a, b);
}

/* block_scores' arithmetic for SCORE_ROWS rows (q[r], scores s[r]) and
 * the 16 * SCORE_CHUNKS keys of kt (the block transposed, key j of
 * dimension d at kt[d * NPL_ATTN_BLOCK + j]), keys in lanes. Lane l of
 * block_scores' accumulator, the fmadd chain of q[c + l] * k[c + l] over
 * c, is here a whole vector a_l (one lane per key), and vf_hsum's pairs
 * become vector additions: t8_l = a_l + a_{l+8}, t4_l = t8_l + t8_{l+4},
 * (t4_0 + t4_2) + (t4_1 + t4_3); then the tail dimensions fmadd'ed and the
 * product with scale. No shuffles, and the same bits per key. The pairs
 * are computed in the order the tree consumes them (0, 4, 2, 6, 1, 5, 3,
 * 7), so at most three partial sums per accumulator wait, unrolled so
 * they have fixed places (registers) rather than an indexed array. */
NPL_V_AI void score_tile(const float *const q[SCORE_ROWS], const float *kt, size_t hd, float scale,
                         float *const s[SCORE_ROWS])
{
    size_t hd16 = hd & ~(size_t)15;
    vf h0[SCORE_ROWS][SCORE_CHUNKS], h1[SCORE_ROWS][SCORE_CHUNKS], h2[SCORE_ROWS][SCORE_CHUNKS];
    vf t8[SCORE_ROWS][SCORE_CHUNKS];
    score_pair(q, kt, hd16, 0, h0);
    score_pair(q, kt, hd16, 4, t8);
    add_tile(h0, h0, t8); /* t4_0 */
    score_pair(q, kt, hd16, 2, h1);
    score_pair(q, kt, hd16, 6, t8);
    add_tile(h1, h1, t8); /* t4_2 */
    add_tile(h0, h0, h1);
    score_pair(q, kt, hd16, 1, h1);
    score_pair(q, kt, hd16, 5, t8);
    add_tile(h1, h1, t8); /* t4_1 */
    score_pair(q, kt, hd16, 3, h2);
    score_pair(q, kt, hd16, 7, t8);
    add_tile(h2, h2, t8); /* t4_3 */
    add_tile(h1, h1, h2);
    add_tile(h0, h0, h1);
    vf sc = vf_set1(scale);
#pragma GCC unroll 8
    for (int r = 0; r < SCORE_ROWS; r++)
#pragma GCC unroll 4
        for (int k = 0; k < SCORE_CHUNKS; k++) {
            vf t = h0[r][k];
            for (size_t c = hd16; c < hd; c++)
                t = vf_fmadd(vf_set1(q[r][c]), vf_loadu(kt + c * NPL_ATTN_BLOCK + 16 * (size_t)k), t);
            vf_storeu(s[r] + 16 * (size_t)k, vf_mul(t, sc));
        }
}

/* keys [nj][hd] -> kt [hd][NPL_ATTN_BLOCK], the keys past nj as zeros:
 * 16 x 16 squares through registers, the dimensions past the last 16
 * one by one. */
static void transpose_keys(const float *keys, size_t nj, size_t hd, float *kt)
{
    size_t hd16 = hd & ~(size_t)15;
    for (size_t j0 = 0; j0 < NPL_ATTN_BLOCK; j0 += 16) {
        for (size_t d0 = 0; d0 < hd16; d0 += 16) {
            vf r[16];
            for (size_t j = 0; j < 16; j++)
                r[j] = j0 + j < nj ? vf_loadu(keys + (j0 + j) * hd + d0) : vf_zero();
            vf_transpose16(r);
            for (size_t d = 0; d < 16; d++)
                vf_storeu(kt + (d0 + d) * NPL_ATTN_BLOCK + j0, r[d]);
        }
        for (size_t d = hd16; d < hd; d++)
            for (size_t j = j0; j < j0 + 16; j++)
                kt[d * NPL_ATTN_BLOCK + j] = j < nj ? keys[j * hd + d] : 0.0f;
    }
}

/* Keys of the block [j0, j0 + NPL_ATTN_BLOCK) that row position i sees. */
static size_t row_keys(const npl_attn_rows_job *job, size_t i, size_t j0)
{
    size_t n = (size_t)job->key_hi[i] + 1 - j0;
    return n < NPL_ATTN_BLOCK ? n : NPL_ATTN_BLOCK;
}

void NPL_ISA_FN(npl_attention_rows)(const npl_attn_rows_job *job, float *scratch)
{
    size_t hd = job->head_dim, g = job->group, n_rows = job->n_pos * g;
    npl_attn_rows_scratch sc = npl_attn_rows_scratch_split(scratch, n_rows, hd);
    for (size_t r = 0; r < n_rows; r++) {
        sc.run_max[r] = -INFINITY;
        sc.run_sum[r] = 0.0f;
    }
    memset(sc.acc, 0, n_rows * hd * sizeof *sc.acc);
    size_t n_kv = 0;
    for (size_t i = 0; i < job->n_pos; i++)
        if ((size_t)job->key_hi[i] + 1 > n_kv)
            n_kv = (size_t)job->key_hi[i] + 1;

    for (size_t j0 = 0; j0 < n_kv; j0 += NPL_ATTN_BLOCK) {
        size_t nj = n_kv - j0 < NPL_ATTN_BLOCK ? n_kv - j0 : NPL_ATTN_BLOCK;
        block_to_f32(job->fmt, job->k, job->row_bytes, j0, nj, hd, sc.keys);
        block_to_f32(job->fmt, job->v, job->row_bytes, j0, nj, hd, sc.vals);
        transpose_keys(sc.keys, nj, hd, sc.keys_t);
        /* the next block's cache rows arrive while this one is computed */
        if (j0 + NPL_ATTN_BLOCK < n_kv) {
            size_t next = n_kv - j0 - NPL_ATTN_BLOCK < NPL_ATTN_BLOCK ? n_kv - j0 - NPL_ATTN_BLOCK : NPL_ATTN_BLOCK;
            size_t at = (j0 + NPL_ATTN_BLOCK) * job->row_bytes;
            npl_v_prefetch(job->k, at, next * job->row_bytes);
            npl_v_prefetch(job->v, at, next * job->row_bytes);
        }
        /* The positions seeing this block (a position past its last key
         * skips it); their rows are walked as (position p, head h), in
         * order, so no row number is divided by g. */
        size_t npa = 0;
        for (size_t i = 0; i < job->n_pos; i++)
            if (job->key_hi[i] >= j0)
                sc.active[npa++] = (uint32_t)i;
        if (npa == 0)
            continue;
        size_t na = npa * g;
        /* Scores of the block's keys up to the last a tile's rows see (a
         * row uses its own first row_keys of them); a short tile repeats
         * its last row. */
        for (size_t a0 = 0, p = 0, h = 0; a0 < na; a0 += SCORE_ROWS) {
            const float *qp[SCORE_ROWS];
            float *sp[SCORE_ROWS];
            size_t tile_keys = 0;
            for (size_t r = 0; r < SCORE_ROWS; r++) {
                size_t i = sc.active[p];
                qp[r] = job->q + i * job->q_stride + h * hd;
                sp[r] = sc.scores + (i * g + h) * NPL_ATTN_BLOCK;
                size_t nk = row_keys(job, i, j0);
                tile_keys = nk > tile_keys ? nk : tile_keys;
                if (a0 + r + 1 < na)
                    next_row(&p, &h, g);
            }
            /* chunks past every row's last key are never read */
            size_t tile_chunks = (tile_keys + 15) / 16;
            tile_chunks = (tile_chunks + SCORE_CHUNKS - 1) / SCORE_CHUNKS * SCORE_CHUNKS;
            for (size_t c0 = 0; c0 < tile_chunks; c0 += SCORE_CHUNKS) {
                float *spc[SCORE_ROWS];
                for (size_t r = 0; r < SCORE_ROWS; r++)
                    spc[r] = sp[r] + 16 * c0;
                score_tile(qp, sc.keys_t + 16 * c0, hd, job->scale, spc);
            }
        }
        for (size_t p = 0; p < npa; p++) {
            size_t i = sc.active[p], nk = row_keys(job, i, j0), row = i * g;
            for (; nk % 16 == 0 && row + SOFTMAX_ROWS <= (i + 1) * g; row += SOFTMAX_ROWS) {
                float *sr[SOFTMAX_ROWS], *mr[SOFTMAX_ROWS], *ur[SOFTMAX_ROWS], *ar[SOFTMAX_ROWS];
                for (size_t r = 0; r < SOFTMAX_ROWS; r++) {
                    sr[r] = sc.scores + (row + r) * NPL_ATTN_BLOCK;
                    mr[r] = &sc.run_max[row + r];
                    ur[r] = &sc.run_sum[row + r];
                    ar[r] = sc.acc + (row + r) * hd;
                }
                softmax_rows(sr, nk, mr, ur, ar, hd);
            }
            for (; row < (i + 1) * g; row++)
                softmax_step(sc.scores + row * NPL_ATTN_BLOCK, nk, &sc.run_max[row], &sc.run_sum[row],
                             sc.acc + row * hd, hd);
        }
        /* runs of consecutive rows with the same keys share the value loads */
        for (size_t p = 0, h = 0; p < npa;) {
            size_t i = sc.active[p], row = i * g + h, nk = row_keys(job, i, j0), n = 1;
            next_row(&p, &h, g); /* (p, h): the cursor of row + n */
            while (n < HEADS_AT_ONCE && p < npa && sc.active[p] * g + h == row + n &&
                   row_keys(job, sc.active[p], j0) == nk) {
                n++;
                next_row(&p, &h, g);
            }
            accumulate_values(sc.acc, sc.scores, sc.vals, row, n, nk, hd);
        }
    }

    for (size_t i = 0; i < job->n_pos; i++)
        for (size_t h = 0; h < g; h++) {
            size_t r = i * g + h;
            float inv = npl_attn_inv_sum(sc.run_max[r], sc.run_sum[r], job->sinks ? job->sinks + h : NULL);
            float *o = job->out + i * job->out_stride + h * hd;
            memcpy(o, sc.acc + r * hd, hd * sizeof *o);
            scale_row(o, hd, inv);
        }
}
