/* fake_copy.c - every memcpy flavour.  Each exported function validates its
 * operands, translates them to host addresses (fake_mem_translate) into a
 * struct fake_copy, and hands it to submit(), which applies the driver's
 * host-synchronisation rules:
 *   - sync copies are queued on their stream and waited for, except
 *     device-to-device, which the real driver returns from at once;
 *   - async H2D from pageable memory snapshots the source before
 *     returning and completes later in stream order (the source may be
 *     reused at once); beyond the driver's staging memory it first waits
 *     for the work queued before it on its stream (fake_stream_stage);
 *   - async D2H to pageable memory returns only once the data is in place;
 *   - async copies from/to pinned, registered, managed and device memory are
 *     truly asynchronous: memory is read/written when the op runs;
 *   - while the stream is capturing, async copies are recorded (no snapshot)
 *     and sync ones fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
 * Legacy exports pass per_thread = 0, _ptds/_ptsz exports pass 1.
 */
#define _GNU_SOURCE
#include "fake.h"

#include <stdlib.h>
#include <string.h>

static size_t span_of(const struct fake_copy *cp, int src)
{
    size_t pitch = src ? cp->spitch : cp->dpitch, h = src ? cp->sheight : cp->dheight;
    return ((cp->depth - 1) * h + (cp->height - 1)) * pitch + cp->width;
}

/* sync: wait for the copy (and the work before it); wait_dst: wait for a
 * copy into pageable memory (every copy API, batches by batch_submit's
 * rules). */
static CUresult submit_copy(struct fake_stream *s, struct fake_copy cp, enum fake_mem_kind skind,
                            enum fake_mem_kind dkind, int sync, int wait_dst)
{
    int capturing = fake_stream_capturing(s);
    if (capturing && sync)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct fake_op *op = fake_op_new(OP_COPY);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!sync && !capturing && skind == MEM_PAGEABLE) {
        size_t span = span_of(&cp, 1);
        if (dkind != MEM_PAGEABLE)
            fake_stream_stage(s, op, span);
        op->owned = malloc(span);
        if (!op->owned) {
            fake_op_free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(op->owned, cp.src, span);
        cp.src = op->owned;
    }
    op->cp = cp;
    uint64_t seq;
    fake_enqueue(s, op, &seq);
    int d2d = skind == MEM_DEVICE && dkind == MEM_DEVICE;
    if (!capturing && ((sync && !d2d) || (wait_dst && dkind == MEM_PAGEABLE)))
        fake_stream_wait(s, seq);
    return CUDA_SUCCESS;
}

static CUresult submit(struct fake_stream *s, struct fake_copy cp, enum fake_mem_kind skind,
                       enum fake_mem_kind dkind, int sync)
{
    return submit_copy(s, cp, skind, dkind, sync, 1);
}

/* operand roles */
enum { OPD_HOST, OPD_DEVICE, OPD_UNIFIED };

static CUresult copy1d(CUstream h, int pt, int sync, uintptr_t dst, int drole,
                       uintptr_t src, int srole, size_t n)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    void *d, *sp;
    enum fake_mem_kind dk, sk;
    if ((r = fake_mem_translate(src, n, srole == OPD_DEVICE, &sp, &sk)) ||
        (r = fake_mem_translate(dst, n, drole == OPD_DEVICE, &d, &dk)))
        return r;
    if (sk != MEM_REGISTERED && dk != MEM_REGISTERED) {
        struct fake_copy cp = { .dst = d, .src = sp, .width = n, .height = 1, .depth = 1,
                                .dpitch = n, .dheight = 1, .spitch = n, .sheight = 1 };
        return submit(s, cp, sk, dk, sync);
    }
    /* registered memory: its whole pages from their pinned copy, the
     * partial pages at its ends from where they are (fake_mem.c) */
    for (size_t off = 0, k; off < n && !r; off += k) {
        k = fake_mem_piece(src + off, n - off);
        k = fake_mem_piece(dst + off, k);
        if (!(r = fake_mem_translate(src + off, k, srole == OPD_DEVICE, &sp, &sk)) &&
            !(r = fake_mem_translate(dst + off, k, drole == OPD_DEVICE, &d, &dk))) {
            struct fake_copy cp = { .dst = d, .src = sp, .width = k, .height = 1, .depth = 1,
                                    .dpitch = k, .dheight = 1, .spitch = k, .sheight = 1 };
            r = submit(s, cp, sk, dk, sync);
        }
    }
    return r;
}

#define U(p) ((uintptr_t)(p))

/* ---- 1-D copies: legacy and per-thread flavours ---------------------------------- */
#define SYNC_PAIR(name, params, ...)                                              \
    FAKE_API CUresult name params { FAKE_ENTER(); return copy1d(NULL, 0, 1, __VA_ARGS__); } \
    FAKE_API CUresult name##_ptds params { FAKE_ENTER(); return copy1d(NULL, 1, 1, __VA_ARGS__); }
#define ASYNC_PAIR(name, params, ...)                                             \
    FAKE_API CUresult name params { FAKE_ENTER(); return copy1d(hStream, 0, 0, __VA_ARGS__); } \
    FAKE_API CUresult name##_ptsz params { FAKE_ENTER(); return copy1d(hStream, 1, 0, __VA_ARGS__); }

SYNC_PAIR(cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount),
          dstDevice, OPD_DEVICE, U(srcHost), OPD_HOST, ByteCount)
SYNC_PAIR(cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount),
          U(dstHost), OPD_HOST, srcDevice, OPD_DEVICE, ByteCount)
SYNC_PAIR(cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),
          dstDevice, OPD_DEVICE, srcDevice, OPD_DEVICE, ByteCount)
SYNC_PAIR(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount),
          dst, OPD_UNIFIED, src, OPD_UNIFIED, ByteCount)
ASYNC_PAIR(cuMemcpyHtoDAsync_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
           dstDevice, OPD_DEVICE, U(srcHost), OPD_HOST, ByteCount)
ASYNC_PAIR(cuMemcpyDtoHAsync_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
           U(dstHost), OPD_HOST, srcDevice, OPD_DEVICE, ByteCount)
ASYNC_PAIR(cuMemcpyDtoDAsync_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
           dstDevice, OPD_DEVICE, srcDevice, OPD_DEVICE, ByteCount)
ASYNC_PAIR(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream),
           dst, OPD_UNIFIED, src, OPD_UNIFIED, ByteCount)

/* The CUDA 2.0 ABI with 32-bit sizes and addresses.  It exists so that tests
 * can check that a shim hands it out untouched; the fake's device addresses
 * do not fit in 32 bits, so any non-empty copy is refused. */
FAKE_API CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
    FAKE_ENTER();
    (void)dstDevice;
    (void)srcHost;
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    return ByteCount == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- peer copies ------------------------------------------------------------------- */
static CUresult peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                     size_t n, CUstream h, int pt, int sync)
{
    FAKE_CHECK_INIT();
    if (!fake_ctx_valid((struct fake_ctx *)dctx) || !fake_ctx_valid((struct fake_ctx *)sctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy1d(h, pt, sync, dst, OPD_DEVICE, src, OPD_DEVICE, n);
}

FAKE_API CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                               CUcontext srcContext, size_t ByteCount)
{
    FAKE_ENTER();
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, 0, 1);
}

FAKE_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                    CUcontext srcContext, size_t ByteCount)
{
    FAKE_ENTER();
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, 1, 1);
}

FAKE_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                    CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    FAKE_ENTER();
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, 0, 0);
}

FAKE_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                         CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    FAKE_ENTER();
    return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, 1, 0);
}

/* ---- 2-D and 3-D copies ------------------------------------------------------------- */
/* The entry point a copy came through: their checks differ. */
enum shape_api { API_2D, API_3D };

/* Resolve one side of a 2D/3D copy to a host address of its first byte;
 * *pitch and *height are the side's (an array's own for an array). */
static CUresult operand(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr,
                        size_t x, size_t y, size_t z, size_t *pitch, size_t *height,
                        size_t W, size_t H, size_t D, enum shape_api api, char **out, enum fake_mem_kind *kind)
{
    int in3d = api == API_3D;
    uintptr_t base;
    int need_alloc;
    switch (t) {
    case CU_MEMORYTYPE_HOST:    base = U(host); need_alloc = 0; break;
    case CU_MEMORYTYPE_DEVICE:  base = dev; need_alloc = 1; break;
    case CU_MEMORYTYPE_UNIFIED: base = dev; need_alloc = 0; break;
    case CU_MEMORYTYPE_ARRAY: {
        struct fake_array_shape a;
        /* neither x nor the width need be whole elements, within the row
         * (H100 and H200, driver 580: tests/gpu/checks/shapes.sh) */
        if (fake_array_get(arr, &a) || x > a.row || W > a.row - x ||
            y > a.height || H > a.height - y || z > a.depth || D > a.depth - z)
            return CUDA_ERROR_INVALID_VALUE;
        *pitch = a.row;
        *height = a.height;
        *out = a.mem + (z * a.height + y) * a.row + x;
        *kind = MEM_DEVICE;
        return CUDA_SUCCESS;
    }
    default:                    return CUDA_ERROR_INVALID_VALUE;
    }
    /* a 3D copy's rows must lie within each side's height, one slice or
     * several (H100, driver 580: y 1 + 32 rows in a height of 32 refused,
     * at depth 1 and 8); a 2D copy has no height, nor has one slice of a
     * height of 0, its rows from any y and its slices y + H rows apart
     * (H200, driver 580: tests/gpu/probes/shapes_errors.c, tests/gpu/
     * checks/shapes.sh); a row past its pitch (x + W over it) is refused,
     * 2D or 3D (H200, driver 580) */
    int unbounded = in3d && D == 1 && *height == 0;
    if (unbounded)
        *height = y + H;
    if (base == 0 || *pitch < W || x > *pitch - W ||
        (in3d && !unbounded && (*height < H || y > *height - H)))
        return CUDA_ERROR_INVALID_VALUE;
    size_t start, span, end;
    /* extents that overflow the address space */
    if (__builtin_mul_overflow(z, *height, &start) || __builtin_add_overflow(start, y, &start) ||
        __builtin_mul_overflow(start, *pitch, &start) || __builtin_add_overflow(start, x, &start) ||
        __builtin_mul_overflow(D - 1, *height, &span) || __builtin_add_overflow(span, H - 1, &span) ||
        __builtin_mul_overflow(span, *pitch, &span) || __builtin_add_overflow(span, W, &span) ||
        __builtin_add_overflow(base, start, &start) || __builtin_add_overflow(start, span, &end))
        return CUDA_ERROR_INVALID_VALUE;
    void *p;
    CUresult r = fake_mem_translate(start, span, need_alloc, &p, kind);
    *out = p;
    return r;
}

static CUresult copy3d(const CUDA_MEMCPY3D *c, CUstream h, int pt, int sync, enum shape_api api)
{
    int in3d = api == API_3D;
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    /* the level of detail is not looked at (H100, driver 580: srcLOD 1
     * between host and device memory copied) */
    if (!c || c->reserved0 || c->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->WidthInBytes == 0 || c->Height == 0 || c->Depth == 0)
        return CUDA_SUCCESS;
    size_t W = c->WidthInBytes, H = c->Height, D = c->Depth;
    /* one row of a 3D copy needs no pitch (0); a pitch under the width is
     * refused, in 2D even for one row (H100 and H200, driver 580) */
    size_t sp = in3d && !c->srcPitch && H == 1 && D == 1 ? W : c->srcPitch;
    size_t dp = in3d && !c->dstPitch && H == 1 && D == 1 ? W : c->dstPitch;
    size_t sh = c->srcHeight, dh = c->dstHeight;
    char *src, *dst;
    enum fake_mem_kind sk, dk;
    if ((r = operand(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes,
                     c->srcY, c->srcZ, &sp, &sh, W, H, D, api, &src, &sk)) ||
        (r = operand(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes,
                     c->dstY, c->dstZ, &dp, &dh, W, H, D, api, &dst, &dk)))
        return r;
    struct fake_copy cp = { .dst = dst, .src = src, .width = W, .height = H, .depth = D,
                            .dpitch = dp, .dheight = dh, .spitch = sp, .sheight = sh };
    return submit(s, cp, sk, dk, sync);
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, CUstream h, int pt, int sync, enum shape_api api)
{
    if (!c) {
        struct fake_stream *s;
        CUresult r = fake_stream_get(h, pt, &s);
        return r ? r : CUDA_ERROR_INVALID_VALUE;
    }
    CUDA_MEMCPY3D m = {
        .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
        .srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcArray = c->srcArray,
        .srcPitch = c->srcPitch, .srcHeight = c->Height,
        .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstMemoryType = c->dstMemoryType,
        .dstHost = c->dstHost, .dstDevice = c->dstDevice, .dstArray = c->dstArray,
        .dstPitch = c->dstPitch, .dstHeight = c->Height,
        .WidthInBytes = c->WidthInBytes, .Height = c->Height, .Depth = 1,
    };
    return copy3d(&m, h, pt, sync, api);
}

FAKE_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) { FAKE_ENTER(); return copy2d(pCopy, NULL, 0, 1, API_2D); }
FAKE_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy) { FAKE_ENTER(); return copy2d(pCopy, NULL, 1, 1, API_2D); }
FAKE_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy) { FAKE_ENTER(); return copy2d(pCopy, NULL, 0, 1, API_2D); }
FAKE_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy) { FAKE_ENTER(); return copy2d(pCopy, NULL, 1, 1, API_2D); }
FAKE_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream) { FAKE_ENTER(); return copy2d(pCopy, hStream, 0, 0, API_2D); }
FAKE_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream) { FAKE_ENTER(); return copy2d(pCopy, hStream, 1, 0, API_2D); }
FAKE_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy) { FAKE_ENTER(); return copy3d(pCopy, NULL, 0, 1, API_3D); }
FAKE_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy) { FAKE_ENTER(); return copy3d(pCopy, NULL, 1, 1, API_3D); }
FAKE_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream) { FAKE_ENTER(); return copy3d(pCopy, hStream, 0, 0, API_3D); }
FAKE_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream) { FAKE_ENTER(); return copy3d(pCopy, hStream, 1, 0, API_3D); }

/* ---- host <-> array copies: bytes at an offset into the array's first row ---------- */
/* The real driver reaches only the first row of a 2D array this way (H100,
 * driver 580: 100 of a 100 x 7 array's bytes copied, 700 refused). */
static CUresult copy_array(CUstream h, int pt, int sync, CUarray arr, size_t off, void *host, size_t n,
                           int to_array)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    struct fake_array_shape a;
    if (fake_array_get(arr, &a) || off > a.row || n > a.row - off)
        return CUDA_ERROR_INVALID_VALUE;
    if (n == 0)
        return CUDA_SUCCESS;
    void *hp;
    enum fake_mem_kind hk;
    if ((r = fake_mem_translate(U(host), n, 0, &hp, &hk)))
        return r;
    char *dst = to_array ? a.mem + off : hp, *src = to_array ? hp : a.mem + off;
    struct fake_copy cp = { .dst = dst, .src = src, .width = n, .height = 1, .depth = 1,
                            .dpitch = n, .dheight = 1, .spitch = n, .sheight = 1 };
    return submit(s, cp, to_array ? hk : MEM_DEVICE, to_array ? MEM_DEVICE : hk, sync);
}

FAKE_API CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{ FAKE_ENTER(); return copy_array(NULL, 0, 1, dstArray, dstOffset, (void *)srcHost, ByteCount, 1); }
FAKE_API CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{ FAKE_ENTER(); return copy_array(NULL, 1, 1, dstArray, dstOffset, (void *)srcHost, ByteCount, 1); }
FAKE_API CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ FAKE_ENTER(); return copy_array(NULL, 0, 1, srcArray, srcOffset, dstHost, ByteCount, 0); }
FAKE_API CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ FAKE_ENTER(); return copy_array(NULL, 1, 1, srcArray, srcOffset, dstHost, ByteCount, 0); }
FAKE_API CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount,
                                       CUstream hStream)
{ FAKE_ENTER(); return copy_array(hStream, 0, 0, dstArray, dstOffset, (void *)srcHost, ByteCount, 1); }
FAKE_API CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                            size_t ByteCount, CUstream hStream)
{ FAKE_ENTER(); return copy_array(hStream, 1, 0, dstArray, dstOffset, (void *)srcHost, ByteCount, 1); }
FAKE_API CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                                       CUstream hStream)
{ FAKE_ENTER(); return copy_array(hStream, 0, 0, srcArray, srcOffset, dstHost, ByteCount, 0); }
FAKE_API CUresult cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                                            CUstream hStream)
{ FAKE_ENTER(); return copy_array(hStream, 1, 0, srcArray, srcOffset, dstHost, ByteCount, 0); }

/* ---- batch copies ----------------------------------------------------------------------
 * The rules below were checked on the H100 (driver 580.159.04, CUDA 13.0
 * driver API; batch-probe.log in docs/results/2026-11-24-h100-registration-cache/logs.log,
 * tests/gpu/probes/batch_errors.c, which
 * prints the driver's answer to each, and tests/gpu/checks/batch.sh, whose
 * 300 random cases the fake now answers as the driver did, code, failIdx
 * and bytes); the few still UNVERIFIED say so. */
static CUresult batch_stream(CUstream h, int pt, size_t *failIdx, struct fake_stream **s)
{
    CUresult r = fake_stream_get(h, pt, s);
    if (r)
        return r;
    /* the legacy default stream is refused (documented), INVALID_VALUE
     * (H100); named 0, failIdx is left as it was, named CU_STREAM_LEGACY,
     * it is SIZE_MAX (H100, the 3D batch; the linear one UNVERIFIED) */
    if ((*s)->kind == STREAM_LEGACY && !h)
        return CUDA_ERROR_INVALID_VALUE;
    if (failIdx)
        *failIdx = SIZE_MAX;
    if ((*s)->kind == STREAM_LEGACY)
        return CUDA_ERROR_INVALID_VALUE;
    /* during a capture (relaxed, on the H100): refused, the capture left
     * valid (cuStreamEndCapture returns 0 after it) */
    return fake_stream_capturing(*s) ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* One copy of a batch, queued as soon as it is checked: a refused batch has
 * moved the copies before the one refused (H100).  A pageable source of a
 * copy whose source order is STREAM is read when the copy runs, in stream
 * order (documented), as the fake reads pinned memory; with the other
 * orders it is read in the call (H100), as a linear asynchronous H2D's.
 * Not modelled: behind busy work the H200's driver read a linear batch's
 * pageable source of 128 KiB or more after the call returned, with
 * DURING_API_CALL too (probe_driver_staging slices); the fake keeps to the
 * documented order.  Into host memory (H200, probe_batch_d2h): a copy from
 * device memory of order DURING_API_CALL is waited for, its stream's work
 * and then the copy, whatever the host memory; one of the other orders
 * into pageable memory only when it has more than one row (`rows`, a 3D
 * op's), into pinned memory never; a linear one is not waited for (H100
 * and H200: the call returns before it lands). */
static CUresult batch_submit(struct fake_stream *s, struct fake_copy cp, enum fake_mem_kind sk,
                             enum fake_mem_kind dk, CUmemcpySrcAccessOrder order, int rows)
{
    int in_order = order == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM && sk == MEM_PAGEABLE;
    int read_now = order == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL && sk == MEM_DEVICE &&
                   (dk == MEM_PAGEABLE || dk == MEM_PINNED || dk == MEM_REGISTERED);
    return submit_copy(s, cp, in_order ? MEM_PINNED : sk, dk, read_now, rows && !read_now);
}

/* A source order the documentation names; 0 (INVALID) and any value past
 * ANY refused (H100). */
static int order_ok(CUmemcpySrcAccessOrder o)
{
    return o >= CU_MEMCPY_SRC_ACCESS_ORDER_STREAM && o <= CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

/* A location hint of a linear batch's attributes: an unknown type, or a
 * device that does not exist, refused (H100: type 99, device 7); host NUMA
 * ids are not looked at (UNVERIFIED). */
static int hint_ok(const CUmemLocation *l)
{
    if (l->type == CU_MEM_LOCATION_TYPE_DEVICE)
        return l->id >= 0 && l->id < fake_ndevices();
    return l->type <= CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

/* failIdx (H100): SIZE_MAX on success and for an error of the whole batch,
 * untouched for the legacy stream; the index of the first copy refused
 * (a size of 0, an operand outside any allocation), the copies before it
 * moved.  Attribute flags other than PREFER_OVERLAP_WITH_COMPUTE refused,
 * as a whole-batch error (H100). */
static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                      CUmemcpyAttributes *attrs, size_t *attrIdxs, size_t numAttrs,
                      size_t *failIdx, CUstream h, int pt)
{
    struct fake_stream *s;
    CUresult r = batch_stream(h, pt, failIdx, &s);
    if (r)
        return r;
    if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attrIdxs || numAttrs == 0 ||
        numAttrs > count || attrIdxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t a = 0; a < numAttrs; a++)
        if ((a && attrIdxs[a] <= attrIdxs[a - 1]) || attrIdxs[a] >= count ||
            !order_ok(attrs[a].srcAccessOrder) || (attrs[a].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE) ||
            !hint_ok(&attrs[a].srcLocHint) || !hint_ok(&attrs[a].dstLocHint))
            return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0, a = 0; i < count; i++) {
        a += a + 1 < numAttrs && attrIdxs[a + 1] <= i;
        enum fake_mem_kind sk, dk;
        void *d, *sp;
        r = sizes[i] == 0 ? CUDA_ERROR_INVALID_VALUE : fake_mem_translate(srcs[i], sizes[i], 0, &sp, &sk);
        if (!r)
            r = fake_mem_translate(dsts[i], sizes[i], 0, &d, &dk);
        if (r) {
            if (failIdx)
                *failIdx = i;
            return r;
        }
        struct fake_copy cp = { .dst = d, .src = sp, .width = sizes[i], .height = 1, .depth = 1,
                                .dpitch = sizes[i], .dheight = 1, .spitch = sizes[i], .sheight = 1 };
        if ((r = batch_submit(s, cp, sk, dk, attrs[a].srcAccessOrder, 0)))
            return r;
    }
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                     CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                     size_t *failIdx, CUstream hStream)
{
    FAKE_ENTER();
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, 0);
}

FAKE_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                          CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                          size_t *failIdx, CUstream hStream)
{
    FAKE_ENTER();
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, 1);
}

FAKE_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                        CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                        CUstream hStream)
{
    FAKE_ENTER();
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, 0);
}

FAKE_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                             CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                             CUstream hStream)
{
    FAKE_ENTER();
    return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, 1);
}

/* An operand of a 3D batch, checked: arrays are not modelled
 * (NOT_SUPPORTED: the real driver takes them; pinfast passes them
 * through); another type than a pointer, a rowLength or layerHeight under
 * the extent refused (documented; H100: failIdx the op). */
static CUresult operand3d_check(const CUmemcpy3DOperand *o, const CUextent3D *e)
{
    if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER)
        return CUDA_ERROR_INVALID_VALUE;
    if ((o->op.ptr.rowLength && o->op.ptr.rowLength < e->width) ||
        (o->op.ptr.layerHeight && o->op.ptr.layerHeight < e->height))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* A checked pointer operand's memory: rowLength and layerHeight in bytes
 * here (1-byte elements). */
static CUresult operand3d(const CUmemcpy3DOperand *o, const CUextent3D *e, char **out,
                          enum fake_mem_kind *kind, size_t *pitch, size_t *layer)
{
    *pitch = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
    *layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
    size_t span = ((e->depth - 1) * *layer + (e->height - 1)) * *pitch + e->width;
    void *p;
    CUresult r = fake_mem_translate(o->op.ptr.ptr, span, 0, &p, kind);
    *out = p;
    return r;
}

/* Two passes (H100): every op's parameters first, a zero extent, a source
 * order or op flags refused, an operand refused by operand3d_check: failIdx
 * that op, nothing moved; then each op's memory, queued as soon as found:
 * an operand outside any allocation refused with failIdx left SIZE_MAX,
 * the ops before it moved.  failIdx SIZE_MAX on success, for batch flags
 * and numOps 0.  Location hints are not looked at (H100: type 99
 * accepted). */
static CUresult batch3d(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *failIdx,
                        unsigned long long flags, CUstream h, int pt)
{
    struct fake_stream *s;
    CUresult r = batch_stream(h, pt, failIdx, &s);
    if (r)
        return r;
    if (numOps == 0 || !ops || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numOps; i++) {
        const CUextent3D *e = &ops[i].extent;
        r = CUDA_SUCCESS;
        if (!e->width || !e->height || !e->depth || !order_ok(ops[i].srcAccessOrder) ||
            (ops[i].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE))
            r = CUDA_ERROR_INVALID_VALUE;
        if (!r)
            r = operand3d_check(&ops[i].src, e);
        if (!r)
            r = operand3d_check(&ops[i].dst, e);
        if (r) {
            if (failIdx)
                *failIdx = i;
            return r;
        }
    }
    for (size_t i = 0; i < numOps; i++) {
        const CUextent3D *e = &ops[i].extent;
        char *src, *dst;
        size_t sp, sl, dp, dl;
        enum fake_mem_kind sk, dk;
        if ((r = operand3d(&ops[i].src, e, &src, &sk, &sp, &sl)) ||
            (r = operand3d(&ops[i].dst, e, &dst, &dk, &dp, &dl)))
            return r;
        struct fake_copy cp = { .dst = dst, .src = src, .width = e->width, .height = e->height,
                                .depth = e->depth, .dpitch = dp, .dheight = dl, .spitch = sp, .sheight = sl };
        /* a pageable source read in the call: the op first waits for the
         * work queued before it (H200, 32 KiB to 2 MiB behind 5 ms of
         * work; with ANY it returns at once: tests/gpu/probes/
         * probe_driver_staging.c slices) */
        if (sk == MEM_PAGEABLE && ops[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
            !fake_stream_capturing(s))
            fake_stream_wait_queued(s);
        if ((r = batch_submit(s, cp, sk, dk, ops[i].srcAccessOrder, e->height > 1 || e->depth > 1)))
            return r;
    }
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
                                       unsigned long long flags, CUstream hStream)
{
    FAKE_ENTER();
    return batch3d(numOps, opList, failIdx, flags, hStream, 0);
}

FAKE_API CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
                                            unsigned long long flags, CUstream hStream)
{
    FAKE_ENTER();
    return batch3d(numOps, opList, failIdx, flags, hStream, 1);
}

FAKE_API CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                          unsigned long long flags, CUstream hStream)
{
    FAKE_ENTER();
    return batch3d(numOps, opList, NULL, flags, hStream, 0);
}

FAKE_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                               unsigned long long flags, CUstream hStream)
{
    FAKE_ENTER();
    return batch3d(numOps, opList, NULL, flags, hStream, 1);
}
