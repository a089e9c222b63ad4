/* What a backend of the NPU device interface sees: the objects the common
 * layer passes to npl_npu_backend_ops. Only backends include this. */
#ifndef NPL_NPU_DEVICE_BACKEND_H
#define NPL_NPU_DEVICE_BACKEND_H

#include "npu_device.h"

#ifdef __cplusplus
extern "C" {
#endif

struct npl_npu_buffer {
    npl_npu_device *dev;
    npl_npu_buf_class cls;
    size_t size;
    char label[NPL_NPU_NAME_MAX];
    void *backend;
    npl_npu_buffer *prev, *next;
};

struct npl_npu_group {
    npl_npu_device *dev;
    const npl_npu_group_spec *spec;
    void *backend;
    uint64_t dispatches;
    npl_npu_group *next;
};

typedef struct npl_npu_run_entry {
    npl_npu_group *group;
    npl_npu_arg args[NPL_NPU_MAX_ARGS];
    npl_npu_shape shape;
} npl_npu_run_entry;

struct npl_npu_runlist {
    npl_npu_device *dev;
    npl_npu_run_entry *runs;
    size_t count, cap;
    void *backend;  /* prepared state, valid while prepared */
    bool prepared;
    npl_npu_runlist *prev, *next;
};

/* The table a device was created with (tells backends their own devices
 * apart from others). */
const npl_npu_backend_ops *npl_npu_device_ops(const npl_npu_device *dev);

/* The kernel directory the manifest came from (NULL for the built-in emu
 * manifest); backends resolve binary paths against it. */
const char *npl_npu_device_kernel_dir(const npl_npu_device *dev);
npl_status npl_npu_device_set_kernel_dir(npl_npu_device *dev, const char *dir, npl_error *err);

#ifdef __cplusplus
}
#endif

#endif
