/* probe_legacy_query.c - what cuStreamQuery answers for the legacy stream
 * (CU_STREAM_LEGACY) while work is queued elsewhere: pinfast takes a
 * synchronous copy through a registration into the driver's synchronous
 * call only when its stream is idle by cuStreamQuery, so that the driver's
 * wait, which spins, has only the copy to wait for.  A synchronous copy on
 * the legacy stream also waits for every blocking stream's work; this says
 * whether the query sees that work.  One JSON line per case: the answer
 * while work is queued on the legacy stream itself (50 ms of host function,
 * or a memset of 8 GiB), on a blocking stream, on a non-blocking stream
 * (the host function), and with none queued. */
#include <cuda.h>
#include "../probe.h"

#include <unistd.h>

static void CUDA_CB sleep_50ms(void *arg) {
    (void)arg;
    usleep(50000);
}

static CUdeviceptr big;
#define BIG ((size_t)8 << 30)

enum work { NONE, HOST_FUNCTION, MEMSET };
static const char *works[] = {"none", "host function 50 ms", "memset 8 GiB"};

static void one(const char *where, CUstream s, enum work w) {
    if (w == MEMSET)
        CK(cuMemsetD32Async(big, 0, BIG / 4, s));
    else if (w == HOST_FUNCTION)
        CK(cuLaunchHostFunc(s, sleep_50ms, NULL));
    usleep(1000); /* the work under way, the host function asleep */
    CUresult r = cuStreamQuery(CU_STREAM_LEGACY);
    double t0 = probe_now();
    CK(cuCtxSynchronize());
    printf("{\"probe\":\"legacy_query\",\"work_on\":\"%s\",\"work\":\"%s\",\"query\":\"%s\",\"left_ms\":%.1f}\n",
           where, works[w],
           r == CUDA_SUCCESS ? "idle" : r == CUDA_ERROR_NOT_READY ? "not ready" : "error", (probe_now() - t0) * 1e3);
}

int main(void) {
    probe_context();
    CUstream blocking, nonblocking;
    CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&big, BIG));
    for (int round = 0; round < 2; round++) {
        one("legacy", CU_STREAM_LEGACY, HOST_FUNCTION);
        one("legacy", CU_STREAM_LEGACY, MEMSET);
        one("blocking", blocking, HOST_FUNCTION);
        one("non-blocking", nonblocking, HOST_FUNCTION);
        one("none", CU_STREAM_LEGACY, NONE);
    }
    return 0;
}
