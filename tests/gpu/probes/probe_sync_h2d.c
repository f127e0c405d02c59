/* probe_sync_h2d.c - what bounds bandwidthTest's pageable H2D (cuda-samples
 * 1_Utilities/bandwidthTest, --memory=pageable --htod): 100 synchronous
 * copies of 32,000,000 bytes, each timed on the host alone, 256 MiB of
 * memset between them.  The same loop from host memory three ways, by
 * hand:
 *   pageable    malloc (the driver's own staging; under pinfast, pinfast's)
 *   registered  malloc then cuMemHostRegister, as pinfast's registration
 *               cache does (4 KiB pages); the registration timed apart
 *   pinned      cuMemHostAlloc
 * One JSON line per way: GB/s over the copies' summed time (bandwidthTest's
 * figure), the first four copies' times and the median, and for
 * registered, with the registration's time added.  `blocking` makes the
 * context CU_CTX_SCHED_BLOCKING_SYNC (the driver's waits sleep).
 *   probe_sync_h2d [ROUNDS [blocking]] */
#include <cuda.h>
#include "../probe.h"

#include <stdint.h>

#define BYTES 32000000u
#define COPIES 100
#define FLUSH ((size_t)256 << 20)

enum way { PAGEABLE, REGISTERED, PINNED, NWAYS };
static const char *names[NWAYS] = {"pageable", "registered", "pinned"};

/* The loop; each copy's time into each[]. */
static double loop(CUdeviceptr d, const char *h, char *flush, double *each) {
    double sum = 0;
    for (int i = 0; i < COPIES; i++) {
        double t0 = probe_now();
        CK(cuMemcpyHtoD(d, h, BYTES));
        sum += each[i] = probe_now() - t0;
        memset(flush, i, FLUSH);
    }
    return sum;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3, blocking = argc > 2 && !strcmp(argv[2], "blocking");
    if (blocking) {
        CUdevice dev;
        CK(cuInit(0));
        CK(cuDeviceGet(&dev, 0));
        CK(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC));
    }
    probe_context();
    unsigned flags = 0;
    CK(cuCtxGetFlags(&flags));
    printf("{\"probe\":\"sync_h2d\",\"ctx_flags\":%u}\n", flags);
    CUdeviceptr d;
    CK(cuMemAlloc(&d, BYTES));
    char *flush = malloc(FLUSH);
    memset(flush, 0, FLUSH);
    for (int r = 0; r < rounds; r++)
        for (int w = 0; w < NWAYS; w++) {
            char *h = NULL;
            double reg = 0;
            if (w == PINNED) {
                CK(cuMemHostAlloc((void **)&h, BYTES, 0));
            } else {
                h = malloc(BYTES);
                for (unsigned i = 0; i < BYTES; i++)
                    h[i] = (char)i;
            }
            if (w == REGISTERED) {
                double t0 = probe_now();
                CK(cuMemHostRegister(h, BYTES, 0));
                reg = probe_now() - t0;
            }
            double each[COPIES], s = loop(d, h, flush, each), total = (double)BYTES * COPIES;
            printf("{\"probe\":\"sync_h2d\",\"round\":%d,\"way\":\"%s\",\"gbps\":%.2f,\"copy_us\":%.1f,"
                   "\"first_us\":[%.1f,%.1f,%.1f,%.1f]",
                   r + 1, names[w], total / s / 1e9, s / COPIES * 1e6, each[0] * 1e6, each[1] * 1e6, each[2] * 1e6,
                   each[3] * 1e6);
            printf(",\"median_us\":%.1f", probe_median(each, COPIES) * 1e6);
            if (w == REGISTERED)
                printf(",\"register_ms\":%.2f,\"gbps_with_register\":%.2f", reg * 1e3, total / (s + reg) / 1e9);
            printf("}\n");
            fflush(stdout);
            if (w == REGISTERED)
                CK(cuMemHostUnregister(h));
            if (w == PINNED)
                CK(cuMemFreeHost(h));
            else
                free(h);
        }
    return 0;
}
