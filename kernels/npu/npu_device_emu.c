/* The emulator backend: buffers are a host copy plus a separate "device"
 * copy, syncs are memcpy between them, and a run calls the registered C
 * implementation of the group on device memory. */
#include <stdlib.h>
#include <string.h>

#include "npu_device_backend.h"
#include "npu_emu.h"

typedef struct emu_device {
    const npl_npu_emu_group_def *extra;
    size_t n_extra;
    uint64_t memory_bytes; /* 0: no limit */
    uint64_t used_bytes;
} emu_device;

typedef struct emu_buffer {
    uint8_t *host;   /* NULL for intermediate buffers and released weights */
    uint8_t *device;
} emu_buffer;

static void emu_destroy(void *impl)
{
    free(impl);
}

static npl_status emu_buffer_alloc(void *impl, npl_npu_buffer *buf, npl_error *err)
{
    emu_device *d = impl;
    if (d->memory_bytes && buf->size > d->memory_bytes - d->used_bytes)
        return npl_error_set(err, NPL_ERR_NOMEM,
                             "npu-emu: device memory full: %zu bytes (%s) do not fit in the %llu "
                             "of %llu bytes free", buf->size, buf->label,
                             (unsigned long long)(d->memory_bytes - d->used_bytes),
                             (unsigned long long)d->memory_bytes);
    emu_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu-emu: no memory for a buffer");
    b->device = calloc(1, buf->size);
    if (buf->cls != NPL_NPU_BUF_INTERMEDIATE)
        b->host = calloc(1, buf->size);
    if (!b->device || (buf->cls != NPL_NPU_BUF_INTERMEDIATE && !b->host)) {
        free(b->device);
        free(b->host);
        free(b);
        return npl_error_set(err, NPL_ERR_NOMEM, "npu-emu: no memory for %zu bytes (%s)",
                             buf->size, buf->label);
    }
    buf->backend = b;
    d->used_bytes += buf->size;
    return NPL_OK;
}

static void emu_buffer_free(void *impl, npl_npu_buffer *buf)
{
    emu_device *d = impl;
    emu_buffer *b = buf->backend;
    if (!b)
        return;
    d->used_bytes -= buf->size;
    free(b->host);
    free(b->device);
    free(b);
}

static void *emu_buffer_map(void *impl, npl_npu_buffer *buf, npl_error *err)
{
    (void)impl;
    emu_buffer *b = buf->backend;
    if (!b->host)
        npl_error_set(err, NPL_ERR_INVALID_ARG, "npu-emu: %s has no host view", buf->label);
    return b->host;
}

static npl_status emu_buffer_sync(void *impl, npl_npu_buffer *buf, npl_npu_sync_dir dir,
                                  size_t offset, size_t size, npl_error *err)
{
    (void)impl;
    emu_buffer *b = buf->backend;
    if (!b->host)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu-emu: %s has no host view", buf->label);
    if (dir == NPL_NPU_SYNC_TO_DEVICE)
        memcpy(b->device + offset, b->host + offset, size);
    else
        memcpy(b->host + offset, b->device + offset, size);
    return NPL_OK;
}

static void emu_buffer_release_host(void *impl, npl_npu_buffer *buf)
{
    (void)impl;
    emu_buffer *b = buf->backend;
    free(b->host);
    b->host = NULL;
}

static const npl_npu_emu_group_def *find_impl(const emu_device *d, const char *name)
{
    for (size_t i = 0; i < d->n_extra; i++)
        if (strcmp(d->extra[i].name, name) == 0)
            return &d->extra[i];
    size_t n = 0;
    const npl_npu_emu_group_def *builtin = npl_npu_emu_builtin_groups(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(builtin[i].name, name) == 0)
            return &builtin[i];
    return NULL;
}

static npl_status emu_group_load(void *impl, npl_npu_group *group, npl_error *err)
{
    const npl_npu_emu_group_def *def = find_impl(impl, group->spec->name);
    if (!def)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu-emu: no implementation of kernel group '%s'", group->spec->name);
    /* As the XRT shim checks the xclbin's kernel: the contract must bind
     * exactly the buffer arguments the kernel declares. */
    if (def->n_args != group->spec->n_args)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu-emu: kernel group '%s' declares %u buffer arguments, the "
                             "manifest binds %u", group->spec->name, def->n_args,
                             group->spec->n_args);
    group->backend = (void *)(uintptr_t)def;
    return NPL_OK;
}

static void emu_group_free(void *impl, npl_npu_group *group)
{
    (void)impl;
    group->backend = NULL;
}

/* Poison for tile memory no transfer filled: NaN as f32 and as bf16, so
 * a kernel that reads bytes the instruction stream did not move computes
 * garbage, as on the device. */
#define EMU_TILE_POISON 0xff

/* Executes one run as the device would: decodes its instruction stream,
 * moves exactly the bytes its transfers name into tile memory, runs the
 * group on tile memory and moves the output transfers back. Arguments no
 * transfer reads are poison; bytes no transfer writes back stay on the
 * tiles. Weights read whole are used in place (no copy: same bytes). */
static npl_status emu_run(const npl_npu_run_entry *r, npl_error *err)
{
    const npl_npu_group_spec *spec = r->group->spec;
    const npl_npu_emu_group_def *def = r->group->backend;
    npl_npu_shape shape;
    memset(&shape, 0, sizeof shape);
    bool has_shape = false;
    npl_npu_instr_dma dma[NPL_NPU_MAX_DMA];
    uint32_t n_dma = 0;
    npl_error sub;
    if (npl_npu_instr_parse(r->instr, r->n_instr, spec->n_args, &shape, &has_shape, dma, &n_dma,
                            &sub) != NPL_OK)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu-emu: %s: %s", spec->name, sub.message);
    npl_npu_emu_call call;
    memset(&call, 0, sizeof call);
    call.spec = spec;
    call.shape = &shape;
    uint8_t *tile[NPL_NPU_MAX_ARGS] = {0};
    npl_status st = NPL_OK;
    for (uint32_t i = 0; i < n_dma && st == NPL_OK; i++) {
        const npl_npu_instr_dma *d = &dma[i];
        const npl_npu_arg *arg = &r->args[d->arg];
        if (!arg->buf) {
            st = npl_error_set(err, NPL_ERR_INVALID_ARG,
                               "npu-emu: %s: transfer of '%s', which is not bound", spec->name,
                               spec->args[d->arg].name);
            break;
        }
        size_t view = 0;
        if ((st = npl_npu_group_arg_bytes(spec, d->arg, &shape, &view, err)) != NPL_OK)
            break;
        uint64_t end = (uint64_t)d->offset + d->length;
        if (end > view || arg->offset + end > arg->buf->size) {
            st = npl_error_set(err, NPL_ERR_INVALID_ARG,
                               "npu-emu: %s: transfer %s of '%s' [%u, +%u) runs past %s "
                               "(the kernel sees %zu bytes at offset %zu of %zu)", spec->name,
                               d->out ? "out" : "in", spec->args[d->arg].name, d->offset,
                               d->length, arg->buf->label, view, arg->offset, arg->buf->size);
            break;
        }
        emu_buffer *b = arg->buf->backend;
        uint8_t *dev = b->device + arg->offset;
        call.bytes[d->arg] = view;
        if (!call.data[d->arg]) {
            if (!d->out && arg->buf->cls == NPL_NPU_BUF_STATIC && d->offset == 0 && d->length == view) {
                call.data[d->arg] = dev; /* read-only weights, read whole */
                continue;
            }
            tile[d->arg] = malloc(view ? view : 1);
            if (!tile[d->arg]) {
                st = npl_error_set(err, NPL_ERR_NOMEM, "npu-emu: no memory for %zu bytes of tile",
                                   view);
                break;
            }
            memset(tile[d->arg], EMU_TILE_POISON, view);
            call.data[d->arg] = tile[d->arg];
        }
        if (!d->out && tile[d->arg])
            memcpy(tile[d->arg] + d->offset, dev + d->offset, d->length);
    }
    if (st == NPL_OK && !has_shape && spec->params_shape)
        st = npl_error_set(err, NPL_ERR_INVALID_ARG,
                           "npu-emu: %s: the instruction stream carries no runtime parameters",
                           spec->name);
    if (st == NPL_OK)
        st = def->run(&call, err);
    for (uint32_t i = 0; i < n_dma && st == NPL_OK; i++) {
        const npl_npu_instr_dma *d = &dma[i];
        if (!d->out || !tile[d->arg])
            continue;
        emu_buffer *b = r->args[d->arg].buf->backend;
        memcpy(b->device + r->args[d->arg].offset + d->offset, tile[d->arg] + d->offset, d->length);
    }
    for (uint32_t a = 0; a < NPL_NPU_MAX_ARGS; a++)
        free(tile[a]);
    return st;
}

static npl_status emu_runlist_submit(void *impl, npl_npu_runlist *rl, npl_error *err)
{
    (void)impl;
    for (size_t i = 0; i < rl->count; i++) {
        npl_status st = emu_run(&rl->runs[i], err);
        if (st != NPL_OK)
            return st;
    }
    return NPL_OK;
}

static npl_status emu_buffer_copy(void *impl, npl_npu_buffer *dst, size_t dst_off,
                                  npl_npu_buffer *src, size_t src_off, size_t size,
                                  npl_error *err)
{
    (void)impl;
    (void)err;
    emu_buffer *d = dst->backend, *s = src->backend;
    memcpy(d->device + dst_off, s->device + src_off, size);
    return NPL_OK;
}

static const npl_npu_backend_ops emu_ops = {
    "emu",
    emu_destroy,
    emu_buffer_alloc,
    emu_buffer_free,
    emu_buffer_map,
    emu_buffer_sync,
    emu_buffer_release_host,
    emu_group_load,
    emu_group_free,
    NULL,
    NULL,
    emu_runlist_submit,
    emu_buffer_copy,
};

void *npl_npu_emu_arg(const npl_npu_emu_call *call, const char *name)
{
    int i = npl_npu_group_arg_index(call->spec, name);
    if (i >= 0)
        return call->data[i];
    /* A part of a packed argument: at its offset, absent when empty. */
    int p = npl_npu_group_part_index(call->spec, name);
    if (p < 0 || !call->data[call->spec->parts[p].arg])
        return NULL;
    size_t off = 0, bytes = 0;
    if (npl_npu_part_place(call->spec, (uint32_t)p, call->shape, &off, &bytes, NULL) != NPL_OK
        || bytes == 0)
        return NULL;
    return (uint8_t *)call->data[call->spec->parts[p].arg] + off;
}

npl_status npl_npu_emu_open(const npl_npu_emu_config *config, npl_npu_device **out,
                            npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu-emu: no output pointer");
    *out = NULL;
    npl_npu_manifest *manifest = NULL;
    bool owns = false;
    if (config && config->manifest) {
        if (config->manifest->target != NPL_NPU_TARGET_EMU)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "npu-emu: the manifest is for %s, not emu",
                                 npl_npu_target_name(config->manifest->target));
        manifest = (npl_npu_manifest *)(uintptr_t)config->manifest;
    } else {
        const char *text = npl_npu_emu_builtin_manifest();
        npl_status st = npl_npu_manifest_parse(text, strlen(text), "npu-emu built-in manifest",
                                               &manifest, err);
        if (st != NPL_OK)
            return st;
        owns = true;
    }
    emu_device *d = calloc(1, sizeof *d);
    if (!d) {
        if (owns)
            npl_npu_manifest_free(manifest);
        return npl_error_set(err, NPL_ERR_NOMEM, "npu-emu: no memory");
    }
    if (config) {
        d->extra = config->extra_groups;
        d->n_extra = config->n_extra_groups;
        d->memory_bytes = config->memory_bytes;
    }
    npl_status st = npl_npu_device_create(&emu_ops, d, "npu-emu", manifest, owns, out, err);
    if (st != NPL_OK) {
        free(d);
        if (owns)
            npl_npu_manifest_free(manifest);
    }
    return st;
}

npl_status npl_npu_emu_peek(const npl_npu_buffer *buf, size_t offset, void *dst, size_t size,
                            npl_error *err)
{
    if (!buf || !dst)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu-emu: nothing to peek");
    if (npl_npu_device_ops(buf->dev) != &emu_ops)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "npu-emu: peek works on the emulator only");
    if (offset > buf->size || size > buf->size - offset)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu-emu: peek past the end of %s",
                             buf->label);
    const emu_buffer *b = buf->backend;
    memcpy(dst, b->device + offset, size);
    return NPL_OK;
}
