/* test_pool: the pinned pool.  Under pinfast, cuMemHostAlloc and
 * cuMemAllocHost are served from blocks the program freed with cuMemFreeHost,
 * reused only for the same size, API, flags and context, and only after the
 * free synchronised the context.  Everything here must also hold without
 * pinfast (the .plain run checks the fake driver behaves the way the pool
 * claims to imitate); what only the pool does (same address back, the exit
 * report, fewer real driver calls) is checked in the .pinfast run alone.
 *
 *   fences      a free with a copy or a host function still queued on the
 *               block waits for it: the reused block's new content never
 *               reaches the device or the host function;
 *   flags       each kind (flags x API) comes back with the flags, device
 *               pointer and data path of a fresh block, and kinds and sizes
 *               never get each other's blocks;
 *   contexts    nor do contexts;
 *   attributes  cuPointerGetAttribute(s) / cuMemGetAddressRange on a reused
 *               block say what they say of a fresh one;
 *   errors      double free, malloc'd pointer, interior pointer: the driver's
 *               CUDA_ERROR_INVALID_VALUE, and a double free does not put a
 *               block in the pool twice;
 *   threads     8 threads churning blocks never share one;
 *   cap         PINFAST_POOL=3M trims the least recently freed block back to
 *               the driver, PINFAST_POOL=0 sends every free there (children);
 *   exact       5 alloc/free cycles of one size: 4 hits, 1 miss (child).
 */
#define _GNU_SOURCE
#include "t.h"
#include "report.h"
#include "spawn.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* Blocks stay below PINFAST_MIN_SIZE (512K) where the tests copy, so pinfast
 * passes those copies through and only the pool is under test. */

static void sleep_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t))
        ;
}

/* a pinned allocation through either API: api 0 = cuMemHostAlloc(flags),
 * 1 = cuMemAllocHost (flags must be 0) */
static CUresult pin_alloc(int api, void **p, size_t n, unsigned flags)
{
    return api ? D.MemAllocHost(p, n) : D.MemHostAlloc(p, n, flags);
}

/* ---- 1. reuse after fences --------------------------------------------------- */

static void slow_fn(void *u)
{
    (void)u;
    sleep_ms(30);
}

/* queued behind the slow host function: reads the block it was given and says
 * whether it still held pattern 1 */
struct reader { const void *p; size_t n; uint64_t salt; atomic_int ran, ok; };
static void read_fn(void *u)
{
    struct reader *r = u;
    size_t bad;
    sleep_ms(30);
    atomic_store(&r->ok, t_check_fill(r->p, r->n, r->salt, &bad));
    atomic_store(&r->ran, 1);
}

static void test_fence_copy(void **s)
{
    (void)s;
    const size_t n = 200 * KiB + 24;
    CUstream st;
    CUdeviceptr dev;
    void *a, *b;
    unsigned char *out = malloc(n);
    assert_non_null(out);
    CK(D.StreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(D.MemAlloc(&dev, n));
    CK(D.MemHostAlloc(&a, n, 0));
    uint64_t salt1 = t_rand(), salt2 = t_rand();
    t_fill(a, n, salt1);
    /* the copy cannot start before slow_fn returns: it is still queued when
     * the program frees its source */
    CK(D.LaunchHostFunc(st, slow_fn, NULL));
    CK(D.MemcpyHtoDAsync(dev, a, n, st));
    unsigned long syncs = fake_calls("cuCtxSynchronize");
    CK(D.MemFreeHost(a));                       /* no sync by the program */
    CK(D.MemHostAlloc(&b, n, 0));
    if (t_pinfast()) {
        assert_ptr_equal(b, a);                 /* the pool gave it back... */
        assert_true(fake_calls("cuCtxSynchronize") > syncs);   /* ...after a sync */
    }
    t_fill(b, n, salt2);
    CK(D.StreamSynchronize(st));
    t_poison(out, n);
    CK(D.MemcpyDtoH(out, dev, n));
    size_t bad = 0;
    if (!t_check_fill(out, n, salt1, &bad))
        fail_msg("the device got byte %zu of the block's next content: the free did not wait "
                 "for the queued copy", bad);
    CK(D.MemFreeHost(b));
    CK(D.MemFree(dev));
    CK(D.StreamDestroy(st));
    free(out);
}

static void test_fence_hostfn(void **s)
{
    (void)s;
    const size_t n = 96 * KiB + 8;
    const unsigned flags = CU_MEMHOSTALLOC_DEVICEMAP;
    CUstream st;
    void *a, *b;
    CUdeviceptr mapped;
    CK(D.StreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(D.MemHostAlloc(&a, n, flags));
    CK(D.MemHostGetDevicePointer(&mapped, a, 0));
    /* the reader goes through the mapped address, as a kernel would */
    static struct reader r;
    r = (struct reader){ .p = (const void *)(uintptr_t)mapped, .n = n, .salt = t_rand() };
    t_fill(a, n, r.salt);
    CK(D.LaunchHostFunc(st, slow_fn, NULL));
    CK(D.LaunchHostFunc(st, read_fn, &r));
    CK(D.MemFreeHost(a));
    /* without a fence the reader is still sleeping here */
    assert_int_equal(atomic_load(&r.ran), 1);
    CK(D.MemHostAlloc(&b, n, flags));
    if (t_pinfast())
        assert_ptr_equal(b, a);
    t_fill(b, n, r.salt + 1);
    CK(D.StreamSynchronize(st));
    assert_int_equal(atomic_load(&r.ok), 1);
    CK(D.MemFreeHost(b));
    CK(D.StreamDestroy(st));
}

/* ---- 2. flags ------------------------------------------------------------------ */

struct kind { int api; unsigned flags; const char *name; };
#define P CU_MEMHOSTALLOC_PORTABLE
#define M CU_MEMHOSTALLOC_DEVICEMAP
#define W CU_MEMHOSTALLOC_WRITECOMBINED
static const struct kind kinds[] = {
    { 0, 0, "HostAlloc(0)" },       { 0, P, "HostAlloc(P)" },     { 0, M, "HostAlloc(M)" },
    { 0, W, "HostAlloc(W)" },       { 0, P | M, "HostAlloc(PM)" }, { 0, P | W, "HostAlloc(PW)" },
    { 0, M | W, "HostAlloc(MW)" },  { 0, P | M | W, "HostAlloc(PMW)" },
    { 1, 0, "AllocHost" },
};
#define NKINDS (int)(sizeof kinds / sizeof kinds[0])

/* what the driver says of one block */
struct facts { CUresult flags_r, dptr_r; unsigned flags; CUdeviceptr dptr; };
static struct facts facts_of(void *p)
{
    struct facts f = { 0 };
    f.flags_r = D.MemHostGetFlags(&f.flags, p);
    f.dptr_r = D.MemHostGetDevicePointer(&f.dptr, p, 0);
    return f;
}

/* the block's device pointer works both ways */
static void check_mapped(void *p, size_t n, const char *what)
{
    CUdeviceptr d;
    CK(D.MemHostGetDevicePointer(&d, p, 0));
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    uint64_t salt = t_rand();
    size_t bad;
    t_fill(p, n, salt);
    t_poison(buf, n);
    CK(D.MemcpyDtoH(buf, d, n));                /* device view of host writes */
    if (!t_check_fill(buf, n, salt, &bad))
        fail_msg("%s: read through the device pointer: wrong byte at %zu", what, bad);
    t_fill(buf, n, salt + 1);
    CK(D.MemcpyHtoD(d, buf, n));                /* host view of device writes */
    if (!t_check_fill(p, n, salt + 1, &bad))
        fail_msg("%s: written through the device pointer: wrong byte at %zu", what, bad);
    free(buf);
}

static void test_flags(void **s)
{
    (void)s;
    const size_t n = 72 * KiB + 40;
    void *fresh[NKINDS], *again[NKINDS];
    struct facts ff[NKINDS];
    /* every kind at once, same size: the pool then holds nine blocks that
     * only their kind may take */
    for (int k = 0; k < NKINDS; k++) {
        CK(pin_alloc(kinds[k].api, &fresh[k], n, kinds[k].flags));
        ff[k] = facts_of(fresh[k]);
        /* what the .plain run shows the driver answers for a fresh block */
        CK(ff[k].flags_r);
        assert_int_equal(ff[k].flags, kinds[k].flags);
        CK(ff[k].dptr_r);
        if (kinds[k].flags & M)
            check_mapped(fresh[k], n, kinds[k].name);
    }
    for (int k = 0; k < NKINDS; k++)
        CK(D.MemFreeHost(fresh[k]));
    /* other sizes of each kind first: they must not take a cached block */
    for (int k = 0; k < NKINDS; k++) {
        void *q1, *q2;
        CK(pin_alloc(kinds[k].api, &q1, n + 1, kinds[k].flags));
        CK(pin_alloc(kinds[k].api, &q2, n - 4096, kinds[k].flags));
        if (t_pinfast())
            for (int j = 0; j < NKINDS; j++)
                if (q1 == fresh[j] || q2 == fresh[j])
                    fail_msg("%s of another size got the %s block", kinds[k].name, kinds[j].name);
        CK(D.MemFreeHost(q1));
        CK(D.MemFreeHost(q2));
    }
    /* the same kinds in the order they were freed: the most recently freed
     * block of this size is then always another kind's, which a pool matching
     * on size alone (or size and API) would hand out */
    for (int k = 0; k < NKINDS; k++) {
        CK(pin_alloc(kinds[k].api, &again[k], n, kinds[k].flags));
        if (t_pinfast() && again[k] != fresh[k]) {
            for (int j = 0; j < NKINDS; j++)
                if (again[k] == fresh[j])
                    fail_msg("%s got the %s block", kinds[k].name, kinds[j].name);
            fail_msg("%s: not served from the pool", kinds[k].name);
        }
        struct facts f = facts_of(again[k]);
        assert_int_equal(f.flags_r, ff[k].flags_r);
        assert_int_equal(f.flags, ff[k].flags);
        assert_int_equal(f.dptr_r, ff[k].dptr_r);
        /* with unified addressing the device pointer is the host address */
        assert_true(f.dptr == (CUdeviceptr)(uintptr_t)again[k]);
        assert_true(ff[k].dptr == (CUdeviceptr)(uintptr_t)fresh[k]);
        if (kinds[k].flags & M)
            check_mapped(again[k], n, kinds[k].name);
    }
    for (int k = 0; k < NKINDS; k++)
        CK(D.MemFreeHost(again[k]));
}

/* a block made in one context is never served in another: its flags, device
 * pointer and lifetime belong to the context it was made in */
static void test_contexts(void **s)
{
    (void)s;
    const size_t n = 56 * KiB + 12;
    CUdevice dev;
    CUcontext c2;
    void *a, *b, *c;
    CK(D.CtxGetDevice(&dev));
    CK(D.MemHostAlloc(&a, n, 0));
    CK(D.MemFreeHost(a));                       /* cached in T_CTX */
    CK(D.CtxCreate(&c2, 0, dev));               /* now current */
    CK(D.CtxSetCurrent(c2));
    CK(D.MemHostAlloc(&b, n, 0));
    if (t_pinfast())
        assert_ptr_not_equal(b, a);
    CK(D.MemFreeHost(b));                       /* cached in c2 */
    CK(D.CtxSetCurrent(T_CTX));
    CK(D.MemHostAlloc(&c, n, 0));
    if (t_pinfast()) {
        assert_ptr_equal(c, a);
        assert_ptr_not_equal(c, b);
    }
    /* freed while another context is current: its sync would not cover the
     * block's context, so it is not cached; the driver frees it */
    unsigned long frees = fake_calls("cuMemFreeHost");
    CK(D.CtxSetCurrent(c2));
    CK(D.MemFreeHost(c));
    assert_int_equal(fake_calls("cuMemFreeHost"), frees + 1);
    CK(D.CtxSetCurrent(T_CTX));
    CK_EQ(D.MemFreeHost(c), CUDA_ERROR_INVALID_VALUE);
    CK(D.CtxDestroy(c2));
    CK(D.CtxSetCurrent(T_CTX));
    /* c2's cached block went with c2 (the driver freed it, and may hand its
     * address out again): T_CTX's next block of that size is the driver's */
    unsigned long allocs = fake_calls("cuMemHostAlloc");
    CK(D.MemHostAlloc(&a, n, 0));
    assert_int_equal(fake_calls("cuMemHostAlloc"), allocs + 1);
    CK(D.MemFreeHost(a));
}

/* ---- 3. attributes ----------------------------------------------------------------- */

/* the attributes the fake models; BUFFER_ID names an allocation, so a reused
 * block keeps its own and is only checked to be set */
struct attrs {
    CUcontext ctx;
    unsigned type, managed, mapped;
    int ordinal;
    CUdeviceptr dptr, start;
    void *hptr;
    size_t size;
    unsigned long long id;
    CUdeviceptr range_base;
    size_t range_size;
};

static void attrs_of(void *p, struct attrs *a)
{
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
    memset(a, 0, sizeof *a);
    CK(D.PointerGetAttribute(&a->ctx, CU_POINTER_ATTRIBUTE_CONTEXT, d));
    CK(D.PointerGetAttribute(&a->type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    CK(D.PointerGetAttribute(&a->dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, d));
    CK(D.PointerGetAttribute(&a->hptr, CU_POINTER_ATTRIBUTE_HOST_POINTER, d));
    CK(D.PointerGetAttribute(&a->managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
    CK(D.PointerGetAttribute(&a->mapped, CU_POINTER_ATTRIBUTE_MAPPED, d));
    CK(D.PointerGetAttribute(&a->ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d));
    CK(D.PointerGetAttribute(&a->id, CU_POINTER_ATTRIBUTE_BUFFER_ID, d));
    CK(D.PointerGetAttribute(&a->start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d));
    CK(D.PointerGetAttribute(&a->size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d));
    CK(D.MemGetAddressRange(&a->range_base, &a->range_size, d + 100));
    /* the multi-attribute call agrees with the single one */
    unsigned type2 = 99;
    size_t size2 = 0;
    CUpointer_attribute which[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_SIZE };
    void *data[] = { &type2, &size2 };
    CK(D.PointerGetAttributes(2, which, data, d));
    assert_int_equal(type2, a->type);
    assert_int_equal(size2, a->size);
}

/* equal, with the address-valued attributes taken relative to the block */
static void attrs_same(const struct attrs *x, void *px, const struct attrs *y, void *py, const char *what)
{
    uintptr_t bx = (uintptr_t)px, by = (uintptr_t)py;
    if (x->ctx != y->ctx || x->type != y->type || x->managed != y->managed ||
        x->mapped != y->mapped || x->ordinal != y->ordinal || x->size != y->size ||
        x->range_size != y->range_size || x->dptr - bx != y->dptr - by ||
        (uintptr_t)x->hptr - bx != (uintptr_t)y->hptr - by || x->start - bx != y->start - by ||
        x->range_base - bx != y->range_base - by || !x->id || !y->id)
        fail_msg("%s: attributes of the reused block differ from a fresh one's", what);
}

static void test_attributes(void **s)
{
    (void)s;
    const size_t n = 40 * KiB + 4;
    for (int k = 0; k < NKINDS; k++) {
        void *a, *b;
        struct attrs fa, fb;
        CK(pin_alloc(kinds[k].api, &a, n, kinds[k].flags));
        attrs_of(a, &fa);
        assert_int_equal(fa.type, CU_MEMORYTYPE_HOST);
        assert_ptr_equal(fa.ctx, T_CTX);
        assert_true(fa.start == (CUdeviceptr)(uintptr_t)a);
        assert_int_equal(fa.size, n);
        CK(D.MemFreeHost(a));
        CK(pin_alloc(kinds[k].api, &b, n, kinds[k].flags));
        if (t_pinfast())
            assert_ptr_equal(b, a);
        attrs_of(b, &fb);
        attrs_same(&fa, a, &fb, b, kinds[k].name);
        CK(D.MemFreeHost(b));
    }
}

/* ---- 4. errors --------------------------------------------------------------------- */

static void test_double_free(void **s)
{
    (void)s;
    const size_t n = 24 * KiB;
    for (int api = 0; api < 2; api++) {
        void *a, *y1, *y2;
        CK(pin_alloc(api, &a, n, 0));
        CK(D.MemFreeHost(a));
        CK_EQ(D.MemFreeHost(a), CUDA_ERROR_INVALID_VALUE);
        /* the rejected second free must not have cached the block twice */
        CK(pin_alloc(api, &y1, n, 0));
        CK(pin_alloc(api, &y2, n, 0));
        assert_ptr_not_equal(y1, y2);
        if (t_pinfast())
            assert_ptr_equal(y1, a);
        CK(D.MemFreeHost(y1));
        CK(D.MemFreeHost(y2));
        /* both now idle in the pool: freeing either again is still an error */
        CK_EQ(D.MemFreeHost(y2), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemFreeHost(y1), CUDA_ERROR_INVALID_VALUE);
    }
}

static void test_foreign_free(void **s)
{
    (void)s;
    const size_t n = 24 * KiB;
    char *m = malloc(n), *a;
    assert_non_null(m);
    CK_EQ(D.MemFreeHost(m), CUDA_ERROR_INVALID_VALUE);
    free(m);
    CK(D.MemHostAlloc((void **)&a, n, 0));
    CK_EQ(D.MemFreeHost(a + 64), CUDA_ERROR_INVALID_VALUE);   /* live block */
    CK(D.MemFreeHost(a));                                     /* still freeable */
    CK_EQ(D.MemFreeHost(a + 64), CUDA_ERROR_INVALID_VALUE);   /* idle in the pool */
    void *b;
    CK(D.MemHostAlloc(&b, n, 0));                             /* and still served */
    if (t_pinfast())
        assert_ptr_equal(b, a);
    CK(D.MemFreeHost(b));
}

/* ---- 5. threads -------------------------------------------------------------------- */

#define NTHREADS 8
#define ROUNDS 200
static atomic_int thread_failures;
static char thread_msg[256];

static void thread_fail(const char *fmt, ...)
{
    if (atomic_fetch_add(&thread_failures, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(thread_msg, sizeof thread_msg, fmt, ap);
        va_end(ap);
    }
}

static void *churn(void *arg)
{
    static const size_t sizes[] = { 4 * KiB, 64 * KiB, 64 * KiB + 1, 300 * KiB };
    int id = (int)(intptr_t)arg;
    uint64_t x = t_seed() * 2654435761u + (uint64_t)id + 1;   /* t_rand is not thread-safe */
    t_bind_ctx();
    for (int i = 0; i < ROUNDS && !atomic_load(&thread_failures); i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        uint64_t r = x * 2685821657736338717ULL;
        size_t n = sizes[r % 4];
        int api = (r >> 8) % 3 == 0;
        unsigned flags = api ? 0 : ((r >> 16) & 1 ? CU_MEMHOSTALLOC_PORTABLE : 0);
        unsigned char *p;
        CUresult e = pin_alloc(api, (void **)&p, n, flags);
        if (e) {
            thread_fail("thread %d round %d: alloc of %zu returned %d", id, i, n, (int)e);
            break;
        }
        /* a block handed to two threads at once shows as another id here */
        memset(p, id + 1, n);
        if (i % 8 == 0)
            sleep_ms(1);
        for (size_t j = 0; j < n; j++)
            if (p[j] != id + 1) {
                thread_fail("thread %d round %d: byte %zu of %p is %d: shared with thread %d",
                            id, i, j, (void *)p, p[j], p[j] - 1);
                break;
            }
        if ((e = D.MemFreeHost(p)))
            thread_fail("thread %d round %d: free returned %d", id, i, (int)e);
    }
    return NULL;
}

static void test_threads(void **s)
{
    (void)s;
    pthread_t th[NTHREADS];
    atomic_store(&thread_failures, 0);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, churn, (void *)(intptr_t)i), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    if (atomic_load(&thread_failures))
        fail_msg("%d failures; first: %s", atomic_load(&thread_failures), thread_msg);
}

/* ---- children: 6. cap and 7. exact counts ----------------------------------------- */

/* "cap": four 1 MiB blocks alive at once, then freed;
 * "cycles": five alloc/free cycles of one size.
 * Writes the fake's real cuMemHostAlloc / cuMemFreeHost call counts over that
 * work to argv[2]. */
static int child(const char *mode, const char *file)
{
    if (t_setup(NULL))
        return 30;
    unsigned long a0 = fake_calls("cuMemHostAlloc"), f0 = fake_calls("cuMemFreeHost");
    if (strcmp(mode, "cap") == 0) {
        void *p[4];
        for (int i = 0; i < 4; i++)
            if (D.MemHostAlloc(&p[i], MiB, 0))
                return 31;
        for (int i = 0; i < 4; i++)
            if (D.MemFreeHost(p[i]))
                return 32;
    } else {
        for (int i = 0; i < 5; i++) {
            void *p;
            if (D.MemHostAlloc(&p, 256 * KiB, CU_MEMHOSTALLOC_PORTABLE))
                return 31;
            memset(p, i, 256 * KiB);
            if (D.MemFreeHost(p))
                return 32;
        }
    }
    FILE *f = fopen(file, "w");
    if (!f)
        return 33;
    fprintf(f, "%lu %lu\n", fake_calls("cuMemHostAlloc") - a0, fake_calls("cuMemFreeHost") - f0);
    return fclose(f) ? 33 : 0;
}

static const char *dir;

static int group_setup(void **s)
{
    dir = sp_tmpdir("pool");
    return dir ? t_setup(s) : -1;
}

static int group_teardown(void **s)
{
    (void)s;
    sp_rmdir(dir);
    return 0;
}

/* runs a child with the pool setting; returns its real alloc and free counts
 * and, under pinfast, its report */
static void run_child(const char *mode, const char *pool, unsigned long *allocs,
                      unsigned long *frees, struct report *r)
{
    static int k;
    char json[300], counts[300], errf[300], stats[320], poolv[64];
    snprintf(json, sizeof json, "%s/r-%d.json", dir, k);
    snprintf(counts, sizeof counts, "%s/c-%d.txt", dir, k);
    snprintf(errf, sizeof errf, "%s/e-%d.txt", dir, k++);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", json);
    snprintf(poolv, sizeof poolv, "PINFAST_POOL=%s", pool);
    const char *set[] = { "PINFAST_STATS=json", stats, poolv,
                          t_pinfast() ? "PFT_PINFAST=1" : "PFT_PINFAST=0", NULL };
    char *argv[] = { "test_pool", (char *)mode, counts, NULL };
    int rc = sp_run(argv, t_pinfast(), set, "/dev/null", errf, 120, NULL);
    if (rc != 0) {
        char *err = sp_slurp(errf, NULL);
        fail_msg("%s %s: child status %d\n%s", mode, poolv, rc, err ? err : "");
    }
    char *c = sp_slurp(counts, NULL);
    if (!c || sscanf(c, "%lu %lu", allocs, frees) != 2)
        fail_msg("%s %s: no counts from the child", mode, poolv);
    free(c);
    if (t_pinfast() && report_read(json, r))
        fail_msg("%s %s: report: %s", mode, poolv, r->err);
}

static void test_cap(void **s)
{
    (void)s;
    static struct report r;
    unsigned long allocs, frees;
    run_child("cap", "3M", &allocs, &frees, &r);
    assert_int_equal(allocs, 4);
    if (!t_pinfast()) {
        assert_int_equal(frees, 4);             /* the driver frees each one */
        return;
    }
    /* the 4th free takes the pool over 3 MiB: the oldest block goes for real */
    assert_true(r.pool.trimmed >= 1);
    assert_int_equal(frees, (unsigned long)r.pool.trimmed);
    assert_true(r.pool.idle_bytes <= (long long)(3 * MiB));
    assert_int_equal(r.pool.idle_bytes, (long long)((4 - r.pool.trimmed) * MiB));
    assert_true(r.pool.peak_idle_bytes >= r.pool.idle_bytes);
    assert_int_equal(r.pool.hits, 0);
    assert_int_equal(r.pool.misses, 4);

    run_child("cap", "0", &allocs, &frees, &r);
    assert_int_equal(allocs, 4);
    assert_int_equal(frees, 4);                 /* no pool: every free reaches the driver */
    assert_int_equal(r.pool.hits, 0);
    assert_int_equal(r.pool.idle_bytes, 0);
    assert_int_equal(r.pool.trimmed, 0);
}

static void test_exact(void **s)
{
    (void)s;
    static struct report r;
    unsigned long allocs, frees;
    run_child("cycles", "1G", &allocs, &frees, &r);
    if (!t_pinfast()) {
        assert_int_equal(allocs, 5);
        assert_int_equal(frees, 5);
        return;
    }
    assert_int_equal(r.pool.hits, 4);
    assert_int_equal(r.pool.misses, 1);
    assert_int_equal(allocs, 1);                /* only the miss reached the driver */
    assert_int_equal(frees, 0);                 /* the block is still cached at exit */
    assert_int_equal(r.pool.idle_bytes, 256 * KiB);
    assert_int_equal(r.pool.peak_idle_bytes, 256 * KiB);
    assert_int_equal(r.pool.trimmed, 0);
}

int main(int argc, char **argv)
{
    if (argc == 3)
        return child(argv[1], argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fence_copy),
        cmocka_unit_test(test_fence_hostfn),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_contexts),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_double_free),
        cmocka_unit_test(test_foreign_free),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_exact),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
