/* The CPU's packed weights through a cache file (see cpu_weight_cache.h). */
#include "cpu_weight_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "le_bytes.h"
#include "model_internal.h"
#include "q4nx_cache.h" /* npl_q4nx_checksum, npl_q4nx_cache_key_from_file */
#include "weight_cache_common.h"

/* What a cache file is written from, by a thread of its own while the
 * model runs (the disk, not the CPU, sets its pace: seconds for a large
 * model on a slow disk), and how it went. */
typedef struct write_job {
    char dir[PATH_MAX], name[NAME_MAX + 1], path[PATH_MAX + NAME_MAX + 2];
    npl_q4nx_cache_key key;
    struct cache_entry *e;
    const uint8_t **data; /* the packed copies, owned by the workspace */
    size_t n;
    uint64_t file_bytes;
    bool written;
    char note[240]; /* "; wrote PATH" or "; not written (...)" */
} write_job;

struct npl_cpu_weight_cache {
    void *map; /* the mapped cache file the kernels read, or NULL */
    size_t bytes;
    write_job *job; /* a cache file being written, or NULL */
    pthread_t thread;
};

static void job_free(write_job *j)
{
    if (!j)
        return;
    free(j->e);
    free(j->data);
    free(j);
}

void npl_cpu_weight_cache_free(npl_cpu_weight_cache *c)
{
    if (!c)
        return;
    npl_cpu_weight_cache_wait(c, NULL);
    if (c->map)
        munmap(c->map, c->bytes);
    free(c);
}

/* The report's one line, added to. */
#define note_add(r, ...) npl_cache_note_add((r)->note, sizeof (r)->note, __VA_ARGS__)

/* What one matrix is in the file: its place in the model and in the cache. */
typedef struct cache_entry {
    uint64_t source_offset;
    uint32_t type;
    int64_t rows, cols;
    uint64_t offset, bytes;
    uint64_t checksum;
} cache_entry;

/* The checksum of a matrix's sampled pages: its first, middle and last
 * NPL_CPUW_SAMPLE_BYTES. Hashing every byte would cost about as much as
 * the repack the cache saves (under 1 GB/s on a loaded machine of this
 * kind), so the data is sampled: truncation, a torn write and damage in a
 * sampled page are caught, a flipped bit elsewhere is not (the file is
 * synced before it is renamed into place). */
static uint64_t sample_checksum(const uint8_t *data, uint64_t bytes)
{
    uint64_t span = bytes < NPL_CPUW_SAMPLE_BYTES ? bytes : NPL_CPUW_SAMPLE_BYTES;
    uint64_t starts[3] = {0, (bytes - span) / 2 & ~(uint64_t)63, bytes - span};
    uint64_t h = bytes;
    for (int i = 0; i < 3; i++)
        h = npl_q4nx_checksum(data + starts[i], (size_t)span, h);
    return h;
}

/* Hash of the model's bytes before its tensor data (header, metadata,
 * tensor table): a model rewritten with the same size and mtime but other
 * tensors or metadata does not match. */
static uint64_t source_digest(const npl_gguf *g)
{
    return npl_q4nx_checksum(npl_gguf_bytes(g), (size_t)npl_gguf_data_offset(g), 0x6370757765696768ull);
}

/* The entries for mats as ws packs them, their offsets laid out in a file
 * with the table first; false when a matrix is not one ws packs. */
static bool plan_entries(const npl_gguf *g, const npl_matmul_ws *ws, const npl_matrix *const *mats,
                         size_t n, cache_entry *e, uint64_t *file_bytes)
{
    uintptr_t base = (uintptr_t)npl_gguf_bytes(g);
    uint64_t size = npl_gguf_file_size(g);
    uint64_t end = NPL_CPUW_HEADER_BYTES + (uint64_t)n * NPL_CPUW_ENTRY_BYTES;
    for (size_t i = 0; i < n; i++) {
        uintptr_t d = (uintptr_t)mats[i]->data;
        size_t bytes = npl_matmul_ws_pack_size(ws, mats[i]);
        if (bytes == 0 || d < base || (uint64_t)(d - base) >= size)
            return false;
        e[i].source_offset = (uint64_t)(d - base);
        e[i].type = mats[i]->type;
        e[i].rows = mats[i]->n_rows;
        e[i].cols = mats[i]->n_cols;
        e[i].offset = (end + NPL_CPUW_DATA_ALIGN - 1) / NPL_CPUW_DATA_ALIGN * NPL_CPUW_DATA_ALIGN;
        e[i].bytes = bytes;
        end = e[i].offset + bytes;
    }
    *file_bytes = end;
    return true;
}

static void encode_table(const cache_entry *e, size_t n, uint8_t *table)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = table + i * NPL_CPUW_ENTRY_BYTES;
        npl_put_le64(p, e[i].source_offset);
        npl_put_le32(p + 8, e[i].type);
        npl_put_le32(p + 12, 0);
        npl_put_le64(p + 16, (uint64_t)e[i].rows);
        npl_put_le64(p + 24, (uint64_t)e[i].cols);
        npl_put_le64(p + 32, e[i].offset);
        npl_put_le64(p + 40, e[i].bytes);
        npl_put_le64(p + 48, e[i].checksum);
    }
}

static void encode_header(const npl_q4nx_cache_key *key, size_t n, uint64_t file_bytes,
                          uint64_t table_checksum, uint8_t *h)
{
    memset(h, 0, NPL_CPUW_HEADER_BYTES);
    memcpy(h + NPL_CPUW_MAGIC, NPL_CPU_WEIGHT_CACHE_MAGIC, 8);
    npl_put_le32(h + NPL_CPUW_VERSION, NPL_CPU_WEIGHT_CACHE_VERSION);
    npl_put_le32(h + NPL_CPUW_LAYOUT, npl_matmul_pack_layout_version());
    npl_put_le64(h + NPL_CPUW_SOURCE_SIZE, key->source_size);
    npl_put_le64(h + NPL_CPUW_SOURCE_MTIME, (uint64_t)key->source_mtime_ns);
    npl_put_le64(h + NPL_CPUW_SOURCE_DIGEST, key->source_digest);
    npl_put_le32(h + NPL_CPUW_COUNT, (uint32_t)n);
    npl_put_le64(h + NPL_CPUW_FILE_BYTES, file_bytes);
    npl_put_le64(h + NPL_CPUW_TABLE_CHECKSUM, table_checksum);
    npl_put_le64(h + NPL_CPUW_HEADER_CHECKSUM, npl_q4nx_checksum(h, NPL_CPUW_HEADER_CHECKSUM, 0));
}

/* ---- reading ------------------------------------------------------------ */

/* Reads n bytes at offset; false on error or a short file. */
static bool read_exact(int fd, void *dst, size_t n, uint64_t offset)
{
    uint8_t *p = dst;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)offset);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return true;
}

/* Why the header h of a file of file_bytes does not describe the cache
 * that want (the planned entries) would be, or NULL when it does. */
static const char *header_mismatch(const uint8_t *h, uint64_t file_bytes,
                                   const npl_q4nx_cache_key *key, size_t n, uint64_t want_bytes)
{
    if (memcmp(h + NPL_CPUW_MAGIC, NPL_CPU_WEIGHT_CACHE_MAGIC, 8) != 0)
        return "damaged (bad magic)";
    if (npl_q4nx_checksum(h, NPL_CPUW_HEADER_CHECKSUM, 0) != npl_get_le64(h + NPL_CPUW_HEADER_CHECKSUM))
        return "damaged (header checksum)";
    if (npl_get_le32(h + NPL_CPUW_VERSION) != NPL_CPU_WEIGHT_CACHE_VERSION)
        return "stale (another file format version)";
    if (npl_get_le32(h + NPL_CPUW_LAYOUT) != npl_matmul_pack_layout_version())
        return "stale (made for another packed layout version)";
    if (npl_get_le64(h + NPL_CPUW_SOURCE_SIZE) != key->source_size
        || (int64_t)npl_get_le64(h + NPL_CPUW_SOURCE_MTIME) != key->source_mtime_ns
        || npl_get_le64(h + NPL_CPUW_SOURCE_DIGEST) != key->source_digest)
        return "stale (made from another model file)";
    if (npl_get_le32(h + NPL_CPUW_COUNT) != n || npl_get_le64(h + NPL_CPUW_FILE_BYTES) != want_bytes)
        return "stale (other matrices)";
    if (file_bytes != want_bytes)
        return "damaged (wrong size: truncated or extended)";
    return NULL;
}

/* Whether the first row group of the first matrix of each type in the
 * mapped cache is what this build's packer makes of it: a layout changed
 * without a bump of its version is noticed too (a few KiB packed per
 * type). */
static bool same_packing(const uint8_t *map, const cache_entry *e, const npl_matrix *const *mats,
                         size_t n)
{
    bool same = true;
    for (size_t i = 0; i < n && same; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = mats[j]->type == mats[i]->type;
        if (seen)
            continue;
        size_t cap = (size_t)(e[i].bytes / (uint64_t)((e[i].rows + 15) / 16)); /* >= one group */
        uint8_t *probe = aligned_alloc(64, (cap + 63) & ~(size_t)63);
        size_t got = probe ? npl_matmul_pack_first_group(mats[i], probe, cap) : 0;
        same = got > 0 && memcmp(probe, map + e[i].offset, got) == 0;
        free(probe);
    }
    return same;
}

/* Maps dir/name when it is a valid cache of the planned entries e (their
 * checksums filled from the file) and adopts its pages as ws's packed
 * copies; NULL, with the reason noted, otherwise. */
static npl_cpu_weight_cache *open_cache(const char *path, const npl_q4nx_cache_key *key,
                                        cache_entry *e, size_t n, uint64_t want_bytes,
                                        npl_matmul_ws *ws, const npl_matrix *const *mats,
                                        npl_weight_cache_stats *report)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            note_add(report, "weight cache: none at %s", path);
        else
            note_add(report, "weight cache: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    const char *why = NULL;
    struct stat st;
    uint8_t h[NPL_CPUW_HEADER_BYTES];
    size_t table_bytes = n * NPL_CPUW_ENTRY_BYTES;
    uint8_t *table = malloc(table_bytes ? table_bytes : 1);
    if (!table)
        why = "no memory for its table";
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (!read_exact(fd, h, sizeof h, 0))
        why = "damaged (shorter than its header)";
    else if (!(why = header_mismatch(h, (uint64_t)st.st_size, key, n, want_bytes))
             && (!read_exact(fd, table, table_bytes, NPL_CPUW_HEADER_BYTES)
                 || npl_q4nx_checksum(table, table_bytes, 0) != npl_get_le64(h + NPL_CPUW_TABLE_CHECKSUM)))
        why = "damaged (table checksum)";
    for (size_t i = 0; !why && i < n; i++) {
        const uint8_t *p = table + i * NPL_CPUW_ENTRY_BYTES;
        if (npl_get_le64(p) != e[i].source_offset || npl_get_le32(p + 8) != e[i].type
            || (int64_t)npl_get_le64(p + 16) != e[i].rows || (int64_t)npl_get_le64(p + 24) != e[i].cols
            || npl_get_le64(p + 32) != e[i].offset || npl_get_le64(p + 40) != e[i].bytes)
            why = "stale (other matrices)";
        e[i].checksum = npl_get_le64(p + 48);
    }
    free(table);
    void *map = MAP_FAILED;
    if (!why && want_bytes <= SIZE_MAX) {
        /* Populated now: the first token reads every page anyway, and
         * faulting them in one call is cheaper than one fault at a time. */
        map = mmap(NULL, (size_t)want_bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (map == MAP_FAILED)
            note_add(report, "weight cache: cannot map %s: %s", path, strerror(errno));
    }
    close(fd);
    if (why)
        note_add(report, "weight cache: %s is %s", path, why);
    if (map == MAP_FAILED)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (sample_checksum((const uint8_t *)map + e[i].offset, e[i].bytes) != e[i].checksum) {
            note_add(report, "weight cache: %s is damaged (checksum of matrix %zu)", path, i);
            munmap(map, (size_t)want_bytes);
            return NULL;
        }
    if (!same_packing(map, e, mats, n)) {
        note_add(report, "weight cache: %s is stale (its packed bytes are not this build's)", path);
        munmap(map, (size_t)want_bytes);
        return NULL;
    }
    npl_cpu_weight_cache *c = malloc(sizeof *c);
    if (!c) {
        munmap(map, (size_t)want_bytes);
        note_add(report, "weight cache: no memory");
        return NULL;
    }
    c->map = map;
    c->bytes = (size_t)want_bytes;
    c->job = NULL;
    for (size_t i = 0; i < n; i++)
        if (npl_matmul_ws_adopt_packed(ws, mats[i], (const uint8_t *)map + e[i].offset))
            report->matrices_cached++;
    note_add(report, "weight cache: mapped %u matrices from %s", report->matrices_cached, path);
    return c;
}

/* ---- writing ------------------------------------------------------------ */

static bool write_all(int fd, const void *data, size_t n, uint64_t offset)
{
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)offset);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO; /* no progress: never report success */
            return false;
        }
        p += w;
        n -= (size_t)w;
        offset += (uint64_t)w;
    }
    return true;
}

/* Writes the job's packed copies as its dir/name: a temporary file in
 * dir, its space reserved first (a full disk is found before any data is
 * written), synced and renamed into place. Notes why not on failure. */
static void write_cache(write_job *j)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s/.%s.tmp.XXXXXX", j->dir, j->name) >= (int)sizeof tmp) {
        note_add(j, "; not written: path too long");
        return;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        note_add(j, "; not written: cannot create a file in %s: %s", j->dir, strerror(errno));
        return;
    }
    size_t table_bytes = j->n * NPL_CPUW_ENTRY_BYTES;
    uint8_t *table = calloc(1, table_bytes ? table_bytes : 1);
    const char *step = "no memory";
    int rc = ENOMEM;
    if (table && (uint64_t)(off_t)j->file_bytes == j->file_bytes
        && (rc = posix_fallocate(fd, 0, (off_t)j->file_bytes)) != 0)
        step = "cannot reserve its space";
    else if (table) {
        rc = 0;
        for (size_t i = 0; i < j->n && rc == 0; i++) {
            j->e[i].checksum = sample_checksum(j->data[i], j->e[i].bytes);
            if (!write_all(fd, j->data[i], (size_t)j->e[i].bytes, j->e[i].offset)) {
                step = "write failed";
                rc = errno;
            }
        }
        uint8_t h[NPL_CPUW_HEADER_BYTES];
        encode_table(j->e, j->n, table);
        encode_header(&j->key, j->n, j->file_bytes, npl_q4nx_checksum(table, table_bytes, 0), h);
        if (rc == 0 && (!write_all(fd, table, table_bytes, NPL_CPUW_HEADER_BYTES)
                        || !write_all(fd, h, sizeof h, 0))) {
            step = "write failed";
            rc = errno;
        }
        if (rc == 0 && fsync(fd) != 0) {
            step = "fsync failed";
            rc = errno;
        }
        if (rc == 0 && fchmod(fd, 0644) != 0) {
            step = "chmod failed";
            rc = errno;
        }
        if (rc == 0 && rename(tmp, j->path) != 0) {
            step = "rename failed";
            rc = errno;
        }
    }
    free(table);
    close(fd);
    if (rc != 0) {
        unlink(tmp);
        note_add(j, "; not written (%s: %s)", step, strerror(rc));
        return;
    }
    j->written = true;
    note_add(j, "; wrote %s", j->path);
}

static void *write_thread(void *arg)
{
    write_cache(arg);
    return NULL;
}

bool npl_cpu_weight_cache_wait(npl_cpu_weight_cache *c, npl_weight_cache_stats *report)
{
    if (!c || !c->job)
        return false;
    pthread_join(c->thread, NULL);
    if (report) {
        report->writing = false;
        report->written = c->job->written;
        note_add(report, "%s", c->job->note);
    }
    job_free(c->job);
    c->job = NULL;
    return true;
}

/* Starts writing the cache of the planned entries e from ws's packed
 * copies of mats (on a thread; here when none can be started): a handle
 * to wait for, or NULL with the reason noted. */
static npl_cpu_weight_cache *start_write(const char *dir, const char *name, const char *path,
                                         const npl_q4nx_cache_key *key, const cache_entry *e,
                                         size_t n, uint64_t file_bytes, const npl_matmul_ws *ws,
                                         const npl_matrix *const *mats,
                                         npl_weight_cache_stats *report)
{
    write_job *j = calloc(1, sizeof *j);
    npl_cpu_weight_cache *c = calloc(1, sizeof *c);
    if (j) {
        j->e = malloc((n ? n : 1) * sizeof *j->e);
        j->data = malloc((n ? n : 1) * sizeof *j->data);
    }
    if (!j || !c || !j->e || !j->data) {
        job_free(j);
        free(c);
        note_add(report, "; not written: no memory");
        return NULL;
    }
    snprintf(j->dir, sizeof j->dir, "%s", dir);
    snprintf(j->name, sizeof j->name, "%s", name);
    snprintf(j->path, sizeof j->path, "%s", path);
    j->key = *key;
    memcpy(j->e, e, n * sizeof *e);
    j->n = n;
    j->file_bytes = file_bytes;
    for (size_t i = 0; i < n; i++)
        if (!(j->data[i] = npl_matmul_ws_packed(ws, mats[i]))) {
            job_free(j);
            free(c);
            note_add(report, "; not written: a matrix was not repacked");
            return NULL;
        }
    c->job = j;
    if (pthread_create(&c->thread, NULL, write_thread, j) != 0) {
        write_cache(j);
        report->written = j->written;
        note_add(report, "%s", j->note);
        job_free(j);
        free(c);
        return NULL;
    }
    report->writing = true;
    return c;
}

/* ---- at load -------------------------------------------------------------- */

npl_cpu_weight_cache *npl_cpu_weights_prepare(const npl_gguf *g, const char *cache_dir,
                                              npl_matmul_ws *ws, npl_threadpool *pool,
                                              const npl_matrix *const *mats, size_t n,
                                              npl_weight_cache_stats *report)
{
    memset(report, 0, sizeof *report);
    if (!cache_dir || !cache_dir[0])
        return NULL; /* repacked on first use, as without a cache */
    /* Only the matrices ws repacks (none without AVX2). */
    const npl_matrix **packed = malloc((n ? n : 1) * sizeof *packed);
    cache_entry *e = calloc(n ? n : 1, sizeof *e);
    size_t k = 0;
    for (size_t i = 0; packed && i < n; i++)
        if (npl_matmul_ws_pack_size(ws, mats[i]) > 0)
            packed[k++] = mats[i];
    char dir[PATH_MAX], name[NAME_MAX + 1], why[160], path[PATH_MAX + NAME_MAX + 2];
    npl_q4nx_cache_key key;
    npl_error sub;
    npl_error_clear(&sub);
    uint64_t file_bytes = 0;
    npl_cpu_weight_cache *c = NULL;
    bool use = false;
    if (!packed || !e)
        note_add(report, "weight cache: no memory");
    else if (k == 0)
        note_add(report, "weight cache: no matrices to repack on this CPU");
    else if (!npl_weight_cache_place(npl_gguf_path(g), cache_dir, NPL_CPU_WEIGHT_CACHE_SUFFIX,
                                     "weight cache", dir, sizeof dir, name, sizeof name, why,
                                     sizeof why))
        note_add(report, "%s", why);
    else if (npl_q4nx_cache_key_from_file(npl_gguf_path(g), source_digest(g), &key, &sub) != NPL_OK)
        note_add(report, "weight cache off: %s", sub.message);
    else if (!plan_entries(g, ws, packed, k, e, &file_bytes))
        note_add(report, "weight cache off: a matrix lies outside the model file");
    else
        use = true;
    if (use) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        c = open_cache(path, &key, e, k, file_bytes, ws, packed, report);
    }
    if (!c && k > 0 && packed) {
        /* Repacked now rather than on first use, to be written below. */
        bool all = true;
        for (size_t i = 0; i < k; i++) {
            bool had = npl_matmul_ws_packed(ws, packed[i]) != NULL;
            bool ok = npl_matmul_ws_prepack(ws, pool, packed[i]);
            all = all && ok;
            report->matrices_packed += ok && !had;
        }
        note_add(report, "; repacked %u matrices", report->matrices_packed);
        if (use && !all)
            note_add(report, "; not written: no memory for every packed copy");
        else if (use)
            c = start_write(dir, name, path, &key, e, k, file_bytes, ws, packed, report);
    }
    free(packed);
    free(e);
    return c;
}

void npl_model_cpu_weights_prepare(npl_model *m, const char *cache_dir)
{
    size_t cap = (size_t)m->hp.n_layer * 9 + 2, n = 0;
    const npl_matrix **mats = malloc(cap * sizeof *mats);
    if (!mats) {
        memset(&m->weight_cache_stats, 0, sizeof m->weight_cache_stats);
        snprintf(m->weight_cache_stats.note, sizeof m->weight_cache_stats.note, "weight cache: no memory");
        return;
    }
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const npl_layer *L = &m->layers[l];
        const npl_matrix *list[] = {&L->wq,     &L->wk,   &L->wv,       &L->wo,      &L->w_gate,
                                    &L->w_up,   &L->w_down, &L->ple_gate, &L->ple_proj};
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
            if (list[i]->data) /* not a layer's missing projection (gemma4's shared KV) */
                mats[n++] = list[i];
    }
    mats[n++] = &m->output;
    if (m->ple_model_proj.data) /* gemma4 */
        mats[n++] = &m->ple_model_proj;
    /* Each matrix once (a tied output is the token embeddings). */
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < u && !seen; j++)
            seen = mats[j]->data == mats[i]->data;
        if (!seen)
            mats[u++] = mats[i];
    }
    m->weight_cache = npl_cpu_weights_prepare(m->gguf, cache_dir, m->mm_ws, m->pool, mats, u,
                                              &m->weight_cache_stats);
    free(mats);
}

void npl_model_weight_cache_stats(const npl_model *m, npl_weight_cache_stats *out)
{
    if (!out)
        return;
    if (!m) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = m->weight_cache_stats;
    if (out->writing)
        note_add(out, "; writing %s in the background", m->weight_cache->job->path);
}

bool npl_model_weight_cache_wait(npl_model *m)
{
    return m && npl_cpu_weight_cache_wait(m->weight_cache, &m->weight_cache_stats);
}
