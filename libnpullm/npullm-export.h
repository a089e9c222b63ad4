/* libnpullm-1: symbols are hidden unless marked NPULLM_EXPORT. */
#pragma once

#if !defined(__NPULLM_H_INSIDE__) && !defined(NPULLM_COMPILATION)
#error "Only <npullm.h> can be included directly."
#endif

#if defined(NPULLM_COMPILATION)
#define NPULLM_EXPORT __attribute__((visibility("default"))) extern
#else
#define NPULLM_EXPORT extern
#endif
