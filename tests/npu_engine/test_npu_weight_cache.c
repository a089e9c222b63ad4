/* The NPU runtime's Q4NX weight cache (`test-npu-weight-cache CASE MODEL
 * [OTHER_MODEL]`); every case works on a copy of the model in a temporary
 * directory, so tests running at once never share a cache file:
 *   write_then_read  the first load repacks and writes <model>.q4nx next to
 *                    the model (no temporary file left), the second reads
 *                    every matrix from it (0 repacks); both compute the
 *                    same logits, bit for bit, as a load without a cache.
 *   stale            a touched model (mtime) or another model under the
 *                    same name rebuilds the cache, with the right weights.
 *   damaged          a flipped byte anywhere that matters (header, table,
 *                    first and last tensor), truncation to any of several
 *                    lengths, an appended byte, a directory in its place:
 *                    the load succeeds with the right logits and rewrites
 *                    the cache byte for byte as it was.
 *   unwritable       cache directories that cannot take a file (missing,
 *                    a regular file, /proc, read-only for non-root): the
 *                    load succeeds and says why nothing was written.
 *   disk_full        the write fails part way (RLIMIT_FSIZE): the load
 *                    succeeds, no file or temporary file is left.
 *   off              npu_cache_dir "": nothing written, nothing read.
 *   other_dir        a cache directory apart from the model's: the file
 *                    goes there (named after the model), and is read back.
 *   relative_path    a model named without a directory: the cache goes to
 *                    the working directory.
 *   params_field     npl_model_params.npu_cache_dir reaches the runtime
 *                    through npl_model_load ("" and a directory).
 *   reader_bytes     the unmapped reader on a small cache: every single
 *                    flipped byte is detected (Q4NX tensors are multiples
 *                    of 64 bytes, so a cache has no unchecked padding), and
 *                    every shorter length; wrong type, shape, name or room
 *                    are errors; the mapped reader reads the same bytes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "backend_npu.h"
#include "model_internal.h"
#include "npu_emu.h"
#include "npu_engine_test.h"
#include "npu_weight_cache.h"
#include "npullm.h"
#include "q4nx_cache.h"

enum { CHUNK = 16, N_CTX = 64, PROMPT = 6, STEPS = 2 };

/* ---- files ---------------------------------------------------------- */

static char *make_tempdir(void)
{
    char tmpl[] = "/tmp/npl-weight-cache-XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d) {
        perror("mkdtemp");
        return NULL;
    }
    return strdup(d);
}

/* Removes dir and what is in it (files, or empty directories). */
static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[PATH_MAX];
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            rmdir(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    if (d)
        closedir(d);
    return n;
}

/* The whole file in *data (malloc'd); false when it cannot be read. */
static bool read_whole(const char *path, uint8_t **data, size_t *n)
{
    *data = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    bool ok = fseek(f, 0, SEEK_END) == 0;
    long len = ok ? ftell(f) : -1;
    ok = len >= 0 && fseek(f, 0, SEEK_SET) == 0;
    uint8_t *buf = ok ? malloc((size_t)len + 1) : NULL;
    ok = buf && fread(buf, 1, (size_t)len, f) == (size_t)len;
    fclose(f);
    if (!ok) {
        free(buf);
        return false;
    }
    *data = buf;
    *n = (size_t)len;
    return true;
}

static bool write_whole(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0) && ok;
}

static bool copy_file(const char *from, const char *to)
{
    uint8_t *data;
    size_t n;
    if (!read_whole(from, &data, &n))
        return false;
    bool ok = write_whole(to, data, n);
    free(data);
    return ok;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A temporary directory holding a copy of `model` as model.gguf. */
typedef struct workdir {
    char *dir;
    char model[PATH_MAX];
    char cache[PATH_MAX]; /* where the default cache goes */
} workdir;

static bool workdir_init(workdir *w, const char *model)
{
    memset(w, 0, sizeof *w);
    w->dir = make_tempdir();
    if (!w->dir || !model)
        return false;
    snprintf(w->model, sizeof w->model, "%s/model.gguf", w->dir);
    snprintf(w->cache, sizeof w->cache, "%s/model.gguf%s", w->dir, NPL_NPU_WEIGHT_CACHE_SUFFIX);
    return copy_file(model, w->model);
}

static void workdir_free(workdir *w)
{
    if (w->dir)
        remove_tree(w->dir);
    free(w->dir);
}

/* ---- models ---------------------------------------------------------- */

static npl_model_params params_for(const char *device)
{
    npl_model_params p;
    npl_model_params_default(&p);
    p.n_threads = 1;
    p.prefill_chunk = CHUNK;
    p.device = device;
    return p;
}

/* Through npl_model_load: the cache in its default place. */
static npl_model *load_default(const char *path)
{
    npl_model_params p = params_for("npu-emu");
    npl_error err;
    npl_model *m = npl_model_load(path, &p, &err);
    if (!m)
        fprintf(stderr, "cannot load %s: %s\n", path, err.message);
    return m;
}

/* The runtime built on an emulated device with the cache in cache_dir, as
 * npl_model_load builds it. */
static npl_model *load_in(const char *path, const char *cache_dir)
{
    npl_model_params p = params_for("cpu");
    npl_error err;
    npl_model *m = npl_model_load(path, &p, &err);
    if (!m) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.message);
        return NULL;
    }
    npl_npu_device *dev = NULL;
    npl_backend_npu *b = NULL;
    if (npl_npu_emu_open(NULL, &dev, &err) != NPL_OK ||
        npl_backend_npu_create_in(m, dev, cache_dir, &b, &err) != NPL_OK) {
        fprintf(stderr, "cannot build the NPU runtime for %s: %s\n", path, err.message);
        npl_model_free(m);
        return NULL;
    }
    npl_backend_attach_npu(m, b);
    return m;
}

static npl_device_stats stats_of(const npl_model *m)
{
    npl_device_stats s;
    if (!npl_model_device_stats(m, &s))
        fprintf(stderr, "no device stats\n");
    return s;
}

/* The logits after a prompt and after each of STEPS greedy decodes,
 * (1 + STEPS) * n_vocab floats (malloc'd), or NULL. */
static float *run_logits(npl_model *m)
{
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    float *out = malloc((size_t)(1 + STEPS) * nv * sizeof *out);
    npl_error err;
    npl_seq *s = npl_seq_create(m, N_CTX, &err);
    int32_t ids[PROMPT] = {1, 17, 4242, 99, 100000, 7};
    for (size_t i = 0; i < PROMPT; i++)
        ids[i] %= (int32_t)nv;
    bool ok = out && s && npl_prefill(m, s, ids, PROMPT, 0, NULL, &err) == NPL_OK;
    for (int k = 0; ok && k <= STEPS; k++) {
        memcpy(out + (size_t)k * nv, npl_seq_logits(s), nv * sizeof *out);
        int32_t next = nt_argmax(npl_seq_logits(s), nv);
        ok = k == STEPS || npl_decode(m, &s, &next, 1, &err) == NPL_OK;
    }
    if (!ok) {
        fprintf(stderr, "forward pass failed: %s\n", err.message);
        free(out);
        out = NULL;
    }
    npl_seq_free(s);
    return out;
}

static bool same_logits(const float *a, const float *b, const npl_model *m)
{
    size_t n = (size_t)(1 + STEPS) * npl_model_get_info(m)->n_vocab;
    return a && b && memcmp(a, b, n * sizeof *a) == 0;
}

/* Loads, checks the logits against ref (when given) and returns the load's
 * stats; *logits_out takes the logits when asked for. */
static npl_device_stats load_and_run(const char *path, const char *cache_dir, bool through_default,
                                     const float *ref, float **logits_out, bool *ok)
{
    npl_device_stats s;
    memset(&s, 0, sizeof s);
    npl_model *m = through_default ? load_default(path) : load_in(path, cache_dir);
    *ok = m != NULL;
    if (!m)
        return s;
    s = stats_of(m);
    float *logits = run_logits(m);
    if (!logits || (ref && !same_logits(ref, logits, m))) {
        fprintf(stderr, "logits differ from the reference (cache note: %s)\n", s.load_cache_note);
        *ok = false;
    }
    if (logits_out)
        *logits_out = logits;
    else
        free(logits);
    npl_model_free(m);
    return s;
}

/* The logits of a load without any cache. */
static float *reference_logits(const char *path, uint32_t *n_matrices)
{
    bool ok;
    float *ref = NULL;
    npl_device_stats s = load_and_run(path, "", false, NULL, &ref, &ok);
    *n_matrices = s.load_matrices_repacked;
    if (s.load_matrices_cached != 0 || s.load_cache_written) {
        fprintf(stderr, "a load without a cache used one: %s\n", s.load_cache_note);
        free(ref);
        return NULL;
    }
    return ok ? ref : NULL;
}

#define CHECK_REPACKED(s, n)                                                                \
    CHECKF((s).load_matrices_repacked == (n) && (s).load_matrices_cached == 0,             \
           "repacked %u, cached %u (expected %u repacked): %s", (s).load_matrices_repacked, \
           (s).load_matrices_cached, (n), (s).load_cache_note)
#define CHECK_CACHED(s, n)                                                                  \
    CHECKF((s).load_matrices_repacked == 0 && (s).load_matrices_cached == (n) &&           \
               !(s).load_cache_written,                                                     \
           "repacked %u, cached %u (expected %u cached): %s", (s).load_matrices_repacked,   \
           (s).load_matrices_cached, (n), (s).load_cache_note)

/* ---- cases ------------------------------------------------------------ */

static void test_write_then_read(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    uint32_t n = 0;
    float *ref = reference_logits(w.model, &n);
    REQUIRE(ref && n > 0);
    CHECK(count_entries(w.dir) == 1);

    bool ok;
    npl_device_stats first = load_and_run(w.model, NULL, true, ref, NULL, &ok);
    CHECK(ok);
    CHECK_REPACKED(first, n);
    CHECKF(first.load_cache_written, "%s", first.load_cache_note);
    CHECK(exists(w.cache) && count_entries(w.dir) == 2); /* no temporary file left */
    printf("first load: %s\n", first.load_cache_note);

    npl_device_stats second = load_and_run(w.model, NULL, true, ref, NULL, &ok);
    CHECK(ok);
    CHECK_CACHED(second, n);
    CHECK(second.weight_bytes == first.weight_bytes &&
          second.load.h2d_weight_bytes == first.load.h2d_weight_bytes);
    CHECK(strstr(second.load_cache_note, w.cache) != NULL);
    printf("second load: %s\n", second.load_cache_note);
    free(ref);
    workdir_free(&w);
}

/* The next load finds the cache stale: it repacks all n matrices and
 * writes a new cache (note names why, when given), and the load after
 * that reads it. */
static void check_rebuilt_then_read(const workdir *w, const float *ref, uint32_t n,
                                    const char *note)
{
    bool ok;
    npl_device_stats s = load_and_run(w->model, NULL, true, ref, NULL, &ok);
    CHECK(ok);
    CHECK_REPACKED(s, n);
    CHECK(s.load_cache_written && (!note || strstr(s.load_cache_note, note)));
    s = load_and_run(w->model, NULL, true, ref, NULL, &ok);
    CHECK(ok);
    CHECK_CACHED(s, n);
}

static void test_stale(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    REQUIRE(nt_arg(1));
    uint32_t n = 0;
    float *ref = reference_logits(w.model, &n);
    REQUIRE(ref);
    bool ok;
    load_and_run(w.model, NULL, true, ref, NULL, &ok);
    REQUIRE(ok && exists(w.cache));

    /* The model touched: its mtime is part of the key. */
    struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000, .tv_nsec = 5}};
    REQUIRE(utimensat(AT_FDCWD, w.model, times, 0) == 0);
    check_rebuilt_then_read(&w, ref, n, "different model file");

    /* A cache of format version 1 (the old Q4NX byte order) is rebuilt,
     * never read. */
    uint8_t *bytes = NULL;
    size_t len = 0;
    REQUIRE(read_whole(w.cache, &bytes, &len) && len > 12);
    bytes[8] = 1, bytes[9] = bytes[10] = bytes[11] = 0;
    REQUIRE(write_whole(w.cache, bytes, len));
    free(bytes);
    check_rebuilt_then_read(&w, ref, n, "version 1");

    /* Another model under the same name. */
    uint32_t n_other = 0;
    float *ref_other = reference_logits(nt_arg(1), &n_other);
    REQUIRE(ref_other);
    REQUIRE(copy_file(nt_arg(1), w.model));
    check_rebuilt_then_read(&w, ref_other, n_other, NULL);
    free(ref);
    free(ref_other);
    workdir_free(&w);
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void test_damaged(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    uint32_t n = 0;
    float *ref = reference_logits(w.model, &n);
    REQUIRE(ref);
    bool ok;
    load_and_run(w.model, NULL, true, ref, NULL, &ok);
    uint8_t *good = NULL, *bad = NULL;
    size_t len = 0;
    REQUIRE(ok && read_whole(w.cache, &good, &len) && len > 128);
    bad = malloc(len + 1);
    REQUIRE(bad);
    size_t table = (size_t)le64(good + 40);
    REQUIRE(table > 64 && table < len);

    /* Flipped bytes: magic, version, key, table place and checksum, the
     * first tensor's first byte, the middle, the last tensor's last byte,
     * the table's first and last bytes. */
    const size_t flips[] = {0, 8, 16, 24, 32, 40, 48, 52, 56, 64, len / 2, table - 1, table,
                            len - 1};
    /* Lengths: empty, inside the header, exactly the header, inside the
     * data, without the table, one byte short, one byte long. */
    const size_t lengths[] = {0, 1, 63, 64, 65, len / 2, table, len - 1, len + 1};
    size_t n_flips = sizeof flips / sizeof flips[0], n_lengths = sizeof lengths / sizeof lengths[0];
    for (size_t k = 0; k < n_flips + n_lengths; k++) {
        size_t out_len = len;
        memcpy(bad, good, len);
        if (k < n_flips) {
            bad[flips[k]] ^= 0x20;
        } else {
            out_len = lengths[k - n_flips];
            if (out_len > len)
                bad[len] = 0;
        }
        REQUIRE(write_whole(w.cache, bad, out_len));
        npl_device_stats s = load_and_run(w.model, NULL, true, ref, NULL, &ok);
        CHECKF(ok, "damage %zu", k);
        CHECK_REPACKED(s, n);
        CHECKF(s.load_cache_written, "damage %zu: %s", k, s.load_cache_note);
        /* Rewritten exactly as it was. */
        uint8_t *again = NULL;
        size_t again_len = 0;
        CHECKF(read_whole(w.cache, &again, &again_len) && again_len == len &&
                   memcmp(again, good, len) == 0,
               "damage %zu: the rebuilt cache differs", k);
        free(again);
    }

    /* A directory where the cache should be: read as damaged, not
     * replaced, and the load goes on. */
    REQUIRE(unlink(w.cache) == 0 && mkdir(w.cache, 0755) == 0);
    npl_device_stats s = load_and_run(w.model, NULL, true, ref, NULL, &ok);
    CHECK(ok);
    CHECK_REPACKED(s, n);
    CHECK(!s.load_cache_written && strstr(s.load_cache_note, "not written"));
    CHECK(count_entries(w.dir) == 2);
    printf("directory in place of the cache: %s\n", s.load_cache_note);
    free(good);
    free(bad);
    free(ref);
    workdir_free(&w);
}

/* A load with cache_dir that must succeed without writing anything. */
static void check_not_written(const char *model, const char *cache_dir, const float *ref,
                              uint32_t n)
{
    bool ok;
    npl_device_stats s = load_and_run(model, cache_dir, false, ref, NULL, &ok);
    CHECKF(ok, "cache dir %s", cache_dir);
    CHECK_REPACKED(s, n);
    CHECKF(!s.load_cache_written && strstr(s.load_cache_note, "not written"),
           "cache dir %s: %s", cache_dir, s.load_cache_note);
    printf("cache dir %s: %s\n", cache_dir, s.load_cache_note);
}

static void test_unwritable(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    uint32_t n = 0;
    float *ref = reference_logits(w.model, &n);
    REQUIRE(ref);
    char missing[PATH_MAX];
    snprintf(missing, sizeof missing, "%s/no-such-dir", w.dir);
    check_not_written(w.model, missing, ref, n);
    check_not_written(w.model, w.model, ref, n); /* a regular file */
    check_not_written(w.model, "/proc/self", ref, n); /* refuses new files, even to root */
    if (geteuid() != 0) { /* root writes into read-only directories anyway */
        REQUIRE(chmod(w.dir, 0555) == 0);
        check_not_written(w.model, NULL, ref, n);
        CHECK(chmod(w.dir, 0755) == 0);
    }
    CHECK(count_entries(w.dir) == 1);
    free(ref);
    workdir_free(&w);
}

static void test_disk_full(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    uint32_t n = 0;
    float *ref = reference_logits(w.model, &n);
    REQUIRE(ref);
    struct rlimit old, small;
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    /* Writes past 1 MiB fail with EFBIG instead of the signal. */
    signal(SIGXFSZ, SIG_IGN);
    small = old;
    small.rlim_cur = 1u << 20;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    bool ok;
    npl_device_stats s = load_and_run(w.model, NULL, false, ref, NULL, &ok);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_DFL);
    CHECK(ok);
    CHECK_REPACKED(s, n);
    CHECKF(!s.load_cache_written && strstr(s.load_cache_note, "not written"), "%s",
           s.load_cache_note);
    CHECK(count_entries(w.dir) == 1); /* neither the cache nor a temporary file */
    printf("disk full: %s\n", s.load_cache_note);
    /* With room again it is written. */
    s = load_and_run(w.model, NULL, false, ref, NULL, &ok);
    CHECK(ok && s.load_cache_written && exists(w.cache));
    free(ref);
    workdir_free(&w);
}

static void test_off(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    uint32_t n = 0;
    float *ref = reference_logits(w.model, &n);
    REQUIRE(ref && n > 0);
    bool ok;
    npl_device_stats s = load_and_run(w.model, "", false, ref, NULL, &ok);
    CHECK(ok);
    CHECK_REPACKED(s, n);
    CHECK(!s.load_cache_written && strstr(s.load_cache_note, "off"));
    CHECK(count_entries(w.dir) == 1);
    /* Not read either: a cache next to the model is left alone. */
    s = load_and_run(w.model, NULL, false, ref, NULL, &ok);
    CHECK(ok && s.load_cache_written && exists(w.cache));
    s = load_and_run(w.model, "", false, ref, NULL, &ok);
    CHECK(ok);
    CHECK_REPACKED(s, n);
    free(ref);
    workdir_free(&w);
}

static void test_other_dir(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    char *cache_dir = make_tempdir();
    REQUIRE(cache_dir);
    uint32_t n = 0;
    float *ref = reference_logits(w.model, &n);
    REQUIRE(ref);
    bool ok;
    npl_device_stats s = load_and_run(w.model, cache_dir, false, ref, NULL, &ok);
    CHECK(ok);
    CHECK_REPACKED(s, n);
    CHECK(s.load_cache_written);
    char expect[PATH_MAX];
    snprintf(expect, sizeof expect, "%s/model.gguf%s", cache_dir, NPL_NPU_WEIGHT_CACHE_SUFFIX);
    CHECK(exists(expect) && count_entries(cache_dir) == 1);
    CHECK(count_entries(w.dir) == 1);
    s = load_and_run(w.model, cache_dir, false, ref, NULL, &ok);
    CHECK(ok);
    CHECK_CACHED(s, n);
    remove_tree(cache_dir);
    free(cache_dir);
    free(ref);
    workdir_free(&w);
}

static void test_relative_path(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    char cwd[PATH_MAX];
    REQUIRE(getcwd(cwd, sizeof cwd) && chdir(w.dir) == 0);
    bool ok;
    npl_device_stats s = load_and_run("model.gguf", NULL, true, NULL, NULL, &ok);
    CHECK(ok && s.load_cache_written && s.load_matrices_repacked > 0);
    CHECKF(strstr(s.load_cache_note, "./model.gguf.q4nx") != NULL, "%s", s.load_cache_note);
    uint32_t n = s.load_matrices_repacked;
    s = load_and_run("model.gguf", NULL, true, NULL, NULL, &ok);
    CHECK(ok);
    CHECK_CACHED(s, n);
    CHECK(chdir(cwd) == 0);
    CHECK(exists(w.cache) && count_entries(w.dir) == 2);
    workdir_free(&w);
}

static void test_params_field(void)
{
    workdir w;
    REQUIRE(workdir_init(&w, nt_arg(0)));
    char *cache_dir = make_tempdir();
    REQUIRE(cache_dir);
    npl_model_params p = params_for("npu-emu");
    npl_error err;
    p.npu_cache_dir = "";
    npl_model *m = npl_model_load(w.model, &p, &err);
    REQUIRE(m);
    npl_device_stats s = stats_of(m);
    CHECKF(!s.load_cache_written && strstr(s.load_cache_note, "off"), "%s", s.load_cache_note);
    npl_model_free(m);
    CHECK(count_entries(w.dir) == 1);

    p.npu_cache_dir = cache_dir;
    m = npl_model_load(w.model, &p, &err);
    REQUIRE(m);
    s = stats_of(m);
    CHECKF(s.load_cache_written, "%s", s.load_cache_note);
    npl_model_free(m);
    CHECK(count_entries(cache_dir) == 1 && count_entries(w.dir) == 1);
    m = npl_model_load(w.model, &p, &err);
    REQUIRE(m);
    s = stats_of(m);
    CHECKF(s.load_matrices_repacked == 0 && s.load_matrices_cached > 0, "%s", s.load_cache_note);
    npl_model_free(m);
    remove_tree(cache_dir);
    free(cache_dir);
    workdir_free(&w);
}

/* ---- the reader on its own ------------------------------------------- */

typedef struct small_tensor {
    const char *name;
    uint32_t type, rows, cols;
    npl_q4nx_layout layout;
    uint8_t *data;
} small_tensor;

/* Every tensor read back through c equals its original; false on the
 * first read error. */
static bool reads_back(const npl_q4nx_cache *c, small_tensor *t, size_t n, uint8_t *buf)
{
    for (size_t i = 0; i < n; i++) {
        if (npl_q4nx_cache_read(c, t[i].name, t[i].type, t[i].rows, t[i].cols, buf,
                                t[i].layout.bytes, NULL) != NPL_OK)
            return false;
        if (memcmp(buf, t[i].data, t[i].layout.bytes) != 0) {
            fprintf(stderr, "tensor %s read back different bytes\n", t[i].name);
            nt_check_failed(__FILE__, __LINE__, "see above");
        }
    }
    return true;
}

static void test_reader_bytes(void)
{
    char *dir = make_tempdir();
    REQUIRE(dir);
    char model[PATH_MAX], path[PATH_MAX];
    snprintf(model, sizeof model, "%s/m.gguf", dir);
    snprintf(path, sizeof path, "%s/m.gguf.q4nx", dir);
    REQUIRE(write_whole(model, "model", 5));
    npl_error err;
    npl_q4nx_cache_key key;
    REQUIRE(npl_q4nx_cache_key_from_file(model, 77, &key, &err) == NPL_OK);
    small_tensor t[2] = {{"a.weight", 2, 20, 256, {0}, NULL}, {"b.weight", 8, 1, 7, {0}, NULL}};
    size_t max_bytes = 0;
    for (size_t i = 0; i < 2; i++) {
        REQUIRE(npl_q4nx_layout_init(&t[i].layout, t[i].rows, t[i].cols, &err) == NPL_OK);
        t[i].data = malloc(t[i].layout.bytes);
        REQUIRE(t[i].data);
        for (size_t k = 0; k < t[i].layout.bytes; k++)
            t[i].data[k] = (uint8_t)(k * 131 + i * 7 + 1);
        if (t[i].layout.bytes > max_bytes)
            max_bytes = t[i].layout.bytes;
    }
    npl_q4nx_cache_writer *wr = NULL;
    REQUIRE(npl_q4nx_cache_writer_open(dir, "m.gguf.q4nx", &key, &wr, &err) == NPL_OK);
    for (size_t i = 0; i < 2; i++)
        REQUIRE(npl_q4nx_cache_writer_add(wr, t[i].name, t[i].type, &t[i].layout, t[i].data,
                                          &err) == NPL_OK);
    REQUIRE(npl_q4nx_cache_writer_commit(wr, &err) == NPL_OK);
    uint8_t *good = NULL, *bad = NULL, *buf = malloc(max_bytes);
    size_t len = 0;
    REQUIRE(buf && read_whole(path, &good, &len));
    bad = malloc(len);
    REQUIRE(bad);

    npl_q4nx_cache *c = NULL, *mapped = NULL;
    npl_q4nx_cache_state state;
    REQUIRE(npl_q4nx_cache_open_unmapped(dir, "m.gguf.q4nx", &key, &c, &state, &err) == NPL_OK);
    REQUIRE(npl_q4nx_cache_open(dir, "m.gguf.q4nx", &key, &mapped, &state, &err) == NPL_OK);
    CHECK(reads_back(c, t, 2, buf) && reads_back(mapped, t, 2, buf));
    CHECK(npl_q4nx_cache_find(c, "a.weight", NULL, NULL) == NULL); /* unmapped: no bytes */
    CHECK(npl_q4nx_cache_find(mapped, "a.weight", NULL, NULL) != NULL);
    /* Asking for something else is an error. */
    CHECK(npl_q4nx_cache_read(c, "a.weight", 8, 20, 256, buf, max_bytes, &err) == NPL_ERR_FORMAT);
    CHECK(npl_q4nx_cache_read(c, "a.weight", 2, 21, 256, buf, max_bytes, &err) == NPL_ERR_FORMAT);
    CHECK(npl_q4nx_cache_read(c, "a.weight", 2, 20, 512, buf, max_bytes, &err) == NPL_ERR_FORMAT);
    CHECK(npl_q4nx_cache_read(c, "c.weight", 2, 20, 256, buf, max_bytes, &err) == NPL_ERR_FORMAT);
    CHECK(npl_q4nx_cache_read(c, "a.weight", 2, 20, 256, buf, t[0].layout.bytes - 1, &err) ==
          NPL_ERR_INVALID_ARG);
    CHECK(npl_q4nx_cache_read(mapped, "a.weight", 2, 20, 512, buf, max_bytes, &err) ==
          NPL_ERR_FORMAT);
    npl_q4nx_cache_close(c);
    npl_q4nx_cache_close(mapped);

    CHECK(64 + t[0].layout.bytes + t[1].layout.bytes == (size_t)le64(good + 40)); /* no padding */

    /* Every byte flipped in turn, then every shorter length: refused when
     * opened (as damaged or stale, never missing) or when read. */
    size_t flips_detected = 0, cuts_detected = 0;
    for (size_t k = 0; k < 2 * len; k++) {
        size_t out_len = len;
        memcpy(bad, good, len);
        if (k < len)
            bad[k] ^= 0x01;
        else
            out_len = k - len;
        REQUIRE(write_whole(path, bad, out_len));
        c = NULL;
        npl_status st = npl_q4nx_cache_open_unmapped(dir, "m.gguf.q4nx", &key, &c, &state, NULL);
        CHECKF(st == NPL_OK || state == NPL_Q4NX_CACHE_CORRUPT || state == NPL_Q4NX_CACHE_STALE,
               "change %zu: state %d", k, (int)state);
        bool refused = st != NPL_OK || !reads_back(c, t, 2, buf);
        npl_q4nx_cache_close(c);
        if (refused)
            *(k < len ? &flips_detected : &cuts_detected) += 1;
    }
    CHECKF(flips_detected == len && cuts_detected == len,
           "%zu-byte cache: %zu flips and %zu truncations detected", len, flips_detected,
           cuts_detected);
    printf("%zu-byte cache: %zu of %zu flipped bytes and %zu of %zu truncations detected\n", len,
           flips_detected, len, cuts_detected, len);
    for (size_t i = 0; i < 2; i++)
        free(t[i].data);
    free(good);
    free(bad);
    free(buf);
    remove_tree(dir);
    free(dir);
}

NT_MAIN({"write_then_read", test_write_then_read}, {"stale", test_stale},
        {"damaged", test_damaged}, {"unwritable", test_unwritable},
        {"disk_full", test_disk_full}, {"off", test_off}, {"other_dir", test_other_dir},
        {"relative_path", test_relative_path},
        {"params_field", test_params_field}, {"reader_bytes", test_reader_bytes})
