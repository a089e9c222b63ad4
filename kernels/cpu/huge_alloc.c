/* Large buffers on transparent huge pages.
 *
 * Streaming a big buffer on 4 KiB pages costs a TLB miss (a page walk)
 * every 4 KiB, and first touching it a page fault every 4 KiB: in a VM
 * each fault is an exit to the hypervisor. Packed weights (a decode step
 * streams them all; 1-vector rates rose 15-25% on an Intel Xeon VM) and
 * KV caches (a follow-up turn copies thousands of cached rows into a new
 * sequence; docs/performance.md) are therefore mapped 2 MiB-aligned and
 * offered to transparent huge pages, which the kernel's default policy
 * gives only where asked (madvise). The tail past the last whole huge page
 * stays on small pages, so the resident size is the buffer's. */
#include "huge_alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *npl_huge_alloc(size_t bytes, size_t *map_bytes)
{
    *map_bytes = 0;
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_PAGE && bytes <= SIZE_MAX - 2 * HUGE_PAGE) {
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
            madvise((void *)base, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* a hint */
            *map_bytes = len;
            return (void *)base; /* anonymous pages read as zero */
        }
    }
#endif
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes)
        return NULL;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (p)
        memset(p, 0, rounded);
    return p;
}

void npl_huge_free(void *p, size_t map_bytes)
{
    if (!p)
        return;
    if (map_bytes)
        munmap(p, map_bytes);
    else
        free(p);
}
