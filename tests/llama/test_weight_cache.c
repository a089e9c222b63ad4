/* The CPU's packed-weight cache (engine/models/cpu_weight_cache.h) on a generated
 * model (path as the argument after the case name):
 *  - roundtrip: the first load writes the cache (in the background, while
 *    the model runs), the second maps it; the logits and greedy tokens are
 *    bit-identical to a load without cache;
 *  - corrupt: a truncated, extended or garbage file, a flipped byte in the
 *    header, in the table or in a sampled data page is found, and the
 *    cache rebuilt (same output);
 *  - stale: a model file with another mtime, size or metadata, a cache
 *    made for another packed layout version, and one whose packed bytes
 *    differ from this build's (checksums right), are rebuilt;
 *  - unwritable: a missing directory or a file in its place never fails
 *    the load;
 *  - full_disk: writes failing with EFBIG (RLIMIT_FSIZE) and, as root
 *    where tmpfs can be mounted, ENOSPC never fail the load and leave no
 *    temporary file;
 *  - adopt: the kernels' npl_matmul_ws_adopt_packed and what it refuses.
 * Without AVX2 nothing is repacked and the cases only check the output. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "cpu_features.h"
#include "cpu_weight_cache.h"
#include "ggml_types.h"
#include "le_bytes.h"
#include "npl_test.h"
#include "npl_test_model.h"
#include "q4nx_cache.h"

enum { GEN = 5, N_CTX = 64 };

static const int32_t PROMPT[] = {1, 17, 400, 33, 9, 250, 71, 5, 3000, 12};

typedef struct run_out {
    float *logits;
    int32_t tokens[GEN];
    npl_weight_cache_stats stats; /* after the background write, if any */
    bool writing_at_load;         /* the cache file was being written while the model ran */
} run_out;

static char g_dir[256];   /* this case's scratch directory */
static char g_model[300]; /* a copy of the model in it (the stale case edits it) */

static bool packs_here(void)
{
    return npl_simd_detect() >= NPL_SIMD_AVX2;
}

/* Loads model with cache_dir (NULL = none), prompts, decodes greedily. */
static bool run(const char *model, const char *cache_dir, run_out *out)
{
    memset(out, 0, sizeof *out);
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 2;
    p.weight_cache_dir = cache_dir;
    npl_error err;
    npl_model *m = npl_model_load(model, &p, &err);
    if (!m) {
        fprintf(stderr, "cannot load %s: %s\n", model, err.message);
        return false;
    }
    npl_model_weight_cache_stats(m, &out->stats);
    out->writing_at_load = out->stats.writing;
    if (out->stats.writing && !strstr(out->stats.note, "in the background"))
        fprintf(stderr, "the note does not say the cache is being written: %s\n", out->stats.note);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_seq *s = npl_seq_create(m, N_CTX, &err);
    size_t used = 0;
    bool ok = s && npl_prefill(m, s, PROMPT, sizeof PROMPT / sizeof PROMPT[0], 0, &used, &err) == NPL_OK;
    if (ok && (out->logits = malloc(nv * sizeof *out->logits)))
        memcpy(out->logits, npl_seq_logits(s), nv * sizeof *out->logits);
    ok = ok && out->logits;
    for (int i = 0; ok && i < GEN; i++) {
        out->tokens[i] = nt_argmax(npl_seq_logits(s), nv);
        ok = i + 1 == GEN || npl_decode(m, &s, &out->tokens[i], 1, &err) == NPL_OK;
    }
    if (!ok)
        fprintf(stderr, "run failed: %s\n", err.message);
    npl_seq_free(s);
    if (npl_model_weight_cache_wait(m) != out->writing_at_load) {
        fprintf(stderr, "waited for a write that was not said to be under way, or not for one that was\n");
        ok = false;
    }
    npl_model_weight_cache_stats(m, &out->stats);
    if (out->stats.writing) {
        fprintf(stderr, "still writing after the wait\n");
        ok = false;
    }
    out->stats.note[sizeof out->stats.note - 1] = '\0';
    npl_model_free(m);
    return ok;
}

static uint32_t g_nv;
static run_out g_ref; /* without cache */

static bool same_output(const run_out *a)
{
    return memcmp(a->logits, g_ref.logits, g_nv * sizeof *a->logits) == 0 &&
           memcmp(a->tokens, g_ref.tokens, sizeof a->tokens) == 0;
}

static bool copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    bool ok = in && out;
    char buf[65536];
    size_t n;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out && fclose(out) != 0)
        ok = false;
    return ok;
}

/* A scratch directory with a copy of the case's model, and the reference
 * output of a load without cache. */
static bool setup(const char *name)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/npullm-wcache-%s-%d", name, (int)getpid());
    if (mkdir(g_dir, 0755) != 0 && errno != EEXIST)
        return false;
    snprintf(g_model, sizeof g_model, "%s/model.gguf", g_dir);
    if (!nt_arg(0) || !copy_file(nt_arg(0), g_model))
        return false;
    if (!run(g_model, NULL, &g_ref))
        return false;
    npl_model_params p;
    npl_model_params_default(&p);
    npl_error err;
    npl_model *m = npl_model_load(g_model, &p, &err);
    if (!m)
        return false;
    g_nv = npl_model_get_info(m)->n_vocab;
    npl_model_free(m);
    return g_ref.stats.matrices_packed == 0 && g_ref.stats.note[0] == '\0';
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    free(g_ref.logits);
    g_ref.logits = NULL;
}

static void cache_path(char *out, size_t cap)
{
    snprintf(out, cap, "%s/model.gguf%s", g_dir, NPL_CPU_WEIGHT_CACHE_SUFFIX);
}

/* Files in dir whose name contains ".tmp." (left-over temporary files). */
static int temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* A load that must write a new cache (after `why` was found), then one
 * that maps it; both with the reference output. */
static void expect_rebuilt(const char *dir, const char *why)
{
    run_out a, b;
    REQUIRE(run(g_model, dir, &a));
    CHECK(same_output(&a));
    if (packs_here()) {
        CHECKF(a.writing_at_load && a.stats.written && a.stats.matrices_cached == 0 && a.stats.matrices_packed > 0,
               "%s", a.stats.note);
        CHECKF(!why || strstr(a.stats.note, why), "expected '%s' in: %s", why, a.stats.note);
    }
    free(a.logits);
    REQUIRE(run(g_model, dir, &b));
    CHECK(same_output(&b));
    if (packs_here())
        CHECKF(!b.stats.written && b.stats.matrices_packed == 0 && b.stats.matrices_cached == a.stats.matrices_packed,
               "%s", b.stats.note);
    free(b.logits);
    CHECK(temp_files(dir) == 0);
}

/* A load that cannot use or write a cache: the reference output, and the
 * note has `why`. */
static void expect_uncached(const char *dir, const char *why)
{
    run_out a;
    REQUIRE(run(g_model, dir, &a));
    CHECK(same_output(&a));
    if (packs_here())
        CHECKF(!a.stats.written && a.stats.matrices_cached == 0 && a.stats.matrices_packed > 0 &&
                   strstr(a.stats.note, why),
               "expected '%s' in: %s", why, a.stats.note);
    free(a.logits);
}

static void test_roundtrip(void)
{
    REQUIRE(setup("roundtrip"));
    expect_rebuilt(g_dir, "none at");
    /* Mapped, not read: the third load maps the same file again. */
    run_out none; /* no directory: repacked on first use, as before */
    REQUIRE(run(g_model, NULL, &none));
    CHECK(same_output(&none) && none.stats.matrices_packed == 0 && none.stats.note[0] == '\0');
    free(none.logits);
    run_out c;
    REQUIRE(run(g_model, g_dir, &c));
    CHECK(same_output(&c));
    if (packs_here())
        CHECKF(c.stats.matrices_cached > 0 && strstr(c.stats.note, "mapped"), "%s", c.stats.note);
    free(c.logits);
    teardown();
}

static bool flip_byte(const char *path, long offset)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return false;
    uint8_t b = 0;
    bool ok = pread(fd, &b, 1, offset) == 1;
    b ^= 0x5a;
    ok = ok && pwrite(fd, &b, 1, offset) == 1;
    return close(fd) == 0 && ok;
}

/* Offset of the first matrix's data in the cache (from its table). */
static long first_data_offset(const char *path)
{
    uint8_t e[NPL_CPUW_ENTRY_BYTES];
    int fd = open(path, O_RDONLY);
    bool ok = fd >= 0 && pread(fd, e, sizeof e, NPL_CPUW_HEADER_BYTES) == (ssize_t)sizeof e;
    if (fd >= 0)
        close(fd);
    return ok ? (long)npl_get_le64(e + 32) : -1;
}

static void test_corrupt(void)
{
    REQUIRE(setup("corrupt"));
    if (!packs_here()) {
        expect_uncached(g_dir, "");
        teardown();
        return;
    }
    char path[400];
    cache_path(path, sizeof path);
    expect_rebuilt(g_dir, "none at");
    struct stat st;
    REQUIRE(stat(path, &st) == 0);

    REQUIRE(truncate(path, st.st_size - 4096) == 0);
    expect_rebuilt(g_dir, "damaged (wrong size");
    REQUIRE(truncate(path, 100) == 0);
    expect_rebuilt(g_dir, "damaged (shorter than its header)");
    REQUIRE(truncate(path, st.st_size + 1) == 0);
    expect_rebuilt(g_dir, "damaged (wrong size");

    REQUIRE(flip_byte(path, NPL_CPUW_SOURCE_DIGEST + 3));
    expect_rebuilt(g_dir, "damaged (header checksum)");
    REQUIRE(flip_byte(path, NPL_CPUW_MAGIC + 1));
    expect_rebuilt(g_dir, "damaged (bad magic)");
    REQUIRE(flip_byte(path, NPL_CPUW_HEADER_BYTES + 10));
    expect_rebuilt(g_dir, "damaged (table checksum)");
    long data = first_data_offset(path);
    REQUIRE(data > 0);
    REQUIRE(flip_byte(path, data + 100));
    expect_rebuilt(g_dir, "damaged (checksum of matrix 0)");
    REQUIRE(flip_byte(path, st.st_size - 1)); /* the last matrix's last page */
    expect_rebuilt(g_dir, "damaged (checksum of matrix");

    /* Garbage of the right size, and a directory in the file's place. */
    int fd = open(path, O_WRONLY | O_TRUNC);
    REQUIRE(fd >= 0);
    uint8_t junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 131 + 7);
    for (off_t at = 0; at < st.st_size; at += (off_t)sizeof junk)
        REQUIRE(pwrite(fd, junk, sizeof junk, at) == (ssize_t)sizeof junk);
    REQUIRE(ftruncate(fd, st.st_size) == 0);
    close(fd);
    expect_rebuilt(g_dir, "damaged (bad magic)");
    teardown();
}

/* Sets the model copy's mtime to t (seconds). */
static bool set_mtime(const char *path, time_t t)
{
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    return utimensat(AT_FDCWD, path, ts, 0) == 0;
}

/* Offset of the first occurrence of s in path, or -1. */
static long find_in_file(const char *path, const char *s)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t len = strlen(s);
    for (size_t i = 0; i + len <= n; i++)
        if (memcmp(buf + i, s, len) == 0)
            return (long)i;
    return -1;
}

/* The cache's matrix 0 with a byte of its first group changed and every
 * checksum made right again: what a packer of another layout would have
 * written, had nobody bumped the layout version. */
static bool forge_other_packing(const char *path)
{
    int fd = open(path, O_RDWR);
    if (fd < 0)
        return false;
    uint8_t h[NPL_CPUW_HEADER_BYTES];
    bool ok = pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h;
    size_t table_bytes = (size_t)npl_get_le32(h + NPL_CPUW_COUNT) * NPL_CPUW_ENTRY_BYTES;
    uint8_t *table = malloc(table_bytes);
    ok = ok && table && pread(fd, table, table_bytes, NPL_CPUW_HEADER_BYTES) == (ssize_t)table_bytes;
    uint64_t offset = ok ? npl_get_le64(table + 32) : 0, bytes = ok ? npl_get_le64(table + 40) : 0;
    uint8_t *data = ok ? malloc((size_t)bytes) : NULL;
    ok = ok && data && pread(fd, data, (size_t)bytes, (off_t)offset) == (ssize_t)bytes;
    if (ok) {
        data[100] ^= 0x5a;
        /* the engine's sample checksum: first, middle and last 4 KiB */
        uint64_t span = bytes < NPL_CPUW_SAMPLE_BYTES ? bytes : NPL_CPUW_SAMPLE_BYTES;
        uint64_t starts[3] = {0, (bytes - span) / 2 & ~(uint64_t)63, bytes - span};
        uint64_t sum = bytes;
        for (int i = 0; i < 3; i++)
            sum = npl_q4nx_checksum(data + starts[i], (size_t)span, sum);
        npl_put_le64(table + 48, sum);
        npl_put_le64(h + NPL_CPUW_TABLE_CHECKSUM, npl_q4nx_checksum(table, table_bytes, 0));
        npl_put_le64(h + NPL_CPUW_HEADER_CHECKSUM, npl_q4nx_checksum(h, NPL_CPUW_HEADER_CHECKSUM, 0));
        ok = pwrite(fd, data, (size_t)bytes, (off_t)offset) == (ssize_t)bytes &&
             pwrite(fd, table, table_bytes, NPL_CPUW_HEADER_BYTES) == (ssize_t)table_bytes &&
             pwrite(fd, h, sizeof h, 0) == (ssize_t)sizeof h;
    }
    free(data);
    free(table);
    return close(fd) == 0 && ok;
}

static void test_stale(void)
{
    REQUIRE(setup("stale"));
    char path[400];
    cache_path(path, sizeof path);
    REQUIRE(set_mtime(g_model, 1700000000));
    expect_rebuilt(g_dir, "none at");
    if (!packs_here()) {
        teardown();
        return;
    }
    /* Touched: another mtime. */
    REQUIRE(set_mtime(g_model, 1700000100));
    expect_rebuilt(g_dir, "stale (made from another model file)");
    /* Same size and mtime, other metadata (general.name's last byte). */
    long at = find_in_file(g_model, "general.name");
    REQUIRE(at > 0);
    /* key length (8) + key + type (4) + string length (8): the value */
    REQUIRE(flip_byte(g_model, at + (long)strlen("general.name") + 4 + 8));
    REQUIRE(set_mtime(g_model, 1700000100));
    expect_rebuilt(g_dir, "stale (made from another model file)");
    /* Another size: bytes appended after the tensor data. */
    int fd = open(g_model, O_WRONLY | O_APPEND);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "\0\0\0\0\0\0\0\0", 8) == 8);
    close(fd);
    REQUIRE(set_mtime(g_model, 1700000100));
    expect_rebuilt(g_dir, "stale (made from another model file)");

    /* A cache of another packed layout version (header checksum right). */
    uint8_t h[NPL_CPUW_HEADER_BYTES];
    fd = open(path, O_RDWR);
    REQUIRE(fd >= 0);
    REQUIRE(pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h);
    npl_put_le32(h + NPL_CPUW_LAYOUT, npl_matmul_pack_layout_version() + 1);
    npl_put_le64(h + NPL_CPUW_HEADER_CHECKSUM, npl_q4nx_checksum(h, NPL_CPUW_HEADER_CHECKSUM, 0));
    REQUIRE(pwrite(fd, h, sizeof h, 0) == (ssize_t)sizeof h);
    close(fd);
    expect_rebuilt(g_dir, "stale (made for another packed layout version)");
    /* Same version, other bytes (a layout change nobody bumped it for). */
    REQUIRE(forge_other_packing(path));
    expect_rebuilt(g_dir, "stale (its packed bytes are not this build's)");
    teardown();
}

static void test_unwritable(void)
{
    REQUIRE(setup("unwritable"));
    char missing[400], file[400];
    snprintf(missing, sizeof missing, "%s/missing/sub", g_dir);
    expect_uncached(missing, "not written");
    expect_uncached(missing, "cannot create a file");
    snprintf(file, sizeof file, "%s/a-file", g_dir);
    FILE *f = fopen(file, "w");
    REQUIRE(f && fclose(f) == 0);
    expect_uncached(file, "not written");
    teardown();
}

static void test_full_disk(void)
{
    REQUIRE(setup("full_disk"));
    char cache[400];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    REQUIRE(mkdir(cache, 0755) == 0);
    /* Files may grow to 64 KiB: writing more fails with EFBIG (the signal
     * that would end the process is ignored, as a service should). */
    struct rlimit old, tiny;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    tiny = old;
    tiny.rlim_cur = 65536;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &tiny) == 0);
    expect_uncached(cache, "not written");
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, prev);
    CHECK(temp_files(cache) == 0);
    /* Then the directory has room again: written and used. */
    expect_rebuilt(cache, "none at");

    /* A real full disk where a small tmpfs can be mounted (root). */
    char small[400];
    snprintf(small, sizeof small, "%s/small", g_dir);
    REQUIRE(mkdir(small, 0755) == 0);
    if (mount("npullm-test", small, "tmpfs", 0, "size=64k") == 0) {
        expect_uncached(small, "No space left on device");
        CHECK(temp_files(small) == 0);
        CHECK(umount(small) == 0);
    } else {
        fprintf(stderr, "no tmpfs (%s): ENOSPC part not run, EFBIG was\n", strerror(errno));
    }
    teardown();
}

/* The kernels' side: adopting a packed copy, and what is refused. */
static void test_adopt(void)
{
    static uint8_t q4[20 * 2 * 18], f32[20 * 64 * 4]; /* 20 rows of 64: Q4_0 and F32 */
    for (size_t i = 0; i < sizeof q4; i++)
        q4[i] = (uint8_t)(i * 7);
    npl_matrix wq, wf;
    REQUIRE(npl_matrix_init(&wq, NPL_TYPE_Q4_0, q4, 64, 20));
    REQUIRE(npl_matrix_init(&wf, NPL_TYPE_F32, f32, 64, 20));
    npl_matmul_ws *ws = npl_matmul_ws_create(1, 64, 1);
    REQUIRE(ws);
    CHECK(npl_matmul_ws_pack_size(ws, &wf) == 0);
    size_t bytes = npl_matmul_ws_pack_size(ws, &wq);
    uint8_t *copy = aligned_alloc(64, 4096);
    REQUIRE(copy);
    if (!packs_here()) {
        CHECK(bytes == 0 && !npl_matmul_ws_adopt_packed(ws, &wq, copy));
    } else {
        REQUIRE(bytes > 0 && bytes % 64 == 0 && bytes <= 4096);
        size_t group = npl_matmul_pack_first_group(&wq, copy, bytes);
        CHECK(group > 0 && group * 2 <= bytes);
        CHECK(npl_matmul_pack_first_group(&wq, copy, group - 1) == 0);
        CHECK(npl_matmul_pack_first_group(&wf, copy, bytes) == 0);
        CHECK(!npl_matmul_ws_adopt_packed(ws, &wq, copy + 1)); /* misaligned */
        CHECK(!npl_matmul_ws_adopt_packed(ws, &wf, copy));      /* not packed */
        CHECK(npl_matmul_ws_packed(ws, &wq) == NULL);
        CHECK(npl_matmul_ws_adopt_packed(ws, &wq, copy));
        CHECK(!npl_matmul_ws_adopt_packed(ws, &wq, copy));      /* already held */
        CHECK(npl_matmul_ws_packed(ws, &wq) == copy);
        CHECK(npl_matmul_ws_packed_bytes(ws) == 0);             /* not owned */
    }
    npl_matmul_ws_free(ws); /* must not free the adopted copy */
    free(copy);
}

int main(int argc, char **argv)
{
    static const nt_case cases[] = {
        {"roundtrip", test_roundtrip},   {"corrupt", test_corrupt},     {"stale", test_stale},
        {"unwritable", test_unwritable}, {"full_disk", test_full_disk}, {"adopt", test_adopt},
    };
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
