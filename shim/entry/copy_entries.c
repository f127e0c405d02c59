/* The copy entry points.  Pageable<->device copies of the linear families go
 * to the staging engine; everything else passes through and is counted. */
#include "entry.h"
#include "../engine/engine.h"
#include "../memory/pending.h"
#include "../observe/nvtx.h"
#include "../observe/roundtrip.h"

#define UNCLASSIFIED PF_MEM_COUNT

/* The stream a call runs on, as an explicit handle, so that the engine can
 * use the legacy-flavour functions for both flavours of caller. */
static CUstream explicit_stream(CUstream s, int ptds) {
    if (s)
        return s;
    return ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

/* Inlined, as linear() is, into each wrapper, where api and sym are constants. */
static inline __attribute__((always_inline)) CUresult
pass_linear(enum pf_copy_api api, enum pf_symbol sym, uintptr_t dst, uintptr_t src, size_t n,
            CUstream s) {
    switch (api) {
    case PF_API_MEMCPY: return PF_PASS(sym, cuMemcpy, dst, src, n);
    case PF_API_MEMCPY_ASYNC: return PF_PASS(sym, cuMemcpyAsync, dst, src, n, s);
    case PF_API_HTOD: return PF_PASS(sym, cuMemcpyHtoD_v2, dst, (const void *)src, n);
    case PF_API_HTOD_ASYNC: return PF_PASS(sym, cuMemcpyHtoDAsync_v2, dst, (const void *)src, n, s);
    case PF_API_DTOH: return PF_PASS(sym, cuMemcpyDtoH_v2, (void *)dst, src, n);
    case PF_API_DTOH_ASYNC: return PF_PASS(sym, cuMemcpyDtoHAsync_v2, (void *)dst, src, n, s);
    case PF_API_DTOD: return PF_PASS(sym, cuMemcpyDtoD_v2, dst, src, n);
    case PF_API_DTOD_ASYNC: return PF_PASS(sym, cuMemcpyDtoDAsync_v2, dst, src, n, s);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* One linear copy: dk/sk are the kinds of the sides when the API fixes them.
 * Inlined into each wrapper: the constants there (api, sym, ptds, async, the
 * fixed kinds) prune its branches, ~50 instructions a call. */
static inline __attribute__((always_inline)) CUresult
linear(enum pf_copy_api api, enum pf_symbol sym, int ptds, int async, uintptr_t dst,
       uintptr_t src, size_t n, CUstream s, enum pf_mem dk, enum pf_mem sk) {
    if (!pf_enter())
        return pass_linear(api, sym, dst, src, n, s);
    unsigned timed = pf_time_weight(n);
    uint64_t t0 = timed ? pf_ticks() : 0;
    if (sk == UNCLASSIFIED)
        sk = pf_classify(src);
    if (dk == UNCLASSIFIED)
        dk = pf_classify(dst);
    /* host memory an asynchronous D2H has yet to write is neither read nor
     * written before it lands (PINFAST_ASYNC_D2H) */
    if (sk != PF_MEM_DEVICE)
        pf_pending_wait((const void *)src, n);
    if (dk != PF_MEM_DEVICE)
        pf_pending_wait((const void *)dst, n);
    enum pf_dir dir = pf_dir_of(sk, dk);
    enum pf_mem host = dir == PF_DIR_H2D ? sk : dir == PF_DIR_D2H ? dk : sk;
    enum pf_path path = PF_PATH_PASSTHROUGH;
    CUresult r = CUDA_SUCCESS;
    int noted = 0; /* an NVTX range was pushed for this copy */
    /* host memory the CPU can read without moving it (not managed memory) */
    int readable = host == PF_MEM_PAGEABLE || host == PF_MEM_PINNED;
    /* judged before the copy: an async H2D's source may change right after */
    int back = dir == PF_DIR_H2D && readable && pf_roundtrip_h2d((void *)src, n);
    /* the engine's own checks, the cheap ones first: a small copy pays for
     * nothing more on its way to the driver */
    if (host == PF_MEM_PAGEABLE && (dir == PF_DIR_H2D || dir == PF_DIR_D2H) &&
        pf_options()->stage && n >= pf_options()->min_size) {
        struct pf_xfer x = {
            .dir = dir,
            .dev = dir == PF_DIR_H2D ? dst : src,
            .host = (void *)(dir == PF_DIR_H2D ? src : dst),
            .bytes = n,
            .stream = explicit_stream(s, ptds),
            .async = async,
        };
        /* a profiler sees each copy pinfast tries to stage, and those it
         * then had to pass through */
        noted = pf_nvtx_push("stage", dir, n);
        if (pf_engine_copy(&x, &r))
            path = PF_PATH_STAGED;
        pf_nvtx_pop(noted);
    }
    if (path == PF_PATH_PASSTHROUGH) {
        noted = noted && pf_nvtx_push("passthrough", dir, n);
        r = pass_linear(api, sym, dst, src, n, s);
        pf_nvtx_pop(noted);
    }
    pf_stats_copy(api, dir, host, path, n, timed ? pf_ticks_since(t0) * timed : 0, r);
    if (r == CUDA_SUCCESS && back)
        pf_stats_round_trip(n);
    /* a D2H into pageable memory is complete on return, even an async one,
     * unless pinfast lets it land later */
    if (r == CUDA_SUCCESS && dir == PF_DIR_D2H && readable &&
        (!async || (host == PF_MEM_PAGEABLE && !pf_options()->async_d2h)))
        pf_roundtrip_d2h((void *)dst, n);
    return r;
}

#define U (uintptr_t)
#define DEV PF_MEM_DEVICE
#define ANY UNCLASSIFIED
/* The legacy and per-thread-stream forms of one family differ only in the
 * real function they pass through to and in what stream 0 means. */
#define LINEAR_PAIR(legacy, ptds, api, async, params, d, s, n, st, dk, sk)      \
    PF_API CUresult legacy params {                                            \
        return linear(api, PF_S_##legacy, 0, async, U(d), U(s), n, st, dk, sk); \
    }                                                                          \
    PF_API CUresult ptds params {                                              \
        return linear(api, PF_S_##ptds, 1, async, U(d), U(s), n, st, dk, sk);   \
    }

LINEAR_PAIR(cuMemcpy, cuMemcpy_ptds, PF_API_MEMCPY, 0,
            (CUdeviceptr d, CUdeviceptr s, size_t n), d, s, n, 0, ANY, ANY)
LINEAR_PAIR(cuMemcpyAsync, cuMemcpyAsync_ptsz, PF_API_MEMCPY_ASYNC, 1,
            (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), d, s, n, st, ANY, ANY)
LINEAR_PAIR(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, PF_API_HTOD, 0,
            (CUdeviceptr d, const void *s, size_t n), d, s, n, 0, DEV, ANY)
LINEAR_PAIR(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, PF_API_HTOD_ASYNC, 1,
            (CUdeviceptr d, const void *s, size_t n, CUstream st), d, s, n, st, DEV, ANY)
LINEAR_PAIR(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, PF_API_DTOH, 0,
            (void *d, CUdeviceptr s, size_t n), d, s, n, 0, ANY, DEV)
LINEAR_PAIR(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, PF_API_DTOH_ASYNC, 1,
            (void *d, CUdeviceptr s, size_t n, CUstream st), d, s, n, st, ANY, DEV)
LINEAR_PAIR(cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds, PF_API_DTOD, 0,
            (CUdeviceptr d, CUdeviceptr s, size_t n), d, s, n, 0, DEV, DEV)
LINEAR_PAIR(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz, PF_API_DTOD_ASYNC, 1,
            (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), d, s, n, st, DEV, DEV)

/* Calls that always pass through: count them with what they move. */
#define COUNTED(api, dir, mem, bytes, call)                                    \
    do {                                                                       \
        if (!pf_enter())                                                       \
            return call;                                                       \
        uint64_t t0_ = pf_ticks();                                             \
        CUresult r_ = call;                                                    \
        pf_stats_copy(api, dir, mem, PF_PATH_PASSTHROUGH, bytes, pf_ticks_since(t0_), r_); \
        return r_;                                                             \
    } while (0)

#define PEER_PARAMS (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
PF_API CUresult cuMemcpyPeer PEER_PARAMS {
    COUNTED(PF_API_PEER, PF_DIR_D2D, DEV, n, PF_PASS(PF_S_cuMemcpyPeer, cuMemcpyPeer, d, dc, s, sc, n));
}
PF_API CUresult cuMemcpyPeer_ptds PEER_PARAMS {
    COUNTED(PF_API_PEER, PF_DIR_D2D, DEV, n, PF_PASS(PF_S_cuMemcpyPeer_ptds, cuMemcpyPeer, d, dc, s, sc, n));
}
#define PEER_ASYNC_PARAMS (CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st)
PF_API CUresult cuMemcpyPeerAsync PEER_ASYNC_PARAMS {
    COUNTED(PF_API_PEER_ASYNC, PF_DIR_D2D, DEV, n,
            PF_PASS(PF_S_cuMemcpyPeerAsync, cuMemcpyPeerAsync, d, dc, s, sc, n, st));
}
PF_API CUresult cuMemcpyPeerAsync_ptsz PEER_ASYNC_PARAMS {
    COUNTED(PF_API_PEER_ASYNC, PF_DIR_D2D, DEV, n,
            PF_PASS(PF_S_cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, d, dc, s, sc, n, st));
}

/* Kind of one side of a 2D/3D copy from its memory type and pointers. */
static enum pf_mem side(CUmemorytype type, const void *host, CUdeviceptr dev) {
    switch (type) {
    case CU_MEMORYTYPE_HOST: return pf_classify((uintptr_t)host);
    case CU_MEMORYTYPE_UNIFIED: return pf_classify((uintptr_t)dev);
    default: return PF_MEM_DEVICE; /* device memory or an array */
    }
}

/* Direction and host-side kind of a copy whose sides are known. */
static void shape(enum pf_mem sk, enum pf_mem dk, enum pf_dir *dir, enum pf_mem *mem) {
    *dir = pf_dir_of(sk, dk);
    *mem = *dir == PF_DIR_D2H ? dk : sk;
}

/* p is the copy's descriptor: without one the driver gives the error */
#define SHAPED(api, p, bytes, call)                                            \
    do {                                                                       \
        if (!pf_enter() || !(p))                                               \
            return call;                                                       \
        enum pf_dir dir_;                                                      \
        enum pf_mem mem_;                                                      \
        pf_pending_wait(NULL, (size_t)-1);                                     \
        shape(P2(p), &dir_, &mem_);                                            \
        COUNTED(api, dir_, mem_, bytes, call);                                 \
    } while (0)

#define P2(p) side((p)->srcMemoryType, (p)->srcHost, (p)->srcDevice), \
              side((p)->dstMemoryType, (p)->dstHost, (p)->dstDevice)
#define B2(p) ((p)->WidthInBytes * (p)->Height)
#define B3(p) ((p)->WidthInBytes * (p)->Height * (p)->Depth)

PF_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p) {
    SHAPED(PF_API_M2D, p, B2(p), PF_PASS(PF_S_cuMemcpy2D_v2, cuMemcpy2D_v2, p));
}
PF_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p) {
    SHAPED(PF_API_M2D, p, B2(p), PF_PASS(PF_S_cuMemcpy2D_v2_ptds, cuMemcpy2D_v2, p));
}
PF_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) {
    SHAPED(PF_API_M2D_UNALIGNED, p, B2(p),
           PF_PASS(PF_S_cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2, p));
}
PF_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p) {
    SHAPED(PF_API_M2D_UNALIGNED, p, B2(p),
           PF_PASS(PF_S_cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned_v2, p));
}
PF_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream s) {
    SHAPED(PF_API_M2D_ASYNC, p, B2(p), PF_PASS(PF_S_cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2, p, s));
}
PF_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream s) {
    SHAPED(PF_API_M2D_ASYNC, p, B2(p),
           PF_PASS(PF_S_cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync_v2, p, s));
}
PF_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p) {
    SHAPED(PF_API_M3D, p, B3(p), PF_PASS(PF_S_cuMemcpy3D_v2, cuMemcpy3D_v2, p));
}
PF_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p) {
    SHAPED(PF_API_M3D, p, B3(p), PF_PASS(PF_S_cuMemcpy3D_v2_ptds, cuMemcpy3D_v2, p));
}
PF_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream s) {
    SHAPED(PF_API_M3D_ASYNC, p, B3(p), PF_PASS(PF_S_cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2, p, s));
}
PF_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream s) {
    SHAPED(PF_API_M3D_ASYNC, p, B3(p),
           PF_PASS(PF_S_cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync_v2, p, s));
}

/* A batch is one row: its direction and kind if all copies agree, else mixed. */
struct batch {
    enum pf_dir dir;
    enum pf_mem mem;
    size_t bytes;
    int n;
};

static void batch_add(struct batch *b, enum pf_mem sk, enum pf_mem dk, size_t bytes) {
    enum pf_dir dir;
    enum pf_mem mem;
    shape(sk, dk, &dir, &mem);
    if (b->n++ == 0) {
        b->dir = dir;
        b->mem = mem;
    }
    if (b->dir != dir)
        b->dir = PF_DIR_MIXED;
    if (b->mem != mem)
        b->mem = PF_MEM_MIXED;
    b->bytes += bytes;
}

static struct batch linear_batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count) {
    struct batch b = {PF_DIR_MIXED, PF_MEM_MIXED, 0, 0};
    for (size_t i = 0; dsts && srcs && sizes && i < count; i++)
        batch_add(&b, pf_classify(srcs[i]), pf_classify(dsts[i]), sizes[i]);
    return b;
}

static enum pf_mem operand(const CUmemcpy3DOperand *o) {
    return o->type == CU_MEMCPY_OPERAND_TYPE_POINTER ? pf_classify(o->op.ptr.ptr) : PF_MEM_DEVICE;
}

/* Bytes as the extents give them: elements of 1 byte for pointer operands. */
static struct batch batch3d(const CUDA_MEMCPY3D_BATCH_OP *ops, size_t count) {
    struct batch b = {PF_DIR_MIXED, PF_MEM_MIXED, 0, 0};
    for (size_t i = 0; ops && i < count; i++)
        batch_add(&b, operand(&ops[i].src), operand(&ops[i].dst),
                  ops[i].extent.width * ops[i].extent.height * ops[i].extent.depth);
    return b;
}

#define BATCHED(api, describe, call)                                           \
    do {                                                                       \
        if (!pf_enter())                                                       \
            return call;                                                       \
        pf_pending_wait(NULL, (size_t)-1);                                     \
        struct batch b_ = describe;                                            \
        COUNTED(api, b_.dir, b_.mem, b_.bytes, call);                          \
    } while (0)

#define BATCH_V1_PARAMS (CUdeviceptr *d, CUdeviceptr *s, size_t *z, size_t n, CUmemcpyAttributes *a, \
                         size_t *ai, size_t na, size_t *fail, CUstream st)
#define BATCH_V2_PARAMS (CUdeviceptr *d, CUdeviceptr *s, size_t *z, size_t n, CUmemcpyAttributes *a, \
                         size_t *ai, size_t na, CUstream st)
PF_API CUresult cuMemcpyBatchAsync BATCH_V1_PARAMS {
    BATCHED(PF_API_BATCH, linear_batch(d, s, z, n),
            PF_PASS(PF_S_cuMemcpyBatchAsync, cuMemcpyBatchAsync, d, s, z, n, a, ai, na, fail, st));
}
PF_API CUresult cuMemcpyBatchAsync_ptsz BATCH_V1_PARAMS {
    BATCHED(PF_API_BATCH, linear_batch(d, s, z, n),
            PF_PASS(PF_S_cuMemcpyBatchAsync_ptsz, cuMemcpyBatchAsync, d, s, z, n, a, ai, na, fail, st));
}
PF_API CUresult cuMemcpyBatchAsync_v2 BATCH_V2_PARAMS {
    BATCHED(PF_API_BATCH, linear_batch(d, s, z, n),
            PF_PASS(PF_S_cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2, d, s, z, n, a, ai, na, st));
}
PF_API CUresult cuMemcpyBatchAsync_v2_ptsz BATCH_V2_PARAMS {
    BATCHED(PF_API_BATCH, linear_batch(d, s, z, n),
            PF_PASS(PF_S_cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync_v2, d, s, z, n, a, ai, na, st));
}
#define BATCH3D_V1_PARAMS (size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail, unsigned long long f, CUstream st)
#define BATCH3D_V2_PARAMS (size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long f, CUstream st)
PF_API CUresult cuMemcpy3DBatchAsync BATCH3D_V1_PARAMS {
    BATCHED(PF_API_BATCH3D, batch3d(ops, n),
            PF_PASS(PF_S_cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync, n, ops, fail, f, st));
}
PF_API CUresult cuMemcpy3DBatchAsync_ptsz BATCH3D_V1_PARAMS {
    BATCHED(PF_API_BATCH3D, batch3d(ops, n),
            PF_PASS(PF_S_cuMemcpy3DBatchAsync_ptsz, cuMemcpy3DBatchAsync, n, ops, fail, f, st));
}
PF_API CUresult cuMemcpy3DBatchAsync_v2 BATCH3D_V2_PARAMS {
    BATCHED(PF_API_BATCH3D, batch3d(ops, n),
            PF_PASS(PF_S_cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2, n, ops, f, st));
}
PF_API CUresult cuMemcpy3DBatchAsync_v2_ptsz BATCH3D_V2_PARAMS {
    BATCHED(PF_API_BATCH3D, batch3d(ops, n),
            PF_PASS(PF_S_cuMemcpy3DBatchAsync_v2_ptsz, cuMemcpy3DBatchAsync_v2, n, ops, f, st));
}
