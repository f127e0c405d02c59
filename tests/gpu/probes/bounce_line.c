/* bounce_line: where the line between bouncing, staging and passing through
 * falls for an asynchronous H2D from pageable memory (docs/design.md, the
 * bounce area).  For each size, from malloc'd memory, on a stream:
 *   return_us: the time until cuMemcpyHtoDAsync returns when the stream is
 *              busy with ~BUSY_MS of device work queued before it (memsets:
 *              no module needed); the driver waits for that work first;
 *   copy_gbps: the copy's own throughput, between events recorded before
 *              and after it, behind the same busy stream;
 *   idle_us:   on an idle stream, the call plus a stream synchronisation;
 *   burst_us:  the time until BURST copies of the size (16 MiB at most in
 *              all) made back to back behind the busy stream have all
 *              returned: the driver stages small copies without waiting
 *              only as long as its own staging memory lasts.
 * Medians of REPS.  Run it plain, and preloaded with PINFAST_BOUNCE=0 and
 * at the defaults (bounce_line.sh runs the three).  The first argument
 * labels the table.
 * cc -O2 -I$CUDA/include bounce_line.c -L$CUDA/lib64/stubs -lcuda */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../probe.h"

#define REPS 21
#define BUSY_MS 5.0
#define BURST 256

int main(int argc, char **argv) {
    const char *label = argc > 1 ? argv[1] : "run";
    static const size_t sizes[] = {1, 16, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 128 << 10,
                                   256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const size_t most = 8 << 20, busy_bytes = (size_t)1 << 30;
    probe_context();
    CUstream st;
    CUevent e0, e1;
    CUdeviceptr d, busy;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CK(cuMemAlloc(&d, most));
    CK(cuMemAlloc(&busy, busy_bytes));
    unsigned char *h = malloc(most), *back = malloc(most);
    for (size_t i = 0; i < most; i++)
        h[i] = (unsigned char)(i * 131 + 7);
    /* how many 1 GiB memsets make BUSY_MS */
    float one_ms;
    int memsets = probe_busy_memsets(st, busy, busy_bytes, BUSY_MS, &one_ms);
    printf("%s: the busy stream: %d memsets of 1 GiB, %.2f ms each\n", label, memsets, one_ms);
    printf("%-10s %10s %10s %10s %10s %10s %10s\n", "bytes", "return_us", "copy_gbps", "idle_us", "idle_gbps",
           "burst", "burst_us");
    for (int k = 0; k < nsizes; k++) {
        size_t n = sizes[k];
        double ret[REPS], gbps[REPS], idle[REPS], burst[REPS];
        int copies = n * BURST <= (16u << 20) ? BURST : (int)((16u << 20) / n);
        for (int r = 0; r < REPS; r++) {
            for (int m = 0; m < memsets; m++)
                CK(cuMemsetD32Async(busy, (unsigned)r, busy_bytes / 4, st));
            CK(cuEventRecord(e0, st));
            double t0 = probe_now();
            CK(cuMemcpyHtoDAsync(d, h, n, st));
            ret[r] = (probe_now() - t0) * 1e6;
            CK(cuEventRecord(e1, st));
            CK(cuStreamSynchronize(st));
            float ms;
            CK(cuEventElapsedTime(&ms, e0, e1));
            gbps[r] = ms > 0 ? n / (ms * 1e-3) / 1e9 : 0;
            t0 = probe_now();
            CK(cuMemcpyHtoDAsync(d, h, n, st));
            CK(cuStreamSynchronize(st));
            idle[r] = (probe_now() - t0) * 1e6;
            for (int m = 0; m < memsets; m++)
                CK(cuMemsetD32Async(busy, (unsigned)r, busy_bytes / 4, st));
            t0 = probe_now();
            for (int i = 0; i < copies; i++) {
                size_t off = (size_t)i * n % (most - n + 1);
                CK(cuMemcpyHtoDAsync(d + off, h + off, n, st));
            }
            burst[r] = (probe_now() - t0) * 1e6;
            CK(cuStreamSynchronize(st));
        }
        memset(back, 0, most);
        CK(cuMemcpyDtoH(back, d, most));
        size_t span = copies * n < most ? copies * n : most;
        if (memcmp(back, h, span)) {
            fprintf(stderr, "%s: %zu bytes: wrong bytes landed\n", label, n);
            return 1;
        }
        double mi = probe_median(idle, REPS);
        printf("%-10zu %10.1f %10.2f %10.1f %10.2f %10d %10.1f\n", n, probe_median(ret, REPS),
               probe_median(gbps, REPS), mi, n / (mi * 1e-6) / 1e9, copies, probe_median(burst, REPS));
    }
    return 0;
}
