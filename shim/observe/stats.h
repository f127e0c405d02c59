/* Counters for every intercepted call, and the report printed at exit. */
#ifndef PINFAST_STATS_H
#define PINFAST_STATS_H

#include "../base/types.h"
#include "../base/options.h"

#include <stddef.h>
#include <stdint.h>

#define PF_COPY_APIS(X)                                                        \
    X(MEMCPY, "cuMemcpy") X(MEMCPY_ASYNC, "cuMemcpyAsync")                     \
    X(HTOD, "cuMemcpyHtoD") X(HTOD_ASYNC, "cuMemcpyHtoDAsync")                 \
    X(DTOH, "cuMemcpyDtoH") X(DTOH_ASYNC, "cuMemcpyDtoHAsync")                 \
    X(DTOD, "cuMemcpyDtoD") X(DTOD_ASYNC, "cuMemcpyDtoDAsync")                 \
    X(PEER, "cuMemcpyPeer") X(PEER_ASYNC, "cuMemcpyPeerAsync")                 \
    X(M2D, "cuMemcpy2D") X(M2D_UNALIGNED, "cuMemcpy2DUnaligned")               \
    X(M2D_ASYNC, "cuMemcpy2DAsync") X(M3D, "cuMemcpy3D")                       \
    X(M3D_ASYNC, "cuMemcpy3DAsync") X(BATCH, "cuMemcpyBatchAsync")             \
    X(BATCH3D, "cuMemcpy3DBatchAsync")

#define PF_ALLOC_APIS(X)                                                       \
    X(HOST_ALLOC, "cuMemHostAlloc") X(ALLOC_HOST, "cuMemAllocHost")            \
    X(FREE_HOST, "cuMemFreeHost") X(HOST_REGISTER, "cuMemHostRegister")        \
    X(HOST_UNREGISTER, "cuMemHostUnregister") X(ALLOC, "cuMemAlloc")           \
    X(FREE, "cuMemFree") X(ALLOC_ASYNC, "cuMemAllocAsync")                     \
    X(FREE_ASYNC, "cuMemFreeAsync") X(ALLOC_MANAGED, "cuMemAllocManaged")

#define PF_API_ENUM_(id, name) PF_API_##id,
enum pf_copy_api { PF_COPY_APIS(PF_API_ENUM_) PF_COPY_API_COUNT };
enum pf_alloc_api { PF_ALLOC_APIS(PF_API_ENUM_) PF_ALLOC_API_COUNT };
#undef PF_API_ENUM_

/* Timing a call takes two counter reads, ~40 ns on the H100 VM: 4% of a
 * 1 us cuMemcpyHtoDAsync (tests/gpu/passcost.sh).  So a thread's copies
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

/* Records one copy call that took `ticks` (pf_ticks); bytes count only when
 * result is 0 (success). */
void pf_stats_copy(enum pf_copy_api api, enum pf_dir dir, enum pf_mem mem, enum pf_path path,
                   size_t bytes, uint64_t ticks, int result);
void pf_stats_alloc(enum pf_alloc_api api, size_t bytes, uint64_t ticks, int result);

/* An H2D that brought back, unchanged, what a D2H had just taken out. */
void pf_stats_round_trip(size_t bytes);

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
void pf_stats_fork_prepare(void);
void pf_stats_fork_done(void);
void pf_stats_forked(void);

#endif
