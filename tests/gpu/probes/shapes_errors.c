/* shapes_errors: the real driver's answers to bad 2D and array copies, each
 * printed beside what the fake driver answers (tests/fake/fake_copy.c,
 * fake_array.c), which the equivalence test (tests/test_shapes.c) rests
 * on; and pinfast's own assumptions: the largest pitch
 * (CU_DEVICE_ATTRIBUTE_MAX_PITCH, shim/engine/shape.c), and that a chunk's
 * DMA as pinfast issues it (cuMemcpy3DAsync from a pinned slot, pitch =
 * width, Depth 1, the device side moved down by srcY/dstY) is accepted for
 * device memory and arrays.  A line whose "fake" differs from "driver" is a
 * difference to fix in the fake.  Plain driver only; no pinfast.
 * Build: gcc -O2 -I/usr/local/cuda/include -o shapes_errors tests/gpu/probes/shapes_errors.c -lcuda */
#include <cuda.h>

#include "../probe.h"

#define W 1000
#define H 64
#define DEVPITCH 1024

static CUdeviceptr dev;
static unsigned char *host, *pinned;
static CUarray arr, arr1d; /* 512 x 64 and 4096 x 1 of float2 (8 bytes) */
static int diffs;

/* fake < 0: the fake makes no assumption (it has no such limit) */
static void line(const char *what, CUresult got, int fake) {
    if (fake < 0) {
        printf("%-52s driver %3d fake   -\n", what, got);
        return;
    }
    printf("%-52s driver %3d fake %3d%s\n", what, got, fake, (int)got == fake ? "" : "   DIFFERENT");
    diffs += (int)got != fake;
}

/* A valid H2D 2D copy of W x H from pageable host into device memory. */
static CUDA_MEMCPY2D h2d(void) {
    CUDA_MEMCPY2D m = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = W + 24,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = DEVPITCH,
                       .WidthInBytes = W, .Height = H};
    return m;
}

static CUDA_MEMCPY2D to_array(void) {
    CUDA_MEMCPY2D m = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = 4096,
                       .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = arr, .WidthInBytes = 512 * 8, .Height = H};
    return m;
}

/* Overflowing extents (a row, pitch or slice near SIZE_MAX) are left out: the
 * driver crashes on them (H100, driver 580: tests/gpu/checks/shapes.sh); so
 * does a host pitch past the host buffer (it reads pageable memory as given)
 * and a bogus array handle. */
int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0); /* what was printed before a crash stays */
    probe_context();
    CUdevice d;
    int maxpitch;
    CK(cuCtxGetDevice(&d));
    CK(cuDeviceGetAttribute(&maxpitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH, d));
    printf("CU_DEVICE_ATTRIBUTE_MAX_PITCH %d (pinfast passes pitches over 2147483647 through)\n", maxpitch);
    CK(cuMemAlloc(&dev, DEVPITCH * (H + 8)));
    CK(cuMemAllocHost((void **)&pinned, 1 << 22));
    host = malloc(1 << 22);
    memset(host, 1, 1 << 22);
    CUDA_ARRAY_DESCRIPTOR ad = {.Width = 512, .Height = H, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 2};
    CK(cuArrayCreate(&arr, &ad));
    CUDA_ARRAY_DESCRIPTOR ad1 = {.Width = 4096, .Height = 0, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 2};
    CK(cuArrayCreate(&arr1d, &ad1));
    CUDA_MEMCPY2D m;

    m = h2d(); line("2D valid", cuMemcpy2D(&m), 0);
    m = h2d(); line("2DUnaligned valid", cuMemcpy2DUnaligned(&m), 0);
    m = h2d(); m.srcPitch = W - 1; line("2D host pitch < width", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = h2d(); m.dstPitch = W - 1; line("2D device pitch < width", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = h2d(); m.srcPitch = W - 1; m.Height = 1; line("2D host pitch < width, 1 row", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = h2d(); m.dstPitch = 1000; line("2D device pitch not from cuMemAllocPitch", cuMemcpy2D(&m), 0);
    m = h2d(); m.dstPitch = 1000; line("2DUnaligned device pitch 1000", cuMemcpy2DUnaligned(&m), 0);
    m = h2d(); m.dstY = H + 8; line("2D device rows past the allocation", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = h2d(); m.dstDevice = dev + (1ull << 40); line("2D bogus device pointer", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = h2d(); m.srcHost = NULL; line("2D NULL host", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = h2d(); m.WidthInBytes = 0; line("2D width 0", cuMemcpy2D(&m), 0);
    m = h2d(); m.Height = 0; line("2D height 0", cuMemcpy2D(&m), 0);
    m = h2d(); m.dstXInBytes = DEVPITCH - W + 1; line("2D device x + width past the pitch", cuMemcpy2D(&m), 1);
    m = h2d(); m.dstXInBytes = DEVPITCH - W + 1;
    line("2DUnaligned device x + width past the pitch", cuMemcpy2DUnaligned(&m), 1);
    m = h2d(); m.srcXInBytes = 25; line("2D host x + width past the pitch", cuMemcpy2D(&m), 1);
    m = h2d(); m.dstMemoryType = (CUmemorytype)9; line("2D memory type 9", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = h2d(); m.dstMemoryType = CU_MEMORYTYPE_UNIFIED; line("2D unified device side", cuMemcpy2D(&m), 0);
    m = h2d(); m.srcMemoryType = CU_MEMORYTYPE_UNIFIED; m.srcDevice = (CUdeviceptr)(uintptr_t)host;
    line("2D unified pageable host side", cuMemcpy2D(&m), 0);
    m = to_array(); line("2D to array valid", cuMemcpy2D(&m), 0);
    m = to_array(); m.dstXInBytes = 4;
    line("2D to array x off an element, past the row", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = to_array(); m.dstXInBytes = 4, m.WidthInBytes = 4000;
    line("2D to array x off an element, within the row", cuMemcpy2D(&m), 0);
    m = to_array(); m.WidthInBytes = 12; line("2D to array width not whole elements", cuMemcpy2D(&m), 0);
    m = to_array(); m.dstXInBytes = 8; line("2D to array past the row", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
    m = to_array(); m.dstY = 1; line("2D to array past the rows", cuMemcpy2D(&m), CUDA_ERROR_INVALID_VALUE);

    CUarray a;
    CUDA_ARRAY_DESCRIPTOR bad = ad;
    bad.Format = (CUarray_format)0x77;
    line("cuArrayCreate format 0x77", cuArrayCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);
    bad = ad, bad.NumChannels = 3;
    line("cuArrayCreate 3 channels", cuArrayCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);
    bad = ad, bad.Width = 0;
    line("cuArrayCreate width 0", cuArrayCreate(&a, &bad), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY3D_DESCRIPTOR d3;
    CK(cuArray3DGetDescriptor(&d3, arr1d));
    printf("cuArray3DGetDescriptor of a 1D array: %zu x %zu x %zu flags %u (fake: 4096 x 0 x 0 flags 0)\n",
           d3.Width, d3.Height, d3.Depth, d3.Flags);

    line("HtoA 1D valid", cuMemcpyHtoA(arr1d, 8, host, 800), 0);
    line("HtoA 1D offset 3 (not a whole element)", cuMemcpyHtoA(arr1d, 3, host, 800), 0);
    line("HtoA 1D size 13", cuMemcpyHtoA(arr1d, 0, host, 13), 0);
    line("HtoA 1D past the end", cuMemcpyHtoA(arr1d, 4096 * 8 - 8, host, 16), CUDA_ERROR_INVALID_VALUE);
    line("HtoA 1D size 0", cuMemcpyHtoA(arr1d, 0, host, 0), 0);
    line("HtoA 2D array (rows after rows)", cuMemcpyHtoA(arr, 0, host, 512 * 8 * 2), CUDA_ERROR_INVALID_VALUE);
    line("AtoH 1D valid", cuMemcpyAtoH(host, arr1d, 8, 800), 0);
    line("HtoAAsync 1D valid", cuMemcpyHtoAAsync(arr1d, 8, host, 800, 0), 0);

    /* pinfast's chunk DMAs */
    CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = pinned, .srcPitch = W, .srcHeight = 16,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = DEVPITCH,
                       .dstY = 8, .dstHeight = 8 + H, .WidthInBytes = W, .Height = 16, .Depth = 1};
    line("chunk DMA: 3DAsync pinned -> device rows 8..23", cuMemcpy3DAsync(&c, 0), 0);
    c.dstPitch = 1000;
    line("chunk DMA: 3DAsync device pitch 1000", cuMemcpy3DAsync(&c, 0), 0);
    CUDA_MEMCPY3D ca = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = pinned, .srcPitch = 4096, .srcHeight = 16,
                        .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = arr, .dstY = 32, .dstHeight = 48,
                        .WidthInBytes = 4096, .Height = 16, .Depth = 1};
    line("chunk DMA: 3DAsync pinned -> array rows 32..47", cuMemcpy3DAsync(&ca, 0), 0);
    CUDA_MEMCPY3D cw = ca;
    cw.dstXInBytes = 4, cw.WidthInBytes = 4000;
    line("3D to array x not a whole element", cuMemcpy3DAsync(&cw, 0), 0);
    CUDA_MEMCPY3D cx = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = pinned, .srcPitch = 800, .srcHeight = 1,
                        .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = arr1d, .dstXInBytes = 808,
                        .WidthInBytes = 800, .Height = 1, .Depth = 1};
    line("chunk DMA: 3DAsync pinned -> 1D array at x 808", cuMemcpy3DAsync(&cx, 0), 0);
    /* 3D: slices of device memory 72 rows apart */
    CUDA_MEMCPY3D v = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = W + 24, .srcHeight = 8,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = DEVPITCH,
                       .dstHeight = 24, .WidthInBytes = W, .Height = 8, .Depth = 3};
    CUDA_MEMCPY3D w = v;
    line("3D valid (3 slices)", cuMemcpy3D(&w), 0);
    w = v, w.srcHeight = 7; line("3D host height < rows, 3 slices", cuMemcpy3D(&w), CUDA_ERROR_INVALID_VALUE);
    w = v, w.Depth = 1, w.srcHeight = 0; line("3D host height 0, 1 slice", cuMemcpy3D(&w), 0);
    w = v, w.Depth = 1, w.srcHeight = 5; line("3D host height 5 < rows 8, 1 slice", cuMemcpy3D(&w), 1);
    w = v, w.Depth = 1, w.dstHeight = 0; line("3D device height 0, 1 slice", cuMemcpy3D(&w), 0);
    w = v, w.Depth = 1, w.dstHeight = 3; line("3D device height 3 < rows 8, 1 slice", cuMemcpy3D(&w), 1);
    w = v, w.Depth = 1, w.srcHeight = 0, w.srcY = 1; line("3D host height 0, 1 slice from row 1", cuMemcpy3D(&w), 0);
    w = v, w.Depth = 1, w.dstHeight = 0, w.dstY = 1; line("3D device height 0, 1 slice from row 1", cuMemcpy3D(&w), 0);
    w = v, w.Depth = 1, w.Height = 1, w.srcPitch = 0; line("3D one row, host pitch 0", cuMemcpy3D(&w), 0);
    w = v, w.Depth = 1, w.Height = 1, w.srcPitch = W - 1; line("3D one row, host pitch < width", cuMemcpy3D(&w), 1);
    w = v, w.dstXInBytes = DEVPITCH - W + 1; line("3D device x + width past the pitch", cuMemcpy3D(&w), 1);
    w = v, w.srcLOD = 1; line("3D srcLOD 1", cuMemcpy3D(&w), 0);
    w = v, w.dstZ = 3; line("3D dstZ past the allocation", cuMemcpy3D(&w), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D cz = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = pinned, .srcPitch = W, .srcHeight = 5,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = DEVPITCH,
                        .dstY = 3, .dstZ = 2, .dstHeight = 24, .WidthInBytes = W, .Height = 5, .Depth = 1};
    line("chunk DMA: 3DAsync pinned -> slice 2, rows 3..7", cuMemcpy3DAsync(&cz, 0), 0);
    CK(cuCtxSynchronize());
    printf("%d differences\n", diffs);
    return 0;
}
