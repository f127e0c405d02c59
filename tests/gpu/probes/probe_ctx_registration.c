/* probe_ctx_registration.c - what becomes of host memory a context pinned
 * when the context goes: pinfast forgets its registrations of a destroyed
 * context (pf_register_context_gone) and its staging slots and bounce area
 * (pf_engine_context_gone) as gone with it, and the fake driver drops
 * them so.  For each way a context goes (cuCtxDestroy of a created one,
 * the last cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxReset) and each
 * set of registration flags, a range of 8 MiB (mmap, huge pages advised,
 * written) is registered in that context, and 2 MiB allocated there with
 * cuMemHostAlloc (portable); the context goes; then in another context,
 * made before: what cuPointerGetAttribute answers for the range, whether
 * cuMemHostUnregister finds a registration, whether cuMemHostRegister of
 * the same range succeeds, whether the range still holds what was written,
 * and whether the allocation's pages are still mapped (mincore).  One
 * JSON line per case.
 *   probe_ctx_registration */
#include <cuda.h>
#include "../probe.h"

#include <sys/mman.h>
#include <errno.h>

#define BYTES ((size_t)8 << 20)
#define PINNED ((size_t)2 << 20)

enum way { CREATED, RELEASED, RESET, NWAYS };
static const char *ways[NWAYS] = {"cuCtxDestroy", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset"};

/* 1: every page of [q, q+n) is mapped. */
static int mapped(void *q, size_t n) {
    unsigned char v[PINNED / 4096];
    return mincore(q, n, v) == 0 ? 1 : errno == ENOMEM ? 0 : -1;
}

int main(void) {
    CUdevice d;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    unsigned sets[2] = {CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP};
    for (int w = 0; w < NWAYS; w++)
        for (int f = 0; f < 2; f++) {
            CUcontext other, a;
            CK(cuCtxCreate(&other, NULL, 0, d)); /* the one that stays */
            if (w == CREATED) {
                CK(cuCtxCreate(&a, NULL, 0, d));
            } else {
                CK(cuDevicePrimaryCtxRetain(&a, d));
                CK(cuCtxSetCurrent(a));
            }
            char *p = probe_written_range(BYTES);
            void *q = NULL;
            CUresult reg = cuMemHostRegister(p, BYTES, sets[f]);
            CK(cuMemHostAlloc(&q, PINNED, CU_MEMHOSTALLOC_PORTABLE));
            memset(q, 1, PINNED);
            if (w == CREATED)
                CK(cuCtxDestroy(a));
            else if (w == RELEASED)
                CK(cuDevicePrimaryCtxRelease(d));
            else
                CK(cuDevicePrimaryCtxReset(d));
            CK(cuCtxSetCurrent(other));
            unsigned type = 0;
            CUresult attr = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p);
            CUresult unreg = cuMemHostUnregister(p);
            CUresult again = cuMemHostRegister(p, BYTES, sets[f]);
            CUresult undo = again == CUDA_SUCCESS ? cuMemHostUnregister(p) : again;
            printf("{\"probe\":\"ctx_registration\",\"way\":\"%s\",\"flags\":%u,\"register\":%d,"
                   "\"attribute\":%d,\"memory_type\":%u,\"unregister_after\":%d,\"register_again\":%d,"
                   "\"unregister_again\":%d,\"range_intact\":%d,\"hostalloc_mapped\":%d}\n",
                   ways[w], sets[f], (int)reg, (int)attr, type, (int)unreg, (int)again, (int)undo, probe_written_intact(p, BYTES),
                   mapped(q, PINNED));
            fflush(stdout);
            munmap(p, BYTES);
            CK(cuCtxDestroy(other));
        }
    return 0;
}
