/* malloc's functions: a block of PINFAST_REGISTER_MIN or more comes from
 * pinfast's heap (memory/heap.h), whose blocks alone may be registered;
 * every other call goes to the real allocator: the program's own (a
 * sanitizer's, one preloaded before pinfast: then the heap is off) or the
 * next definition after pinfast, found without dlsym (base/dynsym.h), so
 * that a malloc preloaded after pinfast keeps working.  A pointer is the
 * heap's when it lies in its reserved range: one comparison. */
#include "entry.h"
#include "../base/libc.h"
#include "../memory/heap.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int glibc_posix_memalign(void **pp, size_t align, size_t n) {
    void *p = __libc_memalign(align, n);
    return p ? (*pp = p, 0) : ENOMEM;
}
static size_t glibc_usable(void *p) {
    (void)p;
    return 0;
}
static int glibc_trim(size_t pad) {
    (void)pad;
    return 0;
}

/* glibc raises its mmap threshold to the size of a mapped block the
 * program frees (up to 32 MiB, DEFAULT_MMAP_THRESHOLD_MAX), and the size at
 * which it gives its heap's top back to the system to twice that.  The
 * program's large blocks are pinfast's, so glibc is shown a free of the
 * same size, made through it: else it would keep giving back, and the
 * program keep faulting in again, the memory of its smaller blocks (a
 * DataLoader's samples, freed each one).  The threshold only grows, so a
 * size no larger than one shown before changes nothing and is not shown. */
#define LIBC_THRESHOLD_MAX ((size_t)32 << 20)

static void libc_sees_free(size_t n, size_t align) {
    static size_t shown;
    size_t was = __atomic_load_n(&shown, __ATOMIC_RELAXED);
    do {
        if (n <= was || n > LIBC_THRESHOLD_MAX)
            return;
    } while (!__atomic_compare_exchange_n(&shown, &was, n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    pf_libc_free(align > 16 ? pf_libc_aligned_alloc(align, n) : pf_libc_malloc(n));
}

static void heap_free(void *p) {
    size_t align, n = pf_heap_free(p, &align);
    libc_sees_free(n, align);
}

PF_API void *malloc(size_t n) {
    void *p = pf_heap_serves(n) ? pf_heap_alloc(n, 16, 0) : NULL;
    return p ? p : pf_libc_malloc(n);
}

PF_API void free(void *p) {
    if (pf_heap_owns(p))
        heap_free(p);
    else
        pf_libc_free(p);
}

PF_API void *calloc(size_t m, size_t n) {
    size_t t;
    void *p = !__builtin_mul_overflow(m, n, &t) && pf_heap_serves(t) ? pf_heap_alloc(t, 16, 1) : NULL;
    return p ? p : pf_libc_calloc(m, n);
}

/* A block of the real allocator stays with it (growing one from small to
 * large keeps glibc's mremap); one of the heap is resized there; none is
 * malloc's (a buffer grown from nothing, as CPython's bytearray). */
PF_API void *realloc(void *p, size_t n) {
    if (!p)
        return malloc(n);
    if (pf_heap_owns(p) && !n) { /* as glibc: freed */
        heap_free(p);
        return NULL;
    }
    if (pf_heap_owns(p))
        return pf_heap_realloc(p, n, pf_libc_malloc);
    return pf_libc_realloc(p, n);
}

PF_API void *reallocarray(void *p, size_t m, size_t n) {
    size_t t;
    if (__builtin_mul_overflow(m, n, &t)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, t);
}

PF_API int posix_memalign(void **pp, size_t align, size_t n) {
    void *p = pf_heap_serves(n) && align && !(align & (align - 1)) && !(align % sizeof(void *))
                  ? pf_heap_alloc(n, align, 0)
                  : NULL;
    if (!p)
        return PF_LIBC_REAL("posix_memalign", glibc_posix_memalign)(pp, align, n);
    *pp = p;
    return 0;
}

PF_API void *aligned_alloc(size_t align, size_t n) {
    void *p = pf_heap_serves(n) && align && !(align & (align - 1)) ? pf_heap_alloc(n, align, 0) : NULL;
    return p ? p : PF_LIBC_REAL("aligned_alloc", __libc_memalign)(align, n);
}

PF_API void *memalign(size_t align, size_t n) {
    void *p = pf_heap_serves(n) && align && !(align & (align - 1)) ? pf_heap_alloc(n, align, 0) : NULL;
    return p ? p : PF_LIBC_REAL("memalign", __libc_memalign)(align, n);
}

PF_API void *valloc(size_t n) { return memalign((size_t)sysconf(_SC_PAGESIZE), n); }

PF_API void *pvalloc(size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n > SIZE_MAX - page) {
        errno = ENOMEM;
        return NULL;
    }
    return memalign(page, n ? (n + page - 1) & ~(page - 1) : page);
}

PF_API size_t malloc_usable_size(void *p) {
    if (p && pf_heap_owns(p))
        return pf_heap_usable(p);
    return PF_LIBC_REAL("malloc_usable_size", glibc_usable)(p);
}

PF_API int malloc_trim(size_t pad) {
    pf_heap_trim();
    return PF_LIBC_REAL("malloc_trim", glibc_trim)(pad);
}
