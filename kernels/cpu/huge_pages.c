#include "huge_pages.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *npl_huge_alloc(size_t bytes, size_t *map_bytes)
{
    *map_bytes = 0;
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_PAGE && bytes <= SIZE_MAX - HUGE_PAGE) {
        size_t span = bytes + HUGE_PAGE;
        uint8_t *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw != MAP_FAILED) {
            uintptr_t base = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
            size_t head = (size_t)(base - (uintptr_t)raw);
            long ps = sysconf(_SC_PAGESIZE);
            size_t page = ps > 0 ? (size_t)ps : 4096;
            size_t len = (bytes + page - 1) & ~(page - 1); /* whole pages: munmap needs them */
            if (head)
                munmap(raw, head);
            if (span - head > len)
                munmap((uint8_t *)base + len, span - head - len);
            /* The tail past the last whole huge page stays on small pages,
             * so the resident size is the region's. */
            madvise((void *)base, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
            *map_bytes = len;
            return (void *)base;
        }
    }
#endif
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

void npl_huge_free(void *p, size_t map_bytes)
{
    if (map_bytes)
        munmap(p, map_bytes);
    else
        free(p);
}
