/* What a host address is: an interval map of the host memory the program
 * allocated or registered through intercepted calls, and of pinfast's own. */
#ifndef PINFAST_HOSTMAP_H
#define PINFAST_HOSTMAP_H

#include "../base/types.h"

#include <stddef.h>
#include <stdint.h>

struct pf_range {
    uintptr_t base, end; /* [base, end) */
    enum pf_mem kind;
    unsigned flags; /* the allocation's or registration's flags */
};

/* Records a range; an existing one with the same base is replaced. */
void pf_hostmap_add(const void *base, size_t size, enum pf_mem kind, unsigned flags);

/* Forgets the range starting at base; returns 1 if there was one, filling *out. */
int pf_hostmap_remove(const void *base, struct pf_range *out);

/* The range containing p, returning 1; or returns 0 with out->base and
 * out->end set to the gap around p that holds no range. */
int pf_hostmap_find(const void *p, struct pf_range *out);

/* Changes whenever the map does, and whenever device memory is freed: what
 * was learnt of an address before may no longer hold. */
extern unsigned pf_hostmap_generation_;
static inline unsigned pf_hostmap_generation(void) {
    return __atomic_load_n(&pf_hostmap_generation_, __ATOMIC_ACQUIRE);
}
void pf_hostmap_touch(void);

/* Held across fork() so the child never inherits a half-changed map. */
void pf_hostmap_fork_prepare(void);
void pf_hostmap_fork_done(void); /* in the parent */
void pf_hostmap_forked(void);    /* in the child: the lock made anew */

#endif
