/* batch_check: the random cases of tests/batch_cases.h (the same as
 * tests/test_batch.c runs on the fake driver) on the real driver, printed
 * so that a plain run and a pinfast run can be diffed line by line
 * (tests/gpu/checks/batch.sh).  The 12.8 ABIs come from cuGetProcAddress
 * (pinfast hands out its own there, as to cudart).
 * Build: gcc -O2 -I/usr/local/cuda/include -I tests -o batch_check tests/gpu/checks/batch_check.c -lcuda
 * Usage: batch_check <cases> <seed> */
#include <cuda.h>
#include <stdio.h>

typedef CUresult (*batch_v1)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *,
                             size_t, size_t *, CUstream);
typedef CUresult (*batch3d_v1)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long, CUstream);
static batch_v1 cuMemcpyBatchAsync12;
static batch3d_v1 cuMemcpy3DBatchAsync12;

#define BC(f) cu##f
#define BC_LOG(...) (printf(__VA_ARGS__), fflush(stdout))
#include "../../batch_cases.h"

int main(int argc, char **argv)
{
    int cases = argc > 1 ? atoi(argv[1]) : 300;
    rs = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
    CUdevice d;
    CUcontext c;
    CUdriverProcAddressQueryResult q;
    CU(cuInit(0));
    CU(cuDeviceGet(&d, 0));
    CU(cuDevicePrimaryCtxRetain(&c, d));
    CU(cuCtxSetCurrent(c));
    CU(cuGetProcAddress("cuMemcpyBatchAsync", (void **)&cuMemcpyBatchAsync12, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CU(cuGetProcAddress("cuMemcpy3DBatchAsync", (void **)&cuMemcpy3DBatchAsync12, 12080, CU_GET_PROC_ADDRESS_DEFAULT,
                        &q));
    return batch_cases(cases);
}
