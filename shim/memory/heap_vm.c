/* The program's own mapping calls over pinfast's heap (heap.h): an munmap
 * inside the reserved range leaves it reserved, a move out of it reserves
 * what it vacated, and the blocks an madvise, munmap, mremap or mprotect
 * reached are marked, for their reuse and pinfast's huge-page advice. */
#include "heap.h"
#include "block.h"
#include "../base/libc.h"

#include <errno.h>
#include <unistd.h>

#define UNIT ((uintptr_t)2 << 20)

static uintptr_t page(void) {
    static uintptr_t p; /* threads may race to set it, to the same value */
    uintptr_t v = __atomic_load_n(&p, __ATOMIC_RELAXED);
    if (!v)
        __atomic_store_n(&p, v = (uintptr_t)sysconf(_SC_PAGESIZE), __ATOMIC_RELAXED);
    return v;
}

/* [lo, hi) clipped to the reserved range. */
static int clip(uintptr_t *lo, uintptr_t *hi) {
    uintptr_t b = pf_heap_lo_, e = b + pf_heap_len_;
    *lo = *lo < b ? b : *lo;
    *hi = *hi > e ? e : *hi;
    return *lo < *hi;
}

int pf_heap_unmap(uintptr_t lo, uintptr_t hi) {
    if (lo & (page() - 1) || hi <= lo) {
        errno = EINVAL;
        return -1;
    }
    hi = (hi + page() - 1) & ~(page() - 1);
    uintptr_t a = lo, z = hi;
    int r = 0;
    if (clip(&a, &z)) {
        r = pf_heap_reserve_again(a, z - a);
        if (lo < a)
            r |= pf_libc_munmap((void *)lo, a - lo);
        if (z < hi)
            r |= pf_libc_munmap((void *)z, hi - z);
    } else {
        r = pf_libc_munmap((void *)lo, hi - lo);
    }
    return r ? -1 : 0;
}

void pf_heap_vacated(uintptr_t lo, uintptr_t hi) {
    lo &= ~(page() - 1);
    hi = (hi + page() - 1) & ~(page() - 1);
    if (clip(&lo, &hi))
        (void)pf_heap_reserve_again(lo, hi - lo);
}

/* Marks the blocks meeting [lo, hi): huge-page advice, or an alteration. */
static void mark(uintptr_t lo, uintptr_t hi, int altered) {
    if (!clip(&lo, &hi))
        return;
    pf_heap_lock();
    for (uintptr_t p = lo & ~(UNIT - 1); p < hi; p += UNIT) {
        struct pf_block *b = pf_heap_find(p);
        if (b && altered)
            b->altered = 1;
        else if (b)
            b->thp = 1;
    }
    pf_heap_unlock();
}

void pf_heap_advised(uintptr_t lo, uintptr_t hi) { mark(lo, hi, 0); }
void pf_heap_altered(uintptr_t lo, uintptr_t hi) { mark(lo, hi, 1); }

int pf_heap_advisable(const void *p, size_t n) {
    if (!pf_heap_owns(p))
        return 0;
    pf_heap_lock();
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    int ok = b && b->state == PF_BLOCK_LIVE && !b->thp && (uintptr_t)p + n <= b->base + b->size;
    pf_heap_unlock();
    return ok;
}
