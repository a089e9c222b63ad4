/* The NPU runtime's weights at load, through the Q4NX cache file (see
 * npu_weight_cache.h). */
#include "npu_weight_cache.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "q4nx.h"
#include "q4nx_cache.h"
#include "weight_cache_common.h"

/* Starts the digest: change it when what the runtime stores changes in a
 * way the repack probes below would not show. */
#define WEIGHT_CACHE_REVISION "npullm q4nx weights 1"

/* Rows of each source type's probe: one Q4NX row block. */
#define PROBE_ROWS NPL_Q4NX_BLOCK_ROWS

/* The report's one line, added to. */
#define note_add(r, ...) npl_cache_note_add((r)->note, sizeof (r)->note, __VA_ARGS__)

static npl_status matrix_layout(const npl_npu_cache_matrix *m, npl_q4nx_layout *layout,
                                npl_error *err)
{
    npl_error sub;
    npl_error_clear(&sub);
    npl_status st = npl_q4nx_layout_init(layout, m->mat->n_rows, m->mat->n_cols, &sub);
    if (st != NPL_OK)
        return npl_error_set(err, st, "npu: '%s': %s", m->name, sub.message);
    if (layout->bytes > m->dst_bytes)
        return npl_error_set(err, NPL_ERR_INTERNAL,
                             "npu: '%s' needs %zu bytes on the device, %zu were laid out",
                             m->name, layout->bytes, m->dst_bytes);
    return NPL_OK;
}

/* The first rows rows of m repacked into dst (sized for them). */
static npl_status repack_rows(const npl_npu_cache_matrix *m, const npl_q4nx_layout *layout,
                              void *dst, npl_error *err)
{
    npl_error sub;
    npl_error_clear(&sub);
    npl_status st = npl_q4nx_repack(layout, m->mat->type, m->mat->data,
                                    m->mat->row_bytes * (size_t)layout->rows, dst, layout->bytes,
                                    NULL, &sub);
    if (st != NPL_OK)
        return npl_error_set(err, st, "npu: repacking '%s': %s", m->name, sub.message);
    return NPL_OK;
}

static npl_status repack_matrix(const npl_npu_cache_matrix *m, npl_error *err)
{
    npl_q4nx_layout layout;
    npl_status st = matrix_layout(m, &layout, err);
    return st != NPL_OK ? st : repack_rows(m, &layout, m->dst, err);
}

/* What the repacker makes of the first row block of m. */
static npl_status probe_digest(const npl_npu_cache_matrix *m, uint64_t *h, npl_error *err)
{
    npl_q4nx_layout layout;
    int64_t rows = m->mat->n_rows < PROBE_ROWS ? m->mat->n_rows : PROBE_ROWS;
    npl_error sub;
    npl_error_clear(&sub);
    if (npl_q4nx_layout_init(&layout, rows, m->mat->n_cols, &sub) != NPL_OK)
        return npl_error_set(err, sub.code, "npu: '%s': %s", m->name, sub.message);
    void *buf = malloc(layout.bytes);
    if (!buf)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory to digest the weights");
    npl_status st = repack_rows(m, &layout, buf, err);
    if (st == NPL_OK)
        *h = npl_q4nx_checksum(buf, layout.bytes, *h);
    free(buf);
    return st;
}

/* The cache key's digest: every matrix's name, type and shape, then a
 * probe repack of each source type, so a repacker that changes its output
 * makes old caches stale. */
static npl_status weights_digest(const npl_npu_cache_matrix *mats, size_t n, uint64_t *out,
                                 npl_error *err)
{
    uint64_t h = npl_q4nx_checksum(WEIGHT_CACHE_REVISION, strlen(WEIGHT_CACHE_REVISION), 0);
    for (size_t i = 0; i < n; i++) {
        const npl_matrix *mat = mats[i].mat;
        uint64_t rec[3] = {mat->type, (uint64_t)mat->n_rows, (uint64_t)mat->n_cols};
        uint8_t bytes[sizeof rec];
        for (size_t k = 0; k < sizeof bytes; k++) /* little-endian whatever the host */
            bytes[k] = (uint8_t)(rec[k / 8] >> (8 * (k % 8)));
        h = npl_q4nx_checksum(mats[i].name, strlen(mats[i].name) + 1, h);
        h = npl_q4nx_checksum(bytes, sizeof bytes, h);
    }
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = mats[j].mat->type == mats[i].mat->type;
        if (seen)
            continue;
        npl_status st = probe_digest(&mats[i], &h, err);
        if (st != NPL_OK)
            return st;
    }
    *out = h;
    return NPL_OK;
}

/* Every matrix from a valid cache; false, with the reason noted, when it
 * is missing, stale or turns out damaged part way (the caller repacks
 * all of them then). */
static bool read_cache(const char *dir, const char *name, const npl_q4nx_cache_key *key,
                       const npl_npu_cache_matrix *mats, size_t n, npl_npu_cache_report *report)
{
    npl_error sub;
    npl_error_clear(&sub);
    npl_q4nx_cache *c = NULL;
    npl_q4nx_cache_state state;
    if (npl_q4nx_cache_open_unmapped(dir, name, key, &c, &state, &sub) != NPL_OK) {
        if (state == NPL_Q4NX_CACHE_MISSING)
            note_add(report, "q4nx cache: none at %s/%s", dir, name);
        else
            note_add(report, "%s", sub.message);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        npl_q4nx_layout layout;
        ok = matrix_layout(&mats[i], &layout, &sub) == NPL_OK
             && npl_q4nx_cache_read(c, mats[i].name, mats[i].mat->type, layout.rows,
                                    layout.cols, mats[i].dst, mats[i].dst_bytes, &sub) == NPL_OK;
    }
    npl_q4nx_cache_close(c);
    if (!ok)
        note_add(report, "%s", sub.message);
    return ok;
}

/* Repacks every matrix, adding each to w when w is set; a cache that
 * cannot be written is dropped and noted, a failing repack fails. */
static npl_status repack_all(const npl_npu_cache_matrix *mats, size_t n,
                             npl_q4nx_cache_writer *w, npl_npu_cache_report *report,
                             npl_error *err)
{
    npl_error sub;
    npl_error_clear(&sub);
    for (size_t i = 0; i < n; i++) {
        npl_status st = repack_matrix(&mats[i], err);
        if (st != NPL_OK) {
            npl_q4nx_cache_writer_abort(w);
            return st;
        }
        report->repacked++;
        npl_q4nx_layout layout;
        if (w && (matrix_layout(&mats[i], &layout, &sub) != NPL_OK
                  || npl_q4nx_cache_writer_add(w, mats[i].name, mats[i].mat->type, &layout,
                                               mats[i].dst, &sub) != NPL_OK)) {
            npl_q4nx_cache_writer_abort(w);
            w = NULL;
            note_add(report, "; not written: %s", sub.message);
        }
    }
    if (w && npl_q4nx_cache_writer_commit(w, &sub) != NPL_OK)
        note_add(report, "; not written: %s", sub.message);
    else if (w)
        report->written = true;
    return NPL_OK;
}

npl_status npl_npu_weights_fill(const char *model_path, const char *cache_dir,
                                const npl_npu_cache_matrix *mats, size_t n,
                                npl_npu_cache_report *report, npl_error *err)
{
    if (!model_path || (n > 0 && !mats) || !report)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: weights need a model and matrices");
    memset(report, 0, sizeof *report);
    char dir[PATH_MAX], name[NAME_MAX + 1], why[128];
    bool use = npl_weight_cache_place(model_path, cache_dir, NPL_NPU_WEIGHT_CACHE_SUFFIX,
                                      "q4nx cache", dir, sizeof dir, name, sizeof name, why,
                                      sizeof why);
    npl_q4nx_cache_key key;
    if (use) {
        uint64_t digest = 0;
        npl_error sub;
        npl_error_clear(&sub);
        npl_status st = weights_digest(mats, n, &digest, err);
        if (st != NPL_OK)
            return st;
        if (npl_q4nx_cache_key_from_file(model_path, digest, &key, &sub) != NPL_OK) {
            note_add(report, "q4nx cache off: %s", sub.message);
            use = false;
        }
    } else {
        note_add(report, "%s", why);
    }
    if (use && read_cache(dir, name, &key, mats, n, report)) {
        report->cached = (uint32_t)n;
        note_add(report, "q4nx cache: read %zu matrices from %s/%s", n, dir, name);
        return NPL_OK;
    }
    /* Tried first, so a directory we cannot write to costs no write. */
    npl_q4nx_cache_writer *w = NULL;
    if (use) {
        npl_error sub;
        npl_error_clear(&sub);
        if (npl_q4nx_cache_writer_open(dir, name, &key, &w, &sub) != NPL_OK) {
            note_add(report, "; not written: %s", sub.message);
            w = NULL;
        }
    }
    npl_status st = repack_all(mats, n, w, report, err);
    if (st == NPL_OK)
        note_add(report, "; repacked %u matrices", report->repacked);
    if (st == NPL_OK && report->written)
        note_add(report, " and wrote %s/%s", dir, name);
    return st;
}
