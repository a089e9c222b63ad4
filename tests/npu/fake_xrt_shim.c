/* A module with the XRT shim's entry point that opens the emulator: lets
 * the loader be tested end to end (dlopen, ABI check, a working device)
 * where XRT is not installed. */
#include "npu_emu.h"
#include "xrt_shim.h"

npl_status npl_npu_xrt_shim_open(unsigned abi, const npl_npu_xrt_config *cfg,
                                 npl_npu_device **out, npl_error *err)
{
    (void)cfg;
    if (abi != NPL_NPU_XRT_SHIM_ABI)
        return npl_error_set(err, NPL_ERR_UNSUPPORTED, "fake shim: ABI %u", abi);
    return npl_npu_emu_open(NULL, out, err);
}
