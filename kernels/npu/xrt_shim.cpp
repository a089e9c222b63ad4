// The XRT backend of the NPU device interface (C++17, see xrt_shim.h).
//
// Flow per the XRT hardware-context API: open the device, register the
// manifest's one xclbin and create its hardware context, take each
// kernel by name after checking the argument count it declares, allocate
// data buffers in host memory, and run with opcode 3 (execute the
// instruction stream). Each run has its own instruction buffer (cacheable,
// in the kernel's group 1) holding the stream the host made for it: the
// group's instruction file with its patched words written, or one
// generated from its transfers (npu_instr.h); a submission rewrites the
// streams of its runs. Runs that
// share a hardware context go through one xrt::runlist, so a token is
// submitted at once.
//
// Kernel argument order (the ABI a kernel build must follow): 0 opcode
// (u64 = 3), 1 instruction buffer, 2 instruction word count (u32), then
// one buffer per manifest argument in contract order: 3 + n_args in all.
#include "xrt_shim.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>
#include <xrt/xrt_hw_context.h>
#include <xrt/xrt_kernel.h>
#if __has_include(<xrt/experimental/xrt_kernel.h>)
#include <xrt/experimental/xrt_kernel.h>
#include <xrt/experimental/xrt_xclbin.h>
#else
#include <experimental/xrt_kernel.h>
#include <experimental/xrt_xclbin.h>
#endif

#include "npu_device_backend.h"
#include "npu_manifest.h"

namespace {

constexpr uint64_t kOpcodeRunInstructions = 3;
constexpr int kFirstDataArg = 3;
constexpr int kInstrGroupArg = 1;

struct XclbinContext {
    std::string path;
    xrt::xclbin xclbin;
    xrt::uuid uuid;
    xrt::hw_context context;
    std::map<std::string, xrt::kernel> kernels;
};

struct LoadedGroup {
    XclbinContext *ctx = nullptr;
    xrt::kernel kernel;
};

struct Buffer {
    xrt::bo bo;
    void *host = nullptr;
};

struct PreparedRun {
    xrt::run run;
    std::vector<xrt::bo> views;  // sub-buffers at the argument offsets
    xrt::bo instr;  // this run's instruction stream
    XclbinContext *ctx = nullptr;
};

struct Segment {
    size_t first = 0, count = 0;
    xrt::runlist list;  // used when count > 1
};

struct Prepared {
    std::vector<PreparedRun> runs;
    std::vector<Segment> segments;
};

struct Device {
    xrt::device device;
    std::string kernel_dir;
    std::vector<std::unique_ptr<XclbinContext>> contexts;
    std::map<std::string, LoadedGroup> groups;
    xrt::memory_group data_group = 0;
};

npl_status fail(npl_error *err, const char *what, const std::exception &e)
{
    return npl_error_set(err, NPL_ERR_IO, "xrt: %s: %s", what, e.what());
}

XclbinContext *context_for(Device *d, const std::string &rel)
{
    std::string path = d->kernel_dir + "/" + rel;
    for (auto &c : d->contexts)
        if (c->path == path)
            return c.get();
    auto c = std::make_unique<XclbinContext>();
    c->path = path;
    c->xclbin = xrt::xclbin(path);
    c->uuid = d->device.register_xclbin(c->xclbin);
    c->context = xrt::hw_context(d->device, c->uuid);
    d->contexts.push_back(std::move(c));
    return d->contexts.back().get();
}

void load_group(Device *d, const npl_npu_group_spec &spec, bool first)
{
    LoadedGroup g;
    g.ctx = context_for(d, spec.xclbin);
    // Setting an argument the kernel does not declare fails inside XRT
    // at run time; refuse at load, with the reason.
    size_t declared = g.ctx->xclbin.get_kernel(spec.kernel).get_num_args();
    if (declared != kFirstDataArg + spec.n_args)
        throw std::runtime_error("kernel " + std::string(spec.kernel) + " of group " + spec.name +
                                 " declares " + std::to_string(declared) +
                                 " arguments; the manifest needs " +
                                 std::to_string(kFirstDataArg + spec.n_args) +
                                 " (opcode, instructions, their count and " +
                                 std::to_string(spec.n_args) + " buffers)");
    auto k = g.ctx->kernels.find(spec.kernel);
    if (k == g.ctx->kernels.end())
        k = g.ctx->kernels.emplace(spec.kernel, xrt::kernel(g.ctx->context, spec.kernel)).first;
    g.kernel = k->second;
    if (first)
        d->data_group = static_cast<xrt::memory_group>(g.kernel.group_id(kFirstDataArg));
    d->groups[spec.name] = g;
}

// ---- backend ops ----

void shim_destroy(void *impl)
{
    delete static_cast<Device *>(impl);
}

npl_status shim_buffer_alloc(void *impl, npl_npu_buffer *buf, npl_error *err)
{
    Device *d = static_cast<Device *>(impl);
    try {
        auto b = std::make_unique<Buffer>();
        b->bo = xrt::bo(d->device, buf->size, xrt::bo::flags::host_only, d->data_group);
        b->host = b->bo.map<void *>();
        // The interface promises zero-filled buffers.
        std::memset(b->host, 0, buf->size);
        b->bo.sync(XCL_BO_SYNC_BO_TO_DEVICE);
        buf->backend = b.release();
        return NPL_OK;
    } catch (const std::exception &e) {
        return fail(err, buf->label, e);
    }
}

void shim_buffer_free(void *impl, npl_npu_buffer *buf)
{
    (void)impl;
    delete static_cast<Buffer *>(buf->backend);
    buf->backend = nullptr;
}

void *shim_buffer_map(void *impl, npl_npu_buffer *buf, npl_error *err)
{
    (void)impl;
    (void)err;
    return static_cast<Buffer *>(buf->backend)->host;
}

npl_status shim_buffer_sync(void *impl, npl_npu_buffer *buf, npl_npu_sync_dir dir, size_t offset,
                            size_t size, npl_error *err)
{
    (void)impl;
    try {
        static_cast<Buffer *>(buf->backend)
            ->bo.sync(dir == NPL_NPU_SYNC_TO_DEVICE ? XCL_BO_SYNC_BO_TO_DEVICE
                                                   : XCL_BO_SYNC_BO_FROM_DEVICE,
                      size, offset);
        return NPL_OK;
    } catch (const std::exception &e) {
        return fail(err, buf->label, e);
    }
}

// Buffers are host_only: the host view is the memory the device reads, so
// a copy is the source's range made current on the host, a memcpy, and
// the destination's range handed back to the device.
npl_status shim_buffer_copy(void *impl, npl_npu_buffer *dst, size_t dst_off, npl_npu_buffer *src,
                            size_t src_off, size_t size, npl_error *err)
{
    (void)impl;
    Buffer *d = static_cast<Buffer *>(dst->backend), *s = static_cast<Buffer *>(src->backend);
    try {
        s->bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE, size, src_off);
        std::memcpy(static_cast<char *>(d->host) + dst_off,
                    static_cast<const char *>(s->host) + src_off, size);
        d->bo.sync(XCL_BO_SYNC_BO_TO_DEVICE, size, dst_off);
        return NPL_OK;
    } catch (const std::exception &e) {
        return fail(err, dst->label, e);
    }
}

npl_status shim_group_load(void *impl, npl_npu_group *group, npl_error *err)
{
    Device *d = static_cast<Device *>(impl);
    auto g = d->groups.find(group->spec->name);
    if (g == d->groups.end())
        return npl_error_set(err, NPL_ERR_INTERNAL, "xrt: group %s was not loaded at open",
                             group->spec->name);
    group->backend = &g->second;
    return NPL_OK;
}

void shim_group_free(void *impl, npl_npu_group *group)
{
    (void)impl;
    group->backend = nullptr;
}

void shim_runlist_release(void *impl, npl_npu_runlist *rl)
{
    (void)impl;
    delete static_cast<Prepared *>(rl->backend);
    rl->backend = nullptr;
}

npl_status shim_runlist_prepare(void *impl, npl_npu_runlist *rl, npl_error *err)
{
    Device *d = static_cast<Device *>(impl);
    try {
        auto p = std::make_unique<Prepared>();
        p->runs.reserve(rl->count);
        for (size_t i = 0; i < rl->count; i++) {
            const npl_npu_run_entry &e = rl->runs[i];
            const npl_npu_group_spec *spec = e.group->spec;
            LoadedGroup *g = static_cast<LoadedGroup *>(e.group->backend);
            PreparedRun r;
            r.ctx = g->ctx;
            r.run = xrt::run(g->kernel);
            r.instr = xrt::bo(d->device, e.n_instr * sizeof(uint32_t), xrt::bo::flags::cacheable,
                              g->kernel.group_id(kInstrGroupArg));
            r.run.set_arg(0, kOpcodeRunInstructions);
            r.run.set_arg(1, r.instr);
            r.run.set_arg(2, e.n_instr);
            for (uint32_t a = 0; a < spec->n_args; a++) {
                // Absent optional arguments stay unset (address 0).
                if (!e.args[a].buf)
                    continue;
                const Buffer *b = static_cast<const Buffer *>(e.args[a].buf->backend);
                size_t off = e.args[a].offset;
                xrt::bo view = off ? xrt::bo(b->bo, e.args[a].buf->size - off, off) : b->bo;
                r.views.push_back(view);
                r.run.set_arg(kFirstDataArg + static_cast<int>(a), view);
            }
            p->runs.push_back(std::move(r));
        }
        // Consecutive runs in one hardware context form one runlist.
        for (size_t i = 0; i < p->runs.size();) {
            Segment s;
            s.first = i;
            while (i < p->runs.size() && p->runs[i].ctx == p->runs[s.first].ctx)
                i++;
            s.count = i - s.first;
            if (s.count > 1) {
                s.list = xrt::runlist(p->runs[s.first].ctx->context);
                for (size_t k = s.first; k < i; k++)
                    s.list.add(p->runs[k].run);
            }
            p->segments.push_back(std::move(s));
        }
        rl->backend = p.release();
        return NPL_OK;
    } catch (const std::exception &e) {
        return fail(err, "preparing a run list", e);
    }
}

npl_status shim_runlist_submit(void *impl, npl_npu_runlist *rl, npl_error *err)
{
    (void)impl;
    Prepared *p = static_cast<Prepared *>(rl->backend);
    try {
        // The streams as the host last generated them (the position and
        // row words change between submissions).
        for (size_t i = 0; i < rl->count; i++) {
            const npl_npu_run_entry &e = rl->runs[i];
            size_t bytes = e.n_instr * sizeof(uint32_t);
            std::memcpy(p->runs[i].instr.map<void *>(), e.instr, bytes);
            p->runs[i].instr.sync(XCL_BO_SYNC_BO_TO_DEVICE, bytes, 0);
        }
        for (Segment &s : p->segments) {
            if (s.count > 1) {
                s.list.execute();
                s.list.wait();
                continue;
            }
            xrt::run &run = p->runs[s.first].run;
            run.start();
            ert_cmd_state state = run.wait();
            if (state != ERT_CMD_STATE_COMPLETED)
                return npl_error_set(err, NPL_ERR_IO, "xrt: group %s ended in state %d",
                                     rl->runs[s.first].group->spec->name,
                                     static_cast<int>(state));
        }
        return NPL_OK;
    } catch (const std::exception &e) {
        return fail(err, "running kernel groups", e);
    }
}

const npl_npu_backend_ops shim_ops = {
    "xrt",
    shim_destroy,
    shim_buffer_alloc,
    shim_buffer_free,
    shim_buffer_map,
    shim_buffer_sync,
    nullptr,  // host memory is the device memory: nothing to release
    shim_group_load,
    shim_group_free,
    shim_runlist_prepare,
    shim_runlist_release,
    shim_runlist_submit,
    shim_buffer_copy,
};

}  // namespace

extern "C" npl_status npl_npu_xrt_shim_open(unsigned abi, const npl_npu_xrt_config *cfg,
                                            npl_npu_device **out, npl_error *err)
{
    if (!out || !cfg || !cfg->kernel_dir)
        return npl_error_set(err, NPL_ERR_INVALID_ARG, "xrt: open needs a kernel directory");
    *out = nullptr;
    if (abi != NPL_NPU_XRT_SHIM_ABI)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "xrt: shim module speaks ABI %u, the engine %u",
                             NPL_NPU_XRT_SHIM_ABI, abi);
    npl_npu_manifest *manifest = nullptr;
    npl_status st = npl_npu_manifest_load(cfg->kernel_dir, &manifest, err);
    if (st != NPL_OK)
        return st;
    if (manifest->target == NPL_NPU_TARGET_EMU) {
        npl_npu_manifest_free(manifest);
        return npl_error_set(err, NPL_ERR_UNSUPPORTED,
                             "xrt: %s holds emulator contracts, not NPU binaries", cfg->kernel_dir);
    }
    std::unique_ptr<Device> d;
    try {
        d = std::make_unique<Device>();
        d->kernel_dir = cfg->kernel_dir;
        d->device = xrt::device(cfg->device_index);
        for (size_t i = 0; i < manifest->n_groups; i++)
            load_group(d.get(), manifest->groups[i], i == 0);
    } catch (const std::exception &e) {
        npl_npu_manifest_free(manifest);
        return fail(err, "opening the NPU", e);
    }
    char name[32];
    std::snprintf(name, sizeof name, "npu:%s", npl_npu_target_name(manifest->target));
    st = npl_npu_device_create(&shim_ops, d.get(), name, manifest, true, out, err);
    if (st != NPL_OK) {
        npl_npu_manifest_free(manifest);
        return st;
    }
    d.release();
    st = npl_npu_device_set_kernel_dir(*out, cfg->kernel_dir, err);
    if (st != NPL_OK) {
        npl_npu_device_destroy(*out);
        *out = nullptr;
    }
    return st;
}
