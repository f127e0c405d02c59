/* The copy entry points of one copy a call, made from the table
 * (PF_SINGLE_COPY_ENTRIES; batches are batch_entries.c's).  A linear copy
 * is routed (engine/route.h), a 2D or host <-> array copy made into a
 * transfer (engine/shape.h), then staged by the engine or passed to the
 * driver; peer copies always pass through.  Every copy is seen once by the
 * observers (pf_observe_copy). */
#include "copies.h"
#include "../engine/engine.h"
#include "../engine/shape.h"
#include "../memory/pending_writes.h"
#include "../memory/register.h"
#include "../memory/register_guard.h"

#include <stdint.h>

/* Has the engine take x (staged, or through a registration): 1 when it did
 * (c->path is the way it went, c->result the copy's). */
static inline __attribute__((always_inline)) int stage(struct pf_copy_seen *c, int *noted, const struct pf_xfer *x) {
    CUresult r;
    /* a profiler sees the copies pinfast tries to stage, not the small ones
     * it looks up among its registrations */
    *noted = !x->held_only && pf_nvtx_push("stage", x->dir, x->bytes);
    int path = pf_engine_copy(x, &r, &c->chunks);
    pf_nvtx_pop(*noted);
    if (path) {
        c->path = path;
        c->result = r;
    }
    return path != 0;
}

/* A linear copy up to the driver's call: routes it, has the engine stage
 * or bounce it when the route says so, and returns 1 when it did (c->result is the
 * copy's), 0 when the wrapper passes it to the driver; *noted: an NVTX range
 * was pushed for a staging attempt (a profiler sees each copy pinfast tries
 * to stage, and those it then had to pass through).  Inlined into each
 * wrapper: the constants there (api, ptds, async, the fixed kinds) prune its
 * branches, ~50 instructions a call. */
static inline __attribute__((always_inline)) int linear(struct pf_copy_seen *c, int *noted, enum pf_copy_api api,
                                                        int ptds, int async, uintptr_t dst, uintptr_t src, size_t n,
                                                        CUstream s, enum pf_mem dk, enum pf_mem sk) {
    pf_observe_start(c, api, n, pf_time_weight(n));
    struct pf_route rt = pf_route_linear(dst, src, n, dk, sk, async);
    /* host memory an asynchronous D2H has yet to write is neither read nor
     * written before it lands (PINFAST_ASYNC_D2H) */
    if (rt.src != PF_MEM_DEVICE)
        pf_pending_wait((const void *)src, n);
    if (rt.dst != PF_MEM_DEVICE)
        pf_pending_wait((const void *)dst, n);
    pf_observe_sides(c, rt.dir, rt.host, dst, src, async);
    c->path = PF_PATH_PASSTHROUGH;
    *noted = 0;
    void *host = (void *)(rt.dir == PF_DIR_H2D ? src : dst);
    if (pf_overruns_hand(rt, (uintptr_t)host, n)) {
        c->result = CUDA_ERROR_INVALID_VALUE;
        return 1;
    }
    /* too small to stage: taken only when a registration of pinfast's holds
     * it, or is due or being made (the driver would take that memory for
     * pinned); asked without a driver call first, as most are not */
    int held_only = !rt.stage && !rt.bounce;
    if (held_only && !(rt.host == PF_MEM_PAGEABLE && (rt.dir == PF_DIR_H2D || rt.dir == PF_DIR_D2H) &&
                       pf_register_near(host, n) && !pf_register_quiet(host, n)))
        return 0;
    /* memory a registration of pinfast's holds (or is due to) is bounced
     * all the same: passed through, the copy would be waited for */
    int near = rt.bounce && pf_register_near(host, n);
    if (rt.bounce && (!near || pf_register_quiet(host, n)) && pf_engine_driver_has_room(explicit_stream(s, ptds), n))
        return 0;
    struct pf_xfer x = {
        .dir = rt.dir,
        .dev = rt.dir == PF_DIR_H2D ? dst : src,
        .host = host,
        .bytes = n,
        .stream = explicit_stream(s, ptds),
        .async = async,
        .held_only = held_only,
    };
    if (rt.bounce) {
        CUresult r;
        if (pf_engine_bounce(&x, &r)) {
            c->path = PF_PATH_BOUNCED;
            c->result = r;
            return 1;
        }
        if (!near) /* the area is full */
            return 0;
        x.held_only = 1;
    }
    return stage(c, noted, &x);
}

/* The body of a linear copy's wrapper; `call` is the driver's own. */
#define LINEAR(family, ptds, async, d, s, n, st, dk, sk, call) \
    do { \
        if (!pf_enter()) \
            return call; \
        struct pf_copy_seen c_; \
        int noted_; \
        FINISH(linear(&c_, &noted_, PF_API_##family, ptds, async, (uintptr_t)(d), (uintptr_t)(s), n, st, dk, sk), n, \
               pf_register_guard((const void *)(c_.dir == PF_DIR_D2H ? (uintptr_t)(d) : (uintptr_t)(s)), n), \
               async ? explicit_stream(st, ptds) : NULL, 0, call); \
    } while (0)

#define WRAP_LINEAR_ANY(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr d, CUdeviceptr s, size_t n) { \
        LINEAR(family, ptds, 0, d, s, n, 0, PF_MEM_OPEN, PF_MEM_OPEN, PF_CALL(sym, d, s, n)); \
    }
#define WRAP_LINEAR_ANY_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { \
        LINEAR(family, ptds, 1, d, s, n, st, PF_MEM_OPEN, PF_MEM_OPEN, PF_CALL(sym, d, s, n, st)); \
    }
#define WRAP_LINEAR_H2D(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr d, const void *s, size_t n) { \
        LINEAR(family, ptds, 0, d, s, n, 0, PF_MEM_DEVICE, PF_MEM_OPEN, PF_CALL(sym, d, s, n)); \
    }
#define WRAP_LINEAR_H2D_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr d, const void *s, size_t n, CUstream st) { \
        LINEAR(family, ptds, 1, d, s, n, st, PF_MEM_DEVICE, PF_MEM_OPEN, PF_CALL(sym, d, s, n, st)); \
    }
#define WRAP_LINEAR_D2H(family, ptds, sym) \
    PF_API CUresult sym(void *d, CUdeviceptr s, size_t n) { \
        LINEAR(family, ptds, 0, d, s, n, 0, PF_MEM_OPEN, PF_MEM_DEVICE, PF_CALL(sym, d, s, n)); \
    }
#define WRAP_LINEAR_D2H_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(void *d, CUdeviceptr s, size_t n, CUstream st) { \
        LINEAR(family, ptds, 1, d, s, n, st, PF_MEM_OPEN, PF_MEM_DEVICE, PF_CALL(sym, d, s, n, st)); \
    }
#define WRAP_LINEAR_D2D(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr d, CUdeviceptr s, size_t n) { \
        LINEAR(family, ptds, 0, d, s, n, 0, PF_MEM_DEVICE, PF_MEM_DEVICE, PF_CALL(sym, d, s, n)); \
    }
#define WRAP_LINEAR_D2D_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { \
        LINEAR(family, ptds, 1, d, s, n, st, PF_MEM_DEVICE, PF_MEM_DEVICE, PF_CALL(sym, d, s, n, st)); \
    }

/* The body of a wrapper that always passes through, its route known: timed
 * (every call) and counted with what it moves. */
#define PASSED(family, route, bytes, call) \
    do { \
        struct pf_route rt_ = route; \
        struct pf_copy_seen c_; \
        pf_observe_start(&c_, PF_API_##family, bytes, 1); \
        c_.dir = rt_.dir; \
        c_.host = rt_.host; \
        c_.path = PF_PATH_PASSTHROUGH; \
        c_.result = call; \
        pf_observe_copy(&c_); \
        return (CUresult)c_.result; \
    } while (0)

#define PEER_ROUTE pf_route_of(PF_MEM_DEVICE, PF_MEM_DEVICE)
#define WRAP_PEER(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { \
        if (!pf_enter()) \
            return PF_CALL(sym, d, dc, s, sc, n); \
        PASSED(family, PEER_ROUTE, n, PF_CALL(sym, d, dc, s, sc, n)); \
    }
#define WRAP_PEER_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) { \
        if (!pf_enter()) \
            return PF_CALL(sym, d, dc, s, sc, n, st); \
        PASSED(family, PEER_ROUTE, n, PF_CALL(sym, d, dc, s, sc, n, st)); \
    }

/* A pitched or array copy: like linear(), with the transfer shape.h made
 * of it (NULL: none, it passes through); h its host side's bytes. */
static int shaped(struct pf_copy_seen *c, int *noted, enum pf_copy_api api, size_t n, struct pf_route rt,
                  struct pf_rows h, struct pf_xfer *x) {
    pf_observe_start(c, api, n, 1);
    c->dir = rt.dir;
    c->host = rt.host;
    c->path = PF_PATH_PASSTHROUGH;
    *noted = 0;
    if (h.exact && pf_overruns_hand(rt, h.lo, h.span)) {
        c->result = CUDA_ERROR_INVALID_VALUE;
        return 1;
    }
    return x && stage(c, noted, x);
}

/* The body of a pitched or array copy's wrapper: `xfer` makes the transfer
 * from x_ and s_ (1) or says it passes through (0); `rows` is the host
 * side's bytes (struct pf_rows), given rt_.  One worth no staging is
 * taken only as route.h says (held_only). */
#define SHAPED_STAGE(family, n, route, st, ptds, as, xfer, rows, call) \
    do { \
        struct pf_route rt_ = route; \
        struct pf_shape s_; \
        struct pf_xfer x_ = {.stream = explicit_stream(st, ptds), .async = as}; \
        struct pf_copy_seen c_; \
        struct pf_rows h_ = rows; \
        int noted_; \
        int take_ = pf_route_pitched(rt_, n, as, h_.exact, h_.lo, h_.span); \
        int ok_ = take_ && (xfer); /* engine/shape.h decides */ \
        x_.held_only |= ok_ && take_ == PF_TAKE_HELD; \
        FINISH(shaped(&c_, &noted_, PF_API_##family, n, rt_, h_, ok_ ? &x_ : NULL), n, pf_rows_guard(h_), \
               as ? x_.stream : NULL, 0, call); \
    } while (0)

/* Declared in copies.h. */
struct pf_rows pf_side_rows(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y, size_t z,
                            size_t slice_rows, size_t pitch, size_t width, size_t height, size_t depth) {
    struct pf_rows r = {0};
    if (type != CU_MEMORYTYPE_HOST && type != CU_MEMORYTYPE_UNIFIED)
        return r;
    uintptr_t lo = type == CU_MEMORYTYPE_HOST ? (uintptr_t)host : (uintptr_t)dev, rows, off, span;
    size_t step = pitch > width ? pitch : width;
    int ok = !__builtin_mul_overflow(z, slice_rows, &off) && !__builtin_add_overflow(off, y, &off) &&
             !__builtin_mul_overflow(off, pitch, &off) && !__builtin_add_overflow(off, x, &off) &&
             !__builtin_add_overflow(lo, off, &lo) && depth && height &&
             !__builtin_mul_overflow(depth - 1, slice_rows, &rows) &&
             !__builtin_add_overflow(rows, height - 1, &rows) && !__builtin_mul_overflow(rows, step, &span) &&
             !__builtin_add_overflow(span, width, &span) && lo + span >= lo;
    r.lo = lo;
    r.span = ok ? span : UINTPTR_MAX - lo;
    r.exact = ok && width;
    r.host = 1;
    return r;
}
#define ROWS_SIDE(p, side, z, slice_rows, depth) \
    pf_side_rows((p)->side##MemoryType, (p)->side##Host, (p)->side##Device, (p)->side##XInBytes, (p)->side##Y, z, \
                 slice_rows, (p)->side##Pitch, (p)->WidthInBytes, (p)->Height, depth)
#define ROWS_2D(p, dir) ((dir) == PF_DIR_H2D ? ROWS_SIDE(p, src, 0, 0, 1) : ROWS_SIDE(p, dst, 0, 0, 1))
#define ROWS_3D(p, dir) \
    ((dir) == PF_DIR_H2D ? ROWS_SIDE(p, src, (p)->srcZ, (p)->srcHeight, (p)->Depth) \
                         : ROWS_SIDE(p, dst, (p)->dstZ, (p)->dstHeight, (p)->Depth))
/* A 2D or 3D copy (dims 2 or 3) up to the driver's call. */
#define SHAPED(dims, family, ptds, as, p, st, call) \
    do { \
        if (!pf_enter() || !(p)) \
            return call; \
        pf_pending_wait(NULL, (size_t)-1); \
        SHAPED_STAGE(family, bytes_##dims##d(p), SHAPE_ROUTE(p), st, ptds, as, pf_shape_##dims##d(p, rt_, &x_, &s_), \
                     ROWS_##dims##D(p, rt_.dir), call); \
    } while (0)
#define WRAP_M2D(family, ptds, sym) \
    PF_API CUresult sym(const CUDA_MEMCPY2D *p) { SHAPED(2, family, ptds, 0, p, 0, PF_CALL(sym, p)); }
#define WRAP_M2D_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(const CUDA_MEMCPY2D *p, CUstream s) { SHAPED(2, family, ptds, 1, p, s, PF_CALL(sym, p, s)); }
#define WRAP_M3D(family, ptds, sym) \
    PF_API CUresult sym(const CUDA_MEMCPY3D *p) { SHAPED(3, family, ptds, 0, p, 0, PF_CALL(sym, p)); }
#define WRAP_M3D_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(const CUDA_MEMCPY3D *p, CUstream s) { SHAPED(3, family, ptds, 1, p, s, PF_CALL(sym, p, s)); }

/* Host <-> array copies: the host side is classified, the array is device
 * memory. */
static inline struct pf_route array_route(enum pf_dir dir, const void *host) {
    enum pf_mem h = pf_classify((uintptr_t)host);
    return dir == PF_DIR_H2D ? pf_route_of(h, PF_MEM_DEVICE) : pf_route_of(PF_MEM_DEVICE, h);
}
#define ARRAY_COPY(family, ptds, as, dir, a, o, h, n, st, call) \
    do { \
        if (!pf_enter()) \
            return call; \
        pf_pending_wait(h, n); \
        SHAPED_STAGE(family, n, array_route(dir, h), st, ptds, as, \
                     pf_shape_array(a, o, (void *)(h), n, dir, &x_, &s_), \
                     ((struct pf_rows){.lo = (uintptr_t)(h), .span = n, .exact = 1, .host = 1}), call); \
    } while (0)
#define WRAP_HTOA(family, ptds, sym) \
    PF_API CUresult sym(CUarray a, size_t o, const void *h, size_t n) { \
        ARRAY_COPY(family, ptds, 0, PF_DIR_H2D, a, o, h, n, 0, PF_CALL(sym, a, o, h, n)); \
    }
#define WRAP_HTOA_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(CUarray a, size_t o, const void *h, size_t n, CUstream st) { \
        ARRAY_COPY(family, ptds, 1, PF_DIR_H2D, a, o, h, n, st, PF_CALL(sym, a, o, h, n, st)); \
    }
#define WRAP_ATOH(family, ptds, sym) \
    PF_API CUresult sym(void *h, CUarray a, size_t o, size_t n) { \
        ARRAY_COPY(family, ptds, 0, PF_DIR_D2H, a, o, h, n, 0, PF_CALL(sym, h, a, o, n)); \
    }
#define WRAP_ATOH_ASYNC(family, ptds, sym) \
    PF_API CUresult sym(void *h, CUarray a, size_t o, size_t n, CUstream st) { \
        ARRAY_COPY(family, ptds, 1, PF_DIR_D2H, a, o, h, n, st, PF_CALL(sym, h, a, o, n, st)); \
    }

PF_SINGLE_COPY_ENTRIES(PF_WRAP)
