#include "cpu_features.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <stdint.h>

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
    unsigned leaf7_b = b, leaf7_c = c;
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
        return f->avx512bf16 ? "avx512 (vnni, bf16)" : "avx512 (vnni)";
    if (f->avx2 && f->fma && f->f16c)
        return "avx2";
    return "portable";
}
