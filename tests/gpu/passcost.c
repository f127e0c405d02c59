/* passcost: what one small copy costs through the driver API, to tell
 * pinfast's share of a passed-through copy from the harness's run-to-run
 * noise.  Times N 4-byte cuMemcpyHtoDAsync and N cuMemcpyDtoHAsync on a
 * non-blocking stream (synchronised every 1000) from pageable memory, best
 * of 5 rounds, and prints ns per call.  Run it without and with pinfast,
 * interleaved (tests/gpu/passcost.sh).
 * cc -O2 -I$CUDA/include passcost.c -L$CUDA/lib64/stubs -lcuda */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_) {                                                              \
            fprintf(stderr, "%s: %d\n", #x, (int)r_);                          \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    CUdevice dev;
    CUcontext ctx;
    CUstream st;
    CUdeviceptr d;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&d, 4096));
    unsigned *h = malloc(4096);
    for (int i = 0; i < 1024; i++)
        h[i] = (unsigned)rand();
    double best[2] = {1e9, 1e9};
    for (int round = 0; round < 5; round++)
        for (int dir = 0; dir < 2; dir++) {
            double t0 = now();
            for (int i = 0; i < n; i++) {
                if (dir == 0)
                    CK(cuMemcpyHtoDAsync(d + 4 * (i & 1023), h + (i & 1023), 4, st));
                else
                    CK(cuMemcpyDtoHAsync(h + (i & 1023), d + 4 * (i & 1023), 4, st));
                if (i % 1000 == 999)
                    CK(cuStreamSynchronize(st));
            }
            CK(cuStreamSynchronize(st));
            double ns = (now() - t0) / n * 1e9;
            if (ns < best[dir])
                best[dir] = ns;
        }
    /* the data made it: h holds what went out and came back */
    printf("{\"h2d_async_ns\":%.1f,\"d2h_async_ns\":%.1f,\"calls\":%d}\n", best[0], best[1], n);
    return 0;
}
