// shapes: the random cases of tests/test_shapes.c on the real driver, each
// printing its return code and a hash of every byte of both sides after it,
// so that a plain run and a pinfast run can be diffed line by line
// (tests/gpu/checks/shapes.sh):
//   2d     cuMemcpy2D / 2DUnaligned / 2DAsync between pageable memory and
//          device memory (or a unified pointer to it) or a 2D or 1D array of
//          a random format, random widths, heights, pitches and offsets
//          (pitch = width now and then: a linear copy); one in four with bad
//          input (pitch < width, overflowing extents, NULL host, a pointer
//          past the allocation, an array x not on an element, past the
//          array, width 0, memory type 9)
//   array  cuMemcpyHtoA / AtoH and their Async forms with a 1D array, at
//          whole elements and not, past the end, into a 2D array
//   vmm    a pageable copy spanning 2 or 3 VMM mappings of one reservation
// Device memory and arrays are filled and read back through pinned memory.
// Driver API only: nvcc -O2 -o $B/shapes tests/gpu/checks/shapes.cu -lcuda
// Usage: shapes <cases> <seed>
#include <cuda.h>

#include "../samples/check.h"

#define DEVSIZE ((size_t)4 << 20)
#define HOSTSIZE ((size_t)4 << 20)

static uint64_t rs;
static CUstream S;
static CUdeviceptr DEV;
static unsigned char *HOST, *PIN;

static size_t R(size_t lo, size_t hi) { return rng_range(&rs, lo, hi); }

static void dev_fill(CUdeviceptr d, size_t n, uint64_t salt)
{
    uint64_t s = salt;
    rng_fill(&s, PIN, n);
    CU(cuMemcpyHtoD(d, PIN, n));
    CU(cuCtxSynchronize());
}

static uint64_t dev_hash(CUdeviceptr d, size_t n, uint64_t h)
{
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(PIN, d, n));
    return hash_bytes(h, PIN, n);
}

static const CUarray_format formats[] = {
    CU_AD_FORMAT_UNSIGNED_INT8, CU_AD_FORMAT_UNSIGNED_INT16, CU_AD_FORMAT_UNSIGNED_INT32,
    CU_AD_FORMAT_SIGNED_INT8,   CU_AD_FORMAT_SIGNED_INT16,   CU_AD_FORMAT_SIGNED_INT32,
    CU_AD_FORMAT_HALF,          CU_AD_FORMAT_FLOAT,
};
static size_t format_size(CUarray_format f)
{
    return f == CU_AD_FORMAT_UNSIGNED_INT8 || f == CU_AD_FORMAT_SIGNED_INT8 ? 1
         : f == CU_AD_FORMAT_UNSIGNED_INT16 || f == CU_AD_FORMAT_SIGNED_INT16 || f == CU_AD_FORMAT_HALF ? 2 : 4;
}

static size_t array_bytes(CUarray a)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    CU(cuArray3DGetDescriptor(&d, a));
    return d.Width * format_size(d.Format) * d.NumChannels * (d.Height ? d.Height : 1);
}

static void array_fill(CUarray a, uint64_t salt)
{
    uint64_t s = salt;
    size_t n = array_bytes(a);
    rng_fill(&s, PIN, n);
    CU(cuMemcpyHtoA(a, 0, PIN, n));
    CU(cuCtxSynchronize());
}

static uint64_t array_hash(CUarray a, uint64_t h)
{
    size_t n = array_bytes(a);
    CU(cuCtxSynchronize());
    CU(cuMemcpyAtoH(PIN, a, 0, n));
    return hash_bytes(h, PIN, n);
}

static CUresult array_new(CUarray *a, size_t w, size_t h, size_t *elem, int bad_format)
{
    static const unsigned channels[] = {1, 2, 4};
    CUDA_ARRAY3D_DESCRIPTOR d = {};
    d.Width = w, d.Height = h;
    d.Format = bad_format ? (CUarray_format)0x77 : formats[R(0, 7)];
    d.NumChannels = channels[R(0, 2)];
    *elem = format_size(d.Format) * d.NumChannels;
    return cuArray3DCreate(a, &d);
}

static CUresult copy2d(const CUDA_MEMCPY2D *m, int api)
{
    switch (api) {
    case 0: return cuMemcpy2D(m);
    case 1: return cuMemcpy2DUnaligned(m);
    case 2: return cuMemcpy2DAsync(m, S);
    default: return cuMemcpy2DAsync(m, 0);
    }
}

enum bad { OK, PITCH_LT_WIDTH, OVERFLOW_Y, OVERFLOW_PITCH, NULL_HOST, BOGUS_DEV, PAST_END, ARRAY_X_ODD,
           ARRAY_PAST, WIDTH0, BAD_TYPE, NBAD };

static void case_2d(int i, int h2d, int arr, int uni, int api, int bad)
{
    uint64_t salt = rng_next(&rs);
    size_t width = R(1, 3) == 1 ? R(1, 96 << 10) : R(1, 8 << 10);
    size_t rows = R(1, 400), elem = 1;
    CUarray a = NULL;
    CUDA_MEMCPY2D m = {};
    m.WidthInBytes = width, m.Height = rows;
    size_t hx = R(0, 1) ? 0 : R(1, 64), hy = R(0, 3);
    size_t hp = R(0, 2) ? width + hx + R(0, 300) : width + hx;
    if (arr) {
        size_t w = R(1, 2048), h = R(0, 4) == 0 ? 0 : R(1, 200);
        CUresult cr = array_new(&a, w, h, &elem, 0);
        if (cr) {
            printf("%d array %d\n", i, cr);
            return;
        }
        size_t hh = h ? h : 1, ex = R(0, w - 1);
        width = elem * R(1, w - ex);
        rows = R(1, hh);
        size_t y = R(0, hh - rows);
        m.WidthInBytes = width, m.Height = rows;
        hp = width + hx + (R(0, 1) ? 0 : R(1, 200));
        if (h2d)
            m.dstMemoryType = CU_MEMORYTYPE_ARRAY, m.dstArray = a, m.dstXInBytes = ex * elem, m.dstY = y;
        else
            m.srcMemoryType = CU_MEMORYTYPE_ARRAY, m.srcArray = a, m.srcXInBytes = ex * elem, m.srcY = y;
        array_fill(a, salt ^ 1);
    } else {
        size_t dx = R(0, 1) ? 0 : R(1, 64), dy = R(0, 3);
        size_t dp = R(0, 2) ? width + dx + R(0, 300) : width + dx;
        while ((dy + rows) * dp > DEVSIZE || (hy + rows) * hp > HOSTSIZE)
            rows = rows / 2 + 1, dy = 0, hy = 0;
        CUmemorytype t = uni ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE;
        if (h2d)
            m.dstMemoryType = t, m.dstDevice = DEV, m.dstXInBytes = dx, m.dstY = dy, m.dstPitch = dp;
        else
            m.srcMemoryType = t, m.srcDevice = DEV, m.srcXInBytes = dx, m.srcY = dy, m.srcPitch = dp;
        m.Height = rows;
        dev_fill(DEV, DEVSIZE, salt ^ 1);
    }
    while ((hy + rows) * hp > HOSTSIZE)
        rows = rows / 2 + 1, hy = 0, m.Height = rows;
    CUmemorytype ht = uni && R(0, 1) ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
    if (h2d) {
        m.srcMemoryType = ht, m.srcXInBytes = hx, m.srcY = hy, m.srcPitch = hp;
        m.srcHost = HOST, m.srcDevice = (CUdeviceptr)(uintptr_t)HOST;
    } else {
        m.dstMemoryType = ht, m.dstXInBytes = hx, m.dstY = hy, m.dstPitch = hp;
        m.dstHost = HOST, m.dstDevice = (CUdeviceptr)(uintptr_t)HOST;
    }
    switch (bad) {
    case PITCH_LT_WIDTH:
        if (m.Height < 2)
            m.Height = 2;
        *(h2d ? &m.srcPitch : &m.dstPitch) = width - (width > 1);
        if (width == 1)
            m.WidthInBytes = 2;
        break;
    case OVERFLOW_Y: *(h2d ? &m.srcY : &m.dstY) = SIZE_MAX / 2; break;
    case OVERFLOW_PITCH: *(h2d ? &m.srcPitch : &m.dstPitch) = SIZE_MAX / 4, m.Height = 8; break;
    case NULL_HOST:
        if (h2d)
            m.srcHost = NULL, m.srcDevice = 0;
        else
            m.dstHost = NULL, m.dstDevice = 0;
        break;
    case BOGUS_DEV: /* a pointer past the allocation (no bogus array handle: the driver may crash) */
        if (!arr)
            *(h2d ? &m.dstDevice : &m.srcDevice) = DEV + ((size_t)1 << 40);
        break;
    case PAST_END:
        if (!arr)
            *(h2d ? &m.dstY : &m.srcY) = DEVSIZE / (h2d ? m.dstPitch : m.srcPitch);
        else
            *(h2d ? &m.dstY : &m.srcY) += 1000;
        break;
    case ARRAY_X_ODD: *(h2d ? &m.dstXInBytes : &m.srcXInBytes) += 1; break;
    case ARRAY_PAST: m.WidthInBytes += 1 << 20; break;
    case WIDTH0: m.WidthInBytes = 0; break;
    case BAD_TYPE: *(h2d ? &m.dstMemoryType : &m.srcMemoryType) = (CUmemorytype)9; break;
    default: break;
    }
    uint64_t hs = salt;
    rng_fill(&hs, HOST, HOSTSIZE);
    CUresult r = copy2d(&m, api);
    uint64_t h = hash_bytes(0, HOST, HOSTSIZE);
    CU(cuCtxSynchronize());
    h = a ? array_hash(a, h) : dev_hash(DEV, DEVSIZE, h);
    printf("%d 2d h2d=%d arr=%d uni=%d api=%d bad=%d w=%zu rows=%zu: %d %016llx\n", i, h2d, arr, uni, api, bad,
           m.WidthInBytes, m.Height, r, (unsigned long long)h);
    if (a)
        CU(cuArrayDestroy(a));
}

static void case_array(int i, int h2d, int async, int bad)
{
    uint64_t salt = rng_next(&rs);
    size_t elem, w = bad == 2 ? R(1, 20000) : R(1, 200000);
    CUarray a;
    CUresult cr = array_new(&a, w, bad == 2 ? 7 : 0, &elem, bad == 1);
    if (cr) {
        printf("%d array %d\n", i, cr);
        return;
    }
    size_t total = w * elem, off = R(0, total - 1), n = R(1, total - off);
    if (R(0, 3))
        off -= off % elem, n = n < elem ? elem : n - n % elem;
    if (bad == 3)
        n += elem;
    array_fill(a, salt ^ 1);
    uint64_t hs = salt;
    rng_fill(&hs, HOST, HOSTSIZE);
    CUresult r = h2d ? (async ? cuMemcpyHtoAAsync(a, off, HOST, n, S) : cuMemcpyHtoA(a, off, HOST, n))
                     : (async ? cuMemcpyAtoHAsync(HOST, a, off, n, S) : cuMemcpyAtoH(HOST, a, off, n));
    uint64_t h = hash_bytes(0, HOST, HOSTSIZE);
    CU(cuCtxSynchronize());
    h = array_hash(a, h);
    printf("%d array h2d=%d async=%d bad=%d n=%zu: %d %016llx\n", i, h2d, async, bad, n, r, (unsigned long long)h);
    CU(cuArrayDestroy(a));
}

static void case_vmm(int i, int h2d)
{
    uint64_t salt = rng_next(&rs);
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t g;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    int maps = (int)R(2, 3);
    size_t size = maps * g;
    CUdeviceptr base;
    CUmemGenericAllocationHandle hd[3];
    CUmemAccessDesc acc = {};
    acc.location = prop.location, acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemAddressReserve(&base, size, 0, 0, 0));
    for (int k = 0; k < maps; k++) {
        CU(cuMemCreate(&hd[k], g, &prop, 0));
        CU(cuMemMap(base + k * g, g, 0, hd[k], 0));
    }
    CU(cuMemSetAccess(base, size, &acc, 1));
    size_t off = R(0, g - 1), end = size - off < HOSTSIZE ? size - off : HOSTSIZE;
    size_t n = R(g - off + 1, end);
    dev_fill(base, size, salt ^ 1);
    uint64_t hs = salt;
    rng_fill(&hs, HOST, HOSTSIZE);
    CUresult r = h2d ? cuMemcpyHtoD(base + off, HOST, n) : cuMemcpyDtoH(HOST, base + off, n);
    uint64_t h = hash_bytes(0, HOST, HOSTSIZE);
    h = dev_hash(base, size, h);
    printf("%d vmm h2d=%d maps=%d off=%zu n=%zu: %d %016llx\n", i, h2d, maps, off, n, r, (unsigned long long)h);
    CU(cuMemUnmap(base, size));
    for (int k = 0; k < maps; k++)
        CU(cuMemRelease(hd[k]));
    CU(cuMemAddressFree(base, size));
}

int main(int argc, char **argv)
{
    int cases = argc > 1 ? atoi(argv[1]) : 300;
    rs = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
    CUdevice d;
    CUcontext c;
    CU(cuInit(0));
    CU(cuDeviceGet(&d, 0));
    CU(cuDevicePrimaryCtxRetain(&c, d));
    CU(cuCtxSetCurrent(c));
    HOST = (unsigned char *)malloc(HOSTSIZE);
    CU(cuMemAllocHost((void **)&PIN, DEVSIZE + (4 << 20)));
    CU(cuMemAlloc(&DEV, DEVSIZE));
    CU(cuStreamCreate(&S, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < cases; i++) {
        int kind = (int)R(0, 9), h2d = (int)R(0, 1);
        int bad = R(0, 3) ? OK : (int)R(1, NBAD - 1);
        if (kind < 6)
            case_2d(i, h2d, kind >= 4, kind == 3, (int)R(0, 3), bad);
        else if (kind < 9)
            case_array(i, h2d, (int)R(0, 1), bad ? (int)R(1, 3) : 0);
        else
            case_vmm(i, h2d);
        fflush(stdout);
    }
    return 0;
}
