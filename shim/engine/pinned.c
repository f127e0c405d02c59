/* pinfast's own pinned memory (staging slots, bounce rings): a mapping on
 * 2 MiB boundaries with huge pages advised, registered with the driver
 * (portable).  The driver pins it in less than half the time
 * cuMemHostAlloc takes and unpins it in a sixth
 * (tests/gpu/probes/probe_pin_cost.c, docs/options.md "Staging"); the copy
 * engine reads both alike.  Where the driver registers no host memory
 * (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED), or refuses this mapping,
 * cuMemHostAlloc.  Not mapped in a forked child (MADV_DONTFORK): it can
 * use none of its parent's CUDA state, and the kernel would copy every
 * pinned page into it at the fork. */
#include "pinned.h"
#include "../base/libc.h"
#include "../driver/driver.h"

#include <stdint.h>

#define ALIGN ((size_t)2 << 20)

static size_t pages(size_t n) {
    size_t p = (size_t)sysconf(_SC_PAGESIZE);
    return (n + p - 1) & ~(p - 1);
}

static char *mapped(size_t size) {
    if (size > SIZE_MAX - ALIGN)
        return NULL;
    char *map = pf_libc_mmap(NULL, size + ALIGN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return NULL;
    char *mem = (char *)(((uintptr_t)map + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    if (mem > map)
        pf_libc_munmap(map, (size_t)(mem - map));
    if (map + ALIGN > mem)
        pf_libc_munmap(mem + size, (size_t)(map + ALIGN - mem));
    /* advice only: without huge pages it is pinned page by page, about as
     * fast as cuMemHostAlloc */
    pf_libc_madvise(mem, size, MADV_HUGEPAGE);
    pf_libc_madvise(mem, size, MADV_DONTFORK);
    if (PF_CALL(cuMemHostRegister_v2, mem, size, CU_MEMHOSTREGISTER_PORTABLE) == CUDA_SUCCESS)
        return mem;
    pf_libc_munmap(mem, size);
    return NULL;
}

int pf_pinned_make(struct pf_pinned *p, size_t size) {
    void *mem = NULL;
    *p = (struct pf_pinned){.size = pages(size), .mapped = 1};
    if (!p->size)
        return 0;
    if (!(p->mem = mapped(p->size)) &&
        PF_CALL(cuMemHostAlloc, &mem, p->size = size, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS)
        *p = (struct pf_pinned){.mem = mem, .size = size};
    return p->mem != NULL;
}

void pf_pinned_free(struct pf_pinned *p) {
    if (p->mem && p->mapped) {
        PF_CALL(cuMemHostUnregister, p->mem);
        pf_libc_munmap(p->mem, p->size);
    } else if (p->mem) {
        PF_CALL(cuMemFreeHost, p->mem);
    }
    p->mem = NULL;
}

void pf_pinned_gone(struct pf_pinned *p) {
    if (p->mem && p->mapped)
        pf_libc_munmap(p->mem, p->size);
    p->mem = NULL;
}
