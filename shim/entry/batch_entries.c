/* The batch entry points (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync), made
 * from the table (PF_BATCH_ENTRIES): each ABI's arguments, what its copies
 * are and whether they are valid, and its driver call for a part of a
 * batch.  A batch has what it can of its copies staged (batch.c), the
 * others passed to the driver as one smaller batch; it is seen once by the
 * observers (pf_observe_copy). */
#include "batch.h"
#include "copies.h"
#include "../driver/capture.h"
#include "../engine/engine.h"
#include "../engine/shape.h"
#include "../memory/pending_writes.h"
#include "../memory/register.h"
#include "../memory/register_guard.h"

#include <stdint.h>
#include <stdlib.h>

/* A batch is one row of the report: its direction and kind if all copies
 * agree, else mixed; staged when pinfast staged any of its copies. */
struct batch {
    struct pf_route route;
    size_t bytes;
    int n;
};

static void batch_add(struct batch *b, enum pf_mem sk, enum pf_mem dk, size_t bytes) {
    struct pf_route r = pf_route_of(sk, dk);
    if (b->n++ == 0)
        b->route = r;
    if (b->route.dir != r.dir)
        b->route.dir = PF_DIR_MIXED;
    if (b->route.host != r.host)
        b->route.host = PF_MEM_MIXED;
    b->bytes += bytes;
}

static struct batch linear_batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count) {
    struct batch b = {.route = {.dir = PF_DIR_MIXED, .host = PF_MEM_MIXED}};
    for (size_t i = 0; dsts && srcs && sizes && i < count; i++)
        batch_add(&b, pf_classify(srcs[i]), pf_classify(dsts[i]), sizes[i]);
    return b;
}

/* Bytes as the extents give them: elements of 1 byte for pointer operands. */
static struct batch batch3d(const CUDA_MEMCPY3D_BATCH_OP *ops, size_t count) {
    struct batch b = {.route = {.dir = PF_DIR_MIXED, .host = PF_MEM_MIXED}};
    for (size_t i = 0; ops && i < count; i++)
        batch_add(&b, pf_route_operand(&ops[i].src), pf_route_operand(&ops[i].dst),
                  ops[i].extent.width * ops[i].extent.height * ops[i].extent.depth);
    return b;
}

/* Source orders and flags pinfast knows the meaning of; with any other the
 * driver answers.  Location hints change where a managed or HMM operand is
 * moved, never what is copied: pinfast stages with any it knows. */
static int order_known(CUmemcpySrcAccessOrder o, unsigned flags) {
    return o >= CU_MEMCPY_SRC_ACCESS_ORDER_STREAM && o <= CU_MEMCPY_SRC_ACCESS_ORDER_ANY &&
           !(flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE);
}
static int hint_known(CUmemLocation l) {
    int n = 0;
    if (l.type == CU_MEM_LOCATION_TYPE_DEVICE) /* H100: a device that does not exist is refused */
        return l.id >= 0 && PF_CALL(cuDeviceGetCount, &n) == CUDA_SUCCESS && l.id < n;
    return l.type >= CU_MEM_LOCATION_TYPE_INVALID && l.type <= CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

/* One side of a copy, valid as far as pinfast can tell: device memory
 * lying in its allocations, or host memory (pageable or pinned) at an
 * address other than NULL.  Managed or unknown memory pinfast cannot
 * check: its batch goes to the driver. */
static int side_valid(CUdeviceptr p, size_t span) {
    switch (pf_classify(p)) {
    case PF_MEM_DEVICE: return pf_route_device_range(p, span);
    case PF_MEM_PAGEABLE:
    case PF_MEM_PINNED:
    case PF_MEM_PINFAST: return p != 0;
    default: return 0;
    }
}

/* A copy pinfast may take, by its route and source order: an H2D whose
 * source is read in the call (DURING_API_CALL, ANY), as staging reads it.
 * One of stream order (STREAM) stays with the driver; so do D2H copies:
 * the driver does not wait for some of them (one row, order STREAM or ANY:
 * held_waits), and staging one would make the program wait. */
static int batch_takes(struct pf_route rt, CUmemcpySrcAccessOrder o) {
    return rt.dir == PF_DIR_H2D && o != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
}

/* A linear batch's arguments. */
struct linear_args {
    CUdeviceptr *d, *s;
    size_t *z, n;
    CUmemcpyAttributes *a;
    size_t *ai, na;
    CUstream st; /* the program's */
};

/* Well formed as the documentation asks: every array, count and numAttrs
 * (1 to count), attrsIdxs from 0 and increasing below count; every source
 * order and flag one pinfast knows.  Anything else goes to the driver. */
static int linear_valid(const struct linear_args *b) {
    if (!b->n || !b->d || !b->s || !b->z || !b->a || !b->ai || !b->na || b->na > b->n || b->ai[0])
        return 0;
    for (size_t k = 0; k < b->na; k++)
        if ((k && b->ai[k] <= b->ai[k - 1]) || b->ai[k] >= b->n ||
            !order_known(b->a[k].srcAccessOrder, b->a[k].flags) || !hint_known(b->a[k].srcLocHint) ||
            !hint_known(b->a[k].dstLocHint))
            return 0;
    return 1;
}

/* The entry of attrs that copy i has: the last starting at or before it. */
static size_t attr_of(const struct linear_args *b, size_t i) {
    size_t lo = 0, hi = b->na;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        *(b->ai[mid] <= i ? &lo : &hi) = mid;
    }
    return lo;
}

/* A copy of 0 bytes is refused (H100), as is one with a side past its
 * allocation or NULL. */
static int linear_stageable(void *args, size_t i, struct batch_copy *c) {
    const struct linear_args *b = args;
    if (!b->z[i] || !side_valid(b->s[i], b->z[i]) || !side_valid(b->d[i], b->z[i]))
        return COPY_INVALID;
    struct pf_route rt = pf_route_linear(b->d[i], b->s[i], b->z[i], PF_MEM_OPEN, PF_MEM_OPEN, 1);
    if (!(rt.stage || rt.bounce) || !batch_takes(rt, b->a[attr_of(b, i)].srcAccessOrder))
        return COPY_DRIVER;
    c->x.dir = rt.dir;
    c->x.dev = rt.dir == PF_DIR_H2D ? b->d[i] : b->s[i];
    c->x.host = (void *)(rt.dir == PF_DIR_H2D ? b->s[i] : b->d[i]);
    c->x.bytes = b->z[i];
    c->to = rt.bounce ? TO_BOUNCE : TO_ENGINE;
    return COPY_TAKE;
}

/* A copy's registered bytes the driver gets (batch.h's guard): 1 when the
 * batch must be waited for, as the driver, given pageable memory, would
 * have read or written it before returning (H200, probe_batch_d2h and
 * test_batch's refused case).  A source of order DURING_API_CALL: the
 * driver reads pageable memory in the call, registered memory in stream
 * order.  A destination of a copy of more than one row (`rows`, a 3D op's)
 * of order STREAM or ANY: into pageable memory the driver waits for the
 * stream and lands the copy before it returns, into registered memory it
 * does not.  The driver treats the rest alike whatever the host memory:
 * the other orders leave a source to the program until the copy is done,
 * a copy of one row into host memory of those orders is not waited for,
 * and one from device memory of order DURING_API_CALL always is. */
static int held_waits(int src, int dst, CUmemcpySrcAccessOrder o, int rows) {
    if (o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL)
        return src;
    return dst && rows;
}

static int linear_guard(void *args, size_t i) {
    const struct linear_args *b = args;
    return held_waits(pf_register_guard((const void *)(uintptr_t)b->s[i], b->z[i]),
                      pf_register_guard((const void *)(uintptr_t)b->d[i], b->z[i]), b->a[attr_of(b, i)].srcAccessOrder,
                      0);
}

static int linear_overrun(void *args, size_t i) {
    const struct linear_args *b = args;
    if (!pf_register_near((const void *)(uintptr_t)b->s[i], 0) &&
        !pf_register_near((const void *)(uintptr_t)b->d[i], 0))
        return 0;
    struct pf_route rt = pf_route_linear(b->d[i], b->s[i], b->z[i], PF_MEM_OPEN, PF_MEM_OPEN, 1);
    return pf_overruns_hand(rt, rt.dir == PF_DIR_H2D ? b->s[i] : b->d[i], b->z[i]);
}

/* The room a copy takes in a part of a linear batch (linear_part). */
struct linear_copy {
    CUdeviceptr d, s;
    size_t z, ai;
    CUmemcpyAttributes a;
};

/* The copies idx[0..k) as a batch of their own, in scratch, each with its
 * attributes. */
static struct linear_args linear_part(const struct linear_args *b, void *scratch, const size_t *idx, size_t k) {
    CUdeviceptr *d = scratch, *s = d + k;
    size_t *z = (size_t *)(s + k), *ai = z + k;
    CUmemcpyAttributes *a = (CUmemcpyAttributes *)(ai + k);
    struct linear_args o = {.d = d, .s = s, .z = z, .n = k, .a = a, .ai = ai, .st = b->st};
    for (size_t j = 0, last = SIZE_MAX; j < k; j++) {
        size_t i = idx[j], at = attr_of(b, i);
        d[j] = b->d[i], s[j] = b->s[i], z[j] = b->z[i];
        if (at != last)
            a[o.na] = b->a[at], ai[o.na++] = j, last = at;
    }
    return o;
}

/* A 3D batch's arguments. */
struct ops_args {
    CUDA_MEMCPY3D_BATCH_OP *ops;
    CUstream st; /* the program's */
};

/* The op's parameters as the driver checks every op's before it moves
 * any (H100): pointer operands only (pinfast passes a batch with an array
 * through), a whole extent, rowLength and layerHeight 0 or at least the
 * extent, a source order and flags pinfast knows.  A location hint of a
 * type the driver does not know it takes in a 3D op (H100: type 99); one
 * naming a device is not probed there, so one that does not exist is left
 * to the driver. */
static int op_checked(void *args, size_t i) {
    const CUDA_MEMCPY3D_BATCH_OP *o = &((const struct ops_args *)args)->ops[i];
    const CUextent3D *e = &o->extent;
    const CUmemcpy3DOperand *side[2] = {&o->src, &o->dst};
    for (int k = 0; k < 2; k++)
        if (side[k]->type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
            (side[k]->op.ptr.locHint.type == CU_MEM_LOCATION_TYPE_DEVICE && !hint_known(side[k]->op.ptr.locHint)) ||
            (side[k]->op.ptr.rowLength && side[k]->op.ptr.rowLength < e->width) ||
            (side[k]->op.ptr.layerHeight && side[k]->op.ptr.layerHeight < e->height))
            return 0;
    return order_known(o->srcAccessOrder, o->flags) && e->width && e->height && e->depth;
}

/* A pointer operand's bytes, as if host memory (host 0: an array). */
static struct pf_rows op_rows(const CUmemcpy3DOperand *o, const CUextent3D *e) {
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER)
        return (struct pf_rows){0};
    return pf_side_rows(CU_MEMORYTYPE_HOST, (const void *)(uintptr_t)o->op.ptr.ptr, 0, 0, 0, 0,
                        o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height,
                        o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width, e->width, e->height, e->depth);
}

/* An op made into a 3D copy of unified pointers: rows rowLength bytes
 * apart (0: the width), layers layerHeight rows (0: the height); shape.c
 * checks it as any 3D copy.  Valid: its parameters (op_checked), each side
 * in its memory (side_valid). */
static int op_stageable(void *args, size_t i, struct batch_copy *c) {
    const CUDA_MEMCPY3D_BATCH_OP *o = &((const struct ops_args *)args)->ops[i];
    const CUextent3D *e = &o->extent;
    if (!op_checked(args, i))
        return COPY_INVALID;
    CUDA_MEMCPY3D m = {
        .srcMemoryType = CU_MEMORYTYPE_UNIFIED,
        .srcDevice = o->src.op.ptr.ptr,
        .srcPitch = o->src.op.ptr.rowLength ? o->src.op.ptr.rowLength : e->width,
        .srcHeight = o->src.op.ptr.layerHeight ? o->src.op.ptr.layerHeight : e->height,
        .dstMemoryType = CU_MEMORYTYPE_UNIFIED,
        .dstDevice = o->dst.op.ptr.ptr,
        .dstPitch = o->dst.op.ptr.rowLength ? o->dst.op.ptr.rowLength : e->width,
        .dstHeight = o->dst.op.ptr.layerHeight ? o->dst.op.ptr.layerHeight : e->height,
        .WidthInBytes = e->width,
        .Height = e->height,
        .Depth = e->depth,
    };
    size_t rows = (e->depth - 1) * m.srcHeight + e->height - 1, drows = (e->depth - 1) * m.dstHeight + e->height - 1;
    if (!side_valid(m.srcDevice, rows * m.srcPitch + e->width) ||
        !side_valid(m.dstDevice, drows * m.dstPitch + e->width))
        return COPY_INVALID;
    struct pf_route rt = SHAPE_ROUTE(&m);
    struct pf_rows h = op_rows(&o->src, e);
    /* taken as a lone pitched copy is (route.h) */
    int take = pf_route_pitched(rt, bytes_3d(&m), 1, h.exact, h.lo, h.span);
    c->to = TO_ENGINE;
    if (!take || !batch_takes(rt, o->srcAccessOrder))
        return COPY_DRIVER;
    if (!pf_shape_3d(&m, rt, &c->x, &c->s))
        return take == PF_TAKE_HELD ? COPY_DRIVER : COPY_INVALID;
    c->x.held_only |= take == PF_TAKE_HELD;
    return COPY_TAKE;
}

static int op_guard(void *args, size_t i) {
    const CUDA_MEMCPY3D_BATCH_OP *o = &((const struct ops_args *)args)->ops[i];
    return held_waits(pf_rows_guard(op_rows(&o->src, &o->extent)), pf_rows_guard(op_rows(&o->dst, &o->extent)),
                      o->srcAccessOrder, o->extent.height > 1 || o->extent.depth > 1);
}

static int op_overrun(void *args, size_t i) {
    const CUDA_MEMCPY3D_BATCH_OP *o = &((const struct ops_args *)args)->ops[i];
    struct pf_rows src = op_rows(&o->src, &o->extent), dst = op_rows(&o->dst, &o->extent);
    if (!(src.host && pf_register_near((const void *)src.lo, 0)) &&
        !(dst.host && pf_register_near((const void *)dst.lo, 0)))
        return 0;
    struct pf_route rt = pf_route_of(pf_route_operand(&o->src), pf_route_operand(&o->dst));
    struct pf_rows h = rt.dir == PF_DIR_H2D ? src : dst;
    return h.exact && pf_overruns_hand(rt, h.lo, h.span);
}

static CUDA_MEMCPY3D_BATCH_OP *ops_part(const struct ops_args *b, void *scratch, const size_t *idx, size_t k) {
    CUDA_MEMCPY3D_BATCH_OP *p = scratch;
    for (size_t j = 0; j < k; j++)
        p[j] = b->ops[idx[j]];
    return p;
}

/* The body of a batch's wrapper: `valid` says the batch is well formed,
 * `args` its arguments for `stageable` and `part` (the driver's call for a
 * part of it).  One refused on the legacy stream moved nothing (H100). */
#define BATCHED(family, ptds, describe, valid, args, stageable, part, guard, overrun, checked, scratch, n, st, fail, \
                v1, call) \
    do { \
        if (!pf_enter()) \
            return call; \
        pf_pending_wait(NULL, (size_t)-1); \
        struct batch b_ = describe; \
        struct pf_copy_seen c_; \
        int noted_ = 0; \
        pf_observe_start(&c_, PF_API_##family, b_.bytes, 1); \
        c_.dir = b_.route.dir; \
        c_.host = b_.route.host; \
        c_.path = PF_PATH_PASSTHROUGH; \
        __typeof__(args) a_ = args; \
        struct batch_abi abi_ = {&a_, stageable, part, scratch, explicit_stream(st, ptds), guard, overrun, checked}; \
        int valid_ = valid; \
        FINISH(valid_ && (pf_batch_refused(&c_, &abi_, n, fail, v1) || pf_batch_stage(&c_, &abi_, n, fail, v1)), \
               b_.bytes, pf_batch_guard_all(&abi_, n, valid_), abi_.stream, abi_.stream != CU_STREAM_LEGACY, call); \
    } while (0)

/* The 12.8 ABIs (failIdx) and the 13.0 ones: sym##_part is the driver's
 * call for a part of the batch. */
#define LINEAR_ARGS ((struct linear_args){d, s, z, n, a, ai, na, st})
#define WRAP_BATCH_V1(family, ptds, sym) \
    static CUresult sym##_part(void *b, void *scratch, const size_t *idx, size_t k, size_t *fail) { \
        struct linear_args o = linear_part(b, scratch, idx, k); \
        return PF_CALL(sym, o.d, o.s, o.z, o.n, o.a, o.ai, o.na, fail, o.st); \
    } \
    PF_API CUresult sym(CUdeviceptr *d, CUdeviceptr *s, size_t *z, size_t n, CUmemcpyAttributes *a, size_t *ai, \
                        size_t na, size_t *fail, CUstream st) { \
        BATCHED(family, ptds, linear_batch(d, s, z, n), linear_valid(&a_), LINEAR_ARGS, linear_stageable, sym##_part, \
                linear_guard, linear_overrun, NULL, sizeof(struct linear_copy), n, st, fail, 1, \
                PF_CALL(sym, d, s, z, n, a, ai, na, fail, st)); \
    }
#define WRAP_BATCH_V2(family, ptds, sym) \
    static CUresult sym##_part(void *b, void *scratch, const size_t *idx, size_t k, size_t *fail) { \
        struct linear_args o = linear_part(b, scratch, idx, k); \
        (void)fail; \
        return PF_CALL(sym, o.d, o.s, o.z, o.n, o.a, o.ai, o.na, o.st); \
    } \
    PF_API CUresult sym(CUdeviceptr *d, CUdeviceptr *s, size_t *z, size_t n, CUmemcpyAttributes *a, size_t *ai, \
                        size_t na, CUstream st) { \
        BATCHED(family, ptds, linear_batch(d, s, z, n), linear_valid(&a_), LINEAR_ARGS, linear_stageable, sym##_part, \
                linear_guard, linear_overrun, NULL, sizeof(struct linear_copy), n, st, NULL, 0, \
                PF_CALL(sym, d, s, z, n, a, ai, na, st)); \
    }
/* flags must be 0: any other goes to the driver */
#define OPS_ARGS ((struct ops_args){ops, st})
#define WRAP_BATCH3D_V1(family, ptds, sym) \
    static CUresult sym##_part(void *b, void *scratch, const size_t *idx, size_t k, size_t *fail) { \
        return PF_CALL(sym, k, ops_part(b, scratch, idx, k), fail, 0, ((struct ops_args *)b)->st); \
    } \
    PF_API CUresult sym(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail, unsigned long long f, CUstream st) { \
        BATCHED(family, ptds, batch3d(ops, n), n &&ops && !f, OPS_ARGS, op_stageable, sym##_part, op_guard, \
                op_overrun, op_checked, sizeof *ops, n, st, fail, 1, PF_CALL(sym, n, ops, fail, f, st)); \
    }
#define WRAP_BATCH3D_V2(family, ptds, sym) \
    static CUresult sym##_part(void *b, void *scratch, const size_t *idx, size_t k, size_t *fail) { \
        (void)fail; \
        return PF_CALL(sym, k, ops_part(b, scratch, idx, k), 0, ((struct ops_args *)b)->st); \
    } \
    PF_API CUresult sym(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long f, CUstream st) { \
        BATCHED(family, ptds, batch3d(ops, n), n &&ops && !f, OPS_ARGS, op_stageable, sym##_part, op_guard, \
                op_overrun, op_checked, sizeof *ops, n, st, NULL, 0, PF_CALL(sym, n, ops, f, st)); \
    }

PF_BATCH_ENTRIES(PF_WRAP)
