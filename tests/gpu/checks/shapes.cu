// shapes: the random cases of tests/shapes_cases.h (the same as
// tests/test_shapes.c runs on the fake driver) on the real driver, printed
// so that a plain run and a pinfast run can be diffed line by line
// (tests/gpu/checks/shapes.sh).
// Driver API only: nvcc -O2 -o $B/shapes tests/gpu/checks/shapes.cu -lcuda
// Usage: shapes <cases> <seed>
#define SC(f) cu##f
#define SC_LOG(...) (printf(__VA_ARGS__), fflush(stdout))
#define SC_DRIVER_CRASHES 1
#include "../../shapes_cases.h"

int main(int argc, char **argv)
{
    int cases = argc > 1 ? atoi(argv[1]) : 360;
    rs = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
    CUdevice d;
    CUcontext c;
    CU(cuInit(0));
    CU(cuDeviceGet(&d, 0));
    CU(cuDevicePrimaryCtxRetain(&c, d));
    CU(cuCtxSetCurrent(c));
    return shape_cases(cases);
}
