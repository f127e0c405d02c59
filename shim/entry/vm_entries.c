/* The libc functions through which memory changes owner, wrapped so that
 * pinfast's registrations (memory/register.h) over it are dropped BEFORE
 * the real call: once it returns, the address may be the program's new
 * memory, and a copy through a late registration would move the old pages.
 * free and realloc cover what malloc gives back by itself (glibc unmaps
 * large blocks and trims its heaps internally, calling no exported
 * function), since it gives back only memory the program freed first.
 * With nothing watched each wrapper costs one relaxed load.  The real
 * functions are the next definitions after pinfast (RTLD_NEXT), so that a
 * preloaded malloc keeps working; see docs/design.md for what is not
 * covered (raw system calls, another process's changes). */
#include "entry.h"
#include "../memory/register.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

/* Set while this thread looks a real function up: dlsym may free (its
 * error state), and that free cannot reach a free not yet found (the
 * others are looked up again, inside: glibc's lookups nest). */
static __thread int resolving;

static void *next(void **slot, const char *name, int malloc_fn, void *own) {
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (f || (resolving && malloc_fn))
        return f;
    int outer = resolving;
    resolving = 1;
    /* malloc's functions: the program's own (a sanitizer's or a malloc
     * preloaded before pinfast, whose blocks pinfast's own frees hold too),
     * or else the next after pinfast */
    f = malloc_fn ? pf_real_dlsym(RTLD_DEFAULT, name) : NULL;
    if (!f || f == own)
        f = pf_real_dlsym(RTLD_NEXT, name);
    resolving = outer;
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    return f;
}

/* The real function `name`, of the type of pinfast's own: the next after
 * pinfast (a sanitizer's interceptor calls pinfast's as its real one). */
#define REAL(name)                                                             \
    ({                                                                         \
        static void *real_;                                                    \
        (__typeof__(&name))next(&real_, #name, 0, NULL);                       \
    })
/* One of malloc's, whose blocks must go back to the malloc they came from;
 * own: pinfast's wrapper of it, if any. */
#define MALLOCS(name, own)                                                     \
    ({                                                                         \
        static void *real_;                                                    \
        (__typeof__(&name))next(&real_, #name, 1, (void *)(own));              \
    })

static void drop(const void *p, size_t n) {
    if (pf_register_watching())
        pf_register_drop((uintptr_t)p, n > UINTPTR_MAX - (uintptr_t)p ? UINTPTR_MAX : (uintptr_t)p + n,
                         PF_REGISTER_UNMAPPED);
}

/* A heap block about to be freed or moved: its extent as the allocator
 * gives it. */
static void drop_block(void *p) {
    if (!p || !pf_register_watching())
        return;
    size_t (*usable)(void *) = MALLOCS(malloc_usable_size, NULL);
    uintptr_t lo = (uintptr_t)p, hi = usable ? lo + usable(p) : UINTPTR_MAX;
    pf_register_drop(lo, hi > lo ? hi : lo + 1, PF_REGISTER_FREED);
}

PF_API void free(void *p) {
    void (*f)(void *) = MALLOCS(free, free);
    if (!f) /* a block dlsym frees while free itself is being found: kept */
        return;
    drop_block(p);
    f(p);
}

PF_API void *realloc(void *p, size_t n) {
    void *(*f)(void *, size_t) = MALLOCS(realloc, realloc);
    if (!f)
        return NULL;
    drop_block(p);
    return f(p, n);
}

/* glibc's reallocarray reallocates without calling the exported realloc. */
PF_API void *reallocarray(void *p, size_t m, size_t n) {
    void *(*f)(void *, size_t, size_t) = MALLOCS(reallocarray, reallocarray);
    if (!f)
        return NULL;
    drop_block(p);
    return f(p, m, n);
}

PF_API int munmap(void *p, size_t n) {
    drop(p, n);
    return REAL(munmap)(p, n);
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
    return REAL(mremap)(old, old_size, new_size, flags, to);
}

/* The advice that takes the pages away (anonymous memory reads as zeros or
 * new pages after it).  POSIX_MADV_DONTNEED is a no-op in glibc. */
PF_API int madvise(void *p, size_t n, int advice) {
    if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE || advice == 24 /* MADV_DONTNEED_LOCKED */)
        drop(p, n);
    return REAL(madvise)(p, n, advice);
}

PF_API void *mmap(void *p, size_t n, int prot, int flags, int fd, off_t off) {
    if (flags & MAP_FIXED)
        drop(p, n);
    return REAL(mmap)(p, n, prot, flags, fd, off);
}

PF_API void *mmap64(void *p, size_t n, int prot, int flags, int fd, off_t off) {
    if (flags & MAP_FIXED)
        drop(p, n);
    return REAL(mmap64)(p, n, prot, flags, fd, off);
}

/* The heap's end moving down gives its top back. */
PF_API int brk(void *end) {
    void *now = REAL(sbrk)(0);
    if ((uintptr_t)end < (uintptr_t)now)
        drop(end, (uintptr_t)now - (uintptr_t)end);
    return REAL(brk)(end);
}

PF_API void *sbrk(intptr_t inc) {
    if (inc < 0) {
        char *now = REAL(sbrk)(0);
        drop(now + inc, (size_t)-inc);
    }
    return REAL(sbrk)(inc);
}

/* shmdt names no size: everything from the segment's start up goes. */
PF_API int shmdt(const void *p) {
    drop(p, UINTPTR_MAX - (uintptr_t)p);
    return REAL(shmdt)(p);
}

PF_API void *shmat(int id, const void *p, int flags) {
    struct shmid_ds ds;
    if (p && (flags & SHM_REMAP) && pf_register_watching() && !shmctl(id, IPC_STAT, &ds))
        drop(p, ds.shm_segsz);
    return REAL(shmat)(id, p, flags);
}

/* A child must not share registered pages: the driver may keep them from
 * the child (MADV_DONTFORK) or the parent may lose them to copy-on-write.
 * All are unregistered first; copies register them again. */
PF_API pid_t fork(void) {
    drop(NULL, UINTPTR_MAX);
    return REAL(fork)();
}
