/* shapes_cases.h - the random shape cases, one source for the fake driver
 * (tests/test_shapes.c, through the test's driver table) and the GPU
 * (tests/gpu/checks/shapes.cu, the driver API linked directly): each case
 * logs its return code and a hash of every byte of both sides after it, so
 * that a run without pinfast and one under it can be compared line by line.
 *   2d     cuMemcpy2D / 2DUnaligned / 2DAsync, or cuMemcpy3D of one slice
 *          with heights 0 (as the runtime issues cudaMemcpy2DToArray),
 *          between pageable memory and device memory (or a unified
 *          pointer to it) or a 2D or 1D array of a random format, random
 *          widths, heights, pitches and offsets (pitch = width now and
 *          then: a linear copy); one in four with bad
 *          input (pitch < width, overflowing extents, NULL host, a pointer
 *          past the allocation, an array x not on an element, past the
 *          array, width 0, memory type 9)
 *   3d     cuMemcpy3D / 3DAsync between pageable memory and device memory:
 *          random depths, heights (the host's sometimes exactly the rows;
 *          for one slice sometimes 0 or under the rows) and slice
 *          offsets; bad input: a height under the rows, an LOD, pitch <
 *          width, an overflowing z
 *   array  cuMemcpyHtoA / AtoH and their Async forms with a 1D array, at
 *          whole elements and not, past the end, into a 2D array, an
 *          unknown format
 *   vmm    a pageable copy spanning 2 or 3 VMM mappings of one reservation
 * With SC_BUSY=1 in the environment every asynchronous case is queued
 * behind a host function of 1 ms on its stream, and an H2D's pageable
 * source is written over as soon as the call returns: the copy must land
 * what the source held at the call, as the driver's does (pinfast bounces
 * such copies over its registrations, or stages them).
 * Device memory and arrays are filled and read back through pinned memory,
 * which pinfast never stages.  No bogus array handle: the real driver may
 * crash on one.  C and CUDA C++.
 *
 * The includer defines SC(f), the driver function cu<f>, and SC_LOG(...),
 * a line of the log, and seeds rs. */
#ifndef PFT_SHAPES_CASES_H
#define PFT_SHAPES_CASES_H

#include <cuda.h>
#include <stdint.h>

/* 1: leave out the cases on which the real driver crashes (H100 and H200,
 * driver 580: a 2D pitch of SIZE_MAX / 4, a 3D z of SIZE_MAX / 8, a row
 * SIZE_MAX / 2 beside an array, a unified pointer past the allocation);
 * the fake answers them. */
#ifndef SC_DRIVER_CRASHES
#define SC_DRIVER_CRASHES 0
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/samples/check.h"

#define SC_CK(x) CU(x)
/* random bytes from salt */
#define SC_FILL(p, n, salt)                                                    \
    do {                                                                       \
        uint64_t s_ = (salt);                                                  \
        rng_fill(&s_, p, n);                                                   \
    } while (0)

#define DEVSIZE ((size_t)4 << 20)
#define HOSTSIZE ((size_t)4 << 20)

static uint64_t rs; /* the cases' generator */
static CUstream S;
static CUdeviceptr DEV;
static unsigned char *HOST, *PIN; /* pageable, pinned (fill and read back) */

static size_t R(size_t lo, size_t hi) { return rng_range(&rs, lo, hi); }

static int BUSY; /* SC_BUSY */
static void CUDA_CB busy_hold(void *arg)
{
    (void)arg;
    usleep(1000);
}
/* An asynchronous case's stream s is given work to queue behind. */
static void busy_before(int async, CUstream s)
{
    if (BUSY && async)
        SC_CK(SC(LaunchHostFunc)(s, busy_hold, NULL));
}
/* The call returned: an asynchronous H2D's source is written over. */
static void busy_after(int async_h2d, uint64_t salt)
{
    if (BUSY && async_h2d)
        SC_FILL(HOST, HOSTSIZE, salt ^ 0xb5);
}

static void dev_fill(CUdeviceptr d, size_t n, uint64_t salt)
{
    SC_FILL(PIN, n, salt);
    SC_CK(SC(MemcpyHtoD)(d, PIN, n));
    SC_CK(SC(CtxSynchronize)());
}

static uint64_t dev_hash(CUdeviceptr d, size_t n, uint64_t h)
{
    SC_CK(SC(CtxSynchronize)());
    SC_CK(SC(MemcpyDtoH)(PIN, d, n));
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

/* The whole of a 1D or 2D array, to or from PIN, by a 2D copy: the driver's
 * HtoA/AtoH reach only an array's first row (cuMemcpyHtoA of a 100 x 7
 * array's 700 bytes: CUDA_ERROR_INVALID_VALUE on the H100). */
static size_t array_whole(CUarray a, int to_array)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    SC_CK(SC(Array3DGetDescriptor)(&d, a));
    size_t row = d.Width * format_size(d.Format) * d.NumChannels, rows = d.Height ? d.Height : 1;
    CUDA_MEMCPY2D m;
    memset(&m, 0, sizeof m);
    m.WidthInBytes = row, m.Height = rows;
    if (to_array) {
        m.srcMemoryType = CU_MEMORYTYPE_HOST, m.srcHost = PIN, m.srcPitch = row;
        m.dstMemoryType = CU_MEMORYTYPE_ARRAY, m.dstArray = a;
    } else {
        m.srcMemoryType = CU_MEMORYTYPE_ARRAY, m.srcArray = a;
        m.dstMemoryType = CU_MEMORYTYPE_HOST, m.dstHost = PIN, m.dstPitch = row;
    }
    SC_CK(SC(CtxSynchronize)());
    SC_CK(SC(Memcpy2D)(&m));
    return row * rows;
}

static void array_fill(CUarray a, uint64_t salt)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    SC_CK(SC(Array3DGetDescriptor)(&d, a));
    SC_FILL(PIN, d.Width * format_size(d.Format) * d.NumChannels * (d.Height ? d.Height : 1), salt);
    array_whole(a, 1);
}

static uint64_t array_hash(CUarray a, uint64_t h)
{
    size_t n = array_whole(a, 0);
    return hash_bytes(h, PIN, n);
}

static CUresult array_new(CUarray *a, size_t w, size_t h, size_t *elem, int bad_format)
{
    static const unsigned channels[] = {1, 2, 4};
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof d);
    d.Width = w, d.Height = h;
    d.Format = bad_format ? (CUarray_format)0x77 : formats[R(0, 7)];
    d.NumChannels = channels[R(0, 2)];
    *elem = format_size(d.Format) * d.NumChannels;
    return SC(Array3DCreate)(a, &d);
}

static CUresult copy2d(const CUDA_MEMCPY2D *m, int api)
{
    switch (api) {
    case 0: return SC(Memcpy2D)(m);
    case 1: return SC(Memcpy2DUnaligned)(m);
    case 2: return SC(Memcpy2DAsync)(m, S);
    case 3: return SC(Memcpy2DAsync)(m, 0);
    default: { /* as the runtime hands cudaMemcpy2DToArray on: one slice, heights 0 */
        CUDA_MEMCPY3D t;
        memset(&t, 0, sizeof t);
        t.srcXInBytes = m->srcXInBytes, t.srcY = m->srcY, t.srcMemoryType = m->srcMemoryType;
        t.srcHost = m->srcHost, t.srcDevice = m->srcDevice, t.srcArray = m->srcArray, t.srcPitch = m->srcPitch;
        t.dstXInBytes = m->dstXInBytes, t.dstY = m->dstY, t.dstMemoryType = m->dstMemoryType;
        t.dstHost = m->dstHost, t.dstDevice = m->dstDevice, t.dstArray = m->dstArray, t.dstPitch = m->dstPitch;
        t.WidthInBytes = m->WidthInBytes, t.Height = m->Height, t.Depth = 1;
        return SC(Memcpy3D)(&t);
    }
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
    CUDA_MEMCPY2D m;
    memset(&m, 0, sizeof m);
    m.WidthInBytes = width, m.Height = rows;
    size_t hx = R(0, 1) ? 0 : R(1, 64), hy = R(0, 3);
    size_t hp = R(0, 2) ? width + hx + R(0, 300) : width + hx;
    if (arr) {
        size_t w = R(1, 2048), h = R(0, 4) == 0 ? 0 : R(1, 200);
        CUresult cr = array_new(&a, w, h, &elem, 0);
        if (cr) {
            SC_LOG("%d array %d\n", i, cr);
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
    case PITCH_LT_WIDTH: /* refused even for one row (H100, driver 580) */
        m.Height = R(0, 1) ? 1 : m.Height < 2 ? 2 : m.Height;
        *(h2d ? &m.srcPitch : &m.dstPitch) = width - (width > 1);
        if (width == 1)
            m.WidthInBytes = 2;
        break;
    case OVERFLOW_Y: /* beside an array the driver crashes on it (H100, driver 580) */
        if (!arr && !SC_DRIVER_CRASHES)
            *(h2d ? &m.srcY : &m.dstY) = SIZE_MAX / 2;
        break;
    case OVERFLOW_PITCH:
        if (!SC_DRIVER_CRASHES)
            *(h2d ? &m.srcPitch : &m.dstPitch) = SIZE_MAX / 4, m.Height = 8;
        break;
    case NULL_HOST:
        if (h2d)
            m.srcHost = NULL, m.srcDevice = 0;
        else
            m.dstHost = NULL, m.dstDevice = 0;
        break;
    case BOGUS_DEV: /* a pointer past the allocation (no bogus array handle: the driver may crash, and
                     * does on a unified one: H200, driver 580) */
        if (!arr && !(uni && SC_DRIVER_CRASHES))
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
    SC_FILL(HOST, HOSTSIZE, salt);
    int async = api == 2 || api == 3;
    busy_before(async, api == 2 ? S : 0);
    CUresult r = copy2d(&m, api);
    busy_after(async && h2d, salt);
    uint64_t h = hash_bytes(0, HOST, HOSTSIZE);
    SC_CK(SC(CtxSynchronize)());
    h = a ? array_hash(a, h) : dev_hash(DEV, DEVSIZE, h);
    SC_LOG("%d 2d h2d=%d arr=%d uni=%d api=%d bad=%d w=%zu rows=%zu: %d %016llx\n", i, h2d, arr, uni, api, bad,
           m.WidthInBytes, m.Height, r, (unsigned long long)h);
    if (a)
        SC_CK(SC(ArrayDestroy)(a));
}

enum bad3 { OK3, HEIGHT_LT_ROWS, LOD, PITCH3_LT_WIDTH, OVERFLOW_Z, NBAD3 };

static void case_3d(int i, int h2d, int uni, int api, int bad)
{
    uint64_t salt = rng_next(&rs);
    size_t w = R(1, 4) == 1 ? R(1, 96 << 10) : R(1, 4 << 10);
    size_t rows = R(1, 64), depth = R(1, 8);
    size_t hx = R(0, 1) ? 0 : R(1, 64), dx = R(0, 1) ? 0 : R(1, 64);
    size_t hp = R(0, 1) ? w + hx : w + hx + R(1, 300);
    size_t dp = R(0, 1) ? w + dx : w + dx + R(1, 300);
    size_t hh = rows + (R(0, 1) ? 0 : R(1, 5)), dh = rows + (R(0, 1) ? 0 : R(1, 5));
    size_t hz = R(0, 1), dz = R(0, 1), hy = R(0, 2), dy = R(0, 2);
    while (((hz + depth) * hh + hy) * hp > HOSTSIZE || ((dz + depth) * dh + dy) * dp > DEVSIZE) {
        if (depth > 1)
            depth /= 2;
        else if (rows > 1)
            rows /= 2, hh = dh = rows;
        else
            w /= 2, hp = w + hx, dp = w + dx;
    }
    /* one slice: heights of 0 (the runtime's 2D copies) or under the rows */
    if (depth == 1 && !R(0, 2)) {
        hh = R(0, 1) ? 0 : R(1, rows);
        dh = R(0, 1) ? 0 : R(1, rows);
        /* a height of 0 puts slice z at z * (y + rows) rows: it must fit */
        if ((hz * (hh ? hh : hy + rows) + hy + rows) * hp > HOSTSIZE)
            hz = 0;
        if ((dz * (dh ? dh : dy + rows) + dy + rows) * dp > DEVSIZE)
            dz = 0;
    }
    CUmemorytype t = uni ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE;
    CUDA_MEMCPY3D m;
    memset(&m, 0, sizeof m);
    m.WidthInBytes = w, m.Height = rows, m.Depth = depth;
    if (h2d) {
        m.srcMemoryType = CU_MEMORYTYPE_HOST, m.srcHost = HOST, m.srcXInBytes = hx, m.srcY = hy, m.srcZ = hz;
        m.srcPitch = hp, m.srcHeight = hh;
        m.dstMemoryType = t, m.dstDevice = DEV, m.dstXInBytes = dx, m.dstY = dy, m.dstZ = dz;
        m.dstPitch = dp, m.dstHeight = dh;
    } else {
        m.dstMemoryType = CU_MEMORYTYPE_HOST, m.dstHost = HOST, m.dstXInBytes = hx, m.dstY = hy, m.dstZ = hz;
        m.dstPitch = hp, m.dstHeight = hh;
        m.srcMemoryType = t, m.srcDevice = DEV, m.srcXInBytes = dx, m.srcY = dy, m.srcZ = dz;
        m.srcPitch = dp, m.srcHeight = dh;
    }
    switch (bad) {
    case HEIGHT_LT_ROWS:
        m.Height = rows + 1, m.Depth = depth < 2 ? 2 : depth;
        *(h2d ? &m.srcHeight : &m.dstHeight) = rows;
        break;
    case LOD: m.srcLOD = 1; break;
    case PITCH3_LT_WIDTH: m.Height = 2, *(h2d ? &m.srcPitch : &m.dstPitch) = w - 1, m.WidthInBytes = w < 2 ? 2 : w; break;
    case OVERFLOW_Z:
        if (!SC_DRIVER_CRASHES)
            *(h2d ? &m.srcZ : &m.dstZ) = SIZE_MAX / 8;
        break;
    default: break;
    }
    dev_fill(DEV, DEVSIZE, salt ^ 1);
    SC_FILL(HOST, HOSTSIZE, salt);
    busy_before(api != 0, api == 1 ? S : 0);
    CUresult r = api == 0 ? SC(Memcpy3D)(&m) : SC(Memcpy3DAsync)(&m, api == 1 ? S : 0);
    busy_after(api != 0 && h2d, salt);
    uint64_t h = hash_bytes(0, HOST, HOSTSIZE);
    h = dev_hash(DEV, DEVSIZE, h);
    SC_LOG("%d 3d h2d=%d uni=%d api=%d bad=%d w=%zu rows=%zu depth=%zu host x%zu y%zu z%zu p%zu h%zu "
           "dev x%zu y%zu z%zu p%zu h%zu: %d %016llx\n", i, h2d, uni, api, bad, m.WidthInBytes, m.Height,
           m.Depth, hx, hy, hz, hp, hh, dx, dy, dz, dp, dh, r, (unsigned long long)h);
}

static void case_array(int i, int h2d, int async, int bad)
{
    uint64_t salt = rng_next(&rs);
    size_t elem, w = bad == 2 ? R(1, 20000) : R(1, 200000);
    CUarray a;
    CUresult cr = array_new(&a, w, bad == 2 ? 7 : 0, &elem, bad == 1);
    if (cr) {
        SC_LOG("%d array %d\n", i, cr);
        return;
    }
    size_t total = w * elem, off = R(0, total - 1), n = R(1, total - off);
    if (R(0, 3))
        off -= off % elem, n = n < elem ? elem : n - n % elem;
    if (bad == 3)
        n += elem;
    array_fill(a, salt ^ 1);
    SC_FILL(HOST, HOSTSIZE, salt);
    busy_before(async, S);
    CUresult r = h2d ? (async ? SC(MemcpyHtoAAsync)(a, off, HOST, n, S) : SC(MemcpyHtoA)(a, off, HOST, n))
                     : (async ? SC(MemcpyAtoHAsync)(HOST, a, off, n, S) : SC(MemcpyAtoH)(HOST, a, off, n));
    busy_after(async && h2d, salt);
    uint64_t h = hash_bytes(0, HOST, HOSTSIZE);
    SC_CK(SC(CtxSynchronize)());
    h = array_hash(a, h);
    SC_LOG("%d array h2d=%d async=%d bad=%d n=%zu: %d %016llx\n", i, h2d, async, bad, n, r, (unsigned long long)h);
    SC_CK(SC(ArrayDestroy)(a));
}

static void case_vmm(int i, int h2d)
{
    uint64_t salt = rng_next(&rs);
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    size_t g;
    SC_CK(SC(MemGetAllocationGranularity)(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    int maps = (int)R(2, 3);
    size_t size = maps * g;
    CUdeviceptr base;
    CUmemGenericAllocationHandle hd[3];
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location, acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    SC_CK(SC(MemAddressReserve)(&base, size, 0, 0, 0));
    for (int k = 0; k < maps; k++) {
        SC_CK(SC(MemCreate)(&hd[k], g, &prop, 0));
        SC_CK(SC(MemMap)(base + k * g, g, 0, hd[k], 0));
    }
    SC_CK(SC(MemSetAccess)(base, size, &acc, 1));
    size_t off = R(0, g - 1), end = size - off < HOSTSIZE ? size - off : HOSTSIZE;
    size_t n = R(g - off + 1, end);
    dev_fill(base, size, salt ^ 1);
    SC_FILL(HOST, HOSTSIZE, salt);
    CUresult r = h2d ? SC(MemcpyHtoD)(base + off, HOST, n) : SC(MemcpyDtoH)(HOST, base + off, n);
    uint64_t h = hash_bytes(0, HOST, HOSTSIZE);
    h = dev_hash(base, size, h);
    SC_LOG("%d vmm h2d=%d maps=%d off=%zu n=%zu: %d %016llx\n", i, h2d, maps, off, n, r, (unsigned long long)h);
    SC_CK(SC(MemUnmap)(base, size));
    for (int k = 0; k < maps; k++)
        SC_CK(SC(MemRelease)(hd[k]));
    SC_CK(SC(MemAddressFree)(base, size));
}

/* The cases, in the current context: the buffers first, then n cases. */
static int shape_cases(int n)
{
    const char *busy = getenv("SC_BUSY");
    BUSY = busy && atoi(busy) > 0;
    HOST = (unsigned char *)malloc(HOSTSIZE);
    if (!HOST || SC(MemAllocHost)((void **)&PIN, DEVSIZE + (4 << 20)) || SC(MemAlloc)(&DEV, DEVSIZE) ||
        SC(StreamCreate)(&S, CU_STREAM_NON_BLOCKING))
        return 31;
    for (int i = 0; i < n; i++) {
        int kind = (int)R(0, 11), h2d = (int)R(0, 1);
        int bad = R(0, 3) ? OK : (int)R(1, NBAD - 1);
        if (getenv("SC_TRACE")) /* which case a crash of the driver was in */
            fprintf(stderr, "case %d: kind %d h2d %d bad %d\n", i, kind, h2d, bad);
        if (kind < 6)
            case_2d(i, h2d, kind >= 4, kind == 3, (int)R(0, 4), bad);
        else if (kind >= 10)
            case_3d(i, h2d, kind == 11 && R(0, 1), (int)R(0, 2), R(0, 3) ? OK3 : (int)R(1, NBAD3 - 1));
        else if (kind < 9)
            case_array(i, h2d, (int)R(0, 1), bad ? (int)R(1, 3) : 0);
        else
            case_vmm(i, h2d);
    }
    return 0;
}

#endif
