/* What the CPU (and the OS, for the wider register state) lets the
 * kernels use, read once from CPUID and XGETBV. The kernels never assume
 * an instruction set at build time: every x86-64 binary carries the
 * portable, AVX2 and AVX-512 paths and picks one from this at run time. */
#ifndef NPL_CPU_FEATURES_H
#define NPL_CPU_FEATURES_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npl_cpu_features {
    bool avx2, fma, f16c;   /* with the OS saving YMM state */
    bool avx512f, avx512bw, avx512vl, avx512dq; /* with ZMM/opmask state */
    bool avx512vnni;        /* VPDPBUSD: u8 x s8 dot, 4 per lane */
    bool avx512bf16;        /* VDPBF16PS */
    /* AMX tiles (TDPBF16PS, TDPBSSD...): the CPU has them, the OS saves
     * the tile state and granted this process its use (Linux asks each
     * process to request it, arch_prctl ARCH_REQ_XCOMP_PERM). Every
     * thread must load a tile configuration (LDTILECFG) before use. */
    bool amx_bf16, amx_int8;
} npl_cpu_features;

/* Fills f for the running CPU (all false off x86-64). The first call
 * that finds AMX requests the tile permission for the process.
 * NPULLM_NO_AMX=1 in the environment leaves amx_* false (to compare or
 * test the AVX-512 paths on an AMX machine). */
void npl_cpu_features_detect(npl_cpu_features *f);

/* "avx512 (vnni, bf16, amx)", "avx2", "portable": for reports. */
const char *npl_cpu_features_describe(const npl_cpu_features *f);

#ifdef __cplusplus
}
#endif

#endif
