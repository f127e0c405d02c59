/* Pinning after allocation: pinned buffers allocated for sizes the program
 * had already copied from pageable memory, as tensor.pin_memory() does
 * (a new pinned buffer and a copy, while the pageable one lives on). */
#ifndef PINFAST_PIN_AFTER_COPY_H
#define PINFAST_PIN_AFTER_COPY_H

#include <stddef.h>
#include <stdint.h>

#define PF_PIN_AFTER_COPY_MIN_BYTES (64u << 10) /* smaller buffers do not matter for memory */

/* A successful copy of n bytes between pageable memory and the device. */
void pf_pin_after_copy_copy_large(size_t n);
static inline void pf_pin_after_copy_copy(size_t n) {
    if (n >= PF_PIN_AFTER_COPY_MIN_BYTES)
        pf_pin_after_copy_copy_large(n);
}

/* A successful pinned allocation of n bytes at p, and a successful free. */
void pf_pin_after_copy_alloc(const void *p, size_t n);
void pf_pin_after_copy_free(const void *p);

struct pf_pin_after_copy_stats {
    uint64_t count, bytes; /* pinned allocations of sizes copied from pageable memory before */
    uint64_t peak_bytes;   /* of those, the most held at once */
};
void pf_pin_after_copy_stats(struct pf_pin_after_copy_stats *s);

/* In a forked child: the parent's are not the child's. */
void pf_pin_after_copy_reset(void);

#endif
