/* The backend-independent half of the device interface: validation,
 * residency rules and counters. */
#include "npu_device.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_device_backend.h"

struct npl_npu_device {
    const npl_npu_backend_ops *ops;
    void *impl;
    char name[32];
    npl_npu_manifest *manifest;
    bool owns_manifest;
    char *kernel_dir;
    bool sealed;
    npl_npu_stats stats;
    npl_npu_buffer *buffers;
    npl_npu_group *groups;
    npl_npu_runlist *runlists;
};

npl_status npl_npu_device_create(const npl_npu_backend_ops *ops, void *impl, const char *name,
                                 npl_npu_manifest *manifest, bool owns_manifest,
                                 npl_npu_device **out, npl_error *err)
{
    if (!out || !ops || !manifest || !name)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: device needs ops, a name and a manifest");
    *out = NULL;
    npl_npu_device *dev = calloc(1, sizeof *dev);
    if (!dev)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for a device");
    dev->ops = ops;
    dev->impl = impl;
    snprintf(dev->name, sizeof dev->name, "%s", name);
    dev->manifest = manifest;
    dev->owns_manifest = owns_manifest;
    *out = dev;
    return NPL_OK;
}

const char *npl_npu_device_name(const npl_npu_device *dev)
{
    return dev ? dev->name : "";
}

const npl_npu_manifest *npl_npu_device_manifest(const npl_npu_device *dev)
{
    return dev ? dev->manifest : NULL;
}

const npl_npu_backend_ops *npl_npu_device_ops(const npl_npu_device *dev)
{
    return dev ? dev->ops : NULL;
}

const char *npl_npu_device_kernel_dir(const npl_npu_device *dev)
{
    return dev ? dev->kernel_dir : NULL;
}

npl_status npl_npu_device_set_kernel_dir(npl_npu_device *dev, const char *dir, npl_error *err)
{
    char *copy = dir ? strdup(dir) : NULL;
    if (dir && !copy)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory");
    free(dev->kernel_dir);
    dev->kernel_dir = copy;
    return NPL_OK;
}

static void runlist_unprepare(npl_npu_runlist *rl)
{
    if (rl->prepared && rl->dev->ops->runlist_release)
        rl->dev->ops->runlist_release(rl->dev->impl, rl);
    rl->prepared = false;
    rl->backend = NULL;
}

void npl_npu_device_destroy(npl_npu_device *dev)
{
    if (!dev)
        return;
    while (dev->runlists)
        npl_npu_runlist_free(dev->runlists);
    while (dev->buffers)
        npl_npu_buffer_free(dev->buffers);
    while (dev->groups) {
        npl_npu_group *g = dev->groups;
        dev->groups = g->next;
        dev->ops->group_free(dev->impl, g);
        free(g->tmpl);
        free(g);
    }
    dev->ops->destroy(dev->impl);
    if (dev->owns_manifest)
        npl_npu_manifest_free(dev->manifest);
    free(dev->kernel_dir);
    free(dev);
}

/* ---- buffers ---- */

static bool runlist_uses(const npl_npu_runlist *rl, const npl_npu_buffer *buf)
{
    for (size_t i = 0; i < rl->count; i++)
        for (uint32_t a = 0; a < NPL_NPU_MAX_ARGS; a++)
            if (rl->runs[i].args[a].buf == buf)
                return true;
    return false;
}

npl_status npl_npu_buffer_alloc(npl_npu_device *dev, size_t size, npl_npu_buf_class cls,
                                const char *label, npl_npu_buffer **out, npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: no output pointer");
    *out = NULL;
    if (!dev || size == 0 || (unsigned)cls >= NPL_NPU_BUF_CLASS_COUNT)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: buffer needs a device, a size and a valid class");
    if (size > NPL_NPU_MAX_BUFFER_BYTES)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: buffer %s of %zu bytes is larger than %zu: transfers address "
                             "it with 32-bit words", label ? label : "unnamed", size,
                             NPL_NPU_MAX_BUFFER_BYTES);
    if (cls == NPL_NPU_BUF_STATIC && dev->sealed)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: weights are sealed; no new static buffer (%s)",
                             label ? label : "unnamed");
    npl_npu_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for a buffer");
    buf->dev = dev;
    buf->cls = cls;
    buf->size = size;
    snprintf(buf->label, sizeof buf->label, "%s", label ? label : "unnamed");
    npl_status st = dev->ops->buffer_alloc(dev->impl, buf, err);
    if (st != NPL_OK) {
        free(buf);
        return st;
    }
    buf->next = dev->buffers;
    if (dev->buffers)
        dev->buffers->prev = buf;
    dev->buffers = buf;
    dev->stats.allocated_bytes[cls] += size;
    *out = buf;
    return NPL_OK;
}

void npl_npu_buffer_free(npl_npu_buffer *buf)
{
    if (!buf)
        return;
    npl_npu_device *dev = buf->dev;
    /* A run list pointing at this buffer would dangle: drop its runs. */
    for (npl_npu_runlist *rl = dev->runlists; rl; rl = rl->next)
        if (runlist_uses(rl, buf))
            npl_npu_runlist_clear(rl);
    if (buf->prev)
        buf->prev->next = buf->next;
    else
        dev->buffers = buf->next;
    if (buf->next)
        buf->next->prev = buf->prev;
    dev->stats.allocated_bytes[buf->cls] -= buf->size;
    dev->ops->buffer_free(dev->impl, buf);
    free(buf);
}

size_t npl_npu_buffer_size(const npl_npu_buffer *buf)
{
    return buf ? buf->size : 0;
}

npl_npu_buf_class npl_npu_buffer_class(const npl_npu_buffer *buf)
{
    return buf ? buf->cls : NPL_NPU_BUF_INTERMEDIATE;
}

void *npl_npu_buffer_map(npl_npu_buffer *buf, npl_error *err)
{
    if (!buf) {
        npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: no buffer to map");
        return NULL;
    }
    if (buf->cls == NPL_NPU_BUF_INTERMEDIATE) {
        npl_error_set(err, NPL_ERR_INVALID_ARG,
                      "npu: %s is an intermediate buffer and never visible to the host",
                      buf->label);
        return NULL;
    }
    if (buf->cls == NPL_NPU_BUF_STATIC && buf->dev->sealed) {
        npl_error_set(err, NPL_ERR_INVALID_ARG,
                      "npu: %s holds weights and they are sealed", buf->label);
        return NULL;
    }
    return buf->dev->ops->buffer_map(buf->dev->impl, buf, err);
}

npl_status npl_npu_buffer_sync(npl_npu_buffer *buf, npl_npu_sync_dir dir, size_t offset,
                               size_t size, npl_error *err)
{
    if (!buf)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: no buffer to sync");
    if (size == 0 && offset <= buf->size)
        size = buf->size - offset;
    if (offset > buf->size || size > buf->size - offset)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: sync of %zu bytes at %zu runs past %s (%zu bytes)",
                             size, offset, buf->label, buf->size);
    npl_npu_device *dev = buf->dev;
    uint64_t *counter = NULL;
    const char *refusal = NULL;
    switch (buf->cls) {
    case NPL_NPU_BUF_STATIC:
        if (dir == NPL_NPU_SYNC_FROM_DEVICE)
            refusal = "weights never travel back to the host";
        else if (dev->sealed)
            refusal = "weights are sealed: no upload after load";
        counter = &dev->stats.h2d_weight_bytes;
        break;
    case NPL_NPU_BUF_INTERMEDIATE:
        refusal = "intermediate buffers never cross to the host";
        break;
    case NPL_NPU_BUF_OUTPUT:
        if (dir == NPL_NPU_SYNC_TO_DEVICE)
            refusal = "output buffers are written by the device only";
        counter = &dev->stats.d2h_activation_bytes;
        break;
    case NPL_NPU_BUF_IO:
        counter = dir == NPL_NPU_SYNC_TO_DEVICE ? &dev->stats.h2d_activation_bytes
                                                : &dev->stats.d2h_activation_bytes;
        break;
    }
    if (refusal)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: cannot sync %s (%s): %s",
                             buf->label, npl_npu_buf_class_name(buf->cls), refusal);
    npl_status st = dev->ops->buffer_sync(dev->impl, buf, dir, offset, size, err);
    if (st == NPL_OK && counter)
        *counter += size;
    return st;
}

npl_status npl_npu_buffer_copy(npl_npu_buffer *dst, size_t dst_off, npl_npu_buffer *src,
                               size_t src_off, size_t size, npl_error *err)
{
    if (!dst || !src || dst == src)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: a copy needs two distinct buffers");
    if (dst->dev != src->dev)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: cannot copy %s to %s: they are on different devices",
                             src->label, dst->label);
    if (src_off > src->size || size > src->size - src_off || dst_off > dst->size ||
        size > dst->size - dst_off)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: copy of %zu bytes from %s at %zu to %s at %zu runs past a "
                             "buffer (%zu and %zu bytes)", size, src->label, src_off, dst->label,
                             dst_off, src->size, dst->size);
    if (src->cls == NPL_NPU_BUF_STATIC || dst->cls == NPL_NPU_BUF_STATIC)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: cannot copy %s to %s: weights are neither copied nor "
                             "overwritten", src->label, dst->label);
    npl_npu_device *dev = dst->dev;
    if (!dev->ops->buffer_copy)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "npu: the %s backend cannot copy buffers",
                             dev->ops->name);
    if (size == 0)
        return NPL_OK;
    npl_status st = dev->ops->buffer_copy(dev->impl, dst, dst_off, src, src_off, size, err);
    if (st == NPL_OK)
        dev->stats.d2d_bytes += size;
    return st;
}

npl_status npl_npu_buffer_write(npl_npu_buffer *buf, size_t offset, const void *data, size_t size,
                                npl_error *err)
{
    if (!buf || !data || offset > buf->size || size > buf->size - offset || size == 0)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: bad buffer write range");
    uint8_t *host = npl_npu_buffer_map(buf, err);
    if (!host)
        return err ? err->code : NPL_ERR_INVALID_ARG;
    memcpy(host + offset, data, size);
    return npl_npu_buffer_sync(buf, NPL_NPU_SYNC_TO_DEVICE, offset, size, err);
}

npl_status npl_npu_buffer_read(npl_npu_buffer *buf, size_t offset, void *data, size_t size,
                               npl_error *err)
{
    if (!buf || !data || offset > buf->size || size > buf->size - offset || size == 0)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: bad buffer read range");
    uint8_t *host = npl_npu_buffer_map(buf, err);
    if (!host)
        return err ? err->code : NPL_ERR_INVALID_ARG;
    npl_status st = npl_npu_buffer_sync(buf, NPL_NPU_SYNC_FROM_DEVICE, offset, size, err);
    if (st == NPL_OK)
        memcpy(data, host + offset, size);
    return st;
}

npl_status npl_npu_device_seal_weights(npl_npu_device *dev, npl_error *err)
{
    if (!dev)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: no device");
    dev->sealed = true;
    if (dev->ops->buffer_release_host)
        for (npl_npu_buffer *b = dev->buffers; b; b = b->next)
            if (b->cls == NPL_NPU_BUF_STATIC)
                dev->ops->buffer_release_host(dev->impl, b);
    return NPL_OK;
}

bool npl_npu_device_weights_sealed(const npl_npu_device *dev)
{
    return dev && dev->sealed;
}

/* ---- groups ---- */

/* A group's own runtime sequence: raw little-endian u32 words. */
static npl_status read_instr_file(npl_npu_device *dev, npl_npu_group *g, npl_error *err)
{
    if (!dev->kernel_dir)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: group %s names an instruction file but the device has no "
                             "kernel directory", g->spec->name);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dev->kernel_dir, g->spec->instr) >= (int)sizeof path)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: instruction file path too long");
    FILE *f = fopen(path, "rb");
    if (!f)
        return npl_error_set(err, NPL_ERR_IO, "npu: cannot open %s: %s", path, strerror(errno));
    npl_status st = NPL_OK;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size <= 0 || size % 4 || size > (long)64 << 20 || fseek(f, 0, SEEK_SET) != 0) {
        st = npl_error_set(err, NPL_ERR_FORMAT,
                           "npu: %s is not a whole number of 32-bit words (1 to 16 Mi of them)",
                           path);
    } else if (!(g->tmpl = malloc((size_t)size))) {
        st = npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for %s", path);
    } else if (fread(g->tmpl, 1, (size_t)size, f) != (size_t)size) {
        st = npl_error_set(err, NPL_ERR_IO, "npu: cannot read %s", path);
    } else {
        g->n_tmpl = (uint32_t)(size / 4);
        for (uint32_t i = 0; i < g->n_tmpl; i++) {
            const uint8_t *b = (const uint8_t *)&g->tmpl[i];
            g->tmpl[i] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16
                       | (uint32_t)b[3] << 24;
        }
    }
    fclose(f);
    return st;
}

npl_status npl_npu_group_load(npl_npu_device *dev, const char *name, npl_npu_group **out,
                              npl_error *err)
{
    if (!out)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: no output pointer");
    *out = NULL;
    if (!dev || !name)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: group load needs a device and a name");
    for (npl_npu_group *g = dev->groups; g; g = g->next)
        if (strcmp(g->spec->name, name) == 0) {
            *out = g;
            return NPL_OK;
        }
    const npl_npu_group_spec *spec = npl_npu_manifest_find(dev->manifest, name);
    if (!spec)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "npu: the kernel manifest has no group '%s'", name);
    npl_npu_group *g = calloc(1, sizeof *g);
    if (!g)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for a group");
    g->dev = dev;
    g->spec = spec;
    npl_status st = spec->instr ? read_instr_file(dev, g, err) : NPL_OK;
    if (st == NPL_OK)
        st = dev->ops->group_load(dev->impl, g, err);
    if (st != NPL_OK) {
        free(g->tmpl);
        free(g);
        return st;
    }
    g->next = dev->groups;
    dev->groups = g;
    *out = g;
    return NPL_OK;
}

const npl_npu_group_spec *npl_npu_group_spec_get(const npl_npu_group *group)
{
    return group ? group->spec : NULL;
}

uint64_t npl_npu_group_dispatches(const npl_npu_group *group)
{
    return group ? group->dispatches : 0;
}

npl_status npl_npu_args_set(npl_npu_arg *args, const npl_npu_group *group, const char *name,
                            npl_npu_buffer *buf, size_t offset, npl_error *err)
{
    int i = npl_npu_group_arg_index(group ? group->spec : NULL, name);
    if (!args || i < 0)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: group %s has no argument '%s'",
                             group ? group->spec->name : "?", name ? name : "?");
    args[i].buf = buf;
    args[i].offset = offset;
    return NPL_OK;
}

npl_status npl_npu_validate_run(const npl_npu_group *group, const npl_npu_arg *args,
                                const npl_npu_shape *shape, npl_error *err)
{
    if (!group || !args || !shape)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: run needs a group, args and a shape");
    const npl_npu_group_spec *g = group->spec;
    npl_status st = npl_npu_group_check_fixed(g, shape, err);
    if (st != NPL_OK)
        return st;
    for (uint32_t i = 0; i < g->n_args; i++) {
        const npl_npu_arg_spec *a = &g->args[i];
        const npl_npu_buffer *b = args[i].buf;
        if (!b) {
            if (a->optional)
                continue;
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "npu: %s: required argument '%s' has no buffer", g->name, a->name);
        }
        if (b->dev != group->dev)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "npu: %s: buffer for '%s' belongs to another device",
                                 g->name, a->name);
        if (b->cls != a->cls)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "npu: %s: '%s' must be a %s buffer, %s is %s", g->name, a->name,
                                 npl_npu_buf_class_name(a->cls), b->label,
                                 npl_npu_buf_class_name(b->cls));
        if (args[i].offset % NPL_NPU_ARG_ALIGN)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "npu: %s: offset %zu of '%s' is not a multiple of %u",
                                 g->name, args[i].offset, a->name, NPL_NPU_ARG_ALIGN);
        size_t need = 0;
        npl_error sub;
        if (npl_npu_group_arg_bytes(g, i, shape, &need, &sub) != NPL_OK)
            return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: %s: argument '%s': %s",
                                 g->name, a->name, sub.message);
        if (args[i].offset > b->size || need > b->size - args[i].offset)
            return npl_error_set(err, NPL_ERR_INVALID_ARG,
                                 "npu: %s: '%s' needs %zu bytes at offset %zu, %s has %zu",
                                 g->name, a->name, need, args[i].offset, b->label, b->size);
    }
    return NPL_OK;
}

/* ---- run lists ---- */

npl_status npl_npu_runlist_create(npl_npu_device *dev, npl_npu_runlist **out, npl_error *err)
{
    if (!out || !dev)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: run list needs a device");
    npl_npu_runlist *rl = calloc(1, sizeof *rl);
    if (!rl)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for a run list");
    rl->dev = dev;
    rl->next = dev->runlists;
    if (dev->runlists)
        dev->runlists->prev = rl;
    dev->runlists = rl;
    *out = rl;
    return NPL_OK;
}

void npl_npu_runlist_free(npl_npu_runlist *rl)
{
    if (!rl)
        return;
    runlist_unprepare(rl);
    if (rl->prev)
        rl->prev->next = rl->next;
    else
        rl->dev->runlists = rl->next;
    if (rl->next)
        rl->next->prev = rl->prev;
    for (size_t i = 0; i < rl->count; i++)
        free(rl->runs[i].instr);
    free(rl->runs);
    free(rl);
}

/* (Re)generates a run's instruction stream for a shape: from the group's
 * transfers, or its instruction file with the patches written. */
static npl_status entry_build(npl_npu_run_entry *e, const npl_npu_shape *shape, npl_error *err)
{
    const npl_npu_group *g = e->group;
    uint32_t n = g->tmpl ? g->n_tmpl : NPL_NPU_INSTR_MAX_WORDS;
    uint32_t *words = malloc((size_t)n * sizeof *words);
    if (!words)
        return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for an instruction stream");
    uint32_t patched = 0;
    npl_status st;
    if (g->tmpl) {
        st = npl_npu_instr_patch(g->spec, g->tmpl, n, shape, words, &patched, err);
    } else {
        bool present[NPL_NPU_MAX_ARGS];
        for (uint32_t a = 0; a < NPL_NPU_MAX_ARGS; a++)
            present[a] = a < g->spec->n_args && e->args[a].buf;
        st = npl_npu_instr_build(g->spec, shape, present, words, &n, &patched, err);
    }
    if (st != NPL_OK) {
        free(words);
        return st;
    }
    free(e->instr);
    e->instr = words;
    e->n_instr = n;
    e->n_patched = patched;
    e->shape = *shape;
    return NPL_OK;
}

npl_status npl_npu_runlist_add(npl_npu_runlist *rl, npl_npu_group *group, const npl_npu_arg *args,
                               const npl_npu_shape *shape, npl_error *err)
{
    if (!rl || !group || group->dev != rl->dev)
        return npl_error_set(err, NPL_ERR_INVALID_ARG,
                             "npu: run list and group must share a device");
    npl_status st = npl_npu_validate_run(group, args, shape, err);
    if (st != NPL_OK)
        return st;
    if (rl->count == rl->cap) {
        size_t cap = rl->cap ? rl->cap * 2 : 8;
        npl_npu_run_entry *r = realloc(rl->runs, cap * sizeof *r);
        if (!r)
            return npl_error_set(err, NPL_ERR_NOMEM, "npu: no memory for a run");
        rl->runs = r;
        rl->cap = cap;
    }
    npl_npu_run_entry *e = &rl->runs[rl->count];
    memset(e, 0, sizeof *e);
    e->group = group;
    memcpy(e->args, args, group->spec->n_args * sizeof *args);
    st = entry_build(e, shape, err);
    if (st != NPL_OK)
        return st;
    runlist_unprepare(rl);
    rl->count++;
    return NPL_OK;
}

npl_status npl_npu_runlist_set_shape(npl_npu_runlist *rl, size_t index, const npl_npu_shape *shape,
                                     npl_error *err)
{
    if (!rl || index >= rl->count)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: no run %zu in the list", index);
    npl_npu_run_entry *e = &rl->runs[index];
    npl_status st = npl_npu_validate_run(e->group, e->args, shape, err);
    if (st == NPL_OK)
        st = entry_build(e, shape, err);
    return st;
}

size_t npl_npu_runlist_count(const npl_npu_runlist *rl)
{
    return rl ? rl->count : 0;
}

void npl_npu_runlist_clear(npl_npu_runlist *rl)
{
    if (!rl)
        return;
    runlist_unprepare(rl);
    for (size_t i = 0; i < rl->count; i++)
        free(rl->runs[i].instr);
    rl->count = 0;
}

npl_status npl_npu_runlist_submit(npl_npu_runlist *rl, npl_error *err)
{
    if (!rl)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "npu: no run list");
    if (rl->count == 0)
        return NPL_OK;
    npl_npu_device *dev = rl->dev;
    if (!rl->prepared) {
        if (dev->ops->runlist_prepare) {
            npl_status st = dev->ops->runlist_prepare(dev->impl, rl, err);
            if (st != NPL_OK)
                return st;
        }
        rl->prepared = true;
    }
    npl_status st = dev->ops->runlist_submit(dev->impl, rl, err);
    if (st != NPL_OK)
        return st;
    dev->stats.submissions++;
    for (size_t i = 0; i < rl->count; i++) {
        npl_npu_run_entry *e = &rl->runs[i];
        e->group->dispatches++;
        dev->stats.dispatches++;
        /* The words a reused run list rewrites for every submission
         * (position, rows); the rest of the stream went with the list. */
        dev->stats.h2d_activation_bytes += (uint64_t)e->n_patched * sizeof(uint32_t);
    }
    return NPL_OK;
}

npl_status npl_npu_run(npl_npu_device *dev, npl_npu_group *group, const npl_npu_arg *args,
                       const npl_npu_shape *shape, npl_error *err)
{
    npl_npu_runlist *rl = NULL;
    npl_status st = npl_npu_runlist_create(dev, &rl, err);
    if (st != NPL_OK)
        return st;
    st = npl_npu_runlist_add(rl, group, args, shape, err);
    if (st == NPL_OK)
        st = npl_npu_runlist_submit(rl, err);
    npl_npu_runlist_free(rl);
    return st;
}

void npl_npu_device_stats(const npl_npu_device *dev, npl_npu_stats *out)
{
    if (dev && out)
        *out = dev->stats;
}

void npl_npu_device_stats_reset(npl_npu_device *dev)
{
    if (!dev)
        return;
    uint64_t allocated[NPL_NPU_BUF_CLASS_COUNT];
    memcpy(allocated, dev->stats.allocated_bytes, sizeof allocated);
    memset(&dev->stats, 0, sizeof dev->stats);
    memcpy(dev->stats.allocated_bytes, allocated, sizeof allocated);
}
