/* "Where from": copies attributed to the program's call sites, by a stack
 * walk on a sample of the copies, resolved to library + symbol at exit. */
#ifndef PINFAST_CALLSITE_H
#define PINFAST_CALLSITE_H

#include <stddef.h>
#include <stdint.h>

#define PF_CALLSITE_MAX 256 /* sites kept; the rest count as "other" */

/* Per thread: what lets most copies pass with a decrement and two compares. */
struct pf_callsite_countdown {
    uint64_t left;                     /* copies to the next one walked at the base rate; 0: not set up */
    uint64_t small_bytes, small_ticks; /* copies up to these are walked at the base rate only */
};
extern __thread struct pf_callsite_countdown pf_callsite_countdown;
void pf_callsite_sample(size_t bytes, uint64_t ticks);

/* One copy call that took `ticks` (pf_ticks) and moved bytes (0 for a
 * failed one); walks the stack when the copy is sampled.  Call it from
 * inside the wrapper. */
static inline void pf_callsite_copy(size_t bytes, uint64_t ticks) {
    struct pf_callsite_countdown *c = &pf_callsite_countdown;
    if (__builtin_expect(c->left > 1 && bytes <= c->small_bytes && ticks <= c->small_ticks, 1))
        c->left--;
    else
        pf_callsite_sample(bytes, ticks);
}

/* A resolved site: estimates, scaled from the samples (exact when every
 * copy that reached it was walked). */
struct pf_site {
    char library[64];  /* file name of the module, without its directory */
    char symbol[160];  /* function name (mangled for C++), "" when unknown */
    uintptr_t offset;  /* return address - symbol (or - module base when no symbol) */
    uintptr_t address; /* the return address */
    uint64_t calls, bytes, ns;
    uint64_t samples; /* walks behind the estimates */
    int estimated;    /* 1: some samples stood for more than one copy */
};

/* Fills up to max sites (merged by resolved address, in table order) and
 * *other with what did not fit the table; returns the number filled.
 * Report time only: calls dladdr and reads symbol tables. */
int pf_callsite_collect(struct pf_site *sites, int max, struct pf_site *other);

/* In a forked child: the parent's sites are not the child's. */
void pf_callsite_reset(void);

#endif
