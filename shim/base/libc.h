/* libc's memory functions as pinfast itself calls them.  The library links
 * with -Bsymbolic-functions, so a plain malloc, free or madvise from inside
 * it binds to pinfast's own interposers (entry/heap_entries.c,
 * entry/vm_entries.c): a large malloc would come from pinfast's heap, a
 * madvise or munmap would retire registrations.  These reach the real
 * functions: the system call itself for the mapping calls, and for
 * malloc's family the real allocator, the next definition after pinfast
 * (base/dynsym.h) or glibc's own.  Memory from pf_libc_malloc & co. goes
 * back through pf_libc_free, never free. */
#ifndef PINFAST_LIBC_H
#define PINFAST_LIBC_H

#include "dynsym.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* glibc's own, where no other is found */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t m, size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t n);

/* The real function named `name` (a string: base/dynsym.h), of the type
 * of `glibc`, its stand-in where none is found.  Found once per caller:
 * the objects defining malloc's functions are loaded before the first
 * call. */
#define PF_LIBC_REAL(name, glibc) \
    ({ \
        static void *real_; \
        void *f_ = __atomic_load_n(&real_, __ATOMIC_ACQUIRE); \
        if (!f_) { \
            f_ = pf_dynsym_other(name); \
            f_ = f_ ? f_ : (void *)(glibc); \
            __atomic_store_n(&real_, f_, __ATOMIC_RELEASE); \
        } \
        (__typeof__(&glibc))f_; \
    })

static inline void *pf_libc_malloc(size_t n) { return PF_LIBC_REAL("malloc", __libc_malloc)(n); }
static inline void *pf_libc_calloc(size_t m, size_t n) { return PF_LIBC_REAL("calloc", __libc_calloc)(m, n); }
static inline void *pf_libc_realloc(void *p, size_t n) { return PF_LIBC_REAL("realloc", __libc_realloc)(p, n); }
static inline void *pf_libc_aligned_alloc(size_t align, size_t n) {
    return PF_LIBC_REAL("aligned_alloc", __libc_memalign)(align, n);
}
static inline void pf_libc_free(void *p) { PF_LIBC_REAL("free", __libc_free)(p); }

static inline void *pf_libc_mmap(void *p, size_t n, int prot, int flags, int fd, off_t off) {
    if (off & 4095) { /* as glibc's: the kernel takes whole pages */
        errno = EINVAL;
        return MAP_FAILED;
    }
    return (void *)syscall(SYS_mmap, p, n, prot, flags, fd, off);
}
static inline int pf_libc_munmap(void *p, size_t n) { return (int)syscall(SYS_munmap, p, n); }
static inline int pf_libc_madvise(void *p, size_t n, int advice) { return (int)syscall(SYS_madvise, p, n, advice); }
static inline int pf_libc_mprotect(void *p, size_t n, int prot) { return (int)syscall(SYS_mprotect, p, n, prot); }

#endif
