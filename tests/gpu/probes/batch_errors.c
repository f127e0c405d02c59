/* batch_errors: the real driver's answers to bad batches
 * (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync, the 12.8 ABIs with failIdx),
 * each printed beside what the fake driver answers (tests/fake/fake_copy.c;
 * on the H100 on 2026-11-24 (batch-probe.log in docs/results/2026-11-24-h100-registration-cache/logs.log), the
 * fake was brought to the driver's
 * answer on every line), which the equivalence test
 * (tests/test_batch.c) rests on; and what pinfast assumes of batches
 * (shim/entry/batch_entries.c): what failIdx holds after a success, which
 * copies a refused batch moves, that a pageable source of stream order is
 * read in stream order and one of the other orders in the call, whether a
 * pageable D2H has landed when the call returns.  A line whose "fake"
 * differs from "driver" is a difference to fix in the fake.  Plain driver
 * only; no pinfast.
 * Build: gcc -O2 -I/usr/local/cuda/include -o batch_errors tests/gpu/probes/batch_errors.c -lcuda -lpthread */
#include <cuda.h>
#include <stdint.h>
#include <unistd.h>

#include "../probe.h"

typedef CUresult (*batch_v1)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *,
                             size_t, size_t *, CUstream);
typedef CUresult (*batch3d_v1)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long, CUstream);

#define N 3
#define Z ((size_t)1 << 20)
#define UNSET ((size_t)12345)
#define NOFAKE (-2)

static batch_v1 b12;
static batch3d_v1 b3d12;
static CUdeviceptr dev;
static unsigned char *host, *back;
static CUstream S;
static CUdeviceptr d[N], s[N];
static size_t z[N], ai[N + 1], na, fi;
static CUmemcpyAttributes a[N + 1];
static int diffs;

/* The call's code and failIdx (fi, read after the call), printed as a
 * signed number: -1 is SIZE_MAX, 12345 untouched. */
static void line(const char *what, CUresult got, int fake, long long ffake) {
    long long fl = fi == SIZE_MAX ? -1 : (long long)fi;
    printf("%-58s driver %3d failIdx %6lld", what, got, fl);
    if (fake == NOFAKE) {
        printf("   fake -\n");
        return;
    }
    int differ = (int)got != fake || fl != ffake;
    printf("   fake %3d failIdx %6lld%s\n", fake, ffake, differ ? "   DIFFERENT" : "");
    diffs += differ;
}

/* A valid batch of N pageable H2D copies of 1 MiB, source order ANY. */
static void valid(void) {
    for (int i = 0; i < N; i++) {
        d[i] = dev + (size_t)i * Z;
        s[i] = (CUdeviceptr)(uintptr_t)(host + (size_t)i * Z);
        z[i] = Z;
    }
    memset(a, 0, sizeof a);
    a[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
    ai[0] = 0;
    na = 1;
    fi = UNSET;
}

static CUresult run(void) {
    CUresult r = b12(d, s, z, N, a, ai, na, &fi, S);
    CK(cuCtxSynchronize());
    return r;
}

#define CASE(what, change, fake, ffake)                                        \
    do {                                                                       \
        valid();                                                               \
        change;                                                                \
        CUresult r1 = run();                                                   \
        line(what, r1, fake, ffake);                                    \
    } while (0)

static void CUDA_CB writer(void *p) {
    usleep(20000);
    memset(p, 0xAB, Z);
}

/* What a batch H2D of source order o moved from 0x11 bytes, with a host
 * function queued before it writing 0xAB (stream order) or the program
 * writing 0x22 right after the call (the others). */
static void order(CUmemcpySrcAccessOrder o, const char *name) {
    valid();
    a[0].srcAccessOrder = o;
    memset(host, 0x11, Z);
    if (o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)
        CK(cuLaunchHostFunc(S, writer, host));
    CUresult r = b12(d, s, z, 1, a, ai, 1, &fi, S);
    if (o != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)
        memset(host, 0x22, Z);
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(back, dev, Z));
    printf("H2D source order %-16s driver %3d: device has %#x (fake and pinfast: %#x)\n", name, r, back[0],
           o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ? 0xAB : 0x11);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); /* what was printed before a crash stays */
    probe_context();
    int ver;
    CK(cuDriverGetVersion(&ver));
    printf("driver version %d\n", ver);
    CUdriverProcAddressQueryResult q;
    CK(cuGetProcAddress("cuMemcpyBatchAsync", (void **)&b12, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CK(cuGetProcAddress("cuMemcpy3DBatchAsync", (void **)&b3d12, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CK(cuMemAlloc(&dev, N * Z));
    CK(cuStreamCreate(&S, CU_STREAM_NON_BLOCKING));
    host = malloc(N * Z);
    back = malloc(Z);
    memset(host, 0x11, N * Z);

    CASE("valid (failIdx after a success)", (void)0, 0, -1);
    {
        CUresult r;
        valid();
        r = b12(d, s, z, 0, a, ai, na, &fi, S);
        line("count 0", r, 1, -1);
        valid();
        r = b12(NULL, s, z, N, a, ai, na, &fi, S);
        line("dsts NULL", r, 1, -1);
        valid();
        r = b12(d, s, NULL, N, a, ai, na, &fi, S);
        line("sizes NULL", r, 1, -1);
        valid();
        r = b12(d, s, z, N, NULL, ai, na, &fi, S);
        line("attrs NULL", r, 1, -1);
        valid();
        r = b12(d, s, z, N, a, NULL, na, &fi, S);
        line("attrsIdxs NULL", r, 1, -1);
        valid();
        r = b12(d, s, z, N, a, ai, 0, &fi, S);
        line("numAttrs 0", r, 1, -1);
        valid();
        fi = SIZE_MAX;
        r = b12(d, s, z, N, a, ai, na, NULL, S);
        CK(cuCtxSynchronize());
        line("failIdx NULL, valid", r, NOFAKE, 0);
        valid();
        z[1] = 0;
        d[2] = dev + N * Z - 8;
        fi = SIZE_MAX;
        r = b12(d, s, z, N, a, ai, na, NULL, S);
        line("failIdx NULL, copy 2 past the allocation", r, NOFAKE, 0);
        valid();
        r = b12(d, s, z, N, a, ai, na, &fi, 0);
        line("legacy stream (0)", r, 1, (long long)UNSET);
        valid();
        r = b12(d, s, z, N, a, ai, na, &fi, CU_STREAM_PER_THREAD);
        CK(cuCtxSynchronize());
        line("CU_STREAM_PER_THREAD", r, 0, -1);
    }
    CASE("numAttrs 4 > count 3", (na = 4, ai[1] = 1, ai[2] = 2, ai[3] = 2, a[3] = a[2] = a[1] = a[0]), 1, -1);
    CASE("attrsIdxs[0] 1", ai[0] = 1, 1, -1);
    CASE("attrsIdxs {0, 2, 1}", (na = 3, ai[1] = 2, ai[2] = 1, a[2] = a[1] = a[0]), 1, -1);
    CASE("attrsIdxs {0, 3}: past the count", (na = 2, ai[1] = 3, a[1] = a[0]), 1, -1);
    CASE("srcAccessOrder 0 (INVALID), attrs {0, 1}, the second", (na = 2, ai[1] = 1, a[1].srcAccessOrder = 0), 1, -1);
    CASE("srcAccessOrder 0 (INVALID), the only entry", a[0].srcAccessOrder = 0, 1, -1);
    CASE("srcAccessOrder 7", a[0].srcAccessOrder = (CUmemcpySrcAccessOrder)7, 1, -1);
    CASE("flags 0x40", a[0].flags = 0x40, 1, -1);
    CASE("flags PREFER_OVERLAP_WITH_COMPUTE", a[0].flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE, 0, -1);
    CASE("dstLocHint type 99", a[0].dstLocHint.type = (CUmemLocationType)99, 1, -1);
    CASE("dstLocHint device 0 (device memory)", a[0].dstLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE, 0, -1);
    CASE("srcLocHint host (pageable)", a[0].srcLocHint.type = CU_MEM_LOCATION_TYPE_HOST, 0, -1);
    CASE("srcLocHint device 7 (no such device)", (a[0].srcLocHint.type = CU_MEM_LOCATION_TYPE_DEVICE,
                                                  a[0].srcLocHint.id = 7), 1, -1);
    CASE("size 0 for copy 1", z[1] = 0, 1, 1);
    CASE("copy 1 past the allocation", d[1] = dev + N * Z - 8, 1, 1);
    CASE("copies 1 and 2 past the allocation", (d[1] = dev + N * Z - 8, d[2] = dev + N * Z - 4), 1, 1);
    CASE("copy 2 past, copy 1 NULL source", (d[2] = dev + N * Z - 4, s[1] = 0), 1, 1);
    CASE("copy 0 device to device, copy 1 past", (s[0] = dev + 2 * Z, z[0] = 4096, d[1] = dev + N * Z - 8), 1, 1);
    {
        /* a refused batch: did copy 0 move? */
        valid();
        memset(back, 0, Z);
        CK(cuMemcpyHtoD(dev, back, Z));
        memset(host, 0x5c, Z);
        d[2] = dev + N * Z - 8;
        CUresult r = run();
        CK(cuMemcpyDtoH(back, dev, Z));
        printf("refused batch (copy 2 past): driver %d, copy 0 %s (fake: moved)\n", r,
               back[0] == 0x5c ? "MOVED" : "not moved");
        memset(host, 0x11, N * Z);
    }
    {
        /* capture */
        CUgraph g;
        valid();
        CK(cuStreamBeginCapture(S, CU_STREAM_CAPTURE_MODE_RELAXED));
        CUresult r = b12(d, s, z, N, a, ai, na, &fi, S);
        CUresult e = cuStreamEndCapture(S, &g);
        line("during a capture (relaxed)", r, 900, -1);
        printf("  cuStreamEndCapture after it: %d\n", e);
        if (!e)
            cuGraphDestroy(g);
    }
    order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, "STREAM");
    order(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL, "DURING_API_CALL");
    order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY, "ANY");
    {
        /* a pageable D2H: landed when the call returns? (the fake: no; pinfast passes it through) */
        memset(back, 0x77, Z);
        CK(cuMemcpyHtoD(dev, back, Z));
        CK(cuCtxSynchronize());
        memset(back, 0, Z);
        valid();
        d[0] = (CUdeviceptr)(uintptr_t)back;
        s[0] = dev;
        CUresult r = b12(d, s, z, 1, a, ai, 1, &fi, S);
        int landed = back[Z - 1] == 0x77;
        CK(cuCtxSynchronize());
        printf("pageable D2H: driver %d, %s when the call returned (fake and pinfast: not waited for)\n", r,
               landed ? "landed" : "NOT landed");
    }
    /* 3D batches */
    {
        CUDA_MEMCPY3D_BATCH_OP ops[2];
        memset(ops, 0, sizeof ops);
        for (int i = 0; i < 2; i++) {
            ops[i].src.type = ops[i].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
            ops[i].src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)(host + i * Z);
            ops[i].dst.op.ptr.ptr = dev + i * Z;
            ops[i].extent.width = 1000, ops[i].extent.height = 100, ops[i].extent.depth = 2;
            ops[i].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
        }
        CUDA_MEMCPY3D_BATCH_OP o[2];
#define CASE3(what, change, flags, fake, ffake)                                \
    do {                                                                       \
        memcpy(o, ops, sizeof o);                                              \
        change;                                                                \
        fi = UNSET;                                                            \
        CUresult r3 = b3d12(2, o, &fi, flags, S);                              \
        CK(cuCtxSynchronize());                                                \
        line(what, r3, fake, ffake);                                       \
    } while (0)
        CASE3("3D valid (failIdx after a success)", (void)0, 0, 0, -1);
        CASE3("3D flags 1", (void)0, 1, 1, -1);
        CASE3("3D op 1 height 0", o[1].extent.height = 0, 0, 1, 1);
        CASE3("3D op 1 rowLength 999 < width 1000", o[1].src.op.ptr.rowLength = 999, 0, 1, 1);
        CASE3("3D op 1 layerHeight 99 < height 100", o[1].dst.op.ptr.layerHeight = 99, 0, 1, 1);
        CASE3("3D op 1 rowLength 1200, layerHeight 120", (o[1].src.op.ptr.rowLength = 1200,
                                                         o[1].src.op.ptr.layerHeight = 120), 0, 0, -1);
        CASE3("3D op 1 srcAccessOrder 0", o[1].srcAccessOrder = 0, 0, 1, 1);
        CASE3("3D op 1 srcAccessOrder 7", o[1].srcAccessOrder = (CUmemcpySrcAccessOrder)7, 0, 1, 1);
        CASE3("3D op 1 flags 0x40", o[1].flags = 0x40, 0, 1, 1);
        CASE3("3D op 0 locHint type 99", o[0].src.op.ptr.locHint.type = (CUmemLocationType)99, 0, 0, -1);
        CASE3("3D op 1 past the allocation", o[1].dst.op.ptr.ptr = dev + N * Z - 8, 0, 1, -1);
        CASE3("3D op 1 operand type 0", o[1].dst.type = (CUmemcpy3DOperandType)0, 0, 1, 1);
        CUresult r;
        fi = UNSET;
        r = b3d12(0, ops, &fi, 0, S);
        line("3D numOps 0", r, 1, -1);
        fi = UNSET;
        r = b3d12(2, ops, &fi, 0, 0);
        line("3D legacy stream", r, 1, (long long)UNSET);
    }
    printf("%d differences between the driver and the fake\n", diffs);
    return 0;
}
