/* probe_bouncecost.c - what each driver call a bounced 4-byte asynchronous
 * H2D makes costs, in one process (the VM's processes run at one of two
 * speeds): batches of 2000 calls of each kind, back to back on one
 * non-blocking stream, a synchronisation after each batch; the median ns
 * per call of 7 batches.  Without pinfast.
 *   probe_bouncecost */
#include <cuda.h>
#include "../probe.h"

#define N 2000
#define BATCHES 7

static CUstream st;
static CUdeviceptr dev;
static char *pageable, *pinned;
static CUevent ev[N];

static void pageable_copy(int i) { CK(cuMemcpyHtoDAsync(dev + 64 * i, pageable + 64 * i, 4, st)); }
static void pinned_copy(int i) { CK(cuMemcpyHtoDAsync(dev + 64 * i, pinned + 64 * i, 4, st)); }
static void pinned_fenced(int i) { pinned_copy(i); CK(cuEventRecord(ev[i], st)); }
static void record(int i) { CK(cuEventRecord(ev[i], st)); }
static void query(int i) { (void)cuEventQuery(ev[i]); }
static void capturing(int i) {
    (void)i;
    CUstreamCaptureStatus cs;
    CK(cuStreamIsCapturing(st, &cs));
}
static void attributes(int i) {
    unsigned type = 0;
    int managed = 0, ordinal = -1;
    CUpointer_attribute a[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    void *v[3] = {&type, &managed, &ordinal};
    CK(cuPointerGetAttributes(3, a, v, dev + 64 * i));
}
static void range(int i) {
    CUdeviceptr base;
    size_t size;
    CK(cuMemGetAddressRange(&base, &size, dev + 64 * i));
}
static void ctx_current(int i) {
    (void)i;
    CUcontext c;
    CK(cuCtxGetCurrent(&c));
}

int main(void) {
    probe_context();
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&dev, 64 * N));
    pageable = malloc(64 * N);
    void *h;
    CK(cuMemAllocHost(&h, 64 * N));
    pinned = h;
    memset(pageable, 1, 64 * N);
    memset(pinned, 1, 64 * N);
    for (int i = 0; i < N; i++)
        CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
    struct { const char *name; void (*f)(int); } kinds[] = {
        {"cuMemcpyHtoDAsync 4 B pageable", pageable_copy}, {"cuMemcpyHtoDAsync 4 B pinned", pinned_copy},
        {"  the same + cuEventRecord", pinned_fenced}, {"cuEventRecord alone", record},
        {"cuEventQuery (recorded, over)", query}, {"cuStreamIsCapturing", capturing},
        {"cuPointerGetAttributes (3)", attributes}, {"cuMemGetAddressRange", range},
        {"cuCtxGetCurrent", ctx_current}};
    for (int round = 0; round < 2; round++)
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
            double v[BATCHES];
            for (int b = 0; b < BATCHES; b++) {
                double t0 = probe_now();
                for (int i = 0; i < N; i++)
                    kinds[k].f(i);
                double t1 = probe_now();
                CK(cuCtxSynchronize());
                v[b] = (t1 - t0) / N * 1e9;
            }
            if (round)
                printf("%-34s %7.0f ns a call\n", kinds[k].name, probe_median(v, BATCHES));
        }
    return 0;
}
