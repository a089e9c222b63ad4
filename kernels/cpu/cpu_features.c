#include "cpu_features.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define XCR0_TILE_STATE (3u << 17)          /* XTILECFG + XTILEDATA */
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* Linux (5.16+) lets a process use the 8 KiB of tile data only after it
 * asked; the request is idempotent and holds for all its threads. */
static bool amx_permitted(void)
{
    const char *off = getenv("NPULLM_NO_AMX");
    if (off && *off && strcmp(off, "0") != 0)
        return false;
    unsigned long granted = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &granted) == 0 &&
        (granted & (1ul << XFEATURE_XTILEDATA)))
        return true;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

/* XCR0: which register states the OS saves on a context switch. An
 * instruction set is only usable when its state is saved. */
static uint64_t read_xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

void npl_cpu_features_detect(npl_cpu_features *f)
{
    memset(f, 0, sizeof *f);
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    bool osxsave = c & bit_OSXSAVE;
    bool has_fma = c & bit_FMA;
    bool has_f16c = c & bit_F16C;
    bool has_avx = c & bit_AVX;
    if (!osxsave || !has_avx)
        return;
    uint64_t xcr0 = read_xcr0();
    bool ymm_state = (xcr0 & 0x6) == 0x6;          /* SSE + AVX */
    bool zmm_state = (xcr0 & 0xe6) == 0xe6;        /* + opmask, ZMM hi256, hi16 ZMM */
    if (!ymm_state)
        return;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    unsigned leaf7_b = b, leaf7_c = c, leaf7_d = d;
    f->avx2 = leaf7_b & bit_AVX2;
    f->fma = has_fma;
    f->f16c = has_f16c;
    if (zmm_state) {
        f->avx512f = leaf7_b & bit_AVX512F;
        f->avx512bw = leaf7_b & bit_AVX512BW;
        f->avx512vl = leaf7_b & bit_AVX512VL;
        f->avx512dq = leaf7_b & bit_AVX512DQ;
        f->avx512vnni = leaf7_c & bit_AVX512VNNI;
        __cpuid_count(7, 1, a, b, c, d);
        f->avx512bf16 = f->avx512f && (a & bit_AVX512BF16);
        bool tiles = (leaf7_d & (1u << 24)) && (xcr0 & XCR0_TILE_STATE) == XCR0_TILE_STATE;
        if (tiles && f->avx512bf16 && f->avx512vnni && amx_permitted()) {
            f->amx_bf16 = leaf7_d & (1u << 22);
            f->amx_int8 = leaf7_d & (1u << 25);
        }
    }
}
#else
void npl_cpu_features_detect(npl_cpu_features *f)
{
    memset(f, 0, sizeof *f);
}
#endif

const char *npl_cpu_features_describe(const npl_cpu_features *f)
{
    bool avx512 = f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni && f->avx2 && f->fma && f->f16c;
    if (avx512)
        return f->amx_bf16 ? "avx512 (vnni, bf16, amx)" : f->avx512bf16 ? "avx512 (vnni, bf16)" : "avx512 (vnni)";
    if (f->avx2 && f->fma && f->f16c)
        return "avx2";
    return "portable";
}
