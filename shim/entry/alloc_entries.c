/* The allocation entry points, made from the table (PF_ALLOC_ENTRIES):
 * counted, and host memory the program pins or maps is recorded so that
 * copies can tell it from pageable memory. */
#include "entry.h"
#include "../memory/hostmap.h"
#include "../memory/pool.h"
#include "../memory/register.h"
#include "../observe/pin_after_copy.h"

#define TIMED(family, bytes, call, on_success) \
    do { \
        if (!pf_enter()) \
            return call; \
        uint64_t t0_ = pf_ticks(); \
        CUresult r_ = call; \
        pf_observe_alloc(PF_API_##family, bytes, pf_ticks_since(t0_), r_); \
        if (r_ == CUDA_SUCCESS) \
            on_success; \
        return r_; \
    } while (0)

/* A block leaves the map before the driver frees it: once freed, its address
 * may come back from another thread's allocation, whose entry must survive. */
#define FREED(family, ptr, call) \
    do { \
        if (!pf_enter()) \
            return call; \
        struct pf_range old_; \
        int had_ = pf_hostmap_remove((const void *)(ptr), &old_); \
        uint64_t t0_ = pf_ticks(); \
        CUresult r_ = call; \
        pf_observe_alloc(PF_API_##family, 0, pf_ticks_since(t0_), r_); \
        if (r_ != CUDA_SUCCESS && had_) \
            pf_hostmap_add((const void *)old_.base, old_.end - old_.base, old_.kind, old_.flags); \
        return r_; \
    } while (0)

/* A pinned allocation that succeeded or failed (r), t0 ticks ago. */
static CUresult pinned_done(enum pf_alloc_api api, void **pp, size_t n, unsigned flags, uint64_t t0, CUresult r) {
    pf_observe_alloc(api, n, pf_ticks_since(t0), r);
    if (r == CUDA_SUCCESS) {
        pf_hostmap_add(*pp, n, PF_MEM_PINNED, flags);
        pf_pin_after_copy_alloc(*pp, n);
    }
    return r;
}

/* Pinned allocations come from the pool when it has a block of that exact
 * kind, and go to it when freed. */
#define PINNED(family, pp, n, flags, call) \
    do { \
        if (!pf_enter()) \
            return call; \
        uint64_t t0_ = pf_ticks(); \
        void *p_ = (pp) && (n) ? pf_pool_take(PF_API_##family, n, flags) : NULL; \
        CUresult r_ = CUDA_SUCCESS; \
        if (p_) \
            *(pp) = p_; \
        else if ((r_ = call) == CUDA_SUCCESS) \
            pf_pool_adopt(*(pp), PF_API_##family, n, flags, pf_ticks_to_ns(pf_ticks_since(t0_))); \
        return pinned_done(PF_API_##family, pp, n, flags, t0_, r_); \
    } while (0)

#define WRAP_HOST_ALLOC(family, ptds, sym) \
    PF_API CUresult sym(void **pp, size_t n, unsigned int flags) { \
        PINNED(family, pp, n, flags, PF_CALL(sym, pp, n, flags)); \
    }
#define WRAP_ALLOC_HOST(family, ptds, sym) \
    PF_API CUresult sym(void **pp, size_t n) { PINNED(family, pp, n, 0, PF_CALL(sym, pp, n)); }
/* The program's own registration gets the driver's answer as without
 * pinfast: from pinfast's registration where one holds the range (no
 * driver call), else from the driver, pinfast's registrations over the
 * range undone first where they would change its answer. */
static CUresult host_register(void *p, size_t n, unsigned flags, CUresult r) {
    pf_register_program_result(p, n, flags, r);
    if (r == CUDA_SUCCESS)
        pf_hostmap_add(p, n, PF_MEM_PINNED, flags);
    return r;
}

#define WRAP_HOST_REGISTER(family, ptds, sym) \
    PF_API CUresult sym(void *p, size_t n, unsigned int flags) { \
        CUresult r_; \
        if (!pf_enter()) \
            return PF_CALL(sym, p, n, flags); \
        uint64_t t0_ = pf_ticks(); \
        if (!pf_register_program(p, n, flags, &r_)) \
            r_ = PF_CALL(sym, p, n, flags); \
        pf_observe_alloc(PF_API_##family, n, pf_ticks_since(t0_), r_); \
        return host_register(p, n, flags, r_); \
    }
/* managed memory is in the map too */
#define WRAP_ALLOC_MANAGED(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr *dp, size_t n, unsigned int flags) { \
        TIMED(family, n, PF_CALL(sym, dp, n, flags), pf_hostmap_add((void *)*dp, n, PF_MEM_MANAGED, flags)); \
    }
#define WRAP_ALLOC(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr *dp, size_t n) { TIMED(family, n, PF_CALL(sym, dp, n), (void)0); }
#define WRAP_ALLOC_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr *dp, size_t n, CUstream s) { TIMED(family, n, PF_CALL(sym, dp, n, s), (void)0); }
#define WRAP_FREE_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr dp, CUstream s) { TIMED(family, 0, PF_CALL(sym, dp, s), (void)0); }

/* The pool's blocks stay with the pool; others (and only pool blocks exist
 * while pinfast acts) go back to the driver. */
static CUresult free_host(void *p) {
    CUresult r;
    if (!pf_pool_free(p, &r))
        r = PF_CALL(cuMemFreeHost, p);
    if (r == CUDA_SUCCESS)
        pf_pin_after_copy_free(p);
    return r;
}

#define WRAP_FREE_HOST(family, ptds, sym) \
    PF_API CUresult sym(void *p) { FREED(family, p, free_host(p)); }
/* A registration the program made is undone by its call; one of pinfast's
 * is not the program's to undo: answered as the driver answers for
 * pageable memory. */
static CUresult host_unregister(enum pf_symbol sym, void *p) {
    CUresult r;
    if (pf_register_program_undo(p, &r))
        return r;
    r = PF_PASS(sym, cuMemHostUnregister, p);
    pf_register_program_undone(p, r);
    return r;
}

#define WRAP_HOST_UNREGISTER(family, ptds, sym) \
    PF_API CUresult sym(void *p) { FREED(family, p, host_unregister(PF_S_##sym, p)); }
/* managed memory is in the map too */
#define WRAP_FREE(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr dp) { FREED(family, dp, PF_CALL(sym, dp)); }

PF_ALLOC_ENTRIES(PF_WRAP)
