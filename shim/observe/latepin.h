/* Pinning after allocation: pinned buffers allocated for sizes the program
 * had already copied from pageable memory, as tensor.pin_memory() does
 * (a new pinned buffer and a copy, while the pageable one lives on). */
#ifndef PINFAST_LATEPIN_H
#define PINFAST_LATEPIN_H

#include <stddef.h>
#include <stdint.h>

#define PF_LATEPIN_MIN_BYTES (64u << 10) /* smaller buffers do not matter for memory */

/* A successful copy of n bytes between pageable memory and the device. */
void pf_latepin_copy_large(size_t n);
static inline void pf_latepin_copy(size_t n) {
    if (n >= PF_LATEPIN_MIN_BYTES)
        pf_latepin_copy_large(n);
}

/* A successful pinned allocation of n bytes at p, and a successful free. */
void pf_latepin_alloc(const void *p, size_t n);
void pf_latepin_free(const void *p);

struct pf_latepin_stats {
    uint64_t count, bytes; /* pinned allocations of sizes copied from pageable memory before */
    uint64_t peak_bytes;   /* of those, the most held at once */
};
void pf_latepin_stats(struct pf_latepin_stats *s);

/* In a forked child: the parent's are not the child's. */
void pf_latepin_reset(void);

#endif
