#include "q4nx_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "le_bytes.h"

/* Header field offsets (all little-endian). */
enum {
    HDR_MAGIC = 0,
    HDR_VERSION = 8,
    HDR_HEADER_BYTES = 12,
    HDR_SOURCE_SIZE = 16,
    HDR_SOURCE_MTIME = 24,
    HDR_SOURCE_DIGEST = 32,
    HDR_TABLE_OFFSET = 40,
    HDR_TENSOR_COUNT = 48,
    HDR_TABLE_BYTES = 52,
    HDR_TABLE_CHECKSUM = 56,
};

/* Entry: u16 name length, name, u32 type, u32 rows, u32 cols,
 * u64 offset, u64 bytes, u64 checksum. */
#define ENTRY_FIXED_BYTES (2u + 4u * 3u + 8u * 3u)

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t npl_q4nx_checksum(const void *data, size_t n, uint64_t seed)
{
    const uint8_t *p = data;
    uint64_t h = seed ^ 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = npl_get_le64(p + i);
        h = rotl64(h ^ (w * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full;
    }
    uint64_t tail = 0;
    for (size_t k = 0; i + k < n; k++)
        tail |= (uint64_t)p[i + k] << (8 * k);
    h = rotl64(h ^ (tail * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h;
}

npl_status npl_q4nx_cache_key_from_file(const char *model_path, uint64_t digest,
                                        npl_q4nx_cache_key *key, npl_error *err)
{
    struct stat st;
    if (!model_path || !key)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx cache: missing model path or key");
    if (stat(model_path, &st) != 0)
        return npl_error_set(err, NPL_ERR_IO, "q4nx cache: cannot stat %s: %s", model_path,
                             strerror(errno));
    key->source_size = (uint64_t)st.st_size;
    key->source_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    key->source_digest = digest;
    return NPL_OK;
}

static bool join_path(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n > 0 && (size_t)n < cap;
}

/* A file name, not a path: the cache lives exactly in the given dir. */
static bool plain_file_name(const char *name)
{
    return name && name[0] && !strchr(name, '/') && strcmp(name, ".") != 0
        && strcmp(name, "..") != 0;
}

typedef struct cache_entry {
    char *name;
    uint32_t src_type;
    npl_q4nx_layout layout;
    uint64_t offset, bytes, checksum;
} cache_entry;

struct npl_q4nx_cache_writer {
    int fd;
    char tmp_path[PATH_MAX];
    char final_path[PATH_MAX];
    npl_q4nx_cache_key key;
    uint64_t end;          /* bytes written so far */
    cache_entry *entries;
    size_t count, cap;
};

static npl_status write_all(int fd, const void *data, size_t n, uint64_t offset, npl_error *err)
{
    const uint8_t *p = data;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t w = pwrite(fd, p, chunk, (off_t)offset);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return npl_error_set(err, NPL_ERR_IO, "q4nx cache: write failed: %s", strerror(errno));
        }
        p += w;
        n -= (size_t)w;
        offset += (uint64_t)w;
    }
    return NPL_OK;
}

void npl_q4nx_cache_writer_abort(npl_q4nx_cache_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->tmp_path);
    }
    for (size_t i = 0; i < w->count; i++)
        free(w->entries[i].name);
    free(w->entries);
    free(w);
}

npl_status npl_q4nx_cache_writer_open(const char *dir, const char *file_name,
                                      const npl_q4nx_cache_key *key,
                                      npl_q4nx_cache_writer **out, npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx cache: no output pointer");
    *out = NULL;
    if (!dir || !key || !plain_file_name(file_name))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "q4nx cache: need a directory, a key and a plain file name");
    npl_q4nx_cache_writer *w = calloc(1, sizeof *w);
    if (!w)
        return npl_error_set(err, NPL_ERR_NOMEM, "q4nx cache: no memory for a writer");
    w->fd = -1;
    w->key = *key;
    if (!join_path(w->final_path, sizeof w->final_path, dir, file_name)
        || snprintf(w->tmp_path, sizeof w->tmp_path, "%s/.%s.tmp.XXXXXX", dir, file_name)
               >= (int)sizeof w->tmp_path) {
        free(w);
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx cache: path too long");
    }
    w->fd = mkstemp(w->tmp_path);
    if (w->fd < 0) {
        npl_error_set(err, NPL_ERR_IO, "q4nx cache: cannot create a file in %s: %s", dir,
                      strerror(errno));
        free(w);
        return NPL_ERR_IO;
    }
    uint8_t zeros[NPL_Q4NX_CACHE_HEADER_BYTES] = {0};
    npl_status st = write_all(w->fd, zeros, sizeof zeros, 0, err);
    if (st != NPL_OK) {
        npl_q4nx_cache_writer_abort(w);
        return st;
    }
    w->end = sizeof zeros;
    *out = w;
    return NPL_OK;
}

npl_status npl_q4nx_cache_writer_add(npl_q4nx_cache_writer *w, const char *name,
                                     uint32_t src_type, const npl_q4nx_layout *layout,
                                     const void *data, npl_error *err)
{
    if (!w || !name || !layout || !data)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx cache: missing tensor argument");
    size_t name_len = strlen(name);
    if (name_len == 0 || name_len > NPL_Q4NX_CACHE_NAME_MAX)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "q4nx cache: tensor name must be 1..%u bytes",
                             NPL_Q4NX_CACHE_NAME_MAX);
    for (size_t i = 0; i < w->count; i++)
        if (strcmp(w->entries[i].name, name) == 0)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "q4nx cache: tensor %s added twice", name);
    if (w->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        cache_entry *e = realloc(w->entries, cap * sizeof *e);
        if (!e)
            return npl_error_set(err, NPL_ERR_NOMEM, "q4nx cache: no memory for the table");
        w->entries = e;
        w->cap = cap;
    }
    cache_entry *e = &w->entries[w->count];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name)
        return npl_error_set(err, NPL_ERR_NOMEM, "q4nx cache: no memory for a name");
    uint64_t offset = (w->end + NPL_Q4NX_CACHE_ALIGN - 1) / NPL_Q4NX_CACHE_ALIGN * NPL_Q4NX_CACHE_ALIGN;
    npl_status st = write_all(w->fd, data, layout->bytes, offset, err);
    if (st != NPL_OK) {
        free(e->name);
        return st;
    }
    e->src_type = src_type;
    e->layout = *layout;
    e->offset = offset;
    e->bytes = layout->bytes;
    e->checksum = npl_q4nx_checksum(data, layout->bytes, 0);
    w->end = offset + layout->bytes;
    w->count++;
    return NPL_OK;
}

npl_status npl_q4nx_cache_writer_commit(npl_q4nx_cache_writer *w, npl_error *err)
{
    if (!w)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx cache: no writer");
    size_t table_bytes = 0;
    for (size_t i = 0; i < w->count; i++)
        table_bytes += ENTRY_FIXED_BYTES + strlen(w->entries[i].name);
    if (table_bytes > UINT32_MAX || w->count > UINT32_MAX) {
        npl_q4nx_cache_writer_abort(w);
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx cache: too many tensors");
    }
    uint8_t *table = malloc(table_bytes ? table_bytes : 1);
    if (!table) {
        npl_q4nx_cache_writer_abort(w);
        return npl_error_set(err, NPL_ERR_NOMEM, "q4nx cache: no memory for the table");
    }
    uint8_t *p = table;
    for (size_t i = 0; i < w->count; i++) {
        const cache_entry *e = &w->entries[i];
        size_t len = strlen(e->name);
        npl_put_le16(p, (uint16_t)len);
        memcpy(p + 2, e->name, len);
        p += 2 + len;
        npl_put_le32(p, e->src_type);
        npl_put_le32(p + 4, e->layout.rows);
        npl_put_le32(p + 8, e->layout.cols);
        npl_put_le64(p + 12, e->offset);
        npl_put_le64(p + 20, e->bytes);
        npl_put_le64(p + 28, e->checksum);
        p += ENTRY_FIXED_BYTES - 2;
    }
    uint8_t hdr[NPL_Q4NX_CACHE_HEADER_BYTES] = {0};
    memcpy(hdr + HDR_MAGIC, NPL_Q4NX_CACHE_MAGIC, 8);
    npl_put_le32(hdr + HDR_VERSION, NPL_Q4NX_CACHE_VERSION);
    npl_put_le32(hdr + HDR_HEADER_BYTES, NPL_Q4NX_CACHE_HEADER_BYTES);
    npl_put_le64(hdr + HDR_SOURCE_SIZE, w->key.source_size);
    npl_put_le64(hdr + HDR_SOURCE_MTIME, (uint64_t)w->key.source_mtime_ns);
    npl_put_le64(hdr + HDR_SOURCE_DIGEST, w->key.source_digest);
    npl_put_le64(hdr + HDR_TABLE_OFFSET, w->end);
    npl_put_le32(hdr + HDR_TENSOR_COUNT, (uint32_t)w->count);
    npl_put_le32(hdr + HDR_TABLE_BYTES, (uint32_t)table_bytes);
    npl_put_le64(hdr + HDR_TABLE_CHECKSUM, npl_q4nx_checksum(table, table_bytes, 0));
    npl_status st = write_all(w->fd, table, table_bytes, w->end, err);
    free(table);
    if (st == NPL_OK)
        st = write_all(w->fd, hdr, sizeof hdr, 0, err);
    if (st == NPL_OK && fsync(w->fd) != 0)
        st = npl_error_set(err, NPL_ERR_IO, "q4nx cache: fsync failed: %s", strerror(errno));
    if (st == NPL_OK && fchmod(w->fd, 0644) != 0)
        st = npl_error_set(err, NPL_ERR_IO, "q4nx cache: chmod failed: %s", strerror(errno));
    if (st == NPL_OK && rename(w->tmp_path, w->final_path) != 0)
        st = npl_error_set(err, NPL_ERR_IO, "q4nx cache: cannot rename to %s: %s",
                           w->final_path, strerror(errno));
    if (st != NPL_OK) {
        npl_q4nx_cache_writer_abort(w);
        return st;
    }
    close(w->fd);
    w->fd = -1;
    npl_q4nx_cache_writer_abort(w); /* frees; nothing left to unlink */
    return NPL_OK;
}

/* A cache opened mapped (map set, every checksum verified at open) or
 * unmapped (fd set, each tensor verified as npl_q4nx_cache_read reads it). */
struct npl_q4nx_cache {
    const uint8_t *map;
    size_t map_bytes;
    int fd;
    char path[PATH_MAX]; /* for messages */
    cache_entry *entries;
    size_t count;
};

void npl_q4nx_cache_close(npl_q4nx_cache *c)
{
    if (!c)
        return;
    if (c->map)
        munmap((void *)(uintptr_t)c->map, c->map_bytes);
    if (c->fd >= 0)
        close(c->fd);
    for (size_t i = 0; i < c->count; i++)
        free(c->entries[i].name);
    free(c->entries);
    free(c);
}

static npl_status corrupt(npl_q4nx_cache_state *state, npl_error *err, const char *path,
                          const char *why)
{
    *state = NPL_Q4NX_CACHE_CORRUPT;
    return npl_error_set(err, NPL_ERR_FORMAT, "q4nx cache %s is damaged: %s", path, why);
}

/* Reads n bytes at offset; *short_read when the file ends first. */
static npl_status read_exact(int fd, void *dst, size_t n, uint64_t offset, bool *short_read,
                             const char *path, npl_error *err)
{
    uint8_t *p = dst;
    *short_read = false;
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        ssize_t r = pread(fd, p, chunk, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return npl_error_set(err, NPL_ERR_IO, "q4nx cache: cannot read %s: %s", path,
                                 strerror(errno));
        }
        if (r == 0) {
            *short_read = true;
            return NPL_ERR_FORMAT;
        }
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return NPL_OK;
}

/* Entries from the table; each tensor's checksum too when the file is
 * mapped (an unmapped cache checks it on read). */
static npl_status parse_table(npl_q4nx_cache *c, const uint8_t *table, size_t table_bytes,
                              uint32_t count, uint64_t data_end, const char *path,
                              npl_q4nx_cache_state *state, npl_error *err)
{
    if (count > table_bytes / (ENTRY_FIXED_BYTES + 1))
        return corrupt(state, err, path, "tensor count does not fit the table");
    c->entries = calloc(count ? count : 1, sizeof *c->entries);
    if (!c->entries)
        return npl_error_set(err, NPL_ERR_NOMEM, "q4nx cache: no memory for the table");
    const uint8_t *p = table, *end = table + table_bytes;
    for (uint32_t i = 0; i < count; i++) {
        if ((size_t)(end - p) < ENTRY_FIXED_BYTES)
            return corrupt(state, err, path, "table ends inside an entry");
        uint16_t len = npl_get_le16(p);
        if (len == 0 || len > NPL_Q4NX_CACHE_NAME_MAX
            || (size_t)(end - p) < ENTRY_FIXED_BYTES + len)
            return corrupt(state, err, path, "bad tensor name length");
        cache_entry *e = &c->entries[i];
        e->name = malloc((size_t)len + 1);
        if (!e->name)
            return npl_error_set(err, NPL_ERR_NOMEM, "q4nx cache: no memory for a name");
        c->count = i + 1;
        memcpy(e->name, p + 2, len);
        e->name[len] = '\0';
        if (memchr(e->name, '\0', len))
            return corrupt(state, err, path, "tensor name contains a NUL byte");
        p += 2 + len;
        e->src_type = npl_get_le32(p);
        uint32_t rows = npl_get_le32(p + 4), cols = npl_get_le32(p + 8);
        e->offset = npl_get_le64(p + 12);
        e->bytes = npl_get_le64(p + 20);
        e->checksum = npl_get_le64(p + 28);
        p += ENTRY_FIXED_BYTES - 2;
        if (npl_q4nx_layout_init(&e->layout, rows, cols, NULL) != NPL_OK
            || e->layout.bytes != e->bytes)
            return corrupt(state, err, path, "tensor shape does not match its size");
        if (e->offset % NPL_Q4NX_CACHE_ALIGN || e->offset < NPL_Q4NX_CACHE_HEADER_BYTES
            || e->offset > data_end || e->bytes > data_end - e->offset)
            return corrupt(state, err, path, "tensor data lies outside the file");
        if (c->map && npl_q4nx_checksum(c->map + e->offset, (size_t)e->bytes, 0) != e->checksum) {
            char why[NPL_Q4NX_CACHE_NAME_MAX + 64];
            snprintf(why, sizeof why, "checksum mismatch in tensor %s", e->name);
            return corrupt(state, err, path, why);
        }
    }
    if (p != end)
        return corrupt(state, err, path, "table has trailing bytes");
    return NPL_OK;
}

/* Checks magic, version, key and where the table lies in a file of
 * file_bytes. */
static npl_status check_header(const uint8_t *h, uint64_t file_bytes,
                               const npl_q4nx_cache_key *key, const char *path,
                               uint64_t *table_offset, uint32_t *table_bytes,
                               npl_q4nx_cache_state *state, npl_error *err)
{
    if (memcmp(h + HDR_MAGIC, NPL_Q4NX_CACHE_MAGIC, 8) != 0)
        return corrupt(state, err, path, "bad magic");
    if (npl_get_le32(h + HDR_VERSION) != NPL_Q4NX_CACHE_VERSION) {
        *state = NPL_Q4NX_CACHE_STALE;
        return npl_error_set(err, NPL_ERR_FORMAT, "q4nx cache %s has format version %u, not %u",
                             path, npl_get_le32(h + HDR_VERSION), NPL_Q4NX_CACHE_VERSION);
    }
    if (npl_get_le32(h + HDR_HEADER_BYTES) != NPL_Q4NX_CACHE_HEADER_BYTES)
        return corrupt(state, err, path, "bad header size");
    if (npl_get_le64(h + HDR_SOURCE_SIZE) != key->source_size
        || (int64_t)npl_get_le64(h + HDR_SOURCE_MTIME) != key->source_mtime_ns
        || npl_get_le64(h + HDR_SOURCE_DIGEST) != key->source_digest) {
        *state = NPL_Q4NX_CACHE_STALE;
        return npl_error_set(err, NPL_ERR_FORMAT,
                             "q4nx cache %s was made from a different model file", path);
    }
    *table_offset = npl_get_le64(h + HDR_TABLE_OFFSET);
    *table_bytes = npl_get_le32(h + HDR_TABLE_BYTES);
    if (*table_offset < NPL_Q4NX_CACHE_HEADER_BYTES || *table_offset > file_bytes
        || *table_bytes != file_bytes - *table_offset)
        return corrupt(state, err, path, "table lies outside the file");
    return NPL_OK;
}

/* Opens dir/file_name, a regular file at least a header long: a new
 * cache holding its path and open fd. */
static npl_status open_file(const char *dir, const char *file_name, npl_q4nx_cache **out,
                            uint64_t *file_bytes, npl_q4nx_cache_state *state, npl_error *err)
{
    char path[PATH_MAX];
    if (!dir || !plain_file_name(file_name) || !join_path(path, sizeof path, dir, file_name))
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "q4nx cache: need a directory, a key and a plain file name");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            *state = NPL_Q4NX_CACHE_MISSING;
        return npl_error_set(err, NPL_ERR_IO, "q4nx cache: cannot open %s: %s", path,
                             strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return corrupt(state, err, path, "not a regular file");
    }
    if ((uint64_t)st.st_size < NPL_Q4NX_CACHE_HEADER_BYTES) {
        close(fd);
        return corrupt(state, err, path, "shorter than its header");
    }
    npl_q4nx_cache *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return npl_error_set(err, NPL_ERR_NOMEM, "q4nx cache: no memory");
    }
    c->fd = fd;
    memcpy(c->path, path, sizeof path);
    *out = c;
    *file_bytes = (uint64_t)st.st_size;
    return NPL_OK;
}

/* The checks both opens share before open_file. */
static npl_status open_args(const npl_q4nx_cache_key *key, npl_q4nx_cache **out,
                            npl_q4nx_cache_state *state, npl_error *err)
{
    *state = NPL_Q4NX_CACHE_CORRUPT;
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx cache: no output pointer");
    *out = NULL;
    if (!key)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "q4nx cache: need a directory, a key and a plain file name");
    return NPL_OK;
}

npl_status npl_q4nx_cache_open(const char *dir, const char *file_name,
                               const npl_q4nx_cache_key *key, npl_q4nx_cache **out,
                               npl_q4nx_cache_state *state_out, npl_error *err)
{
    npl_q4nx_cache_state state_local;
    npl_q4nx_cache_state *state = state_out ? state_out : &state_local;
    npl_status rc = open_args(key, out, state, err);
    npl_q4nx_cache *c = NULL;
    uint64_t file_bytes = 0;
    if (rc != NPL_OK || (rc = open_file(dir, file_name, &c, &file_bytes, state, err)) != NPL_OK)
        return rc;
    if (file_bytes > SIZE_MAX) {
        rc = corrupt(state, err, c->path, "larger than the address space");
        npl_q4nx_cache_close(c);
        return rc;
    }
    c->map_bytes = (size_t)file_bytes;
    void *m = mmap(NULL, c->map_bytes, PROT_READ, MAP_PRIVATE, c->fd, 0);
    close(c->fd);
    c->fd = -1;
    if (m == MAP_FAILED) {
        rc = npl_error_set(err, NPL_ERR_IO, "q4nx cache: cannot map %s: %s", c->path,
                           strerror(errno));
        npl_q4nx_cache_close(c);
        return rc;
    }
    c->map = m;
    uint64_t table_offset = 0;
    uint32_t table_bytes = 0;
    rc = check_header(c->map, file_bytes, key, c->path, &table_offset, &table_bytes, state, err);
    if (rc == NPL_OK
        && npl_q4nx_checksum(c->map + table_offset, table_bytes, 0)
               != npl_get_le64(c->map + HDR_TABLE_CHECKSUM))
        rc = corrupt(state, err, c->path, "table checksum mismatch");
    if (rc == NPL_OK)
        rc = parse_table(c, c->map + table_offset, table_bytes,
                         npl_get_le32(c->map + HDR_TENSOR_COUNT), table_offset, c->path, state, err);
    if (rc != NPL_OK) {
        npl_q4nx_cache_close(c);
        return rc;
    }
    *state = NPL_Q4NX_CACHE_VALID;
    *out = c;
    return NPL_OK;
}

npl_status npl_q4nx_cache_open_unmapped(const char *dir, const char *file_name,
                                        const npl_q4nx_cache_key *key, npl_q4nx_cache **out,
                                        npl_q4nx_cache_state *state_out, npl_error *err)
{
    npl_q4nx_cache_state state_local;
    npl_q4nx_cache_state *state = state_out ? state_out : &state_local;
    npl_status rc = open_args(key, out, state, err);
    npl_q4nx_cache *c = NULL;
    uint64_t file_bytes = 0;
    if (rc != NPL_OK || (rc = open_file(dir, file_name, &c, &file_bytes, state, err)) != NPL_OK)
        return rc;
    uint8_t h[NPL_Q4NX_CACHE_HEADER_BYTES];
    uint8_t *table = NULL;
    uint64_t table_offset = 0;
    uint32_t table_bytes = 0;
    bool short_read = false;
    rc = read_exact(c->fd, h, sizeof h, 0, &short_read, c->path, err);
    if (rc == NPL_OK)
        rc = check_header(h, file_bytes, key, c->path, &table_offset, &table_bytes, state, err);
    if (rc == NPL_OK && !(table = malloc(table_bytes ? table_bytes : 1)))
        rc = npl_error_set(err, NPL_ERR_NOMEM, "q4nx cache: no memory for the table");
    if (rc == NPL_OK)
        rc = read_exact(c->fd, table, table_bytes, table_offset, &short_read, c->path, err);
    if (short_read) /* the file shrank since fstat */
        rc = corrupt(state, err, c->path, "shorter than its header and table say");
    else if (rc == NPL_OK && npl_q4nx_checksum(table, table_bytes, 0) != npl_get_le64(h + HDR_TABLE_CHECKSUM))
        rc = corrupt(state, err, c->path, "table checksum mismatch");
    else if (rc == NPL_OK)
        rc = parse_table(c, table, table_bytes, npl_get_le32(h + HDR_TENSOR_COUNT), table_offset,
                         c->path, state, err);
    free(table);
    if (rc != NPL_OK) {
        npl_q4nx_cache_close(c);
        return rc;
    }
    *state = NPL_Q4NX_CACHE_VALID;
    *out = c;
    return NPL_OK;
}

size_t npl_q4nx_cache_count(const npl_q4nx_cache *c)
{
    return c ? c->count : 0;
}

static const cache_entry *find_entry(const npl_q4nx_cache *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->count; i++)
        if (strcmp(c->entries[i].name, name) == 0)
            return &c->entries[i];
    return NULL;
}

const void *npl_q4nx_cache_find(const npl_q4nx_cache *c, const char *name, uint32_t *src_type,
                                npl_q4nx_layout *layout)
{
    const cache_entry *e = find_entry(c, name);
    if (!e || !c->map)
        return NULL;
    if (src_type)
        *src_type = e->src_type;
    if (layout)
        *layout = e->layout;
    return c->map + e->offset;
}

npl_status npl_q4nx_cache_read(const npl_q4nx_cache *c, const char *name, uint32_t src_type,
                               uint32_t rows, uint32_t cols, void *dst, size_t dst_bytes,
                               npl_error *err)
{
    if (!c || !name || !dst)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "q4nx cache: missing read argument");
    const cache_entry *e = find_entry(c, name);
    if (!e)
        return npl_error_set(err, NPL_ERR_FORMAT, "q4nx cache %s has no tensor %s", c->path,
                             name);
    if (e->src_type != src_type || e->layout.rows != rows || e->layout.cols != cols)
        return npl_error_set(err, NPL_ERR_FORMAT,
                             "q4nx cache %s holds %s as type %u [%u, %u], not type %u [%u, %u]",
                             c->path, name, e->src_type, e->layout.rows, e->layout.cols,
                             src_type, rows, cols);
    if (dst_bytes < e->bytes)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "q4nx cache: %s needs %llu bytes, the destination has %zu", name,
                             (unsigned long long)e->bytes, dst_bytes);
    if (c->map) { /* verified at open */
        memcpy(dst, c->map + e->offset, (size_t)e->bytes);
        return NPL_OK;
    }
    npl_q4nx_cache_state state;
    bool short_read = false;
    npl_status rc = read_exact(c->fd, dst, (size_t)e->bytes, e->offset, &short_read, c->path, err);
    if (short_read)
        return corrupt(&state, err, c->path, "it ends inside tensor data");
    if (rc != NPL_OK)
        return rc;
    if (npl_q4nx_checksum(dst, (size_t)e->bytes, 0) != e->checksum) {
        char why[NPL_Q4NX_CACHE_NAME_MAX + 64];
        snprintf(why, sizeof why, "checksum mismatch in tensor %s", e->name);
        return corrupt(&state, err, c->path, why);
    }
    return NPL_OK;
}
