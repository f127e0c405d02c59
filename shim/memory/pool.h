/* Pinned host allocations served from a cache: cuMemHostAlloc costs ~0.6 s
 * per GiB and cuMemFreeHost gives it all back, so programs that allocate a
 * pinned buffer per batch pay that every time. */
#ifndef PINFAST_POOL_H
#define PINFAST_POOL_H

#include "../driver/cuda_api.h"

#include <stddef.h>
#include <stdint.h>

/* A cached block of exactly this size, API and flags in the current context,
 * or NULL (the caller allocates, then calls pf_pool_adopt). */
void *pf_pool_take(int api, size_t size, unsigned flags);

/* Tracks a block the driver just allocated, so that freeing it caches it. */
void pf_pool_adopt(void *p, int api, size_t size, unsigned flags, uint64_t alloc_ns);

/* Handles cuMemFreeHost(p): returns 1 with *result when p was the pool's
 * (cached, or a double free answered as the driver would), 0 when the caller
 * must pass the free through. */
int pf_pool_free(void *p, CUresult *result);

/* 1 when p lies in a block the program freed and the pool keeps: to the
 * program, memory the driver no longer knows (entry/query_entries.c). */
int pf_pool_idle_at(uintptr_t p);

/* The program waited for its context (cuCtxSynchronize): blocks idle since
 * the previous such wait go back to the driver, whose cuMemFreeHost waits
 * for the device too, as the program just did. */
void pf_pool_settle(void);

struct pf_pool_stats {
    unsigned long long hits, misses, idle_bytes, peak_idle_bytes, trimmed;
    double saved_seconds, sync_seconds;
};
void pf_pool_stats(struct pf_pool_stats *out);

/* The context was destroyed, and the driver freed its blocks. */
void pf_pool_context_gone(CUcontext ctx);

/* In a forked child the parent's blocks are not the child's to reuse. */
void pf_pool_forked(void);

#endif
