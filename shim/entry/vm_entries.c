/* The libc functions through which the program changes mappings, wrapped
 * for pinfast's heap (memory/heap.h) alone: a change to one of its blocks
 * retires the block's registration before the real call (memory/register.h:
 * no copy uses it again; it is undone later, where the program waits for
 * its context), and an unmapping inside the heap's range leaves it reserved
 * (inaccessible, as unmapped memory is), so that no other mapping lands
 * where pinfast may still hand out a block.  Memory outside the heap is
 * never registered: its changes need nothing.  Each wrapper is the system
 * call itself after a range test; no allocator is called. */
#include "entry.h"
#include "../base/libc.h"
#include "../memory/heap.h"
#include "../memory/register.h"
#include "../memory/register_guard.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

static uintptr_t end_of(const void *p, size_t n) {
    return n > UINTPTR_MAX - (uintptr_t)p ? UINTPTR_MAX : (uintptr_t)p + n;
}

static int in_heap(const void *p, size_t n) { return pf_heap_meets((uintptr_t)p, end_of(p, n)); }

PF_API int munmap(void *p, size_t n) {
    if (!in_heap(p, n))
        return pf_libc_munmap(p, n);
    pf_register_changed((uintptr_t)p, end_of(p, n));
    pf_heap_altered((uintptr_t)p, end_of(p, n));
    return pf_heap_unmap((uintptr_t)p, end_of(p, n));
}

/* A move, a shrink or a growth in place: the old range's pages may move
 * away, and a range vacated inside the heap is reserved again. */
PF_API void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...) {
    void *to = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        to = va_arg(ap, void *);
        va_end(ap);
        pf_register_changed((uintptr_t)to, end_of(to, new_size));
    }
    int heap = in_heap(old, old_size);
    if (heap) {
        pf_register_changed((uintptr_t)old, end_of(old, old_size));
        pf_heap_altered((uintptr_t)old, end_of(old, old_size));
    }
    void *r = (void *)syscall(SYS_mremap, old, old_size, new_size, flags, to);
    if (heap && r != MAP_FAILED) {
        if (r != old)
            pf_heap_vacated((uintptr_t)old, end_of(old, old_size));
        else if (new_size < old_size)
            pf_heap_vacated((uintptr_t)old + new_size, end_of(old, old_size));
    }
    return r;
}

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

/* Advice that takes the pages away retires a registration; the program's
 * own huge-page advice is never overridden by pinfast's (memory/first_touch.c).
 * POSIX_MADV_DONTNEED is a no-op in glibc. */
PF_API int madvise(void *p, size_t n, int advice) {
    if (in_heap(p, n)) {
        if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE || advice == MADV_DONTNEED_LOCKED)
            pf_register_changed((uintptr_t)p, end_of(p, n));
        else if (advice == MADV_HUGEPAGE || advice == MADV_NOHUGEPAGE)
            pf_heap_advised((uintptr_t)p, end_of(p, n));
    }
    return pf_libc_madvise(p, n, advice);
}

/* A block made read-only or inaccessible is no longer written (or read)
 * by the device behind the program's back: a copy then faults as it would
 * without pinfast. */
PF_API int mprotect(void *p, size_t n, int prot) {
    if (in_heap(p, n) && prot != (PROT_READ | PROT_WRITE)) {
        pf_register_changed((uintptr_t)p, end_of(p, n));
        pf_heap_altered((uintptr_t)p, end_of(p, n));
    }
    return pf_libc_mprotect(p, n, prot);
}

PF_API void *mmap(void *p, size_t n, int prot, int flags, int fd, off_t off) {
    if ((flags & MAP_FIXED) && in_heap(p, n)) {
        pf_register_changed((uintptr_t)p, end_of(p, n));
        pf_heap_altered((uintptr_t)p, end_of(p, n));
    }
    return pf_libc_mmap(p, n, prot, flags, fd, off);
}

PF_API void *mmap64(void *p, size_t n, int prot, int flags, int fd, off_t off) {
    return mmap(p, n, prot, flags, fd, off);
}

PF_API void *shmat(int id, const void *p, int flags) {
    struct shmid_ds ds;
    if (p && (flags & SHM_REMAP) && pf_register_watching() && !shmctl(id, IPC_STAT, &ds) && in_heap(p, ds.shm_segsz))
        pf_register_changed((uintptr_t)p, end_of(p, ds.shm_segsz)),
            pf_heap_altered((uintptr_t)p, end_of(p, ds.shm_segsz));
    return (void *)syscall(SYS_shmat, id, p, flags);
}
