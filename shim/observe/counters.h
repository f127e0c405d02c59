/* The counters the copy and allocation paths write: a block per thread,
 * plain stores, summed only when the report is written.  Shared inside
 * observe/ (counters.c writes them, summary.c sums them). */
#ifndef PINFAST_COUNTERS_H
#define PINFAST_COUNTERS_H

#include "observe.h"

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

/* Threads beyond the blocks there are, and a thread after its block went
 * back, count here with atomic adds. */
extern struct pf_thread_counters pf_counters_shared;
/* This thread's block; NULL until its first count. */
extern __thread struct pf_thread_counters *pf_counters_mine;
struct pf_thread_counters *pf_counters_claim(void);
static inline struct pf_thread_counters *pf_counters(void) {
    struct pf_thread_counters *b = pf_counters_mine;
    return __builtin_expect(b != NULL, 1) ? b : pf_counters_claim();
}

void pf_counter_add_atomic(struct pf_counter *c, size_t bytes, uint64_t ticks, int result);

/* No lock prefix: only this thread writes v. */
static inline void pf_counter_bump(uint64_t *v, uint64_t by) {
    __atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + by, __ATOMIC_RELAXED);
}

/* Counts a call in block b's counter c; bytes count only on success. */
static inline void pf_counter_add(struct pf_thread_counters *b, struct pf_counter *c, size_t bytes, uint64_t ticks,
                                  int result) {
    if (__builtin_expect(b == &pf_counters_shared, 0)) {
        pf_counter_add_atomic(c, bytes, ticks, result);
        return;
    }
    pf_counter_bump(&c->calls, 1);
    pf_counter_bump(&c->ticks, ticks);
    if (result)
        pf_counter_bump(&c->errors, 1);
    else
        pf_counter_bump(&c->bytes, bytes);
}

static inline int pf_size_bucket(size_t bytes) {
    int k = bytes ? 63 - __builtin_clzll((unsigned long long)bytes) : 0;
    return k < PF_SIZE_BUCKETS ? k : PF_SIZE_BUCKETS - 1;
}

/* The wall time a row's copies were under way, every thread's together
 * (what its GB/s is over): the union of their intervals, in ticks.  Kept
 * as the latest end seen and the time added past it, so that a copy adds
 * only the part of its interval after that end.  Exact when a row's copies
 * end in the order they started (copies of like sizes, from any number of
 * threads); a copy that starts after another and ends before it hides the
 * time between their starts.  A copy timed on a sample adds its part that
 * many times over, an estimate capped at the span from the row's first
 * start to its last end.  Only rows with a transfer rate keep it. */
struct pf_busy {
    uint64_t first, end, ticks;
};
extern struct pf_busy pf_busy[PF_COPY_API_COUNT][PF_DIR_COUNT][PF_MEM_COUNT][PF_PATH_COUNT];
/* A copy of row b's that began at t0 and took `took` ticks, its time
 * counted weight times over. */
void pf_busy_add(struct pf_busy *b, uint64_t t0, uint64_t took, unsigned weight);
/* Row b's busy time in ticks. */
uint64_t pf_busy_ticks(const struct pf_busy *b);

/* Allocation calls: rare, counted with atomic adds in one table. */
extern struct pf_counter pf_alloc_counters[PF_ALLOC_API_COUNT];

/* Calls fn on the shared block and then, under the lock, on every
 * thread's block. */
void pf_counters_each(void (*fn)(const struct pf_thread_counters *));

/* When counting began (load, or the fork that made this process). */
uint64_t pf_counters_start_ns(void);

#endif
