/* probe_waits: what a wait costs the CPU on the real driver, in a primary
 * context of default flags (what the fake models, tests/fake/fake_stream.c).
 *   copies  a registered H2D of 4 MiB-1 GiB, then cuEventSynchronize on an
 *           event made with or without CU_EVENT_BLOCKING_SYNC, at once or
 *           after 200 us of polling: wall and thread CPU per copy (median
 *           of 9), and cuEventRecord's cost for each kind of event;
 *   behind  100 ms of other work (a host function sleeping) on a blocking
 *           stream: cuStreamSynchronize of it, of the legacy stream and of
 *           a non-blocking stream, cuCtxSynchronize, and each kind of event
 *           recorded on the legacy stream.
 * Build: cc -O2 -I/usr/local/cuda/include -o probe_waits probe_waits.c -lcuda */
#include <cuda.h>
#include "../probe.h"

#include <unistd.h>

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void copies(CUstream s, CUevent ev[2]) {
    size_t big = (size_t)1 << 30, sizes[] = {4 << 20, 16 << 20, 64 << 20, big};
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, big));
    char *host = aligned_alloc(4096, big);
    if (!host)
        exit(2);
    memset(host, 1, big);
    CK(cuMemHostRegister(host, big, CU_MEMHOSTREGISTER_PORTABLE));
    const char *how[] = {"spin event, sync at once", "blocking event, sync at once",
                         "spin event, poll 200us then sync", "blocking event, poll 200us then sync"};
    for (int z = 0; z < 4; z++)
        for (int w = 0; w < 4; w++) {
            double wall[9], cpu[9];
            for (int i = 0; i < 9; i++) {
                double t0 = probe_now(), c0 = cpu_now();
                CK(cuMemcpyHtoDAsync(dev, host, sizes[z], s));
                CK(cuEventRecord(ev[w & 1], s));
                CUresult r = CUDA_ERROR_NOT_READY;
                while (w >= 2 && (r = cuEventQuery(ev[w & 1])) == CUDA_ERROR_NOT_READY && probe_now() - t0 < 200e-6)
                    probe_relax();
                if (r == CUDA_ERROR_NOT_READY)
                    CK(cuEventSynchronize(ev[w & 1]));
                wall[i] = probe_now() - t0;
                cpu[i] = cpu_now() - c0;
            }
            double wm = probe_median(wall, 9), cm = probe_median(cpu, 9);
            printf("%4zu MiB %-38s wall %8.1f us (%.1f GB/s), cpu %8.1f us (%.0f%%)\n", sizes[z] >> 20, how[w],
                   wm * 1e6, sizes[z] / wm / 1e9, cm * 1e6, 100 * cm / wm);
        }
    for (int k = 0; k < 2; k++) {
        double t0 = probe_now();
        for (int i = 0; i < 2000; i++)
            CK(cuEventRecord(ev[k], s));
        CK(cuStreamSynchronize(s));
        printf("cuEventRecord, %s event: %.2f us each\n", k ? "blocking" : "spin", (probe_now() - t0) / 2000 * 1e6);
    }
    CK(cuMemHostUnregister(host));
    CK(cuMemFree(dev));
    free(host);
}

static void CUDA_CB nap(void *arg) {
    (void)arg;
    usleep(100000);
}

static void behind(CUevent ev[2]) {
    CUstream s, nb;
    CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    const char *what[] = {"cuStreamSynchronize(the stream)", "cuStreamSynchronize(legacy)",
                          "cuStreamSynchronize(non-blocking stream)", "cuCtxSynchronize",
                          "blocking event recorded on legacy", "spin event recorded on legacy"};
    for (int k = 0; k < 6; k++) {
        CK(cuLaunchHostFunc(s, nap, NULL));
        usleep(1000);
        double w0 = probe_now(), c0 = cpu_now();
        switch (k) {
        case 0: CK(cuStreamSynchronize(s)); break;
        case 1: CK(cuStreamSynchronize(NULL)); break;
        case 2: CK(cuStreamSynchronize(nb)); break;
        case 3: CK(cuCtxSynchronize()); break;
        default: CK(cuEventRecord(ev[k == 4], NULL)); CK(cuEventSynchronize(ev[k == 4])); break;
        }
        printf("behind 100 ms on a blocking stream: %-42s wall %6.1f ms, cpu %6.1f ms\n", what[k],
               (probe_now() - w0) * 1e3, (cpu_now() - c0) * 1e3);
        CK(cuCtxSynchronize());
    }
    CK(cuStreamDestroy(s));
    CK(cuStreamDestroy(nb));
}

int main(void) {
    probe_context();
    CUstream s;
    CUevent ev[2];
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&ev[0], CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&ev[1], CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC));
    copies(s, ev);
    behind(ev);
    return 0;
}
