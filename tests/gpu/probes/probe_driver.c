/* Facts the shim's design rests on, read off the real driver:
 * does cuGetProcAddress hand out the same addresses as the exported symbols,
 * what does a classification query cost, what does the driver do with bad host pointers. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

typedef CUresult (*gpa2_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { CUresult r_ = (x); if (r_) { printf("FAIL %s = %d\n", #x, r_); exit(1); } } while (0)

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    gpa2_t gpa = (gpa2_t)dlsym(h, "cuGetProcAddress_v2");
    static const char *q[][3] = {
        {"cuMemcpyHtoD", "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds"},
        {"cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz"},
        {"cuMemcpyDtoH", "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds"},
        {"cuMemcpy", "cuMemcpy", "cuMemcpy_ptds"},
        {"cuMemcpyAsync", "cuMemcpyAsync", "cuMemcpyAsync_ptsz"},
        {"cuMemcpyBatchAsync", "cuMemcpyBatchAsync_v2", "cuMemcpyBatchAsync_v2_ptsz"},
        {"cuMemHostAlloc", "cuMemHostAlloc", "cuMemHostAlloc"},
        {"cuMemAlloc", "cuMemAlloc_v2", "cuMemAlloc_v2"},
        {"cuMemAllocAsync", "cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
        {"cuGetProcAddress", "cuGetProcAddress_v2", "cuGetProcAddress_v2"},
    };
    int vers[] = {2000, 3020, 7000, 11030, 12000, 12080, 13000};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        for (int f = 0; f < 3; f++)
            for (size_t v = 0; v < sizeof vers / sizeof vers[0]; v++) {
                void *p = NULL; CUdriverProcAddressQueryResult st;
                CUresult r = gpa(q[i][0], &p, vers[v], (cuuint64_t)f, &st);
                const char *match = "?";
                const char *names[] = {q[i][0], q[i][1], q[i][2], "cuMemcpyBatchAsync_ptsz", "cuGetProcAddress"};
                for (int k = 0; k < 5; k++) { void *e = dlsym(h, names[k]); if (p && e == p) { match = names[k]; break; } }
                printf("gpa %-20s ver=%5d flags=%d r=%d st=%d -> %s\n", q[i][0], vers[v], f, r, st, match);
            }
    CK(cuInit(0)); CUdevice d; CK(cuDeviceGet(&d, 0)); CUcontext c; CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
    CUdeviceptr dp; CK(cuMemAlloc(&dp, 1 << 20));
    char *pg = malloc(1 << 20); memset(pg, 1, 1 << 20);
    void *pin; CK(cuMemHostAlloc(&pin, 1 << 20, 0));
    CUpointer_attribute at[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
    for (int k = 0; k < 3; k++) {
        void *ptr = k == 0 ? (void *)pg : k == 1 ? pin : (void *)dp;
        unsigned mt = 7; int man = 7; void *vals[2] = {&mt, &man};
        double t0 = now(); CUresult r = CUDA_SUCCESS;
        for (int i = 0; i < 100000; i++) r = cuPointerGetAttributes(2, at, vals, (CUdeviceptr)ptr);
        double t1 = now();
        CUdeviceptr b = 0; size_t sz = 0; CUresult r2 = cuMemGetAddressRange(&b, &sz, (CUdeviceptr)ptr);
        double t2 = now(); for (int i = 0; i < 100000; i++) cuMemGetAddressRange(&b, &sz, (CUdeviceptr)ptr);
        double t3 = now();
        CUstreamCaptureStatus cs; double t4 = now(); for (int i = 0; i < 100000; i++) cuStreamIsCapturing(0, &cs); double t5 = now();
        unsigned long long id = 0; double t6 = now(); for (int i = 0; i < 100000; i++) cuCtxGetId(c, &id); double t7 = now();
        CUcontext cur; double t8 = now(); for (int i = 0; i < 100000; i++) cuCtxGetCurrent(&cur); double t9 = now();
        printf("kind=%d getattrs r=%d type=%u managed=%d %.0f ns; addrrange r=%d %.0f ns; iscapturing %.0f ns; ctxgetid %.0f ns; ctxgetcurrent %.0f ns\n",
               k, r, mt, man, (t1 - t0) * 1e4, r2, (t3 - t2) * 1e4, (t5 - t4) * 1e4, (t7 - t6) * 1e4, (t9 - t8) * 1e4);
    }
    CUevent ev; CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    double t0 = now(); for (int i = 0; i < 10000; i++) { cuEventRecord(ev, 0); } double t1 = now();
    cuCtxSynchronize();
    double t2 = now(); for (int i = 0; i < 10000; i++) { cuMemcpyHtoDAsync(dp, pin, 4096, 0); } cuCtxSynchronize(); double t3 = now();
    printf("eventrecord %.0f ns; htodasync 4k pinned %.0f ns per call\n", (t1 - t0) * 1e5, (t3 - t2) * 1e5);
    printf("HtoD NULL src: %d\n", cuMemcpyHtoD(dp, NULL, 4096));
    printf("DtoH NULL dst: %d\n", cuMemcpyDtoH(NULL, dp, 4096));
    printf("HtoD size 0: %d\n", cuMemcpyHtoD(dp, pg, 0));
    printf("HtoD past end: %d\n", cuMemcpyHtoD(dp, pg, 2 << 20));
    printf("HtoD bogus dev: %d\n", cuMemcpyHtoD(0x1234, pg, 4096));
    printf("HtoDAsync bad stream: %d\n", cuMemcpyHtoDAsync(dp, pg, 4096, (CUstream)0x1234));
    void *un = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); munmap(un, 1 << 20);
    fflush(stdout);
    printf("HtoD unmapped src: %d\n", cuMemcpyHtoD(dp, un, 4096)); fflush(stdout);
    printf("DtoH unmapped dst: %d\n", cuMemcpyDtoH(un, dp, 4096)); fflush(stdout);
    printf("HtoD (void*)0x1000 src: %d\n", cuMemcpyHtoD(dp, (void *)0x1000, 4096)); fflush(stdout);
    return 0;
}
