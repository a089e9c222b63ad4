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
} npl_cpu_features;

/* Fills f for the running CPU (all false off x86-64). */
void npl_cpu_features_detect(npl_cpu_features *f);

/* "avx512 (vnni, bf16)", "avx2", "portable": for reports. */
const char *npl_cpu_features_describe(const npl_cpu_features *f);

#ifdef __cplusplus
}
#endif

#endif
