/* probe_call_cost.c - what the driver calls a synchronous copy through
 * pinfast's registration makes before its DMA cost, with the caches cold
 * as bandwidthTest leaves them (256 MiB of memset before each) and warm
 * (the same call again at once): cuCtxGetCurrent, cuCtxGetFlags,
 * cuStreamQuery of the legacy stream, and a mutex's lock and unlock for
 * scale.  Each round first makes a synchronous copy of 32 MB from
 * registered memory, as bandwidthTest's loop does, or none ("work": 0).
 * One JSON line per call and way: the median and the 90th percentile of
 * ROUNDS, in us, cold and warm.
 *   probe_call_cost [ROUNDS] */
#include <cuda.h>
#include "../probe.h"

#include <pthread.h>

#define FLUSH ((size_t)256 << 20)
#define MAXR 400
#define BYTES 32000000u

enum call { CURRENT, FLAGS, QUERY, MUTEX, NCALLS };
static const char *names[NCALLS] = {"cuCtxGetCurrent", "cuCtxGetFlags", "cuStreamQuery_legacy", "mutex"};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double once(enum call c) {
    CUcontext ctx;
    unsigned flags;
    double t0 = probe_now();
    switch (c) {
    case CURRENT: CK(cuCtxGetCurrent(&ctx)); break;
    case FLAGS: CK(cuCtxGetFlags(&flags)); break;
    case QUERY: CK(cuStreamQuery(CU_STREAM_LEGACY)); break;
    default: pthread_mutex_lock(&lock); pthread_mutex_unlock(&lock); break;
    }
    return probe_now() - t0;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    if (rounds < 1 || rounds > MAXR)
        rounds = 100;
    probe_context();
    char *flush = malloc(FLUSH), *h = malloc(BYTES);
    memset(flush, 0, FLUSH);
    memset(h, 1, BYTES);
    CK(cuMemHostRegister(h, BYTES, 0));
    CUdeviceptr d;
    CK(cuMemAlloc(&d, BYTES));
    for (int work = 0; work < 2; work++)
    for (int c = 0; c < NCALLS; c++) {
        double cold[MAXR], warm[MAXR];
        for (int r = 0; r < rounds; r++) {
            if (work)
                CK(cuMemcpyHtoD(d, h, BYTES));
            memset(flush, r, FLUSH);
            __asm__ volatile("" : : "r"(flush) : "memory"); /* the memset is kept */
            cold[r] = once((enum call)c);
            warm[r] = once((enum call)c);
        }
        double cm = probe_median(cold, rounds), c9 = cold[rounds * 9 / 10];
        double wm = probe_median(warm, rounds), w9 = warm[rounds * 9 / 10];
        printf("{\"probe\":\"call_cost\",\"work\":%d,\"call\":\"%s\",\"rounds\":%d,\"cold_us\":%.2f,\"cold_p90_us\":%.2f,"
               "\"warm_us\":%.2f,\"warm_p90_us\":%.2f}\n",
               work, names[c], rounds, cm * 1e6, c9 * 1e6, wm * 1e6, w9 * 1e6);
    }
    return 0;
}
