/* The counters the copy and allocation paths write: a block per thread,
 * plain stores, summed only when the report is written.  Shared inside
 * observe/ (counters.c writes them, summary.c sums them). */
#ifndef PINFAST_COUNTERS_H
#define PINFAST_COUNTERS_H

#include "stats.h"

#include <stdint.h>

/* Live counts: time in ticks (pf_ticks), converted when reported. */
struct pf_counter {
    uint64_t calls, errors, bytes, ticks;
};

#define PF_SIZE_BUCKETS 48 /* sizes by power of two: [2^k, 2^(k+1)); bucket 0 also holds 0 */

/* What the copy path counts.  A thread's own block is written only by that
 * thread, with plain loads and stores (atomic, for the report's reads); a
 * block outlives its thread and goes to the next new one: counts are sums. */
struct pf_thread_counters {
    struct pf_counter copies[PF_COPY_API_COUNT][PF_DIR_COUNT][PF_MEM_COUNT][PF_PATH_COUNT];
    struct pf_counter sizes[PF_DIR_COUNT][PF_SIZE_BUCKETS];
    struct pf_counter trips; /* round trips: calls and bytes */
    struct pf_thread_counters *next;
    int owned; /* a running thread counts in it; under lock */
};

/* Allocation calls: rare, counted with atomic adds in one table. */
extern struct pf_counter pf_alloc_counters[PF_ALLOC_API_COUNT];

/* Calls fn on the shared block and then, under the lock, on every
 * thread's block. */
void pf_counters_each(void (*fn)(const struct pf_thread_counters *));

/* When counting began (load, or the fork that made this process). */
uint64_t pf_counters_start_ns(void);

#endif
