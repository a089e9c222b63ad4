/* The NPU device interface: device buffers with a residency class, kernel
 * groups loaded by name from the manifest, and run lists that chain
 * several group runs into one submission. Two backends implement it:
 * `emu` (host memory, kernel groups in C with the NPU's numerics) and
 * `xrt` (the C++ shim over XRT's hardware-context API).
 *
 * This layer, not the backends, validates every call against the
 * manifest contract and enforces the residency plan:
 *   static        host -> device only, and only until the weights are
 *                 sealed; the host copy is released at seal
 *   intermediate  never mapped nor synced: lives on the device only
 *   output        device -> host only
 *   io            both directions
 * It also keeps the counters (dispatches, bytes each way split into
 * weight and activation bytes), so both backends count the same way.
 *
 * Not thread-safe: one device is driven by one thread at a time. */
#ifndef NPL_NPU_DEVICE_H
#define NPL_NPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "npl_error.h"
#include "npu_manifest.h"
#include "npu_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_npu_device npl_npu_device;
typedef struct npl_npu_buffer npl_npu_buffer;
typedef struct npl_npu_group npl_npu_group;
typedef struct npl_npu_runlist npl_npu_runlist;

typedef enum npl_npu_sync_dir {
    NPL_NPU_SYNC_TO_DEVICE = 0,
    NPL_NPU_SYNC_FROM_DEVICE = 1,
} npl_npu_sync_dir;

/* Argument offsets must be multiples of this: IRON and mlir-aie align
 * buffers and sub-buffers to 64 bytes. */
#define NPL_NPU_ARG_ALIGN 64u

/* Largest buffer: transfer offsets and lengths are 32-bit words of the
 * instruction stream. */
#define NPL_NPU_MAX_BUFFER_BYTES ((size_t)UINT32_MAX + 1 - NPL_NPU_ARG_ALIGN)

typedef struct npl_npu_stats {
    uint64_t dispatches;           /* group runs executed */
    uint64_t submissions;          /* run lists submitted (one host wait each) */
    uint64_t h2d_weight_bytes;     /* static buffers synced to the device */
    uint64_t h2d_activation_bytes; /* io buffers and instruction words to the device */
    uint64_t d2h_weight_bytes;     /* always 0: the interface refuses it */
    uint64_t d2h_activation_bytes; /* output and io buffers read back */
    uint64_t d2d_bytes;            /* copied between buffers on the device */
    uint64_t allocated_bytes[NPL_NPU_BUF_CLASS_COUNT]; /* live, by class */
} npl_npu_stats;

/* One argument of a run: a buffer (NULL only for optional arguments) and
 * a byte offset into it. The contract gives the size. */
typedef struct npl_npu_arg {
    npl_npu_buffer *buf;
    size_t offset;
} npl_npu_arg;

/* ---- backend side ----
 * A backend fills this table; the structs it receives are declared in
 * npu_device_backend.h. Every call has been validated before it arrives. */
typedef struct npl_npu_backend_ops {
    const char *name; /* "emu", "xrt" */
    void (*destroy)(void *impl);
    /* Allocates buf->size bytes (zero-filled) and sets buf->backend. */
    npl_status (*buffer_alloc)(void *impl, npl_npu_buffer *buf, npl_error *err);
    void (*buffer_free)(void *impl, npl_npu_buffer *buf);
    /* Host view of the buffer (static, output and io buffers only). */
    void *(*buffer_map)(void *impl, npl_npu_buffer *buf, npl_error *err);
    npl_status (*buffer_sync)(void *impl, npl_npu_buffer *buf, npl_npu_sync_dir dir,
                              size_t offset, size_t size, npl_error *err);
    /* The weights are sealed: the host copy of a static buffer may go.
     * May be NULL. */
    void (*buffer_release_host)(void *impl, npl_npu_buffer *buf);
    /* Makes group->spec runnable and sets group->backend. */
    npl_status (*group_load)(void *impl, npl_npu_group *group, npl_error *err);
    void (*group_free)(void *impl, npl_npu_group *group);
    /* Builds whatever the backend reuses across submissions of a run
     * list (may be NULL); released when the list changes or is freed. */
    npl_status (*runlist_prepare)(void *impl, npl_npu_runlist *rl, npl_error *err);
    void (*runlist_release)(void *impl, npl_npu_runlist *rl);
    /* Runs every entry in order and waits for the last. */
    npl_status (*runlist_submit)(void *impl, npl_npu_runlist *rl, npl_error *err);
    /* Copies size bytes of device memory from src at src_off to dst at
     * dst_off (distinct buffers); may be NULL (no copies). */
    npl_status (*buffer_copy)(void *impl, npl_npu_buffer *dst, size_t dst_off,
                              npl_npu_buffer *src, size_t src_off, size_t size, npl_error *err);
} npl_npu_backend_ops;

/* Wraps a backend. The device takes impl (destroyed with it) and, when
 * owns_manifest, the manifest. name is what users see ("npu-emu"). */
npl_status npl_npu_device_create(const npl_npu_backend_ops *ops, void *impl, const char *name,
                                 npl_npu_manifest *manifest, bool owns_manifest,
                                 npl_npu_device **out, npl_error *err);

/* Frees the device and everything still allocated from it. */
void npl_npu_device_destroy(npl_npu_device *dev);

const char *npl_npu_device_name(const npl_npu_device *dev);
const npl_npu_manifest *npl_npu_device_manifest(const npl_npu_device *dev);

/* ---- buffers ---- */

npl_status npl_npu_buffer_alloc(npl_npu_device *dev, size_t size, npl_npu_buf_class cls,
                                const char *label, npl_npu_buffer **out, npl_error *err);
void npl_npu_buffer_free(npl_npu_buffer *buf);
size_t npl_npu_buffer_size(const npl_npu_buffer *buf);
npl_npu_buf_class npl_npu_buffer_class(const npl_npu_buffer *buf);

/* Host view; fails for intermediate buffers and for static ones once the
 * weights are sealed. Writes reach the device only through a sync. */
void *npl_npu_buffer_map(npl_npu_buffer *buf, npl_error *err);

/* Moves [offset, offset+size) between the host view and the device
 * (size 0 means to the end) and counts the bytes. */
npl_status npl_npu_buffer_sync(npl_npu_buffer *buf, npl_npu_sync_dir dir, size_t offset,
                               size_t size, npl_error *err);

/* map + copy + sync, for the common case. */
npl_status npl_npu_buffer_write(npl_npu_buffer *buf, size_t offset, const void *data, size_t size,
                                npl_error *err);
npl_status npl_npu_buffer_read(npl_npu_buffer *buf, size_t offset, void *data, size_t size,
                               npl_error *err);

/* Copies [src_off, src_off+size) of src's device memory to dst at dst_off
 * without crossing to the host: how a sequence takes a cached prefix of
 * another's KV cache (intermediate buffers). Both buffers on the same
 * device, neither static; counted in d2d_bytes. */
npl_status npl_npu_buffer_copy(npl_npu_buffer *dst, size_t dst_off, npl_npu_buffer *src,
                               size_t src_off, size_t size, npl_error *err);

/* Ends model loading: from here on static buffers can be neither mapped
 * nor synced, so no weight byte moves after load. */
npl_status npl_npu_device_seal_weights(npl_npu_device *dev, npl_error *err);
bool npl_npu_device_weights_sealed(const npl_npu_device *dev);

/* ---- kernel groups ---- */

/* Loads (once; later calls return the same handle) the manifest group of
 * that name. Groups live until the device is destroyed. */
npl_status npl_npu_group_load(npl_npu_device *dev, const char *name, npl_npu_group **out,
                              npl_error *err);
const npl_npu_group_spec *npl_npu_group_spec_get(const npl_npu_group *group);
uint64_t npl_npu_group_dispatches(const npl_npu_group *group);

/* Sets the named argument in an args array laid out in contract order
 * (group's n_args entries). */
npl_status npl_npu_args_set(npl_npu_arg *args, const npl_npu_group *group, const char *name,
                            npl_npu_buffer *buf, size_t offset, npl_error *err);

/* Checks one run against the contract: fixed shape symbols, every
 * required argument present, classes match, offsets aligned, sizes fit. */
npl_status npl_npu_validate_run(const npl_npu_group *group, const npl_npu_arg *args,
                                const npl_npu_shape *shape, npl_error *err);

/* ---- run lists ---- */

npl_status npl_npu_runlist_create(npl_npu_device *dev, npl_npu_runlist **out, npl_error *err);
void npl_npu_runlist_free(npl_npu_runlist *rl);

/* Appends a validated copy of a run. */
npl_status npl_npu_runlist_add(npl_npu_runlist *rl, npl_npu_group *group, const npl_npu_arg *args,
                               const npl_npu_shape *shape, npl_error *err);

/* Changes the shape of run `index` (e.g. the position for the next token)
 * without rebuilding the list; revalidated. */
npl_status npl_npu_runlist_set_shape(npl_npu_runlist *rl, size_t index,
                                     const npl_npu_shape *shape, npl_error *err);

size_t npl_npu_runlist_count(const npl_npu_runlist *rl);
void npl_npu_runlist_clear(npl_npu_runlist *rl);

/* Submits every run as one submission and waits for completion. */
npl_status npl_npu_runlist_submit(npl_npu_runlist *rl, npl_error *err);

/* A one-run submission. */
npl_status npl_npu_run(npl_npu_device *dev, npl_npu_group *group, const npl_npu_arg *args,
                       const npl_npu_shape *shape, npl_error *err);

/* ---- counters ---- */

void npl_npu_device_stats(const npl_npu_device *dev, npl_npu_stats *out);
/* Zeroes the traffic and dispatch counters (not allocated_bytes). */
void npl_npu_device_stats_reset(npl_npu_device *dev);

#ifdef __cplusplus
}
#endif

#endif
