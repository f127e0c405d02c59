/* batch_cases.h - the random batch cases, one source for the fake driver
 * (tests/test_batch.c, through the test's driver table) and the GPU
 * (tests/gpu/checks/batch_check.c, the driver API): each case logs its return
 * code, its failIdx (the 12.8 ABIs) and a hash of every byte of the host
 * and device buffers after it, so that a run without pinfast and one under
 * it can be compared line by line.
 *   linear  cuMemcpyBatchAsync, 13.0 and 12.8 ABIs: 1-8 copies, each H2D or
 *           D2H between pageable memory and device memory, or from pinned
 *           memory, or device to device; random sizes and offsets, 1 to
 *           count attribute entries of random source orders, hints, flags
 *   3d      cuMemcpy3DBatchAsync, both ABIs: pointer operands, pageable or
 *           pinned against device memory, random extents, rowLength and
 *           layerHeight (0 or more than the extent)
 * One case in four has bad input: count 0, NULL arrays, attrsIdxs not from
 * 0, not increasing or past the count, more attributes than copies, a
 * source order 0 or unknown, unknown flags or hint, the legacy stream, one
 * or two device ranges past the allocation, a copy of 0 bytes; for 3D a
 * zero extent, a rowLength under the width, batch flags.  Copies of a batch
 * never overlap (a batch's copies have no order).  Device memory is filled
 * and read back through pinned memory, which pinfast never stages.
 * Each case also logs a hash of the host sides of the D2H copies that the
 * driver has landed when the call returns (H200, probe_batch_d2h): those
 * of order DURING_API_CALL, and a 3D op's of more than one row into
 * pageable memory; pinfast must not let the program see them unlanded.
 * With BC_BUSY=1 in the environment every batch is queued behind a host
 * function of 1 ms on the cases' stream, and the pageable sources of its
 * 3D H2D ops read in the call (CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL)
 * are written over as the call returns: they must land what the sources
 * held at the call.  The host buffer is copied whole first, so that
 * pinfast has registered it when the cases run.  The other orders leave a source to the program only
 * once the copy is done; a linear batch's sources are left alone, as from
 * 128 KiB the driver reads them after the call (docs/design.md, Known
 * limits).
 *
 * The includer defines BC(f), the driver function cu<f> (MemcpyBatchAsync:
 * the 13.0 ABI, MemcpyBatchAsync12 the 12.8 one), BC_LOG(...), a line of the
 * log, and seeds rs. */
#ifndef PFT_BATCH_CASES_H
#define PFT_BATCH_CASES_H

#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/samples/check.h"

#define SLOTS 8                     /* copies at most; each its own slot */
#define SLOT ((size_t)512 << 10)
#define BUF (SLOTS * SLOT)

static uint64_t rs;
static CUstream S;
static CUdeviceptr DEV, DEV2;        /* device sides; DEV2 the sources of D2D */
static unsigned char *HOST, *PINOP, *PIN; /* pageable, pinned operands, pinned fill/read */

static size_t R(size_t lo, size_t hi) { return rng_range(&rs, lo, hi); }

static int BUSY; /* BC_BUSY */
static void CUDA_CB busy_hold(void *arg)
{
    (void)arg;
    usleep(1000);
}
/* A batch is about to be issued: work for it to queue behind. */
static void busy_before(void)
{
    if (BUSY)
        CU(BC(LaunchHostFunc)(S, busy_hold, NULL));
}

static void bc_fill(uint64_t salt)
{
    uint64_t s = salt;
    rng_fill(&s, HOST, BUF);
    rng_fill(&s, PINOP, BUF);
    rng_fill(&s, PIN, BUF);
    CU(BC(MemcpyHtoD)(DEV, PIN, BUF));
    rng_fill(&s, PIN, BUF);
    CU(BC(MemcpyHtoD)(DEV2, PIN, BUF));
    CU(BC(CtxSynchronize)());
}

static uint64_t bc_hash(void)
{
    CU(BC(CtxSynchronize)());
    uint64_t h = hash_bytes(hash_bytes(0, HOST, BUF), PINOP, BUF);
    CU(BC(MemcpyDtoH)(PIN, DEV, BUF));
    h = hash_bytes(h, PIN, BUF);
    CU(BC(MemcpyDtoH)(PIN, DEV2, BUF));
    return hash_bytes(h, PIN, BUF);
}

enum bad {
    OK, B_COUNT0, B_NULL, B_IDX0, B_ORDER_IDX, B_IDX_PAST, B_NATTRS, B_ORDER0, B_ORDER7, B_FLAGS,
    B_HINT, B_LEGACY, B_RANGE, B_RANGE2, B_ZERO, NBAD,
    /* 3D only */
    B3_EXTENT = B_COUNT0, B3_ROWLEN = B_NULL, B3_FLAGS = B_IDX0,
};

/* Copy i's sides in its own slot: kind 0 pageable H2D, 1 pageable D2H,
 * 2 pinned H2D, 3 pinned D2H, 4 D2D. */
static void sides(int kind, size_t i, size_t off, CUdeviceptr *dst, CUdeviceptr *src)
{
    CUdeviceptr host = (CUdeviceptr)(uintptr_t)((kind == 2 || kind == 3 ? PINOP : HOST) + i * SLOT + off);
    CUdeviceptr dev = DEV + i * SLOT + off;
    *dst = kind == 0 || kind == 2 || kind == 4 ? dev : host;
    *src = kind == 4 ? DEV2 + i * SLOT + off : kind == 1 || kind == 3 ? dev : host;
}

/* Whether copy k's host side (kind 1 pageable D2H, 3 pinned D2H) has
 * landed when a successful call returns, by its source order and rows:
 * then its slot is hashed into *at. */
static void landed(uint64_t *at, int kind, size_t k, CUmemcpySrcAccessOrder o, size_t rows)
{
    int during = o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
    if ((kind == 1 && (during || rows > 1)) || (kind == 3 && during))
        *at = hash_bytes(*at, (kind == 1 ? HOST : PINOP) + k * SLOT, SLOT);
}

static CUmemLocation hint(void)
{
    CUmemLocation l;
    memset(&l, 0, sizeof l);
    l.type = (CUmemLocationType)R(0, 2); /* none, device 0, host */
    return l;
}

/* A copy made to run past its device allocation. */
static void past(CUdeviceptr *d, CUdeviceptr *s, size_t *z)
{
    *(*d >= DEV && *d < DEV + BUF ? d : s) = DEV + BUF - 8;
    *z = 64;
}

static void case_linear(int i, int v1, int bad)
{
    size_t n = R(1, SLOTS), z[SLOTS], ai[SLOTS + 1], na = R(1, n), fi = 0x5a5a;
    CUdeviceptr d[SLOTS], s[SLOTS];
    CUmemcpyAttributes a[SLOTS + 1];
    int kinds[SLOTS];
    memset(a, 0, sizeof a);
    uint64_t salt = rng_next(&rs);
    for (size_t k = 0; k < n; k++) {
        int kind = kinds[k] = R(0, 3) ? (int)R(0, 1) : (int)R(2, 4);
        z[k] = R(0, 3) ? R(1, 64 << 10) : R(1, SLOT / 2);
        sides(kind, k, R(0, SLOT - z[k]), &d[k], &s[k]);
    }
    for (size_t k = 0; k < na; k++) {
        ai[k] = k ? ai[k - 1] + R(1, n - ai[k - 1] - (na - k)) : 0;
        a[k].srcAccessOrder = (CUmemcpySrcAccessOrder)R(1, 3);
        a[k].srcLocHint = hint();
        a[k].dstLocHint = hint();
        a[k].flags = (unsigned)R(0, 1);
    }
    size_t cnt = n, j = R(0, n - 1);
    CUstream st = S;
    switch (bad) {
    case B_COUNT0: cnt = 0; break;
    case B_NULL: break;
    case B_IDX0: ai[0] = 1; break;
    case B_ORDER_IDX: if (na > 1) ai[na - 1] = ai[na - 2]; else ai[0] = 1; break;
    case B_IDX_PAST: ai[na - 1] = n; break;
    case B_NATTRS: na = n + 1; ai[n] = n; a[n] = a[0]; break;
    case B_ORDER0: a[R(0, na - 1)].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID; break;
    case B_ORDER7: a[R(0, na - 1)].srcAccessOrder = (CUmemcpySrcAccessOrder)7; break;
    case B_FLAGS: a[R(0, na - 1)].flags = 0x40; break;
    case B_HINT: a[R(0, na - 1)].dstLocHint.type = (CUmemLocationType)99; break;
    case B_LEGACY: st = CU_STREAM_LEGACY; break;
    case B_RANGE2: /* and the last copy too: which one failIdx names */
        past(&d[n - 1], &s[n - 1], &z[n - 1]);
        /* fall through */
    case B_RANGE:
        past(&d[j], &s[j], &z[j]);
        break;
    case B_ZERO: z[j] = 0; break;
    }
    bc_fill(salt);
    busy_before();
    CUdeviceptr *dp = bad == B_NULL && j == 0 ? NULL : d;
    size_t *zp = bad == B_NULL && j == 1 ? NULL : z;
    CUmemcpyAttributes *ap = bad == B_NULL && j >= 2 ? NULL : a;
    CUresult r = v1 ? BC(MemcpyBatchAsync12)(dp, s, zp, cnt, ap, ai, na, &fi, st)
                    : BC(MemcpyBatchAsync)(dp, s, zp, cnt, ap, ai, na, st);
    uint64_t at = 0;
    for (size_t k = 0, m = 0; r == CUDA_SUCCESS && k < n; k++) {
        while (m + 1 < na && ai[m + 1] <= k) /* the attributes copy k has */
            m++;
        landed(&at, kinds[k], k, a[m].srcAccessOrder, 1);
    }
    uint64_t h = bc_hash();
    BC_LOG("%d linear v1=%d bad=%d count=%zu attrs=%zu: %d fail=%lld %016llx at=%016llx\n", i, v1, bad, n, na, r,
           fi == SIZE_MAX ? -1LL : (long long)fi, (unsigned long long)h, (unsigned long long)at);
}

static void case_3d(int i, int v1, int bad)
{
    size_t n = R(1, SLOTS), fi = 0x5a5a, j = R(0, n - 1);
    int kinds[SLOTS];
    CUDA_MEMCPY3D_BATCH_OP ops[SLOTS];
    memset(ops, 0, sizeof ops);
    uint64_t salt = rng_next(&rs);
    for (size_t k = 0; k < n; k++) {
        CUDA_MEMCPY3D_BATCH_OP *o = &ops[k];
        int kind = kinds[k] = R(0, 3) ? (int)R(0, 1) : (int)R(2, 3);
        size_t w = R(1, 1024), h = R(1, 32), dd = R(1, 4);
        size_t rl[2] = {R(0, 1) ? w + R(0, 256) : 0, R(0, 1) ? w + R(0, 256) : 0};
        size_t lh[2] = {R(0, 1) ? h + R(0, 4) : 0, R(0, 1) ? h + R(0, 4) : 0};
        o->extent.width = w, o->extent.height = h, o->extent.depth = dd;
        o->srcAccessOrder = (CUmemcpySrcAccessOrder)R(1, 3);
        o->flags = (unsigned)R(0, 1);
        CUdeviceptr dst, src;
        sides(kind, k, R(0, 4096), &dst, &src);
        o->src.type = o->dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        o->src.op.ptr.ptr = src, o->src.op.ptr.rowLength = rl[0], o->src.op.ptr.layerHeight = lh[0];
        o->dst.op.ptr.ptr = dst, o->dst.op.ptr.rowLength = rl[1], o->dst.op.ptr.layerHeight = lh[1];
        o->src.op.ptr.locHint = hint();
        o->dst.op.ptr.locHint = hint();
    }
    unsigned long long flags = 0;
    CUstream st = S;
    switch (bad) {
    case B3_EXTENT: ops[j].extent.height = 0; break;
    case B3_ROWLEN:
        ops[j].extent.width += ops[j].extent.width < 2;
        ops[j].src.op.ptr.rowLength = ops[j].extent.width - 1;
        break;
    case B3_FLAGS: flags = 1; break;
    case B_ORDER0: ops[j].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID; break;
    case B_ORDER7: ops[j].srcAccessOrder = (CUmemcpySrcAccessOrder)7; break;
    case B_FLAGS: ops[j].flags = 0x40; break;
    case B_HINT: ops[j].src.op.ptr.locHint.type = (CUmemLocationType)99; break;
    case B_LEGACY: st = CU_STREAM_LEGACY; break;
    case B_RANGE: case B_RANGE2:
        (ops[j].dst.op.ptr.ptr >= DEV && ops[j].dst.op.ptr.ptr < DEV + BUF ? &ops[j].dst : &ops[j].src)->op.ptr.ptr =
            DEV + BUF - 8;
        break;
    }
    bc_fill(salt);
    busy_before();
    CUresult r = v1 ? BC(Memcpy3DBatchAsync12)(n, ops, &fi, flags, st) : BC(Memcpy3DBatchAsync)(n, ops, flags, st);
    uint64_t at = 0;
    for (size_t k = 0; r == CUDA_SUCCESS && k < n; k++)
        landed(&at, kinds[k], k, ops[k].srcAccessOrder, ops[k].extent.height * ops[k].extent.depth);
    for (size_t k = 0; BUSY && k < n; k++) /* each op's sides lie in its own slot */
        if (kinds[k] == 0 && ops[k].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL) {
            uint64_t s = salt ^ (k + 1);
            rng_fill(&s, HOST + k * SLOT, SLOT);
        }
    uint64_t h = bc_hash();
    BC_LOG("%d 3d v1=%d bad=%d count=%zu: %d fail=%lld %016llx at=%016llx\n", i, v1, bad, n, r,
           fi == SIZE_MAX ? -1LL : (long long)fi, (unsigned long long)h, (unsigned long long)at);
}

/* The cases, in the current context: the buffers first, then n cases. */
static int batch_cases(int n)
{
    const char *busy = getenv("BC_BUSY");
    BUSY = busy && atoi(busy) > 0;
    HOST = (unsigned char *)malloc(BUF);
    if (!HOST || BC(MemAllocHost)((void **)&PINOP, BUF) || BC(MemAllocHost)((void **)&PIN, BUF) ||
        BC(MemAlloc)(&DEV, BUF) || BC(MemAlloc)(&DEV2, BUF) || BC(StreamCreate)(&S, CU_STREAM_NON_BLOCKING))
        return 31;
    /* behind busy streams the host buffer is first copied whole a few
     * times: pinfast registers a block copied again and again, and the
     * cases then meet its registration */
    memset(HOST, 0, BUF);
    for (int k = 0; BUSY && k < 3; k++) {
        CU(BC(MemcpyHtoD)(DEV, HOST, BUF));
        usleep(5000);
    }
    for (int i = 0; i < n; i++) {
        int bad = R(0, 3) ? OK : (int)R(1, NBAD - 1);
        if (R(0, 2))
            case_linear(i, (int)R(0, 1), bad);
        else
            case_3d(i, (int)R(0, 1), bad);
    }
    return 0;
}

#endif
