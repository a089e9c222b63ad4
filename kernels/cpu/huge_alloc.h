/* Large buffers offered to transparent huge pages. */
#ifndef NPL_HUGE_ALLOC_H
#define NPL_HUGE_ALLOC_H

#include <stddef.h>

/* Zeroed memory of `bytes`, 64-byte aligned. Buffers of at least one huge
 * page are mapped 2 MiB-aligned and advised MADV_HUGEPAGE; *map_bytes then
 * says how many bytes npl_huge_free must unmap, else it is 0 (malloc'd).
 * NULL when out of memory. */
void *npl_huge_alloc(size_t bytes, size_t *map_bytes);

/* Frees what npl_huge_alloc returned (NULL is ignored). */
void npl_huge_free(void *p, size_t map_bytes);

#endif
