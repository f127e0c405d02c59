/* Host ranges that an asynchronous pageable D2H has yet to write (see
 * PINFAST_ASYNC_D2H).  Every copy that reads or writes host memory waits for
 * the ranges it overlaps, so a program sees its copies in the order the plain
 * driver would have completed them. */
#ifndef PINFAST_PENDING_WRITES_H
#define PINFAST_PENDING_WRITES_H

#include <stddef.h>

/* Registers [p, p+n) held once by the caller; -1 if the table is full. */
int pf_pending_begin(void *p, size_t n);

/* One more / one less hold on a range; the last release removes it. */
void pf_pending_hold(int range);
void pf_pending_release(int range);

/* Returns once no range overlapping [p, p+n) is pending; n = (size_t)-1
 * waits for every range. */
extern int pf_pending_used; /* ranges with holds, readable without the lock */
void pf_pending_wait_held(const void *p, size_t n);
static inline void pf_pending_wait(const void *p, size_t n) {
    if (__atomic_load_n(&pf_pending_used, __ATOMIC_ACQUIRE))
        pf_pending_wait_held(p, n);
}

/* In a forked child: the parent's copies never land here. */
void pf_pending_forked(void);

#endif
