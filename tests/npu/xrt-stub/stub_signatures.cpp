// The XRT API the shim relies on, as compile-time checks: exact member
// function types, which constructors exist and which are explicit, and the
// enum values that cross into the driver. The npu suite compiles this
// against the stand-ins in include/ and, when meson found an XRT, against
// that XRT's headers; passing both means every stand-in declaration here
// is one the real XRT has. Nothing runs.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

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

namespace {

using ms = std::chrono::milliseconds;

// Naming the member through a pointer of the exact type fails to compile
// when the signature differs in any parameter, qualifier or return type.
template <typename T> constexpr bool has(T) { return true; }

static_assert(std::is_same_v<xrt::memory_group, uint32_t>);
static_assert(XCL_BO_SYNC_BO_TO_DEVICE == 0 && XCL_BO_SYNC_BO_FROM_DEVICE == 1);
static_assert(static_cast<uint32_t>(xrt::bo::flags::cacheable) == (1U << 24));
static_assert(static_cast<uint32_t>(xrt::bo::flags::host_only) == (1U << 29));
static_assert(ERT_CMD_STATE_COMPLETED == 4);

static_assert(std::is_default_constructible_v<xrt::bo>);
static_assert(std::is_constructible_v<xrt::bo, const xrt::device&, size_t, xrt::bo::flags,
                                      xrt::memory_group>);
static_assert(std::is_constructible_v<xrt::bo, const xrt::bo&, size_t, size_t>);
static_assert(has(static_cast<size_t (xrt::bo::*)() const>(&xrt::bo::size)));
static_assert(has(static_cast<void (xrt::bo::*)(xclBOSyncDirection, size_t, size_t)>(&xrt::bo::sync)));
static_assert(has(static_cast<void (xrt::bo::*)(xclBOSyncDirection)>(&xrt::bo::sync)));
static_assert(has(static_cast<void* (xrt::bo::*)()>(&xrt::bo::map)));
static_assert(has(static_cast<void* (xrt::bo::*)()>(&xrt::bo::map<void*>)));

static_assert(std::is_constructible_v<xrt::device, unsigned int>);
static_assert(!std::is_convertible_v<unsigned int, xrt::device>);
static_assert(has(static_cast<xrt::uuid (xrt::device::*)(const xrt::xclbin&)>(
    &xrt::device::register_xclbin)));

static_assert(std::is_constructible_v<xrt::xclbin, const std::string&>);
static_assert(!std::is_convertible_v<const std::string&, xrt::xclbin>);
static_assert(has(static_cast<xrt::uuid (xrt::xclbin::*)() const>(&xrt::xclbin::get_uuid)));
static_assert(has(static_cast<xrt::xclbin::kernel (xrt::xclbin::*)(const std::string&) const>(
    &xrt::xclbin::get_kernel)));
static_assert(has(static_cast<size_t (xrt::xclbin::kernel::*)() const>(
    &xrt::xclbin::kernel::get_num_args)));

static_assert(std::is_copy_constructible_v<xrt::uuid> && std::is_copy_assignable_v<xrt::uuid>);

static_assert(static_cast<int>(xrt::hw_context::access_mode::shared) == 1);
static_assert(std::is_constructible_v<xrt::hw_context, const xrt::device&, const xrt::uuid&>);
static_assert(std::is_constructible_v<xrt::hw_context, const xrt::device&, const xrt::uuid&,
                                      xrt::hw_context::access_mode>);

static_assert(std::is_constructible_v<xrt::kernel, const xrt::hw_context&, const std::string&>);
static_assert(has(static_cast<int (xrt::kernel::*)(int) const>(&xrt::kernel::group_id)));

static_assert(std::is_constructible_v<xrt::run, const xrt::kernel&>);
static_assert(!std::is_convertible_v<const xrt::kernel&, xrt::run>);
static_assert(has(static_cast<void (xrt::run::*)()>(&xrt::run::start)));
static_assert(has(static_cast<ert_cmd_state (xrt::run::*)(const ms&) const>(&xrt::run::wait)));
static_assert(has(static_cast<void (xrt::run::*)(int, xrt::bo&)>(&xrt::run::set_arg)));
static_assert(has(static_cast<void (xrt::run::*)(int, const xrt::bo&)>(&xrt::run::set_arg)));
static_assert(has(static_cast<void (xrt::run::*)(int, xrt::bo&&)>(&xrt::run::set_arg)));
// Scalars go through a template (two, constrained, in XRT 2.26), so the
// call is checked rather than its address.
static_assert(std::is_void_v<decltype(std::declval<xrt::run&>().set_arg(
    0, std::declval<const uint64_t&>()))>);
static_assert(std::is_void_v<decltype(std::declval<xrt::run&>().set_arg(
    0, std::declval<uint32_t&>()))>);

static_assert(std::is_default_constructible_v<xrt::runlist>);
static_assert(std::is_constructible_v<xrt::runlist, const xrt::hw_context&>);
static_assert(has(static_cast<void (xrt::runlist::*)(const xrt::run&)>(&xrt::runlist::add)));
static_assert(has(static_cast<void (xrt::runlist::*)()>(&xrt::runlist::execute)));
static_assert(has(static_cast<std::cv_status (xrt::runlist::*)(const ms&) const>(
    &xrt::runlist::wait)));
static_assert(has(static_cast<void (xrt::runlist::*)() const>(&xrt::runlist::wait)));

}  // namespace
