/* pinfast's heap: the program's large heap blocks (malloc, calloc,
 * realloc, posix_memalign, ... from PINFAST_REGISTER_MIN on) are served
 * from mappings pinfast makes in an address range it reserves, so that
 * their lifetime is pinfast's to see: only such blocks are ever registered
 * (memory/register.h), and a freed one is kept, still registered, for a
 * later allocation of a fitting size.  Smaller blocks, and everything while
 * the heap is off, are the real allocator's.  docs/design.md, "The
 * registration cache". */
#ifndef PINFAST_HEAP_H
#define PINFAST_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* The reserved range [pf_heap_lo_, pf_heap_lo_ + pf_heap_len_) (0 until
 * reserved), and the smallest block served (SIZE_MAX: none). */
extern uintptr_t pf_heap_lo_, pf_heap_len_;
extern size_t pf_heap_min_;

static inline int pf_heap_owns(const void *p) {
    return (uintptr_t)p - __atomic_load_n(&pf_heap_lo_, __ATOMIC_RELAXED) <
           __atomic_load_n(&pf_heap_len_, __ATOMIC_RELAXED);
}
/* Whether [lo, hi) meets the reserved range. */
static inline int pf_heap_meets(uintptr_t lo, uintptr_t hi) {
    uintptr_t b = __atomic_load_n(&pf_heap_lo_, __ATOMIC_RELAXED);
    return hi > b && lo < b + __atomic_load_n(&pf_heap_len_, __ATOMIC_RELAXED);
}
static inline int pf_heap_serves(size_t n) { return n >= __atomic_load_n(&pf_heap_min_, __ATOMIC_RELAXED); }

/* Turns the heap on (the library's constructor): from then on blocks of
 * PINFAST_REGISTER_MIN or more are served, unless the cache is off or
 * pinfast's malloc is not the program's. */
void pf_heap_start(void);

/* A block of n bytes aligned to `align` (a power of two), zeroed when
 * `zero`; NULL when the heap does not serve it (the caller asks the real
 * allocator). */
void *pf_heap_alloc(size_t n, size_t align, int zero);
/* p, a block of the heap, is freed: kept for reuse (registered, or warm
 * within PINFAST_HEAP_KEEP) or given back to the system.  Returns the
 * bytes the program asked for it, and *align (unless NULL) the alignment:
 * the size of the free the real allocator would have seen. */
size_t pf_heap_free(void *p, size_t *align);
/* The bytes usable at p, a block of the heap. */
size_t pf_heap_usable(const void *p);
/* p, a block of the heap, resized to n > 0 bytes: in place when it fits,
 * else moved by a copy (a registered block is never unregistered for it,
 * nor grown in place). */
void *pf_heap_realloc(void *p, size_t n, void *(*other)(size_t));
/* Warm blocks kept unregistered are given back (malloc_trim). */
void pf_heap_trim(void);

/* The program unmaps [lo, hi) inside the reserved range: made inaccessible
 * in place (the range stays reserved, so that no other mapping lands in a
 * block pinfast may still give out); the system call's result. */
int pf_heap_unmap(uintptr_t lo, uintptr_t hi);
/* The range [lo, hi) of the reserved range was vacated by a move (mremap):
 * reserved again. */
void pf_heap_vacated(uintptr_t lo, uintptr_t hi);
/* The program advises transparent huge pages (or not) on [lo, hi): its
 * blocks there get no huge-page advice of pinfast's from now on. */
void pf_heap_advised(uintptr_t lo, uintptr_t hi);
/* The program unmapped, remapped or protected [lo, hi): its blocks there
 * are given back when freed, never kept for reuse. */
void pf_heap_altered(uintptr_t lo, uintptr_t hi);
/* Whether [p, p+n) lies in one live block on which the program gave no
 * huge-page advice of its own (memory/first_touch.c may advise it). */
int pf_heap_advisable(const void *p, size_t n);

struct pf_heap_stats {
    unsigned long long served, reused, kept_blocks, released;
    size_t live_bytes, kept_bytes, peak_kept_bytes;
};
void pf_heap_stats(struct pf_heap_stats *out);

/* Around fork: the lock is held across it; the child keeps every block
 * (its memory is the parent's copy) but no registration. */
void pf_heap_fork_prepare(void);
void pf_heap_fork_done(void);

#endif
