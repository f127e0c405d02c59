/* The allocation entry points: counted, and host memory the program pins or
 * maps is recorded so that copies can tell it from pageable memory. */
#include "entry.h"
#include "../observe/latepin.h"
#include "../memory/pool.h"

#define TIMED(api, bytes, call, on_success)                                    \
    do {                                                                       \
        if (!pf_enter())                                                       \
            return call;                                                       \
        uint64_t t0_ = pf_ticks();                                             \
        CUresult r_ = call;                                                    \
        pf_stats_alloc(api, bytes, pf_ticks_since(t0_), r_);                   \
        if (r_ == CUDA_SUCCESS)                                                \
            on_success;                                                        \
        return r_;                                                             \
    } while (0)

/* A block leaves the map before the driver frees it: once freed, its address
 * may come back from another thread's allocation, whose entry must survive. */
#define FREED(api, ptr, call)                                                  \
    do {                                                                       \
        if (!pf_enter())                                                       \
            return call;                                                       \
        struct pf_range old_;                                                  \
        int had_ = pf_hostmap_remove((const void *)(ptr), &old_);              \
        uint64_t t0_ = pf_ticks();                                             \
        CUresult r_ = call;                                                    \
        pf_stats_alloc(api, 0, pf_ticks_since(t0_), r_);                       \
        if (r_ != CUDA_SUCCESS && had_)                                        \
            pf_hostmap_add((const void *)old_.base, old_.end - old_.base, old_.kind, old_.flags); \
        return r_;                                                             \
    } while (0)

/* Pinned allocations come from the pool when it has a block of that exact
 * kind, and go to it when freed. */
static CUresult pinned(enum pf_alloc_api api, void **pp, size_t n, unsigned flags) {
    uint64_t t0 = pf_ticks();
    void *p = pp && n ? pf_pool_take(api, n, flags) : NULL;
    CUresult r = CUDA_SUCCESS;
    if (p) {
        *pp = p;
    } else {
        r = api == PF_API_HOST_ALLOC
                ? PF_PASS(PF_S_cuMemHostAlloc, cuMemHostAlloc, pp, n, flags)
                : PF_PASS(PF_S_cuMemAllocHost_v2, cuMemAllocHost_v2, pp, n);
        if (r == CUDA_SUCCESS)
            pf_pool_adopt(*pp, api, n, flags, pf_ticks_to_ns(pf_ticks_since(t0)));
    }
    pf_stats_alloc(api, n, pf_ticks_since(t0), r);
    if (r == CUDA_SUCCESS) {
        pf_hostmap_add(*pp, n, PF_MEM_PINNED, flags);
        pf_latepin_alloc(*pp, n);
    }
    return r;
}

PF_API CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
    if (!pf_enter())
        return PF_PASS(PF_S_cuMemHostAlloc, cuMemHostAlloc, pp, n, flags);
    return pinned(PF_API_HOST_ALLOC, pp, n, flags);
}

PF_API CUresult cuMemAllocHost_v2(void **pp, size_t n) {
    if (!pf_enter())
        return PF_PASS(PF_S_cuMemAllocHost_v2, cuMemAllocHost_v2, pp, n);
    return pinned(PF_API_ALLOC_HOST, pp, n, 0);
}

PF_API CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
    TIMED(PF_API_HOST_REGISTER, n, PF_PASS(PF_S_cuMemHostRegister_v2, cuMemHostRegister_v2, p, n, flags),
          pf_hostmap_add(p, n, PF_MEM_PINNED, flags));
}

PF_API CUresult cuMemAllocManaged(CUdeviceptr *dp, size_t n, unsigned int flags) {
    TIMED(PF_API_ALLOC_MANAGED, n, PF_PASS(PF_S_cuMemAllocManaged, cuMemAllocManaged, dp, n, flags),
          pf_hostmap_add((void *)*dp, n, PF_MEM_MANAGED, flags));
}

PF_API CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t n) {
    TIMED(PF_API_ALLOC, n, PF_PASS(PF_S_cuMemAlloc_v2, cuMemAlloc_v2, dp, n), (void)0);
}
PF_API CUresult cuMemAllocAsync(CUdeviceptr *dp, size_t n, CUstream s) {
    TIMED(PF_API_ALLOC_ASYNC, n, PF_PASS(PF_S_cuMemAllocAsync, cuMemAllocAsync, dp, n, s), (void)0);
}
PF_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dp, size_t n, CUstream s) {
    TIMED(PF_API_ALLOC_ASYNC, n, PF_PASS(PF_S_cuMemAllocAsync_ptsz, cuMemAllocAsync, dp, n, s), (void)0);
}
PF_API CUresult cuMemFreeAsync(CUdeviceptr dp, CUstream s) {
    TIMED(PF_API_FREE_ASYNC, 0, PF_PASS(PF_S_cuMemFreeAsync, cuMemFreeAsync, dp, s), (void)0);
}
PF_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dp, CUstream s) {
    TIMED(PF_API_FREE_ASYNC, 0, PF_PASS(PF_S_cuMemFreeAsync_ptsz, cuMemFreeAsync, dp, s), (void)0);
}

/* The pool's blocks stay with the pool; others (and only pool blocks exist
 * while pinfast acts) go back to the driver. */
static CUresult free_host(void *p) {
    CUresult r;
    if (!pf_pool_free(p, &r))
        r = PF_PASS(PF_S_cuMemFreeHost, cuMemFreeHost, p);
    if (r == CUDA_SUCCESS)
        pf_latepin_free(p);
    return r;
}

PF_API CUresult cuMemFreeHost(void *p) { FREED(PF_API_FREE_HOST, p, free_host(p)); }
PF_API CUresult cuMemHostUnregister(void *p) {
    FREED(PF_API_HOST_UNREGISTER, p, PF_PASS(PF_S_cuMemHostUnregister, cuMemHostUnregister, p));
}
/* managed memory is in the map too */
PF_API CUresult cuMemFree_v2(CUdeviceptr dp) {
    FREED(PF_API_FREE, dp, PF_PASS(PF_S_cuMemFree_v2, cuMemFree_v2, dp));
}
