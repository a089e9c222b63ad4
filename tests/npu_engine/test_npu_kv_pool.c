/* The KV cache pool on the emulated NPU (`test-npu-kv-pool CASE MODEL`);
 * tests/llama/test_kv_pool.c runs there too (bit identity, owners,
 * eviction) with NPULLM_TEST_DEVICE=npu-emu. This checks what is the
 * device's own:
 *   device_cache  a cached sequence keeps its device KV buffers (the
 *                 device's kv_bytes and the pool's bytes count them); a
 *                 reused prefix moves exactly the K and V rows later steps
 *                 read (every position of a global layer, the window before
 *                 the prefix's end of a local one) from buffer to buffer on
 *                 the device, no byte through the host; the rest of the
 *                 prompt runs in full chunks from the first new position,
 *                 for prefixes ending mid-chunk and at a chunk boundary;
 *                 forgetting the owner frees the device buffers.
 *   device_memory on a device with room for two and a half sequences'
 *                 caches (an emulator with a memory size), a new sequence
 *                 that does not fit evicts the least recently used cached
 *                 ones, whoever owns them; one that does not fit an empty
 *                 device fails with NPL_ERR_NOMEM. */
#include <stdint.h>

#include "backend.h"
#include "backend_npu.h"
#include "model_internal.h"
#include "npu_emu.h"
#include "npu_engine_test.h"
#include "npullm.h"

enum { CHUNK = 16, N_CTX = 128 };

/* K and V bytes a prefix of n positions moves on the device. */
static uint64_t expected_copy(const npl_model *m, uint32_t n)
{
    uint64_t row = (uint64_t)m->hp.n_head_kv * m->hp.head_dim * 2, total = 0;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        uint32_t lo = m->layers[l].local && n + 1 > m->hp.n_swa ? n + 1 - m->hp.n_swa : 0;
        total += 2 * (n - lo) * row;
    }
    return total;
}

/* Prefill all of prompt that s does not hold. */
static bool fill(npl_model *m, npl_seq *s, const int32_t *prompt, size_t n)
{
    npl_error err;
    size_t at = npl_seq_pos(s);
    if (npl_prefill(m, s, prompt + at, n - at, 0, NULL, &err) != NPL_OK) {
        fprintf(stderr, "prefill: %s\n", err.message);
        return false;
    }
    return true;
}

static void test_device_cache(void)
{
    npl_model *m = nt_load_model("npu-emu", 1, CHUNK);
    REQUIRE(m);
    uint32_t nv = npl_model_get_info(m)->n_vocab;
    npl_error err;
    npl_kv_pool *p = npl_kv_pool_create(m, UINT64_MAX, &err);
    REQUIRE(p);
    int32_t first[40], next[70];
    ne_make_prompt(first, 40, 11, nv);
    uint32_t reused = 99;
    npl_seq *s = npl_kv_pool_acquire(p, 5, first, 40, N_CTX, &reused, &err);
    REQUIRE(s);
    CHECK(reused == 0);
    REQUIRE(fill(m, s, first, 40));
    npl_device_stats st0, st1;
    REQUIRE(npl_model_device_stats(m, &st0));
    uint64_t one_kv = st0.kv_bytes;
    CHECK(one_kv > 0 && st0.kv_reused_tokens == 0 && st0.kv_copy_bytes == 0);
    npl_kv_pool_release(p, 5, s);
    REQUIRE(npl_model_device_stats(m, &st1));
    /* kept with its device buffers; no logits, its tokens */
    CHECK(npl_kv_pool_count(p) == 1 && st1.kv_bytes == one_kv);
    CHECK(npl_kv_pool_bytes(p) == one_kv + N_CTX * sizeof(int32_t));

    /* prefixes ending mid-chunk, at a boundary, one past it */
    const uint32_t shared[] = {CHUNK + 5, 2 * CHUNK, CHUNK + 1, 7};
    for (size_t c = 0; c < sizeof shared / sizeof shared[0]; c++) {
        uint32_t k = shared[c];
        memcpy(next, first, k * sizeof *first);
        ne_make_prompt(next + k, 70 - k, 40 + (uint32_t)c, nv);
        if (next[k] == first[k])
            next[k] = (first[k] + 1) % (int32_t)nv;
        REQUIRE(npl_model_device_stats(m, &st0));
        s = npl_kv_pool_acquire(p, 5, next, 70, N_CTX, &reused, &err);
        REQUIRE(s);
        CHECKF(reused == k && npl_seq_pos(s) == k, "prefix %u: reused %u", k, reused);
        REQUIRE(fill(m, s, next, 70));
        REQUIRE(npl_model_device_stats(m, &st1));
        CHECK(st1.kv_reused_tokens - st0.kv_reused_tokens == k);
        CHECKF(st1.kv_copy_bytes - st0.kv_copy_bytes == expected_copy(m, k), "prefix %u: %llu bytes copied",
               k, (unsigned long long)(st1.kv_copy_bytes - st0.kv_copy_bytes));
        /* the rest in chunks from position k: nothing but it crossed */
        uint32_t rest = 70 - k;
        CHECK(st1.prefill_tokens - st0.prefill_tokens == rest);
        CHECK(st1.prefill_chunks - st0.prefill_chunks == (rest + CHUNK - 1) / CHUNK);
        CHECK(st1.prefill.d2h_activation_bytes - st0.prefill.d2h_activation_bytes == (uint64_t)nv * 4);
        npl_kv_pool_release(p, 5, s);
        npl_kv_pool_forget(p, 5);
        /* the first prompt again, as the only cached sequence */
        s = npl_kv_pool_acquire(p, 5, first, 40, N_CTX, &reused, &err);
        REQUIRE(s);
        REQUIRE(fill(m, s, first, 40));
        npl_kv_pool_release(p, 5, s);
    }
    CHECK(npl_kv_pool_forget(p, 5) == 1);
    REQUIRE(npl_model_device_stats(m, &st1));
    CHECK(npl_kv_pool_count(p) == 0 && npl_kv_pool_bytes(p) == 0 && st1.kv_bytes == 0);
    npl_kv_pool_free(p);
    npl_model_free(m);
}

/* One request of owner: acquire, prefill, release. */
static bool turn(npl_model *m, npl_kv_pool *p, uint64_t owner, const int32_t *prompt, size_t n,
                 uint32_t *reused)
{
    npl_error err;
    npl_seq *s = npl_kv_pool_acquire(p, owner, prompt, n, N_CTX, reused, &err);
    if (!s) {
        fprintf(stderr, "acquire: %s\n", err.message);
        return false;
    }
    bool ok = fill(m, s, prompt, n);
    npl_kv_pool_release(p, owner, s);
    return ok;
}

static void test_device_memory(void)
{
    /* what the runtime and one sequence take on the device */
    npl_model *m = nt_load_model("npu-emu", 1, CHUNK);
    REQUIRE(m);
    npl_error err;
    npl_device_stats st;
    npl_seq *s = npl_seq_create(m, N_CTX, &err);
    REQUIRE(s && npl_model_device_stats(m, &st));
    uint64_t base = st.weight_bytes + st.activation_bytes, kv = st.kv_bytes;
    npl_seq_free(s);
    npl_model_free(m);

    m = nt_load_model("cpu", 1, CHUNK);
    REQUIRE(m);
    npl_npu_emu_config cfg = {.memory_bytes = base + 2 * kv + kv / 2};
    npl_npu_device *dev = NULL;
    npl_backend_npu *b = NULL;
    REQUIRE(npl_npu_emu_open(&cfg, &dev, &err) == NPL_OK);
    REQUIRE(npl_backend_npu_create_in(m, dev, "", &b, &err) == NPL_OK);
    npl_backend_attach_npu(m, b);
    uint32_t nv = npl_model_get_info(m)->n_vocab, reused = 99;
    int32_t x[30], y[30], z[30];
    ne_make_prompt(x, 30, 1, nv);
    ne_make_prompt(y, 30, 2, nv);
    ne_make_prompt(z, 30, 3, nv);
    npl_kv_pool *p = npl_kv_pool_create(m, UINT64_MAX, &err);
    REQUIRE(p);
    REQUIRE(turn(m, p, 1, x, 30, &reused));
    REQUIRE(turn(m, p, 2, y, 30, &reused));
    CHECK(npl_kv_pool_count(p) == 2);
    /* a third does not fit beside them: owner 1's (least recent) goes */
    REQUIRE(turn(m, p, 3, z, 30, &reused));
    CHECK(npl_kv_pool_count(p) == 2);
    REQUIRE(turn(m, p, 2, y, 30, &reused));
    CHECK(reused == 29);
    REQUIRE(turn(m, p, 1, x, 30, &reused));
    CHECK(reused == 0);
    /* larger than the whole device: every cached one goes, then a clear error */
    CHECK(npl_kv_pool_acquire(p, 1, x, 30, 4 * N_CTX, &reused, &err) == NULL);
    CHECK(err.code == NPL_ERR_NOMEM && strstr(err.message, "device memory full"));
    CHECK(npl_kv_pool_count(p) == 0);
    REQUIRE(turn(m, p, 1, x, 30, &reused));
    npl_kv_pool_free(p);
    npl_model_free(m); /* frees the runtime and the device */
}

NT_MAIN({"device_cache", test_device_cache}, {"device_memory", test_device_memory})
