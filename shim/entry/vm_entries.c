/* The libc functions through which memory changes owner, wrapped so that
 * pinfast's registrations (memory/register.h) over it are dropped BEFORE
 * the real call: once it returns, the address may be the program's new
 * memory, and a copy through a late registration would move the old pages.
 * free() of a block holding registrations returns at once: the registrar
 * thread unregisters it and only then makes the real call.
 * free and realloc cover what malloc gives back by itself (glibc unmaps
 * large blocks and trims its heaps internally, calling no exported
 * function), since it gives back only memory the program freed first.
 * With nothing watched each wrapper costs one relaxed load.  malloc's
 * functions are the program's (a sanitizer's, a malloc preloaded before
 * pinfast) or the next definitions after pinfast, found without dlsym
 * (base/dynsym.h), so that a preloaded malloc keeps working; the
 * memory-mapping ones are the system calls themselves: an allocator maps
 * memory while it starts, and a lookup then would call into it half made.
 * See docs/design.md for what is not covered (raw system calls, another
 * process's changes). */
#include "entry.h"
#include "../base/dynsym.h"
#include "../memory/register.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

/* glibc's own: its record of the heap's end; its malloc's functions, where
 * no other is found */
extern void *__sbrk(intptr_t inc);
extern void __libc_free(void *p);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_reallocarray(void *p, size_t m, size_t n);

/* The real function `name` (base/dynsym.h), of the type of pinfast's
 * own; glibc's where none is found.  Found once: the objects defining
 * malloc's functions are loaded before anything is freed. */
#define REAL(name, glibc)                                                      \
    ({                                                                         \
        static void *real_;                                                    \
        void *f_ = __atomic_load_n(&real_, __ATOMIC_ACQUIRE);                  \
        if (!f_) {                                                             \
            f_ = pf_dynsym_other(#name);                                       \
            __atomic_store_n(&real_, f_ ? f_ : (void *)(glibc), __ATOMIC_RELEASE); \
            f_ = f_ ? f_ : (void *)(glibc);                                    \
        }                                                                      \
        (__typeof__(&name))f_;                                                 \
    })

static void drop(const void *p, size_t n) {
    if (pf_register_watching())
        pf_register_drop((uintptr_t)p, n > UINTPTR_MAX - (uintptr_t)p ? UINTPTR_MAX : (uintptr_t)p + n,
                         PF_REGISTER_UNMAPPED);
}

/* A heap block about to be freed or moved: its extent as the allocator
 * gives it.  With `release` (a free), a block holding registrations goes to
 * the registrar, which unregisters it and only then releases it: 1 then. */
static int drop_block(void *p, void (*release)(void *)) {
    if (!p || !pf_register_watching())
        return 0;
    size_t (*usable)(void *) = REAL(malloc_usable_size, malloc_usable_size);
    uintptr_t hi = (uintptr_t)p + usable(p);
    return pf_register_free(p, hi > (uintptr_t)p ? hi : (uintptr_t)p + 1, release);
}

PF_API void free(void *p) {
    if (!p && __atomic_load_n(&pf_register_probe_, __ATOMIC_RELAXED)) /* it reached pinfast */
        __atomic_store_n(&pf_register_probe_, 2, __ATOMIC_RELAXED);
    void (*release)(void *) = REAL(free, __libc_free);
    if (!drop_block(p, release))
        release(p);
}

/* Inline: the real realloc may keep, shrink or move the block, and frees
 * the old one itself; deferring would mean making every move a malloc, a
 * copy and a free of pinfast's. */
PF_API void *realloc(void *p, size_t n) {
    drop_block(p, NULL);
    return REAL(realloc, __libc_realloc)(p, n);
}

/* glibc's reallocarray reallocates without calling the exported realloc. */
PF_API void *reallocarray(void *p, size_t m, size_t n) {
    drop_block(p, NULL);
    return REAL(reallocarray, __libc_reallocarray)(p, m, n);
}

PF_API int munmap(void *p, size_t n) {
    drop(p, n);
    return (int)syscall(SYS_munmap, p, n);
}

/* A move, a shrink or a growth in place: all drop the old range (the pages
 * may stay, but are rarely copied again from there). */
PF_API void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...) {
    void *to = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        to = va_arg(ap, void *);
        va_end(ap);
        drop(to, new_size);
    }
    drop(old, old_size);
    return (void *)syscall(SYS_mremap, old, old_size, new_size, flags, to);
}

/* The advice that takes the pages away (anonymous memory reads as zeros or
 * new pages after it).  POSIX_MADV_DONTNEED is a no-op in glibc. */
PF_API int madvise(void *p, size_t n, int advice) {
    if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE || advice == 24 /* MADV_DONTNEED_LOCKED */)
        drop(p, n);
    return (int)syscall(SYS_madvise, p, n, advice);
}

PF_API void *mmap(void *p, size_t n, int prot, int flags, int fd, off_t off) {
    if (flags & MAP_FIXED)
        drop(p, n);
    if (off & 4095) { /* as glibc's: the kernel takes whole pages */
        errno = EINVAL;
        return MAP_FAILED;
    }
    return (void *)syscall(SYS_mmap, p, n, prot, flags, fd, off);
}

PF_API void *mmap64(void *p, size_t n, int prot, int flags, int fd, off_t off) {
    return mmap(p, n, prot, flags, fd, off);
}

/* The heap's end moving down gives its top back. */
PF_API int brk(void *end) {
    void *now = __sbrk(0);
    if ((uintptr_t)end < (uintptr_t)now)
        drop(end, (uintptr_t)now - (uintptr_t)end);
    return __sbrk((intptr_t)end - (intptr_t)now) == (void *)-1 ? -1 : 0;
}

PF_API void *sbrk(intptr_t inc) {
    if (inc < 0) {
        char *now = __sbrk(0);
        drop(now + inc, (size_t)-inc);
    }
    return __sbrk(inc);
}

/* shmdt names no size: everything from the segment's start up goes. */
PF_API int shmdt(const void *p) {
    drop(p, UINTPTR_MAX - (uintptr_t)p);
    return (int)syscall(SYS_shmdt, p);
}

PF_API void *shmat(int id, const void *p, int flags) {
    struct shmid_ds ds;
    if (p && (flags & SHM_REMAP) && pf_register_watching() && !shmctl(id, IPC_STAT, &ds))
        drop(p, ds.shm_segsz);
    return (void *)syscall(SYS_shmat, id, p, flags);
}

/* A child must not share registered pages: the driver may keep them from
 * the child (MADV_DONTFORK) or the parent may lose them to copy-on-write.
 * All are unregistered first; copies register them again. */
PF_API pid_t fork(void) {
    drop(NULL, UINTPTR_MAX);
    static void *next;
    void *n = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
    if (!n) /* the next after pinfast: a sanitizer's fork calls pinfast's as its own next */
        __atomic_store_n(&next, n = pf_dynsym_next("fork"), __ATOMIC_RELEASE);
    pid_t (*f)(void) = (pid_t(*)(void))n;
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    return f();
}
