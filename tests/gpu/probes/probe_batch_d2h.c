/* probe_batch_d2h: what the driver does with a D2H copy into host memory
 * given in a batch (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync, by source
 * order) or alone (cuMemcpyDtoHAsync), by size, by the kind of host memory
 * (pageable, or registered with cuMemHostRegister) and by the stream (idle,
 * or behind a host function of 100 ms): how long the call took, and
 * whether the bytes had landed when it returned.  `probe_batch_d2h shapes`:
 * a 3D batch's D2H into pageable memory behind work, by its size and the
 * size of its rows.  pinfast waits after a batch whose
 * host bytes a registration of its own holds only where the driver, given
 * pageable memory, would have made the program wait
 * (shim/entry/batch_entries.c). */
#define _GNU_SOURCE
#include <cuda.h>
#include <unistd.h>

#include "../probe.h"

typedef CUresult (*batch_v1)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *, size_t,
                             size_t *, CUstream);
typedef CUresult (*batch3d_v1)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long, CUstream);

#define HOLD_US 100000

static batch_v1 b12;
static batch3d_v1 b3d12;

static void CUDA_CB hold(void *arg) {
    (void)arg;
    usleep(HOLD_US);
}

/* One D2H of n bytes from dev into h by `api` (0 alone, 1 linear batch,
 * 2 3D batch of rows of `row` bytes, packed; source order o) on st: the
 * call's ms, and whether h's first and last bytes held the device's when
 * it returned. */
static double one(int api, CUmemcpySrcAccessOrder o, unsigned char *h, CUdeviceptr dev, size_t n, size_t row,
                  CUstream st, int *landed) {
    CUmemcpyAttributes a = {.srcAccessOrder = o};
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)h;
    size_t idx = 0, fi = 0, z = n;
    CUDA_MEMCPY3D_BATCH_OP op;
    memset(&op, 0, sizeof op);
    op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.src.op.ptr.ptr = dev;
    op.dst.op.ptr.ptr = d;
    op.extent.width = n < row ? n : row;
    op.extent.height = n / op.extent.width;
    op.extent.depth = 1;
    op.srcAccessOrder = o;
    double t0 = probe_now();
    CUresult r = api == 0   ? cuMemcpyDtoHAsync(h, dev, n, st)
                 : api == 1 ? b12(&d, &dev, &z, 1, &a, &idx, 1, &fi, st)
                            : b3d12(1, &op, &fi, 0, st);
    double ms = (probe_now() - t0) * 1e3;
    *landed = h[0] == 0x5a && h[n - 1] == 0x5a;
    if (r) {
        fprintf(stderr, "probe_batch_d2h: api %d returned %d\n", api, r);
        exit(1);
    }
    return ms;
}

/* A 3D batch's D2H into pageable memory behind work, by the size of the
 * copy and of its rows: from which does the driver wait for the stream? */
static int shapes(unsigned char *h, CUdeviceptr dev, CUstream st) {
    static const size_t rows[] = {1024, 4096, 65536, 1 << 20};
    static const size_t sizes[] = {64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20};
    printf("%-16s %9s %9s %9s %s\n", "source order", "bytes", "row", "call ms", "landed at return");
    for (int oi = 0; oi < 2; oi++)
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
            for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
                int landed;
                if (rows[r] > sizes[i] || sizes[i] / rows[r] > 1024)
                    continue;
                CK(cuCtxSynchronize());
                memset(h, 0, sizes[i]);
                CK(cuLaunchHostFunc(st, hold, NULL));
                double ms = one(2, oi ? CU_MEMCPY_SRC_ACCESS_ORDER_STREAM : CU_MEMCPY_SRC_ACCESS_ORDER_ANY, h, dev,
                                sizes[i], rows[r], st, &landed);
                CK(cuStreamSynchronize(st));
                printf("%-16s %9zu %9zu %9.3f %s\n", oi ? "STREAM" : "ANY", sizes[i], rows[r], ms,
                       landed ? "yes" : "no");
            }
    return 0;
}

int main(int argc, char **argv) {
    static const size_t sizes[] = {64 << 10, 2 << 20, 16 << 20};
    static const char *const apis[] = {"cuMemcpyDtoHAsync", "cuMemcpyBatchAsync", "cuMemcpy3DBatchAsync"};
    static const CUmemcpySrcAccessOrder orders[] = {CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL,
                                                    CU_MEMCPY_SRC_ACCESS_ORDER_ANY, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    static const char *const order_names[] = {"DURING_API_CALL", "ANY", "STREAM"};
    CUstream st;
    CUdeviceptr dev;
    CUdriverProcAddressQueryResult qr;
    int ver;
    probe_context();
    CK(cuDriverGetVersion(&ver));
    CK(cuGetProcAddress("cuMemcpyBatchAsync", (void **)&b12, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &qr));
    CK(cuGetProcAddress("cuMemcpy3DBatchAsync", (void **)&b3d12, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &qr));
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    size_t max = 16 << 20;
    CK(cuMemAlloc(&dev, max));
    unsigned char *host[2];
    for (int k = 0; k < 2; k++) {
        host[k] = aligned_alloc(4096, max);
        memset(host[k], 0x5a, max);
    }
    CK(cuMemcpyHtoD(dev, host[0], max));
    printf("driver version %d\n", ver);
    if (argc > 1 && !strcmp(argv[1], "shapes"))
        return shapes(host[0], dev, st);
    CK(cuMemHostRegister(host[1], max, 0));
    printf("%-22s %-16s %9s %-10s %-6s %9s %s\n", "api", "source order", "bytes", "host", "stream", "call ms",
           "landed at return");
    for (int api = 0; api < 3; api++)
        for (int oi = 0; oi < (api ? 3 : 1); oi++)
            for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
                for (int k = 0; k < 2; k++)
                    for (int busy = 0; busy < 2; busy++) {
                        int landed;
                        CK(cuCtxSynchronize());
                        memset(host[k], 0, sizes[i]);
                        if (busy)
                            CK(cuLaunchHostFunc(st, hold, NULL));
                        double ms = one(api, orders[oi], host[k], dev, sizes[i], 65536, st, &landed);
                        CK(cuStreamSynchronize(st));
                        if (host[k][0] != 0x5a || host[k][sizes[i] - 1] != 0x5a) {
                            fprintf(stderr, "probe_batch_d2h: the copy did not land\n");
                            return 1;
                        }
                        printf("%-22s %-16s %9zu %-10s %-6s %9.3f %s\n", apis[api], api ? order_names[oi] : "-",
                               sizes[i], k ? "registered" : "pageable", busy ? "busy" : "idle", ms,
                               landed ? "yes" : "no");
                    }
    CK(cuMemHostUnregister(host[1]));
    return 0;
}
