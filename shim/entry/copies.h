/* What the two files of copy wrappers share: copy_entries.c (one copy a
 * call) and batch_entries.c (batches), the only ones that include it, so
 * that a batch's copy is routed, counted and guarded as a lone copy is. */
#ifndef PINFAST_COPIES_H
#define PINFAST_COPIES_H

#include "entry.h"
#include "../driver/capture.h"
#include "../engine/engine.h"
#include "../engine/route.h"
#include "../memory/register.h"
#include "../memory/register_guard.h"
#include "../observe/nvtx.h"

#include <stddef.h>
#include <stdint.h>

/* The stream a call runs on, as an explicit handle, so that the engine can
 * use the legacy-flavour functions for both flavours of caller. */
static inline CUstream explicit_stream(CUstream s, int ptds) {
    if (s)
        return s;
    return ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

/* After the driver's call r on stream s over host bytes a registration of
 * pinfast's holds: the driver takes them for pinned memory, so an
 * asynchronous copy is waited for, as the pageable one would be.  So is a
 * call the driver refused when `refused_moves` (a batch: the driver moves
 * the copies before the one it refuses, batch.h); a refused lone copy
 * moved nothing.  The driver's error, if any, stays the call's. */
static inline CUresult pf_held_await(CUresult r, CUstream s, int refused_moves) {
    if (r != CUDA_SUCCESS && !refused_moves)
        return r;
    CUresult w = pf_registered_await_stream(s);
    return r != CUDA_SUCCESS ? r : w;
}

/* A wrapper's end: the driver's own `call` unless the engine took the copy
 * (`taken`, which fills c_ and noted_), then the observers.  `guard` is 1
 * when a registration of pinfast's holds some of the host bytes the driver
 * is given (memory/register.h): an asynchronous call (`stream` not NULL)
 * is then waited for (pf_held_await; `refused_moves` for batches).  Under
 * a capture the graph's copy runs later either way. */
#define FINISH(taken, n, guard, stream, refused_moves, call) \
    if (!(taken)) { \
        int held_ = (c_.host == PF_MEM_PAGEABLE || c_.host == PF_MEM_MIXED) && !pf_capturing() && (guard); \
        noted_ = noted_ && pf_nvtx_push("passthrough", c_.dir, n); \
        c_.result = call; \
        if (held_ && (stream)) \
            c_.result = pf_held_await((CUresult)c_.result, stream, refused_moves); \
        pf_nvtx_pop(noted_); \
    } \
    pf_observe_copy(&c_); \
    return (CUresult)c_.result

/* A 2D/3D copy's route from its descriptor p, which the caller checked:
 * without one the driver gives the error. */
#define SHAPE_ROUTE(p) \
    pf_route_of(pf_route_side((p)->srcMemoryType, (p)->srcHost, (p)->srcDevice), \
                pf_route_side((p)->dstMemoryType, (p)->dstHost, (p)->dstDevice))

/* 2D and 3D: the bytes the report counts (overflowing extents: the driver
 * refuses them, and they count 0). */
static inline size_t bytes_2d(const CUDA_MEMCPY2D *p) {
    size_t n;
    return __builtin_mul_overflow(p->WidthInBytes, p->Height, &n) ? 0 : n;
}
static inline size_t bytes_3d(const CUDA_MEMCPY3D *p) {
    size_t n;
    return __builtin_mul_overflow(p->WidthInBytes, p->Height, &n) || __builtin_mul_overflow(n, p->Depth, &n) ? 0 : n;
}

/* The host bytes one side of a 2D/3D copy touches, from its first row's
 * first to its last row's last (x, y, z its offsets, slice_rows the rows
 * of its slices).  Extents that overflow, or no rows, reach the end of
 * the address space; exact 0 for those and for rows of no byte: the
 * driver answers them. */
struct pf_rows {
    uintptr_t lo;
    size_t span;
    int exact;
    int host; /* 0: the side is not host memory, the rest 0 */
};
/* In copy_entries.c; hidden, as all of the library but its PF_API
 * wrappers. */
struct pf_rows pf_side_rows(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y, size_t z,
                            size_t slice_rows, size_t pitch, size_t width, size_t height, size_t depth);

/* The program's own registration inside a block pinfast registered,
 * answered from pinfast's: a copy whose host bytes [lo, lo + n) start in
 * it and run past its end is refused, as the driver refuses every form of
 * such a copy without pinfast, a batch's too (tests/gpu/probes/
 * probe_reg_pieces.c), though pinfast's registration of the whole block
 * would take it. */
static inline int pf_overruns_hand(struct pf_route rt, uintptr_t lo, size_t n) {
    return rt.host == PF_MEM_PINNED && (rt.dir == PF_DIR_H2D || rt.dir == PF_DIR_D2H) &&
           pf_register_near((const void *)lo, n) && pf_register_hand_overrun((const void *)lo, n);
}

/* pf_register_guard over a side's host bytes: its answer. */
static inline int pf_rows_guard(struct pf_rows r) { return r.host && pf_register_guard((const void *)r.lo, r.span); }

#endif
