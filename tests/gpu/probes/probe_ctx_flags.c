/* probe_ctx_flags.c - what the driver answers for a context's scheduling
 * flags (pinfast keeps its own synchronous-call path out of contexts whose
 * waits sleep; the fake driver answers as this shows):
 *   the primary context's flags before and after cuDevicePrimaryCtxSetFlags
 *   (cuDevicePrimaryCtxGetState, cuCtxGetFlags);
 *   a created context's, made with and without CU_CTX_SCHED_BLOCKING_SYNC,
 *   and after cuCtxSetFlags.
 * One JSON line per step.
 *   probe_ctx_flags */
#include <cuda.h>
#include "../probe.h"

static void line(const char *step) {
    unsigned f = 0;
    CUresult r = cuCtxGetFlags(&f);
    printf("{\"probe\":\"ctx_flags\",\"step\":\"%s\",\"result\":%d,\"flags\":%u}\n", step, (int)r, f);
}

static void state(const char *step, CUdevice d) {
    unsigned f = 0;
    int active = 0;
    CK(cuDevicePrimaryCtxGetState(d, &f, &active));
    printf("{\"probe\":\"ctx_flags\",\"step\":\"%s\",\"primary_flags\":%u,\"active\":%d}\n", step, f, active);
}

int main(void) {
    CUdevice d;
    CUcontext p, c;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    state("primary before retain", d);
    CK(cuDevicePrimaryCtxRetain(&p, d));
    CK(cuCtxSetCurrent(p));
    line("primary retained");
    CK(cuDevicePrimaryCtxSetFlags(d, CU_CTX_SCHED_BLOCKING_SYNC));
    state("primary set blocking while active", d);
    line("primary set blocking while active");
    CK(cuCtxSetFlags(CU_CTX_SCHED_SPIN));
    state("primary cuCtxSetFlags spin", d);
    line("primary cuCtxSetFlags spin");
    CK(cuCtxCreate(&c, NULL, CU_CTX_SCHED_BLOCKING_SYNC, d));
    line("created blocking");
    CK(cuCtxSetFlags(CU_CTX_SCHED_YIELD));
    line("created cuCtxSetFlags yield");
    CK(cuCtxDestroy(c));
    CK(cuCtxCreate(&c, NULL, 0, d));
    line("created 0");
    CK(cuCtxDestroy(c));
    CK(cuCtxSetCurrent(p));
    CK(cuDevicePrimaryCtxRelease(d));
    state("primary released", d);
    CK(cuDevicePrimaryCtxRetain(&p, d));
    CK(cuCtxSetCurrent(p));
    line("primary retained again");
    return 0;
}
