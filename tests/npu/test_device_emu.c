/* The device interface on the emulator: residency rules, counters, the
 * group registry, validation of runs against the manifest, run lists, and
 * the XRT shim loader. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_device_backend.h"
#include "npu_emu.h"
#include "npu_instr.h"
#include "npl_test.h"
#include "xrt_shim.h"

/* y += a * x over n_embd floats, a = rms_eps: a custom group. */
static npl_status group_axpy(const npl_npu_emu_call *c, npl_error *err)
{
    const float *x = npl_npu_emu_arg(c, "x");
    float *y = npl_npu_emu_arg(c, "y");
    if (!x || !y)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "axpy: missing arguments");
    for (uint32_t i = 0; i < c->shape->n_embd; i++)
        y[i] += c->shape->rms_eps * x[i];
    return NPL_OK;
}

static const npl_npu_emu_group_def axpy_def[] = { { "axpy", group_axpy, 3 } };

static const char axpy_manifest[] =
    "npullm-npu-manifest 1\ndevice = emu\n"
    "[group axpy]\nparams = shape\nfixed = n_tokens=1\n"
    "arg = x io f32 [n_embd]\narg = y io f32 [n_embd]\narg = w static bf16 [n_embd] optional\n"
    "[group missing_impl]\narg = x io f32 [n_embd]\n";

typedef struct axpy_env {
    npl_npu_manifest *manifest;
    npl_npu_device *dev;
    npl_npu_group *group;
    npl_npu_buffer *x, *y;
} axpy_env;

static void axpy_open(axpy_env *e)
{
    npl_error err;
    memset(e, 0, sizeof *e);
    CHECK_OK(npl_npu_manifest_parse(axpy_manifest, strlen(axpy_manifest), "axpy", &e->manifest, &err), &err);
    npl_npu_emu_config cfg = { e->manifest, axpy_def, 1, 0 };
    CHECK_OK(npl_npu_emu_open(&cfg, &e->dev, &err), &err);
    CHECK_OK(npl_npu_group_load(e->dev, "axpy", &e->group, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(e->dev, 64 * sizeof(float), NPL_NPU_BUF_IO, "x", &e->x, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(e->dev, 64 * sizeof(float), NPL_NPU_BUF_IO, "y", &e->y, &err), &err);
}

static void axpy_close(axpy_env *e)
{
    npl_npu_device_destroy(e->dev);
    npl_npu_manifest_free(e->manifest);
}

static npl_npu_shape axpy_shape(uint32_t n, float a)
{
    npl_npu_shape s;
    memset(&s, 0, sizeof s);
    s.n_embd = n;
    s.n_tokens = 1;
    s.rms_eps = a;
    return s;
}

static void residency_rules(void)
{
    npl_npu_device *dev = NULL;
    npl_error err;
    CHECK_OK(npl_npu_emu_open(NULL, &dev, &err), &err);
    CHECK(strcmp(npl_npu_device_name(dev), "npu-emu") == 0);
    npl_npu_buffer *w, *im, *out, *io;
    CHECK_OK(npl_npu_buffer_alloc(dev, 4096, NPL_NPU_BUF_STATIC, "w", &w, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(dev, 1000, NPL_NPU_BUF_INTERMEDIATE, "kv", &im, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(dev, 512, NPL_NPU_BUF_OUTPUT, "logits", &out, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(dev, 256, NPL_NPU_BUF_IO, "x", &io, &err), &err);
    npl_npu_stats s;
    npl_npu_device_stats(dev, &s);
    CHECK(s.allocated_bytes[NPL_NPU_BUF_STATIC] == 4096 && s.allocated_bytes[NPL_NPU_BUF_INTERMEDIATE] == 1000);
    CHECK(npl_npu_buffer_map(im, &err) == NULL && strstr(err.message, "never visible to the host"));
    CHECK_FAILS(npl_npu_buffer_sync(im, NPL_NPU_SYNC_TO_DEVICE, 0, 0, &err), NPL_ERR_INVALID_ARG,
                &err, "intermediate buffers never cross to the host");
    CHECK_FAILS(npl_npu_buffer_sync(w, NPL_NPU_SYNC_FROM_DEVICE, 0, 0, &err), NPL_ERR_INVALID_ARG,
                &err, "weights never travel back");
    CHECK_FAILS(npl_npu_buffer_sync(out, NPL_NPU_SYNC_TO_DEVICE, 0, 0, &err), NPL_ERR_INVALID_ARG,
                &err, "written by the device only");
    CHECK_FAILS(npl_npu_buffer_sync(io, NPL_NPU_SYNC_TO_DEVICE, 200, 57, &err), NPL_ERR_INVALID_ARG,
                &err, "runs past x");
    uint8_t data[4096];
    memset(data, 7, sizeof data);
    CHECK_OK(npl_npu_buffer_write(w, 0, data, 4096, &err), &err);
    CHECK_OK(npl_npu_buffer_write(io, 16, data, 100, &err), &err);
    CHECK_OK(npl_npu_buffer_read(io, 0, data, 256, &err), &err);
    CHECK_OK(npl_npu_buffer_read(out, 0, data, 512, &err), &err);
    CHECK_OK(npl_npu_buffer_sync(io, NPL_NPU_SYNC_FROM_DEVICE, 128, 0, &err), &err); /* to the end */
    npl_npu_device_stats(dev, &s);
    CHECK(s.h2d_weight_bytes == 4096 && s.h2d_activation_bytes == 100);
    CHECK(s.d2h_activation_bytes == 256 + 512 + 128 && s.d2h_weight_bytes == 0);
    npl_npu_device_stats_reset(dev);
    npl_npu_device_stats(dev, &s);
    CHECK(s.h2d_weight_bytes == 0 && s.allocated_bytes[NPL_NPU_BUF_OUTPUT] == 512);
    npl_npu_buffer_free(out);
    npl_npu_device_stats(dev, &s);
    CHECK(s.allocated_bytes[NPL_NPU_BUF_OUTPUT] == 0);
    CHECK_FAILS(npl_npu_buffer_alloc(dev, 0, NPL_NPU_BUF_IO, "empty", &out, &err),
                NPL_ERR_INVALID_ARG, &err, "needs a device, a size");
    npl_npu_device_destroy(dev); /* frees the buffers still allocated */
}

/* Once sealed, no weight byte moves and the host copies are gone. */
static void seal_stops_weight_traffic(void)
{
    npl_npu_device *dev = NULL;
    npl_error err;
    CHECK_OK(npl_npu_emu_open(NULL, &dev, &err), &err);
    npl_npu_buffer *w;
    CHECK_OK(npl_npu_buffer_alloc(dev, 64, NPL_NPU_BUF_STATIC, "w", &w, &err), &err);
    float v[16] = { 1, 2, 3 };
    CHECK_OK(npl_npu_buffer_write(w, 0, v, sizeof v, &err), &err);
    CHECK(!npl_npu_device_weights_sealed(dev));
    CHECK_OK(npl_npu_device_seal_weights(dev, &err), &err);
    CHECK(npl_npu_device_weights_sealed(dev));
    CHECK(npl_npu_buffer_map(w, &err) == NULL && strstr(err.message, "sealed"));
    CHECK_FAILS(npl_npu_buffer_sync(w, NPL_NPU_SYNC_TO_DEVICE, 0, 0, &err), NPL_ERR_INVALID_ARG,
                &err, "no upload after load");
    npl_npu_buffer *w2;
    CHECK_FAILS(npl_npu_buffer_alloc(dev, 64, NPL_NPU_BUF_STATIC, "late", &w2, &err),
                NPL_ERR_INVALID_ARG, &err, "weights are sealed");
    float back[16];
    CHECK_OK(npl_npu_emu_peek(w, 0, back, sizeof back, &err), &err);
    CHECK(back[2] == 3.0f);
    npl_npu_stats s;
    npl_npu_device_stats(dev, &s);
    CHECK(s.h2d_weight_bytes == sizeof v);
    npl_npu_device_destroy(dev);
}

/* Host writes reach the device only through a sync, like on hardware. */
static void host_and_device_memory_are_separate(void)
{
    axpy_env e;
    axpy_open(&e);
    npl_error err;
    float *xh = npl_npu_buffer_map(e.x, &err);
    CHECK(xh != NULL);
    if (!xh) {
        axpy_close(&e);
        return;
    }
    for (int i = 0; i < 64; i++)
        xh[i] = (float)i;
    float dev_view[64];
    CHECK_OK(npl_npu_emu_peek(e.x, 0, dev_view, sizeof dev_view, &err), &err);
    CHECK(dev_view[5] == 0.0f);
    CHECK_OK(npl_npu_buffer_sync(e.x, NPL_NPU_SYNC_TO_DEVICE, 0, 0, &err), &err);
    CHECK_OK(npl_npu_emu_peek(e.x, 0, dev_view, sizeof dev_view, &err), &err);
    CHECK(dev_view[5] == 5.0f);
    npl_npu_arg args[3] = { { e.x, 0 }, { e.y, 0 }, { NULL, 0 } };
    npl_npu_shape s = axpy_shape(64, 2.0f);
    CHECK_OK(npl_npu_run(e.dev, e.group, args, &s, &err), &err);
    float *yh = npl_npu_buffer_map(e.y, &err);
    CHECK(yh && yh[5] == 0.0f); /* not synced back yet */
    CHECK_OK(npl_npu_buffer_sync(e.y, NPL_NPU_SYNC_FROM_DEVICE, 0, 0, &err), &err);
    CHECK(yh && yh[5] == 10.0f && yh[63] == 126.0f);
    axpy_close(&e);
}

static void runs_are_validated(void)
{
    axpy_env e;
    axpy_open(&e);
    npl_error err;
    npl_npu_shape s = axpy_shape(64, 1.0f);
    npl_npu_arg args[3] = { { e.x, 0 }, { NULL, 0 }, { NULL, 0 } };
    CHECK_FAILS(npl_npu_run(e.dev, e.group, args, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "required argument 'y' has no buffer");
    npl_npu_buffer *st, *big;
    CHECK_OK(npl_npu_buffer_alloc(e.dev, 256, NPL_NPU_BUF_STATIC, "weights", &st, &err), &err);
    args[1].buf = st;
    CHECK_FAILS(npl_npu_run(e.dev, e.group, args, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "'y' must be a io buffer, weights is static");
    args[1].buf = e.y;
    args[1].offset = 8;
    CHECK_FAILS(npl_npu_run(e.dev, e.group, args, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "offset 8 of 'y' is not a multiple of 64");
    args[1].offset = 16;
    CHECK_FAILS(npl_npu_run(e.dev, e.group, args, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "offset 16 of 'y' is not a multiple of 64");
    args[1].offset = 64;
    CHECK_FAILS(npl_npu_run(e.dev, e.group, args, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "'y' needs 256 bytes at offset 64, y has 256");
    args[1].offset = 0;
    CHECK_OK(npl_npu_buffer_alloc(e.dev, 1024, NPL_NPU_BUF_IO, "big", &big, &err), &err);
    args[1] = (npl_npu_arg){ big, 512 };
    CHECK_OK(npl_npu_run(e.dev, e.group, args, &s, &err), &err);
    s.n_tokens = 2;
    CHECK_FAILS(npl_npu_run(e.dev, e.group, args, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "built for n_tokens=1, the call has 2");
    s.n_tokens = 1;
    /* The optional static argument must still have the right class. */
    args[2] = (npl_npu_arg){ e.x, 0 };
    CHECK_FAILS(npl_npu_run(e.dev, e.group, args, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "'w' must be a static buffer");
    args[2] = (npl_npu_arg){ st, 0 };
    CHECK_OK(npl_npu_run(e.dev, e.group, args, &s, &err), &err);
    /* A buffer of another device. */
    npl_npu_device *other = NULL;
    npl_npu_buffer *foreign = NULL;
    CHECK_OK(npl_npu_emu_open(NULL, &other, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(other, 256, NPL_NPU_BUF_IO, "foreign", &foreign, &err), &err);
    args[0].buf = foreign;
    CHECK_FAILS(npl_npu_run(e.dev, e.group, args, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "belongs to another device");
    npl_npu_device_destroy(other);
    /* Groups: unknown to the manifest, and declared but not implemented. */
    npl_npu_group *g = NULL;
    CHECK_FAILS(npl_npu_group_load(e.dev, "nope", &g, &err), NPL_ERR_UNSUPPORTED, &err,
                "has no group 'nope'");
    CHECK_FAILS(npl_npu_group_load(e.dev, "missing_impl", &g, &err), NPL_ERR_UNSUPPORTED, &err,
                "no implementation of kernel group 'missing_impl'");
    CHECK_OK(npl_npu_group_load(e.dev, "axpy", &g, &err), &err);
    CHECK(g == e.group);
    /* Filling arguments by name. */
    npl_npu_arg named[3];
    memset(named, 0, sizeof named);
    CHECK_OK(npl_npu_args_set(named, g, "y", e.y, 0, &err), &err);
    CHECK(named[1].buf == e.y && named[0].buf == NULL);
    CHECK_FAILS(npl_npu_args_set(named, g, "z", e.y, 0, &err), NPL_ERR_INVALID_ARG, &err,
                "has no argument 'z'");
    axpy_close(&e);
}

static void run_lists_chain_runs(void)
{
    axpy_env e;
    axpy_open(&e);
    npl_error err;
    float ones[64];
    for (int i = 0; i < 64; i++)
        ones[i] = 1.0f;
    CHECK_OK(npl_npu_buffer_write(e.x, 0, ones, sizeof ones, &err), &err);
    npl_npu_device_stats_reset(e.dev);
    npl_npu_runlist *rl = NULL;
    CHECK_OK(npl_npu_runlist_create(e.dev, &rl, &err), &err);
    npl_npu_arg args[3] = { { e.x, 0 }, { e.y, 0 }, { NULL, 0 } };
    for (int i = 1; i <= 3; i++) {
        npl_npu_shape s = axpy_shape(64, (float)i);
        CHECK_OK(npl_npu_runlist_add(rl, e.group, args, &s, &err), &err);
    }
    CHECK(npl_npu_runlist_count(rl) == 3);
    CHECK_OK(npl_npu_runlist_submit(rl, &err), &err);
    float y[64];
    CHECK_OK(npl_npu_buffer_read(e.y, 0, y, sizeof y, &err), &err);
    CHECK(y[0] == 6.0f && y[63] == 6.0f);
    npl_npu_shape s = axpy_shape(64, 10.0f);
    CHECK_OK(npl_npu_runlist_set_shape(rl, 1, &s, &err), &err);
    s.n_tokens = 4;
    CHECK_FAILS(npl_npu_runlist_set_shape(rl, 0, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "built for n_tokens=1");
    CHECK_FAILS(npl_npu_runlist_set_shape(rl, 3, &s, &err), NPL_ERR_INVALID_ARG, &err, "no run 3");
    CHECK_OK(npl_npu_runlist_submit(rl, &err), &err);
    CHECK_OK(npl_npu_buffer_read(e.y, 0, y, sizeof y, &err), &err);
    CHECK(y[0] == 6.0f + 14.0f);
    npl_npu_stats st;
    npl_npu_device_stats(e.dev, &st);
    CHECK(st.dispatches == 6 && st.submissions == 2 && npl_npu_group_dispatches(e.group) == 6);
    /* Instruction words rewritten per dispatch: the runtime parameters
     * n_tokens, pos and causal (the transfers move whole arguments). */
    uint32_t words[NPL_NPU_INSTR_MAX_WORDS], n_words = 0, n_patched = 0;
    const bool present[3] = { true, true, false };
    npl_npu_shape s1 = axpy_shape(64, 1.0f);
    CHECK_OK(npl_npu_instr_build(npl_npu_group_spec_get(e.group), &s1, present, words, &n_words,
                                 &n_patched, &err), &err);
    CHECK(n_words == 2 + 1 + NPL_NPU_SHAPE_WORDS + 4 * 3); /* x and y in and out */
    CHECK(n_patched == 3);
    CHECK(st.h2d_activation_bytes == 6 * 3 * 4);
    CHECK(st.d2h_activation_bytes == 2 * sizeof y);
    /* Freeing a buffer a list uses empties the list instead of dangling. */
    npl_npu_buffer_free(e.y);
    CHECK(npl_npu_runlist_count(rl) == 0);
    CHECK_OK(npl_npu_runlist_submit(rl, &err), &err); /* empty: nothing to do */
    npl_npu_runlist_free(rl);
    axpy_close(&e);
}

static void builtin_manifest_matches_registry(void)
{
    npl_npu_manifest *m = NULL;
    npl_error err;
    const char *text = npl_npu_emu_builtin_manifest();
    CHECK_OK(npl_npu_manifest_parse(text, strlen(text), "builtin", &m, &err), &err);
    if (!m)
        return;
    CHECK(m->target == NPL_NPU_TARGET_EMU);
    size_t n = 0;
    const npl_npu_emu_group_def *defs = npl_npu_emu_builtin_groups(&n);
    CHECK(n == m->n_groups);
    for (size_t i = 0; i < n; i++)
        CHECK(npl_npu_manifest_find(m, defs[i].name) != NULL);
    npl_npu_device *dev = NULL;
    CHECK_OK(npl_npu_emu_open(NULL, &dev, &err), &err);
    for (size_t i = 0; i < m->n_groups; i++) {
        npl_npu_group *g = NULL;
        CHECK_OK(npl_npu_group_load(dev, m->groups[i].name, &g, &err), &err);
        CHECK(g && npl_npu_group_spec_get(g)->params_shape);
    }
    npl_npu_device_destroy(dev);
    /* An NPU manifest is refused by the emulator. */
    npl_npu_manifest *hw = NULL;
    const char *t = "npullm-npu-manifest 1\ndevice = xdna2\n[group g]\nxclbin = a\n# b\n"
                    "kernel = k\narg = x io f32 [1]\n";
    CHECK_OK(npl_npu_manifest_parse(t, strlen(t), "hw", &hw, &err), &err);
    npl_npu_emu_config cfg = { hw, NULL, 0, 0 };
    CHECK_FAILS(npl_npu_emu_open(&cfg, &dev, &err), NPL_ERR_INVALID_ARG, &err, "is for xdna2");
    npl_npu_manifest_free(hw);
    npl_npu_manifest_free(m);
}

static void xrt_loader(void)
{
    npl_npu_xrt_config cfg = { 0, "/nonexistent-kernels" };
    npl_npu_device *dev = NULL;
    npl_error err;
    CHECK_FAILS(npl_npu_xrt_open("/nonexistent/npullm-npu-xrt.so", &cfg, &dev, &err),
                NPL_ERR_UNSUPPORTED, &err, "cannot load the XRT shim");
    const char *no_entry = getenv("NPU_FAKE_XRT_NEW");
    const char *fake = getenv("NPU_FAKE_SHIM");
    if (!no_entry || !fake) {
        CHECK(!"NPU_FAKE_XRT_NEW and NPU_FAKE_SHIM set by meson");
        return;
    }
    CHECK_FAILS(npl_npu_xrt_open(no_entry, &cfg, &dev, &err), NPL_ERR_UNSUPPORTED, &err,
                "has no npl_npu_xrt_shim_open entry point");
    CHECK_OK(npl_npu_xrt_open(fake, &cfg, &dev, &err), &err);
    CHECK(dev && strcmp(npl_npu_device_name(dev), "npu-emu") == 0);
    npl_npu_buffer *b = NULL;
    CHECK_OK(npl_npu_buffer_alloc(dev, 64, NPL_NPU_BUF_IO, "x", &b, &err), &err);
    npl_npu_device_destroy(dev);
}


/* The device moves only what the instruction stream says: an axpy whose
 * stream reads half of x computes NaN (tile poison) on the other half, and
 * one that writes back half of y leaves the rest of y as it was. */
static const char axpy_half_manifest[] =
    "npullm-npu-manifest 1\ndevice = emu\n"
    "[group axpy]\nparams = shape\nfixed = n_tokens=1\n"
    "arg = x io f32 [n_embd]\narg = y io f32 [n_embd]\n"
    "dma = in x 0 n_embd*2\ndma = in y 0 *\ndma = out y 0 *\n"
    "[group axpy_out_half]\nparams = shape\nfixed = n_tokens=1\n"
    "arg = x io f32 [n_embd]\narg = y io f32 [n_embd]\n"
    "dma = in x 0 *\ndma = in y 0 *\ndma = out y n_embd*2 n_embd*2\n";

static const npl_npu_emu_group_def axpy_half_defs[] = {
    { "axpy", group_axpy, 2 }, { "axpy_out_half", group_axpy, 2 } };

static void stream_moves_exactly_its_transfers(void)
{
    npl_error err;
    npl_npu_manifest *m = NULL;
    CHECK_OK(npl_npu_manifest_parse(axpy_half_manifest, strlen(axpy_half_manifest), "half", &m,
                                    &err), &err);
    npl_npu_emu_config cfg = { m, axpy_half_defs, 2, 0 };
    npl_npu_device *dev = NULL;
    CHECK_OK(npl_npu_emu_open(&cfg, &dev, &err), &err);
    npl_npu_buffer *x, *y;
    CHECK_OK(npl_npu_buffer_alloc(dev, 256, NPL_NPU_BUF_IO, "x", &x, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(dev, 256, NPL_NPU_BUF_IO, "y", &y, &err), &err);
    float ones[64], got[64];
    for (int i = 0; i < 64; i++)
        ones[i] = 1.0f;
    CHECK_OK(npl_npu_buffer_write(x, 0, ones, sizeof ones, &err), &err);
    npl_npu_shape s = axpy_shape(64, 2.0f);
    npl_npu_group *half_in = NULL, *half_out = NULL;
    CHECK_OK(npl_npu_group_load(dev, "axpy", &half_in, &err), &err);
    CHECK_OK(npl_npu_group_load(dev, "axpy_out_half", &half_out, &err), &err);
    npl_npu_arg args[2] = { { x, 0 }, { y, 0 } };
    CHECK_OK(npl_npu_run(dev, half_in, args, &s, &err), &err);
    CHECK_OK(npl_npu_buffer_read(y, 0, got, sizeof got, &err), &err);
    CHECK(got[0] == 2.0f && got[31] == 2.0f && isnan(got[32]) && isnan(got[63]));
    CHECK_OK(npl_npu_buffer_write(y, 0, ones, sizeof ones, &err), &err);
    CHECK_OK(npl_npu_run(dev, half_out, args, &s, &err), &err);
    CHECK_OK(npl_npu_buffer_read(y, 0, got, sizeof got, &err), &err);
    CHECK(got[0] == 1.0f && got[31] == 1.0f && got[32] == 3.0f && got[63] == 3.0f);
    npl_npu_device_destroy(dev);
    npl_npu_manifest_free(m);
}

/* A stream the device cannot execute is refused, word by word. */
static void stream_refusals(void)
{
    npl_error err;
    npl_npu_shape shape;
    bool has_shape;
    npl_npu_instr_dma dma[NPL_NPU_MAX_DMA];
    uint32_t n = 0;
    const uint32_t good[] = { NPL_NPU_INSTR_MAGIC, 1, (2u << 24) | (1u << 16) | 1, 64, 128 };
    CHECK_OK(npl_npu_instr_parse(good, 5, 2, &shape, &has_shape, dma, &n, &err), &err);
    CHECK(n == 1 && dma[0].arg == 1 && dma[0].out && dma[0].offset == 64 && dma[0].length == 128
          && !has_shape);
    uint32_t w[8];
    memcpy(w, good, sizeof good);
    w[0] = 0x12345678;
    CHECK_FAILS(npl_npu_instr_parse(w, 5, 2, &shape, &has_shape, dma, &n, &err), NPL_ERR_FORMAT,
                &err, "bad header");
    memcpy(w, good, sizeof good);
    w[2] = (7u << 24);
    CHECK_FAILS(npl_npu_instr_parse(w, 5, 2, &shape, &has_shape, dma, &n, &err), NPL_ERR_FORMAT,
                &err, "unknown operation");
    memcpy(w, good, sizeof good);
    CHECK_FAILS(npl_npu_instr_parse(w, 5, 1, &shape, &has_shape, dma, &n, &err), NPL_ERR_FORMAT,
                &err, "names argument 1 (direction 1) of a kernel with 1");
    CHECK_FAILS(npl_npu_instr_parse(w, 4, 2, &shape, &has_shape, dma, &n, &err), NPL_ERR_FORMAT,
                &err, "cut short");
    w[1] = 2;
    CHECK_FAILS(npl_npu_instr_parse(w, 5, 2, &shape, &has_shape, dma, &n, &err), NPL_ERR_FORMAT,
                &err, "operation 1 of 2 runs past 5 words");
    w[1] = 1;
    w[5] = 0;
    CHECK_FAILS(npl_npu_instr_parse(w, 6, 2, &shape, &has_shape, dma, &n, &err), NPL_ERR_FORMAT,
                &err, "1 words after the last operation");
    w[2] = (1u << 24) | 5;
    CHECK_FAILS(npl_npu_instr_parse(w, 6, 2, &shape, &has_shape, dma, &n, &err), NPL_ERR_FORMAT,
                &err, "runtime parameter block of 5 words");
}

/* The real limits: buffer arguments (the driver's command argument area),
 * 64-byte alignment (runs_are_validated), buffer size, one xclbin. */
static void limits_are_enforced(void)
{
    npl_error err;
    npl_npu_manifest *m = NULL;
    const char *too_many = "npullm-npu-manifest 1\ndevice = emu\nmax_args = 14\n"
                           "[group g]\narg = x io f32 [n_embd]\n";
    CHECK_FAILS(npl_npu_manifest_parse(too_many, strlen(too_many), "m", &m, &err), NPL_ERR_FORMAT,
                &err, "'max_args' must be 1..13: the driver's command argument area holds 104");
    const char *over = "npullm-npu-manifest 1\ndevice = emu\nmax_args = 2\n"
                       "[group g]\narg = a io f32 [n_embd]\narg = b io f32 [n_embd]\n"
                       "arg = c io f32 [n_embd]\n";
    CHECK_FAILS(npl_npu_manifest_parse(over, strlen(over), "m", &m, &err), NPL_ERR_FORMAT, &err,
                "group 'g' takes 3 buffer arguments, more than max_args = 2");
    char big[4096];
    int len = snprintf(big, sizeof big, "npullm-npu-manifest 1\ndevice = emu\n[group g]\n");
    for (int i = 0; i < 14; i++)
        len += snprintf(big + len, sizeof big - (size_t)len, "arg = a%d io f32 [n_embd]\n", i);
    CHECK_FAILS(npl_npu_manifest_parse(big, (size_t)len, "m", &m, &err), NPL_ERR_FORMAT, &err,
                "at most 13 buffer arguments (the driver's command argument area holds 104 bytes)");
    const char *two = "npullm-npu-manifest 1\ndevice = xdna2\n"
                      "[group a]\nxclbin = a.xclbin\nkernel = K\narg = x io f32 [n_embd]\n"
                      "[group b]\nxclbin = b.xclbin\nkernel = K\narg = x io f32 [n_embd]\n";
    CHECK_FAILS(npl_npu_manifest_parse(two, strlen(two), "m", &m, &err), NPL_ERR_FORMAT, &err,
                "every group must be in one xclbin (a.xclbin)");
    const char *bad_dma[] = {
        "dma = out w 0 *\n", "'dma out' to 'w': static buffers are never written",
        "dma = in z 0 *\n", "'dma' names 'z', which is not an argument declared above",
        "dma = in x 0 *\n", "no transfer moves argument 'w'",
        "dma = sideways x 0 *\n", "'dma' starts with in or out",
        "dma = in x 0 n_embd * 4\n", "no spaces inside an expression",
    };
    for (size_t i = 0; i < sizeof bad_dma / sizeof bad_dma[0]; i += 2) {
        len = snprintf(big, sizeof big, "npullm-npu-manifest 1\ndevice = emu\n[group g]\n"
                       "arg = x io f32 [n_embd]\narg = w static bf16 [n_embd]\n%s", bad_dma[i]);
        CHECK_FAILS(npl_npu_manifest_parse(big, (size_t)len, "m", &m, &err), NPL_ERR_FORMAT, &err,
                    bad_dma[i + 1]);
    }
    /* Without max_args a group gets the 5 buffer arguments stock aiecc
     * kernels declare. */
    len = snprintf(big, sizeof big, "npullm-npu-manifest 1\ndevice = emu\n[group g]\n");
    for (int i = 0; i < 6; i++)
        len += snprintf(big + len, sizeof big - (size_t)len, "arg = a%d io f32 [n_embd]\n", i);
    CHECK_FAILS(npl_npu_manifest_parse(big, (size_t)len, "m", &m, &err), NPL_ERR_FORMAT, &err,
                "group 'g' takes 6 buffer arguments, more than max_args = 5");
    /* Packed arguments: parts only of a pack declared above, before the
     * transfers, and a pack needs parts. */
    const char *bad_pack[] = {
        "arg = w static pack\n", "packed argument 'w' has no parts",
        "arg = w static pack [n_embd]\n", "packed argument 'w' takes no shape",
        "arg = w static bf16 [n_embd]\npart = w a bf16 [n_embd]\n",
        "'part' names 'w', which is not a packed argument declared above",
        "arg = w static pack\npart = w x bf16 [n_embd]\n", "part 'x' declared twice",
        "arg = w static pack\npart = w a pack\n", "unknown element type for 'a'",
        "arg = w static pack\npart = w a bf16 [n_embd] optional\n",
        "unexpected text after the shape of 'a'",
        "arg = w static pack\ndma = in w 0 *\npart = w a bf16 [n_embd]\n",
        "parts come before the transfers",
    };
    for (size_t i = 0; i < sizeof bad_pack / sizeof bad_pack[0]; i += 2) {
        len = snprintf(big, sizeof big, "npullm-npu-manifest 1\ndevice = emu\n[group g]\n"
                       "arg = x io f32 [n_embd]\n%s", bad_pack[i]);
        CHECK_FAILS(npl_npu_manifest_parse(big, (size_t)len, "m", &m, &err), NPL_ERR_FORMAT, &err,
                    bad_pack[i + 1]);
    }
    /* The kernel's declared argument count must be what the manifest
     * binds, as XRT's get_num_args() is checked on the NPU. */
    const char *two_args = "npullm-npu-manifest 1\ndevice = emu\n"
                           "[group axpy]\nparams = shape\narg = x io f32 [n_embd]\n"
                           "arg = y io f32 [n_embd]\n";
    CHECK_OK(npl_npu_manifest_parse(two_args, strlen(two_args), "m", &m, &err), &err);
    npl_npu_emu_config cfg = { m, axpy_def, 1, 0 };
    npl_npu_device *dev = NULL;
    CHECK_OK(npl_npu_emu_open(&cfg, &dev, &err), &err);
    npl_npu_group *g = NULL;
    CHECK_FAILS(npl_npu_group_load(dev, "axpy", &g, &err), NPL_ERR_UNSUPPORTED, &err,
                "kernel group 'axpy' declares 3 buffer arguments, the manifest binds 2");
    npl_npu_device_destroy(dev);
    npl_npu_manifest_free(m);
    m = NULL;
    CHECK_OK(npl_npu_emu_open(NULL, &dev, &err), &err);
    npl_npu_buffer *b = NULL;
    CHECK_FAILS(npl_npu_buffer_alloc(dev, NPL_NPU_MAX_BUFFER_BYTES + 64, NPL_NPU_BUF_STATIC, "huge",
                                     &b, &err), NPL_ERR_INVALID_ARG, &err,
                "transfers address it with 32-bit words");
    npl_npu_device_destroy(dev);
}

/* A backend that keeps buffers in host memory and records the instruction
 * stream of every run it is asked to execute: for checking what the host
 * hands a real device. */
typedef struct recorder {
    uint32_t words[64];
    uint32_t n_words;
    size_t runs;
} recorder;

static void rec_destroy(void *impl) { (void)impl; }
static npl_status rec_alloc(void *impl, npl_npu_buffer *buf, npl_error *err)
{
    (void)impl;
    buf->backend = calloc(1, buf->size);
    return buf->backend ? NPL_OK : npl_error_set(err, NPL_ERR_NOMEM, "no memory");
}
static void rec_free(void *impl, npl_npu_buffer *buf) { (void)impl; free(buf->backend); }
static void *rec_map(void *impl, npl_npu_buffer *buf, npl_error *err)
{
    (void)impl;
    (void)err;
    return buf->backend;
}
static npl_status rec_sync(void *impl, npl_npu_buffer *buf, npl_npu_sync_dir dir, size_t offset,
                           size_t size, npl_error *err)
{
    (void)impl, (void)buf, (void)dir, (void)offset, (void)size, (void)err;
    return NPL_OK;
}
static npl_status rec_group_load(void *impl, npl_npu_group *g, npl_error *err)
{
    (void)impl, (void)g, (void)err;
    return NPL_OK;
}
static void rec_group_free(void *impl, npl_npu_group *g) { (void)impl, (void)g; }
static npl_status rec_submit(void *impl, npl_npu_runlist *rl, npl_error *err)
{
    (void)err;
    recorder *r = impl;
    for (size_t i = 0; i < rl->count; i++) {
        r->n_words = rl->runs[i].n_instr < 64 ? rl->runs[i].n_instr : 64;
        memcpy(r->words, rl->runs[i].instr, r->n_words * sizeof(uint32_t));
        r->runs++;
    }
    return NPL_OK;
}
static const npl_npu_backend_ops rec_ops = {
    "recorder", rec_destroy, rec_alloc, rec_free, rec_map, rec_sync, NULL,
    rec_group_load, rec_group_free, NULL, NULL, rec_submit, NULL,
};

/* A kernel build's own runtime sequence: the host sends the file's words
 * with the patch table's words rewritten for each run, and refuses a
 * patch past the file. */
static void instr_file_is_patched_per_run(void)
{
    char *dir = nt_tempdir();
    char path[1024];
    npl_error err;
    snprintf(path, sizeof path, "%s/seq.bin", dir);
    uint8_t bytes[32];
    for (int i = 0; i < 32; i++)
        bytes[i] = (uint8_t)(i % 4 == 0 ? 0x10 + i / 4 : 0); /* words 0x10 .. 0x17 */
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, sizeof bytes, f) == sizeof bytes);
    if (f)
        fclose(f);
    static const char text[] =
        "npullm-npu-manifest 1\ndevice = xdna2\nmax_args = 1\n"
        "[group g]\nxclbin = k.xclbin\nkernel = K\ninstr = seq.bin\n"
        "patch = 2 pos*64\npatch = 5 n_tokens*n_embd*4\npatch = 6 n_embd\n"
        "arg = x io f32 [n_embd]\n"
        "[group past]\nxclbin = k.xclbin\nkernel = K\ninstr = seq.bin\npatch = 8 pos\n"
        "arg = x io f32 [n_embd]\n";
    npl_npu_manifest *m = NULL;
    CHECK_OK(npl_npu_manifest_parse(text, strlen(text), "rec", &m, &err), &err);
    recorder rec;
    memset(&rec, 0, sizeof rec);
    npl_npu_device *dev = NULL;
    CHECK_OK(npl_npu_device_create(&rec_ops, &rec, "recorder", m, true, &dev, &err), &err);
    npl_npu_group *g = NULL, *past = NULL;
    CHECK_FAILS(npl_npu_group_load(dev, "g", &g, &err), NPL_ERR_INVALID_ARG, &err,
                "names an instruction file but the device has no kernel directory");
    CHECK_OK(npl_npu_device_set_kernel_dir(dev, dir, &err), &err);
    CHECK_OK(npl_npu_group_load(dev, "g", &g, &err), &err);
    npl_npu_buffer *x = NULL;
    CHECK_OK(npl_npu_buffer_alloc(dev, 256, NPL_NPU_BUF_IO, "x", &x, &err), &err);
    npl_npu_buffer *x2 = NULL; /* this backend has no copies */
    CHECK_OK(npl_npu_buffer_alloc(dev, 256, NPL_NPU_BUF_IO, "x2", &x2, &err), &err);
    CHECK_FAILS(npl_npu_buffer_copy(x2, 0, x, 0, 64, &err), NPL_ERR_UNSUPPORTED, &err,
                "cannot copy buffers");
    npl_npu_runlist *rl = NULL;
    CHECK_OK(npl_npu_runlist_create(dev, &rl, &err), &err);
    npl_npu_arg a[1] = { { x, 0 } };
    npl_npu_shape s = axpy_shape(64, 1.0f);
    s.pos = 3;
    CHECK_OK(npl_npu_runlist_add(rl, g, a, &s, &err), &err);
    npl_npu_device_stats_reset(dev);
    CHECK_OK(npl_npu_runlist_submit(rl, &err), &err);
    const uint32_t want3[8] = { 0x10, 0x11, 192, 0x13, 0x14, 256, 64, 0x17 };
    CHECK(rec.runs == 1 && rec.n_words == 8 && memcmp(rec.words, want3, sizeof want3) == 0);
    s.pos = 4;
    CHECK_OK(npl_npu_runlist_set_shape(rl, 0, &s, &err), &err);
    CHECK_OK(npl_npu_runlist_submit(rl, &err), &err);
    CHECK(rec.runs == 2 && rec.words[2] == 256 && rec.words[5] == 256 && rec.words[6] == 64);
    /* Two of the three patches follow the position or rows: 8 bytes per
     * dispatch. */
    npl_npu_stats st;
    npl_npu_device_stats(dev, &st);
    CHECK(st.h2d_activation_bytes == 2 * 2 * 4);
    CHECK_OK(npl_npu_group_load(dev, "past", &past, &err), &err);
    CHECK_FAILS(npl_npu_runlist_add(rl, past, a, &s, &err), NPL_ERR_INVALID_ARG, &err,
                "patch of word 8, but seq.bin has 8 words");
    npl_npu_device_destroy(dev);
    nt_rmtree(dir);
    free(dir);
}

/* A copy between buffers stays on the device: intermediate buffers (a KV
 * cache) take another's bytes without a host view, counted as d2d;
 * weights, ranges past a buffer, one buffer onto itself, another device's
 * buffer and a backend without copies are refused. */
static void buffers_copy_on_device(void)
{
    npl_npu_device *dev = NULL, *other = NULL;
    npl_error err;
    CHECK_OK(npl_npu_emu_open(NULL, &dev, &err), &err);
    CHECK_OK(npl_npu_emu_open(NULL, &other, &err), &err);
    if (!dev || !other) {
        npl_npu_device_destroy(dev);
        npl_npu_device_destroy(other);
        return;
    }
    npl_npu_buffer *io = NULL, *a = NULL, *b = NULL, *w = NULL, *far = NULL;
    CHECK_OK(npl_npu_buffer_alloc(dev, 256, NPL_NPU_BUF_IO, "io", &io, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(dev, 256, NPL_NPU_BUF_INTERMEDIATE, "a", &a, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(dev, 128, NPL_NPU_BUF_INTERMEDIATE, "b", &b, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(dev, 64, NPL_NPU_BUF_STATIC, "w", &w, &err), &err);
    CHECK_OK(npl_npu_buffer_alloc(other, 64, NPL_NPU_BUF_INTERMEDIATE, "far", &far, &err), &err);
    uint8_t bytes[256], got[128];
    for (int i = 0; i < 256; i++)
        bytes[i] = (uint8_t)i;
    CHECK_OK(npl_npu_buffer_write(io, 0, bytes, sizeof bytes, &err), &err);
    npl_npu_stats s0, s1;
    npl_npu_device_stats(dev, &s0);
    CHECK_OK(npl_npu_buffer_copy(a, 0, io, 0, 256, &err), &err);
    CHECK_OK(npl_npu_buffer_copy(b, 64, a, 100, 64, &err), &err);
    CHECK_OK(npl_npu_buffer_copy(b, 0, a, 0, 0, &err), &err);
    npl_npu_device_stats(dev, &s1);
    CHECK(s1.d2d_bytes - s0.d2d_bytes == 320);
    CHECK(s1.h2d_activation_bytes == s0.h2d_activation_bytes &&
          s1.d2h_activation_bytes == s0.d2h_activation_bytes);
    CHECK_OK(npl_npu_emu_peek(b, 0, got, sizeof got, &err), &err);
    CHECK(got[0] == 0 && got[63] == 0 && got[64] == 100 && got[127] == 163);
    CHECK_FAILS(npl_npu_buffer_copy(b, 65, a, 0, 64, &err), NPL_ERR_INVALID_ARG, &err, "runs past");
    CHECK_FAILS(npl_npu_buffer_copy(b, 0, a, 250, 8, &err), NPL_ERR_INVALID_ARG, &err, "runs past");
    CHECK_FAILS(npl_npu_buffer_copy(a, 0, a, 64, 8, &err), NPL_ERR_INVALID_ARG, &err, "distinct");
    CHECK_FAILS(npl_npu_buffer_copy(a, 0, w, 0, 8, &err), NPL_ERR_INVALID_ARG, &err, "weights");
    CHECK_FAILS(npl_npu_buffer_copy(w, 0, a, 0, 8, &err), NPL_ERR_INVALID_ARG, &err, "weights");
    CHECK_FAILS(npl_npu_buffer_copy(far, 0, a, 0, 8, &err), NPL_ERR_INVALID_ARG, &err,
                "different devices");
    npl_npu_device_destroy(other);
    npl_npu_device_destroy(dev);
}

static const nt_case cases[] = {
    { "residency_rules", residency_rules },
    { "seal_stops_weight_traffic", seal_stops_weight_traffic },
    { "host_and_device_memory_are_separate", host_and_device_memory_are_separate },
    { "runs_are_validated", runs_are_validated },
    { "run_lists_chain_runs", run_lists_chain_runs },
    { "builtin_manifest_matches_registry", builtin_manifest_matches_registry },
    { "xrt_loader", xrt_loader },
    { "stream_moves_exactly_its_transfers", stream_moves_exactly_its_transfers },
    { "stream_refusals", stream_refusals },
    { "limits_are_enforced", limits_are_enforced },
    { "instr_file_is_patched_per_run", instr_file_is_patched_per_run },
    { "buffers_copy_on_device", buffers_copy_on_device },
};

int main(int argc, char **argv)
{
    return nt_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
