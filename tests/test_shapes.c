/* test_shapes: every copy shape pinfast stages gives what the driver alone
 * gives.  A child runs random cases (2D copies between pageable memory and
 * device memory, unified pointers or arrays of random formats, with random
 * widths, heights, pitches and offsets; 3D copies of random depths, heights
 * and slice offsets; host <-> 1D array copies; copies
 * across VMM mappings laid end to end; bad input of each kind) and logs,
 * per case, the return code and a hash of every byte of both sides after
 * it (host and device sides filled with random data, the destination's
 * bytes outside the copy checked as well).  The test runs the child on the
 * fake alone and under pinfast with the same seed, and the logs must be
 * equal; pinfast's report must show each shape staged (so the test fails
 * when pinfast passes a shape through).
 *
 * Slots of 64 KiB and PINFAST_MIN_SIZE=0: rows wider than a slot (passed
 * through), copies of many chunks, and every size staged.  Device memory and
 * arrays are filled and read back through pinned memory, which pinfast
 * never stages: its report's staged rows are the cases' copies alone.
 * Internal: test_shapes run <log file>. */
#define _GNU_SOURCE
#include "t.h"
#include "report.h"
#include "spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CASES 360
#define DEVSIZE ((size_t)4 << 20)
#define HOSTSIZE ((size_t)4 << 20)
#define GRAN ((size_t)2 << 20)

static CUstream S;
static CUdeviceptr DEV;
static unsigned char *HOST, *PIN; /* pageable, pinned (fill and read back) */

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* ---- device memory and arrays, through pinned memory ------------------------ */
static void dev_fill(CUdeviceptr d, size_t n, uint64_t salt)
{
    t_fill(PIN, n, salt);
    if (D.MemcpyHtoD(d, PIN, n) || D.CtxSynchronize())
        exit(40);
}

static uint64_t dev_hash(CUdeviceptr d, size_t n, uint64_t h)
{
    if (D.CtxSynchronize() || D.MemcpyDtoH(PIN, d, n))
        exit(41);
    return fnv(PIN, n, h);
}

static size_t array_bytes(CUarray a)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (D.Array3DGetDescriptor(&d, a))
        exit(42);
    size_t f = d.Format == CU_AD_FORMAT_UNSIGNED_INT8 || d.Format == CU_AD_FORMAT_SIGNED_INT8 ? 1
             : d.Format == CU_AD_FORMAT_UNSIGNED_INT16 || d.Format == CU_AD_FORMAT_SIGNED_INT16 ||
                       d.Format == CU_AD_FORMAT_HALF ? 2 : 4;
    return d.Width * f * d.NumChannels * (d.Height ? d.Height : 1);
}

static void array_fill(CUarray a, uint64_t salt)
{
    size_t n = array_bytes(a);
    t_fill(PIN, n, salt);
    if (D.MemcpyHtoA(a, 0, PIN, n) || D.CtxSynchronize())
        exit(43);
}

static uint64_t array_hash(CUarray a, uint64_t h)
{
    size_t n = array_bytes(a);
    if (D.CtxSynchronize() || D.MemcpyAtoH(PIN, a, 0, n))
        exit(44);
    return fnv(PIN, n, h);
}

static const CUarray_format formats[] = {
    CU_AD_FORMAT_UNSIGNED_INT8, CU_AD_FORMAT_UNSIGNED_INT16, CU_AD_FORMAT_UNSIGNED_INT32,
    CU_AD_FORMAT_SIGNED_INT8, CU_AD_FORMAT_SIGNED_INT16, CU_AD_FORMAT_SIGNED_INT32,
    CU_AD_FORMAT_HALF, CU_AD_FORMAT_FLOAT,
};
static size_t format_size(CUarray_format f)
{
    return f == CU_AD_FORMAT_UNSIGNED_INT8 || f == CU_AD_FORMAT_SIGNED_INT8 ? 1
         : f == CU_AD_FORMAT_UNSIGNED_INT16 || f == CU_AD_FORMAT_SIGNED_INT16 || f == CU_AD_FORMAT_HALF ? 2 : 4;
}

/* A random array (1D when h is 0) whose elements are *elem bytes; its
 * creation's code goes into the log (an unknown format must fail alike). */
static CUresult array_new(CUarray *a, size_t w, size_t h, size_t *elem, int bad_format)
{
    static const unsigned channels[] = { 1, 2, 4 };
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = w, .Height = h, .Depth = 0,
                                  .Format = bad_format ? (CUarray_format)0x77 : formats[t_rand_range(0, 7)],
                                  .NumChannels = channels[t_rand_range(0, 2)] };
    *elem = format_size(d.Format) * d.NumChannels;
    return D.Array3DCreate(a, &d);
}

/* ---- one 2D copy ------------------------------------------------------------ */
static CUresult copy2d(const CUDA_MEMCPY2D *m, int api)
{
    switch (api) {
    case 0: return D.Memcpy2D(m);
    case 1: return D.Memcpy2DUnaligned(m);
    case 2: return D.Memcpy2DAsync(m, S);
    default: return D.Memcpy2DAsync(m, 0);
    }
}

/* bad input: each kind of it, applied to an otherwise valid copy */
enum bad { OK, PITCH_LT_WIDTH, OVERFLOW_Y, OVERFLOW_PITCH, NULL_HOST, BOGUS_DEV, PAST_END, ARRAY_X_ODD,
           ARRAY_PAST, WIDTH0, BAD_TYPE, NBAD };

/* A 2D copy between HOST and device memory (unified when uni) or a fresh
 * array (arr), h2d or back; logs its code and the hashes of both sides. */
static void case_2d(FILE *log, int i, int h2d, int arr, int uni, int api, enum bad bad)
{
    uint64_t salt = t_rand();
    size_t width = t_rand_range(1, 3) == 1 ? t_rand_range(1, 96 << 10) : t_rand_range(1, 8 << 10);
    size_t rows = t_rand_range(1, 400), elem = 1;
    CUarray a = NULL;
    CUDA_MEMCPY2D m = { .WidthInBytes = width, .Height = rows };
    /* rows contiguous (pitch = width) now and then: a linear copy */
    size_t hx = t_rand_range(0, 1) ? 0 : t_rand_range(1, 64), hy = t_rand_range(0, 3);
    size_t hp = t_rand_range(0, 2) ? width + hx + t_rand_range(0, 300) : width + hx;
    CUresult cr = CUDA_SUCCESS;
    if (arr) {
        size_t w = t_rand_range(1, 2048), h = t_rand_range(0, 4) == 0 ? 0 : t_rand_range(1, 200);
        cr = array_new(&a, w, h, &elem, 0);
        if (cr) {
            fprintf(log, "%d array %d\n", i, cr);
            return;
        }
        size_t hh = h ? h : 1, ex = t_rand_range(0, w - 1);
        width = elem * t_rand_range(1, w - ex);
        rows = t_rand_range(1, hh);
        size_t y = t_rand_range(0, hh - rows);
        m.WidthInBytes = width, m.Height = rows;
        hp = width + hx + (t_rand_range(0, 1) ? 0 : t_rand_range(1, 200));
        if (h2d)
            m.dstMemoryType = CU_MEMORYTYPE_ARRAY, m.dstArray = a, m.dstXInBytes = ex * elem, m.dstY = y;
        else
            m.srcMemoryType = CU_MEMORYTYPE_ARRAY, m.srcArray = a, m.srcXInBytes = ex * elem, m.srcY = y;
        array_fill(a, salt ^ 1);
    } else {
        size_t dx = t_rand_range(0, 1) ? 0 : t_rand_range(1, 64), dy = t_rand_range(0, 3);
        size_t dp = t_rand_range(0, 2) ? width + dx + t_rand_range(0, 300) : width + dx;
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
    CUmemorytype ht = uni && t_rand_range(0, 1) ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
    if (h2d) {
        m.srcMemoryType = ht, m.srcXInBytes = hx, m.srcY = hy, m.srcPitch = hp;
        m.srcHost = HOST, m.srcDevice = (CUdeviceptr)(uintptr_t)HOST; /* the type says which is read */
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
    case BOGUS_DEV:
        if (!arr)
            *(h2d ? &m.dstDevice : &m.srcDevice) = DEV + ((size_t)1 << 40);
        else
            *(h2d ? &m.dstArray : &m.srcArray) = (CUarray)(uintptr_t)0x1234560;
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
    t_fill(HOST, HOSTSIZE, salt);
    CUresult r = copy2d(&m, api);
    uint64_t h = fnv(HOST, HOSTSIZE, 0xcbf29ce484222325ULL);
    CK(D.CtxSynchronize());
    h = a ? array_hash(a, h) : dev_hash(DEV, DEVSIZE, h);
    fprintf(log, "%d 2d h2d=%d arr=%d uni=%d api=%d bad=%d w=%zu rows=%zu: %d %016llx\n", i, h2d, arr, uni, api,
            bad, m.WidthInBytes, m.Height, r, (unsigned long long)h);
    if (a)
        CK(D.ArrayDestroy(a));
}

/* ---- one 3D copy: slices of pitched rows ------------------------------------- */
enum bad3 { OK3, HEIGHT_LT_ROWS, LOD, PITCH3_LT_WIDTH, OVERFLOW_Z, NBAD3 };

/* Slices of rows between HOST and device memory (unified when uni), with
 * heights at least the rows (the host's sometimes exactly: contiguous). */
static void case_3d(FILE *log, int i, int h2d, int uni, int api, enum bad3 bad)
{
    uint64_t salt = t_rand();
    size_t w = t_rand_range(1, 4) == 1 ? t_rand_range(1, 96 << 10) : t_rand_range(1, 4 << 10);
    size_t rows = t_rand_range(1, 64), depth = t_rand_range(1, 8);
    size_t hx = t_rand_range(0, 1) ? 0 : t_rand_range(1, 64), dx = t_rand_range(0, 1) ? 0 : t_rand_range(1, 64);
    size_t hp = t_rand_range(0, 1) ? w + hx : w + hx + t_rand_range(1, 300);
    size_t dp = t_rand_range(0, 1) ? w + dx : w + dx + t_rand_range(1, 300);
    size_t hh = rows + (t_rand_range(0, 1) ? 0 : t_rand_range(1, 5)), dh = rows + (t_rand_range(0, 1) ? 0 : t_rand_range(1, 5));
    size_t hz = t_rand_range(0, 1), dz = t_rand_range(0, 1), hy = t_rand_range(0, 2), dy = t_rand_range(0, 2);
    while (((hz + depth) * hh + hy) * hp > HOSTSIZE || ((dz + depth) * dh + dy) * dp > DEVSIZE) {
        if (depth > 1)
            depth /= 2;
        else if (rows > 1)
            rows /= 2, hh = dh = rows;
        else
            w /= 2, hp = w + hx, dp = w + dx;
    }
    CUmemorytype t = uni ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE;
    CUDA_MEMCPY3D m = { .WidthInBytes = w, .Height = rows, .Depth = depth };
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
    case OVERFLOW_Z: *(h2d ? &m.srcZ : &m.dstZ) = SIZE_MAX / 8; break;
    default: break;
    }
    dev_fill(DEV, DEVSIZE, salt ^ 1);
    t_fill(HOST, HOSTSIZE, salt);
    CUresult r = api == 0 ? D.Memcpy3D(&m) : D.Memcpy3DAsync(&m, api == 1 ? S : 0);
    uint64_t h = fnv(HOST, HOSTSIZE, 0xcbf29ce484222325ULL);
    h = dev_hash(DEV, DEVSIZE, h);
    fprintf(log, "%d 3d h2d=%d uni=%d api=%d bad=%d w=%zu rows=%zu depth=%zu: %d %016llx\n", i, h2d, uni, api, bad,
            m.WidthInBytes, m.Height, m.Depth, r, (unsigned long long)h);
}

/* ---- host <-> 1D array ------------------------------------------------------ */
static void case_array(FILE *log, int i, int h2d, int async, int bad)
{
    uint64_t salt = t_rand();
    /* 3.2 MB at most: HOST and PIN hold it */
    size_t elem, w = bad == 2 ? t_rand_range(1, 20000) : t_rand_range(1, 200000);
    CUarray a;
    CUresult cr = array_new(&a, w, bad == 2 ? 7 : 0, &elem, bad == 1);
    if (cr) {
        fprintf(log, "%d array %d\n", i, cr);
        return;
    }
    size_t total = w * elem, off = t_rand_range(0, total - 1), n = t_rand_range(1, total - off);
    if (t_rand_range(0, 3)) /* whole elements (pinfast stages only those) */
        off -= off % elem, n = n < elem ? elem : n - n % elem;
    if (bad == 3)
        n += elem;
    array_fill(a, salt ^ 1);
    t_fill(HOST, HOSTSIZE, salt);
    CUresult r = h2d ? (async ? D.MemcpyHtoAAsync(a, off, HOST, n, S) : D.MemcpyHtoA(a, off, HOST, n))
                     : (async ? D.MemcpyAtoHAsync(HOST, a, off, n, S) : D.MemcpyAtoH(HOST, a, off, n));
    uint64_t h = fnv(HOST, HOSTSIZE, 0xcbf29ce484222325ULL);
    CK(D.CtxSynchronize());
    h = array_hash(a, h);
    fprintf(log, "%d array h2d=%d async=%d bad=%d n=%zu: %d %016llx\n", i, h2d, async, bad, n, r,
            (unsigned long long)h);
    CK(D.ArrayDestroy(a));
}

/* ---- across VMM mappings ---------------------------------------------------- */
static void case_vmm(FILE *log, int i, int h2d)
{
    uint64_t salt = t_rand();
    int maps = (int)t_rand_range(2, 3);
    size_t size = maps * GRAN;
    CUdeviceptr base;
    CUmemGenericAllocationHandle hd[3];
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CK(D.MemAddressReserve(&base, size, 0, 0, 0));
    for (int k = 0; k < maps; k++) {
        CK(D.MemCreate(&hd[k], GRAN, &prop, 0));
        CK(D.MemMap(base + k * GRAN, GRAN, 0, hd[k], 0));
    }
    CK(D.MemSetAccess(base, size, &acc, 1));
    /* from the first mapping into a later one */
    size_t off = t_rand_range(0, GRAN - 1), end = size - off < HOSTSIZE ? size - off : HOSTSIZE;
    size_t n = t_rand_range(GRAN - off + 1, end);
    dev_fill(base, size, salt ^ 1);
    t_fill(HOST, HOSTSIZE, salt);
    CUresult r = h2d ? D.MemcpyHtoD(base + off, HOST, n) : D.MemcpyDtoH(HOST, base + off, n);
    uint64_t h = fnv(HOST, HOSTSIZE, 0xcbf29ce484222325ULL);
    h = dev_hash(base, size, h);
    fprintf(log, "%d vmm h2d=%d maps=%d off=%zu n=%zu: %d %016llx\n", i, h2d, maps, off, n, r,
            (unsigned long long)h);
    CK(D.MemUnmap(base, size));
    for (int k = 0; k < maps; k++)
        CK(D.MemRelease(hd[k]));
    CK(D.MemAddressFree(base, size));
}

static int child_run(const char *logf)
{
    if (t_setup(NULL))
        return 30;
    FILE *log = fopen(logf, "w");
    HOST = malloc(HOSTSIZE);
    if (!log || !HOST || D.MemAllocHost((void **)&PIN, DEVSIZE + (4 << 20)) || D.MemAlloc(&DEV, DEVSIZE) ||
        D.StreamCreate(&S, CU_STREAM_NON_BLOCKING))
        return 31;
    for (int i = 0; i < CASES; i++) {
        int kind = (int)t_rand_range(0, 11), h2d = (int)t_rand_range(0, 1);
        enum bad bad = t_rand_range(0, 3) ? OK : (enum bad)t_rand_range(1, NBAD - 1);
        if (kind < 6)
            case_2d(log, i, h2d, kind >= 4, kind == 3, (int)t_rand_range(0, 3), bad);
        else if (kind >= 10)
            case_3d(log, i, h2d, kind == 11 && t_rand_range(0, 1), (int)t_rand_range(0, 2),
                    t_rand_range(0, 3) ? OK3 : (enum bad3)t_rand_range(1, NBAD3 - 1));
        else if (kind < 9)
            case_array(log, i, h2d, (int)t_rand_range(0, 1), bad ? (int)t_rand_range(1, 3) : 0);
        else
            case_vmm(log, i, h2d);
        fflush(log);
    }
    fclose(log);
    return 0;
}

/* ---- the test: plain and pinfast, same seed --------------------------------- */
static long staged_calls(const struct report *r, const char *api)
{
    long n = 0;
    for (int i = 0; i < r->nt; i++)
        if (!strcmp(r->t[i].api, api) && !strcmp(r->t[i].path, "staged"))
            n += r->t[i].calls;
    return n;
}

static void equivalence(void **state)
{
    (void)state;
    char seed[64], logs[2][256], json[256], stats[300];
    snprintf(seed, sizeof seed, "PFT_SEED=%llu", (unsigned long long)t_seed());
    snprintf(json, sizeof json, "%s/report.json", sp_dir);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", json);
    for (int v = 0; v < 2; v++) {
        snprintf(logs[v], sizeof logs[v], "%s/%s.log", sp_dir, v ? "pinfast" : "plain");
        char *argv[] = { "test_shapes", "run", logs[v], NULL };
        const char *set[] = { seed, "PINFAST_MIN_SIZE=0", "PINFAST_CHUNK=64K", "PINFAST_STAGING=1M",
                              "PINFAST_STATS=json", stats, NULL };
        int rc = sp_run(argv, v, set, NULL, NULL, 600, NULL);
        if (rc)
            fail_msg("the %s child exited %d", v ? "pinfast" : "plain", rc);
    }
    char *a = sp_slurp(logs[0], NULL), *b = sp_slurp(logs[1], NULL);
    assert_non_null(a);
    assert_non_null(b);
    for (char *p = a, *q = b; *p || *q;) {
        char *pe = strchrnul(p, '\n'), *qe = strchrnul(q, '\n');
        if (pe - p != qe - q || memcmp(p, q, (size_t)(pe - p)))
            fail_msg("plain and pinfast differ:\n  plain:   %.*s\n  pinfast: %.*s", (int)(pe - p), p,
                     (int)(qe - q), q);
        p = *pe ? pe + 1 : pe;
        q = *qe ? qe + 1 : qe;
    }
    free(a);
    free(b);
    struct report r;
    if (report_read(json, &r))
        fail_msg("report: %s", r.err);
    static const char *const shapes[] = { "cuMemcpy2D", "cuMemcpy2DUnaligned", "cuMemcpy2DAsync",
                                          "cuMemcpy3D", "cuMemcpy3DAsync",
                                          "cuMemcpyHtoA", "cuMemcpyAtoH", "cuMemcpyHtoAAsync",
                                          "cuMemcpyAtoHAsync", "cuMemcpyHtoD", "cuMemcpyDtoH" };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        long n = staged_calls(&r, shapes[i]);
        printf("[ staged   ] %s: %ld\n", shapes[i], n);
        if (!n)
            fail_msg("no %s copy was staged", shapes[i]);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "run") == 0)
        return child_run(argv[2]);
    const struct CMUnitTest tests[] = { cmocka_unit_test(equivalence) };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
