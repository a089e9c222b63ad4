/* The one-time Q4NX cache file: round trip, staleness, damage, and the
 * temporary-file-then-rename write. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggml_types.h"
#include "npl_test.h"
#include "q4nx.h"
#include "q4nx_cache.h"

typedef struct fixture {
    char *dir;
    char model[512];
    npl_q4nx_cache_key key;
    npl_q4nx_layout la, lb;
    uint8_t *a, *b;
} fixture;

static void fixture_init(fixture *fx)
{
    npl_error err;
    fx->dir = nt_tempdir();
    snprintf(fx->model, sizeof fx->model, "%s/model.gguf", fx->dir);
    CHECK(nt_write_file(fx->model, "not really a model, but it has a size and an mtime") == 0);
    CHECK_OK(npl_q4nx_cache_key_from_file(fx->model, 0x1234, &fx->key, &err), &err);
    CHECK_OK(npl_q4nx_layout_init(&fx->la, 40, 300, &err), &err);
    CHECK_OK(npl_q4nx_layout_init(&fx->lb, 32, 256, &err), &err);
    fx->a = malloc(fx->la.bytes);
    fx->b = malloc(fx->lb.bytes);
    if (!fx->a || !fx->b)
        abort();
    for (size_t i = 0; i < fx->la.bytes; i++)
        fx->a[i] = (uint8_t)(i * 31 + 7);
    for (size_t i = 0; i < fx->lb.bytes; i++)
        fx->b[i] = (uint8_t)(i * 17 + 3);
}

static void fixture_free(fixture *fx)
{
    nt_rmtree(fx->dir);
    free(fx->dir);
    free(fx->a);
    free(fx->b);
}

static npl_status write_cache(fixture *fx, const char *name)
{
    npl_error err;
    npl_q4nx_cache_writer *w = NULL;
    npl_status st = npl_q4nx_cache_writer_open(fx->dir, name, &fx->key, &w, &err);
    if (st != NPL_OK)
        return st;
    st = npl_q4nx_cache_writer_add(w, "blk.0.attn_q.weight", NPL_TYPE_Q4_K, &fx->la, fx->a, &err);
    if (st == NPL_OK)
        st = npl_q4nx_cache_writer_add(w, "output.weight", NPL_TYPE_Q6_K, &fx->lb, fx->b, &err);
    if (st != NPL_OK) {
        npl_q4nx_cache_writer_abort(w);
        return st;
    }
    return npl_q4nx_cache_writer_commit(w, &err);
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

static void round_trip(void)
{
    fixture fx;
    fixture_init(&fx);
    CHECK(write_cache(&fx, "model.q4nx") == NPL_OK);
    CHECK(count_entries(fx.dir) == 2); /* the model and the cache: no temp left */
    npl_error err;
    npl_q4nx_cache *c = NULL;
    npl_q4nx_cache_state state = NPL_Q4NX_CACHE_CORRUPT;
    CHECK_OK(npl_q4nx_cache_open(fx.dir, "model.q4nx", &fx.key, &c, &state, &err), &err);
    CHECK(state == NPL_Q4NX_CACHE_VALID);
    CHECK(npl_q4nx_cache_count(c) == 2);
    uint32_t type = 0;
    npl_q4nx_layout l;
    const uint8_t *a = npl_q4nx_cache_find(c, "blk.0.attn_q.weight", &type, &l);
    CHECK(a && type == NPL_TYPE_Q4_K && l.rows == 40 && l.cols == 300 && l.bytes == fx.la.bytes);
    CHECK(a && memcmp(a, fx.a, fx.la.bytes) == 0);
    CHECK(((uintptr_t)a % NPL_Q4NX_CACHE_ALIGN) == 0);
    const uint8_t *b = npl_q4nx_cache_find(c, "output.weight", &type, &l);
    CHECK(b && type == NPL_TYPE_Q6_K && memcmp(b, fx.b, fx.lb.bytes) == 0);
    CHECK(npl_q4nx_cache_find(c, "missing", NULL, NULL) == NULL);
    npl_q4nx_cache_close(c);
    struct stat st;
    char path[600];
    snprintf(path, sizeof path, "%s/model.q4nx", fx.dir);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);
    fixture_free(&fx);
}

static void missing_is_reported(void)
{
    fixture fx;
    fixture_init(&fx);
    npl_error err;
    npl_q4nx_cache *c = NULL;
    npl_q4nx_cache_state state = NPL_Q4NX_CACHE_VALID;
    CHECK_FAILS(npl_q4nx_cache_open(fx.dir, "model.q4nx", &fx.key, &c, &state, &err),
                NPL_ERR_IO, &err, "cannot open");
    CHECK(state == NPL_Q4NX_CACHE_MISSING && c == NULL);
    fixture_free(&fx);
}

/* A changed model (size, mtime) or a different digest makes it stale. */
static void stale_is_detected(void)
{
    fixture fx;
    fixture_init(&fx);
    CHECK(write_cache(&fx, "model.q4nx") == NPL_OK);
    npl_error err;
    npl_q4nx_cache *c = NULL;
    npl_q4nx_cache_state state;
    npl_q4nx_cache_key k = fx.key;
    k.source_digest++;
    CHECK_FAILS(npl_q4nx_cache_open(fx.dir, "model.q4nx", &k, &c, &state, &err), NPL_ERR_FORMAT,
                &err, "different model");
    CHECK(state == NPL_Q4NX_CACHE_STALE);
    /* Rewrite the model with other content and an older mtime. */
    CHECK(nt_write_file(fx.model, "a different model") == 0);
    struct timespec times[2] = { { 1000, 0 }, { 1000, 0 } };
    CHECK(utimensat(AT_FDCWD, fx.model, times, 0) == 0);
    CHECK_OK(npl_q4nx_cache_key_from_file(fx.model, 0x1234, &k, &err), &err);
    CHECK(k.source_size != fx.key.source_size && k.source_mtime_ns == 1000000000000ll);
    CHECK_FAILS(npl_q4nx_cache_open(fx.dir, "model.q4nx", &k, &c, &state, &err), NPL_ERR_FORMAT,
                &err, "different model");
    CHECK(state == NPL_Q4NX_CACHE_STALE);
    /* Rebuilding under the new key replaces it atomically. */
    fx.key = k;
    CHECK(write_cache(&fx, "model.q4nx") == NPL_OK);
    CHECK_OK(npl_q4nx_cache_open(fx.dir, "model.q4nx", &k, &c, &state, &err), &err);
    CHECK(state == NPL_Q4NX_CACHE_VALID);
    npl_q4nx_cache_close(c);
    fixture_free(&fx);
}

static void flip_byte(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    if (!f)
        abort();
    if (offset < 0) {
        fseek(f, 0, SEEK_END);
        offset += ftell(f);
    }
    fseek(f, offset, SEEK_SET);
    int c = fgetc(f);
    fseek(f, offset, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

static void corruption_is_detected(void)
{
    fixture fx;
    fixture_init(&fx);
    char path[600];
    snprintf(path, sizeof path, "%s/model.q4nx", fx.dir);
    const struct {
        long offset;       /* byte to damage; 0 for truncation */
        const char *needle;
    } damage[] = {
        { 100, "checksum mismatch in tensor blk.0.attn_q.weight" },
        { -3, "table checksum" },
        { 2, "bad magic" },
        { 41, "table lies outside" },
        { 0, "table lies outside" },
    };
    for (size_t i = 0; i < sizeof damage / sizeof damage[0]; i++) {
        CHECK(write_cache(&fx, "model.q4nx") == NPL_OK);
        if (damage[i].offset)
            flip_byte(path, damage[i].offset);
        else
            CHECK(truncate(path, 20000) == 0);
        npl_error err;
        npl_q4nx_cache *c = NULL;
        npl_q4nx_cache_state state = NPL_Q4NX_CACHE_VALID;
        CHECK_FAILS(npl_q4nx_cache_open(fx.dir, "model.q4nx", &fx.key, &c, &state, &err),
                    NPL_ERR_FORMAT, &err, damage[i].needle);
        CHECK(state == NPL_Q4NX_CACHE_CORRUPT && c == NULL);
    }
    /* Too short to hold a header. */
    CHECK(truncate(path, 10) == 0);
    npl_error err;
    npl_q4nx_cache *c = NULL;
    npl_q4nx_cache_state state;
    CHECK_FAILS(npl_q4nx_cache_open(fx.dir, "model.q4nx", &fx.key, &c, &state, &err),
                NPL_ERR_FORMAT, &err, "shorter than its header");
    CHECK(state == NPL_Q4NX_CACHE_CORRUPT);
    fixture_free(&fx);
}

/* An aborted write leaves nothing behind, not even under the real name. */
static void abort_leaves_nothing(void)
{
    fixture fx;
    fixture_init(&fx);
    npl_error err;
    npl_q4nx_cache_writer *w = NULL;
    CHECK_OK(npl_q4nx_cache_writer_open(fx.dir, "model.q4nx", &fx.key, &w, &err), &err);
    CHECK_OK(npl_q4nx_cache_writer_add(w, "t", NPL_TYPE_Q4_0, &fx.lb, fx.b, &err), &err);
    CHECK(count_entries(fx.dir) == 2); /* model + temporary */
    npl_q4nx_cache_writer_abort(w);
    CHECK(count_entries(fx.dir) == 1);
    fixture_free(&fx);
}

static void writer_rejects_bad_input(void)
{
    fixture fx;
    fixture_init(&fx);
    npl_error err;
    npl_q4nx_cache_writer *w = NULL;
    CHECK_FAILS(npl_q4nx_cache_writer_open(fx.dir, "../escape.q4nx", &fx.key, &w, &err),
                NPL_ERR_INVALID_ARG, &err, "plain file name");
    CHECK_FAILS(npl_q4nx_cache_writer_open("/nonexistent-dir-npullm", "x.q4nx", &fx.key, &w, &err),
                NPL_ERR_IO, &err, "cannot create");
    CHECK_OK(npl_q4nx_cache_writer_open(fx.dir, "x.q4nx", &fx.key, &w, &err), &err);
    CHECK_OK(npl_q4nx_cache_writer_add(w, "t", NPL_TYPE_Q4_0, &fx.lb, fx.b, &err), &err);
    CHECK_FAILS(npl_q4nx_cache_writer_add(w, "t", NPL_TYPE_Q4_0, &fx.lb, fx.b, &err),
                NPL_ERR_INVALID_ARG, &err, "added twice");
    CHECK_FAILS(npl_q4nx_cache_writer_add(w, "", NPL_TYPE_Q4_0, &fx.lb, fx.b, &err),
                NPL_ERR_INVALID_ARG, &err, "tensor name");
    CHECK_OK(npl_q4nx_cache_writer_commit(w, &err), &err);
    npl_q4nx_cache *c = NULL;
    CHECK_OK(npl_q4nx_cache_open(fx.dir, "x.q4nx", &fx.key, &c, NULL, &err), &err);
    CHECK(npl_q4nx_cache_count(c) == 1);
    npl_q4nx_cache_close(c);
    fixture_free(&fx);
}

static void checksum_properties(void)
{
    uint8_t buf[100];
    for (int i = 0; i < 100; i++)
        buf[i] = (uint8_t)i;
    uint64_t h = npl_q4nx_checksum(buf, 100, 0);
    CHECK(h == npl_q4nx_checksum(buf, 100, 0));
    CHECK(h != npl_q4nx_checksum(buf, 99, 0));
    CHECK(h != npl_q4nx_checksum(buf, 100, 1));
    for (int i = 0; i < 100; i++) {
        buf[i] ^= 1;
        CHECK(npl_q4nx_checksum(buf, 100, 0) != h);
        buf[i] ^= 1;
    }
}

static const nt_case cases[] = {
    { "round_trip", round_trip },
    { "missing_is_reported", missing_is_reported },
    { "stale_is_detected", stale_is_detected },
    { "corruption_is_detected", corruption_is_detected },
    { "abort_leaves_nothing", abort_leaves_nothing },
    { "writer_rejects_bad_input", writer_rejects_bad_input },
    { "checksum_properties", checksum_properties },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
