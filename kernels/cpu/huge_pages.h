/* Memory for data that is streamed end to end on every decode step (the
 * repacked weights): on 4 KiB pages each stream takes a TLB miss every
 * 4 KiB, on 2 MiB transparent huge pages one every 2 MiB
 * (docs/performance.md, "Repacked weights"). */
#ifndef NPL_HUGE_PAGES_H
#define NPL_HUGE_PAGES_H

#include <stddef.h>

/* At least `bytes` of writable memory, 64-byte aligned. Regions of one
 * huge page or more are anonymous mappings aligned to 2 MiB and offered to
 * transparent huge pages (a hint: the kernel may still use small pages),
 * and *map_bytes is set to the length to give npl_huge_free; smaller ones
 * come from aligned_alloc and *map_bytes is 0. NULL when out of memory. */
void *npl_huge_alloc(size_t bytes, size_t *map_bytes);

/* Frees what npl_huge_alloc returned, given its map_bytes. */
void npl_huge_free(void *p, size_t map_bytes);

#endif
