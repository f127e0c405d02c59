/* What the observers see: every copy once, through pf_observe_copy, which
 * feeds them all (the counters, round trips, late pinning, the trace, the
 * call sites); every allocation through pf_observe_alloc; and the report
 * printed at exit. */
#ifndef PINFAST_OBSERVE_H
#define PINFAST_OBSERVE_H

#include "round_trips.h"
#include "../base/clock.h"
#include "../base/options.h"
#include "../base/types.h"
#include "../driver/symbols.h"

#include <stddef.h>
#include <stdint.h>

/* Timing a call takes two counter reads, a share of the shortest copies'
 * time worth saving (docs/tuning.md#small-copies-timing-is-sampled).  So a thread's copies
 * under PF_TIME_ALL_FROM bytes are all timed up to its PF_TIME_EXACT-th,
 * then each with probability 1/PF_TIME_ONE_IN and its time counted that many
 * times over: an unbiased estimate for programs that make millions, exact
 * times for those that make few.  With a trace, or every copy's stack
 * walked (PINFAST_CALLSITES=1), every call is timed. */
#define PF_TIME_ALL_FROM (64u << 10)
#define PF_TIME_EXACT 1024u
#define PF_TIME_ONE_IN 8u
struct pf_time_sampler {
    uint32_t small; /* small copies so far, up to PF_TIME_EXACT */
    uint32_t rng;   /* xorshift32; 0: not seeded */
};
extern __thread struct pf_time_sampler pf_time_sampler;
unsigned pf_time_weight_slow(void);

/* How many times over to count this copy's time; 0: do not time it. */
static inline unsigned pf_time_weight(size_t bytes) {
    struct pf_time_sampler *t = &pf_time_sampler;
    if (bytes >= PF_TIME_ALL_FROM)
        return 1;
    if (__builtin_expect(t->small < PF_TIME_EXACT || pf_options()->time_every_call, 0))
        return pf_time_weight_slow();
    uint32_t x = t->rng;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    t->rng = x;
    return x % PF_TIME_ONE_IN ? 0 : PF_TIME_ONE_IN;
}

/* One copy call as its observers see it.  pf_observe_start fills the first
 * part as the call begins; the wrapper the rest. */
struct pf_copy_seen {
    enum pf_copy_api api;
    size_t bytes;
    unsigned weight; /* its time counts this many times over; 0: not timed */
    uint64_t t0;     /* pf_ticks as the call began, when timed */
    enum pf_dir dir;
    enum pf_mem host; /* the host side's kind */
    enum pf_path path;
    int result;                       /* the call's; bytes count only on success (0) */
    const struct pf_timeline *chunks; /* a staged copy's, for a Chrome trace; else NULL */
    /* linear copies only (0 and NULL for the others): */
    int async;           /* the *Async form */
    int round_trip;      /* an H2D bringing back, unchanged, what a D2H took out */
    const void *d2h_dst; /* the host memory a D2H writes, where the CPU can read it */
};

/* As the call begins: weight is pf_time_weight(bytes) for the copies timed
 * on a sample, 1 for those always timed. */
static inline __attribute__((always_inline)) void pf_observe_start(struct pf_copy_seen *c, enum pf_copy_api api,
                                                                   size_t bytes, unsigned weight) {
    c->api = api;
    c->bytes = bytes;
    c->weight = weight;
    c->t0 = weight ? pf_ticks() : 0;
    c->chunks = NULL;
    c->async = 0;
    c->round_trip = 0;
    c->d2h_dst = NULL;
}

/* A linear copy's sides, once routed, before the driver or the engine moves
 * anything: an H2D's source is judged now (an asynchronous one's may change
 * right after the call). */
static inline __attribute__((always_inline)) void
pf_observe_sides(struct pf_copy_seen *c, enum pf_dir dir, enum pf_mem host, uintptr_t dst, uintptr_t src, int async) {
    /* host memory the CPU can read without moving it (not managed memory) */
    int readable = host == PF_MEM_PAGEABLE || host == PF_MEM_PINNED;
    c->dir = dir;
    c->host = host;
    c->async = async;
    c->round_trip = dir == PF_DIR_H2D && readable && pf_round_trip_h2d((const void *)src, c->bytes);
    c->d2h_dst = dir == PF_DIR_D2H && readable ? (const void *)dst : NULL;
}

/* THE hook: the copy is over (c->path and c->result set); every observer
 * sees it. */
void pf_observe_copy(const struct pf_copy_seen *c);

/* An allocation call that took `ticks` (pf_ticks). */
void pf_observe_alloc(enum pf_alloc_api api, size_t bytes, uint64_t ticks, int result);

/* Marks the process as a CUDA user: only those print a report. */
extern int pf_stats_used;
static inline void pf_stats_touch(void) {
    if (!__atomic_load_n(&pf_stats_used, __ATOMIC_RELAXED))
        __atomic_store_n(&pf_stats_used, 1, __ATOMIC_RELAXED);
}

/* Writes the report per PINFAST_STATS, with what the engine and the pool
 * did (the caller asks them: observe/ calls neither); calls no CUDA. */
struct pf_pool_stats;
void pf_stats_report(const struct pf_engine_stats *staging, const struct pf_pool_stats *pool);

/* Around fork(): the prepare holds the lock of the threads' counters, the
 * parent releases it; in the child nothing the parent counted is the child's. */
void pf_counters_fork_prepare(void);
void pf_counters_fork_done(void);
void pf_counters_forked(void);

#endif
