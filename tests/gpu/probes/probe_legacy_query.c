/* probe_legacy_query.c - what cuStreamQuery answers for the legacy stream
 * (CU_STREAM_LEGACY) while work is queued elsewhere: pinfast takes a
 * synchronous copy through a registration into the driver's synchronous
 * call only when its stream is idle by cuStreamQuery, so that the driver's
 * wait, which spins, has only the copy to wait for.  A synchronous copy on
 * the legacy stream also waits for every blocking stream's work; this says
 * whether the query sees that work.  One JSON line per case: the answer
 * while 50 ms of host function is queued on the legacy stream itself, on a
 * blocking stream, on a non-blocking stream, and with none queued. */
#include <cuda.h>
#include "../probe.h"

#include <unistd.h>

static void CUDA_CB sleep_50ms(void *arg) {
    (void)arg;
    usleep(50000);
}

static void one(const char *where, CUstream s) {
    if (s != (CUstream)1)
        CK(cuLaunchHostFunc(s, sleep_50ms, NULL));
    usleep(1000); /* the work under way, the host function asleep */
    CUresult r = cuStreamQuery(CU_STREAM_LEGACY);
    printf("{\"probe\":\"legacy_query\",\"work_on\":\"%s\",\"query\":\"%s\"}\n", where,
           r == CUDA_SUCCESS ? "idle" : r == CUDA_ERROR_NOT_READY ? "not ready" : "error");
    CK(cuCtxSynchronize());
}

int main(void) {
    probe_context();
    CUstream blocking, nonblocking;
    CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
    one("legacy", CU_STREAM_LEGACY);
    one("blocking", blocking);
    one("non-blocking", nonblocking);
    one("none", (CUstream)1);
    return 0;
}
