/* The emulated NPU (`--device npu-emu`): the device interface implemented
 * in host memory, with every kernel group's contract computed in C using
 * the NPU's numerics (bf16 activations into the MACs, Q4NX weights
 * dequantized to bf16, f32 accumulation). Host and device memory are kept
 * apart, so a missing sync shows up exactly as it would on hardware. */
#ifndef NPL_NPU_EMU_H
#define NPL_NPU_EMU_H

#include "npu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a group implementation receives: the contract, the shape, and for
 * each argument (in contract order) the device memory at its offset and
 * the byte count the contract gives it (NULL/0 when an optional argument
 * is absent). */
typedef struct npl_npu_emu_call {
    const npl_npu_group_spec *spec;
    const npl_npu_shape *shape;
    void *data[NPL_NPU_MAX_ARGS];
    size_t bytes[NPL_NPU_MAX_ARGS];
} npl_npu_emu_call;

typedef npl_status (*npl_npu_emu_group_fn)(const npl_npu_emu_call *call, npl_error *err);

typedef struct npl_npu_emu_group_def {
    const char *name;
    npl_npu_emu_group_fn run;
    uint32_t n_args; /* buffer arguments the kernel declares: loading a
                        manifest group that binds another count is refused */
} npl_npu_emu_group_def;

/* Device memory of a named argument or of a part of a packed argument,
 * or NULL when the contract has no such argument, the call left an
 * optional one out, or the part is empty for this shape. */
void *npl_npu_emu_arg(const npl_npu_emu_call *call, const char *name);

/* The groups the emulator implements, and the manifest describing their
 * contracts (text in the documented manifest format). */
const npl_npu_emu_group_def *npl_npu_emu_builtin_groups(size_t *count);
const char *npl_npu_emu_builtin_manifest(void);

typedef struct npl_npu_emu_config {
    /* Manifest to use instead of the built-in one (borrowed; must outlive
     * the device). Its target must be emu. */
    const npl_npu_manifest *manifest;
    /* Extra group implementations, searched before the built-in ones. */
    const npl_npu_emu_group_def *extra_groups;
    size_t n_extra_groups;
    /* Device memory: an allocation past it fails with NPL_ERR_NOMEM, as
     * on a device that is full. 0: as much as the host gives. */
    uint64_t memory_bytes;
} npl_npu_emu_config;

/* Opens an emulated device named "npu-emu" (config may be NULL). */
npl_status npl_npu_emu_open(const npl_npu_emu_config *config, npl_npu_device **out,
                            npl_error *err);

/* Reads device memory directly, bypassing the residency rules and the
 * counters: for tests and debugging of the emulator only. Fails on a
 * device that is not an emulator. */
npl_status npl_npu_emu_peek(const npl_npu_buffer *buf, size_t offset, void *dst, size_t size,
                            npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
