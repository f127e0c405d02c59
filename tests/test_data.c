/* test_data: every byte arrives, for random sizes (1 B .. 64 MiB+) and
 * offsets, pageable / pinned / registered / managed host memory, sync and
 * async, H2D, D2H, D2D, peer, unified, 2D, 3D and batch copies.  Destinations
 * are poisoned and the guard bytes around them checked. */
#define _GNU_SOURCE
#include "t.h"
#include "base/cpu_quota.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define GUARD 64

enum hmem { H_PAGEABLE, H_PINNED, H_REGISTERED };
static const char *hname[] = { "pageable", "pinned", "registered" };

struct hbuf { enum hmem kind; unsigned char *base; size_t size; };

static void halloc(struct hbuf *b, enum hmem kind, size_t size)
{
    b->kind = kind;
    b->size = size;
    if (kind == H_PINNED) {
        CK(D.MemHostAlloc((void **)&b->base, size, 0));
    } else {
        b->base = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
        assert_non_null(b->base);
        if (kind == H_REGISTERED)
            CK(D.MemHostRegister(b->base, size, 0));
    }
}

static void hfree(struct hbuf *b)
{
    if (b->kind == H_PINNED) {
        CK(D.MemFreeHost(b->base));
    } else {
        if (b->kind == H_REGISTERED)
            CK(D.MemHostUnregister(b->base));
        free(b->base);
    }
}

static void expect_poison(const unsigned char *p, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0xA5)
            fail_msg("%s: byte %zu outside the copy was overwritten", what, i);
}

static CUstream S;    /* a created blocking stream */

static int setup(void **s)
{
    if (t_setup(s))
        return -1;
    return D.StreamCreate(&S, CU_STREAM_DEFAULT) ? -1 : 0;
}

/* H2D then D2H of n bytes at random offsets through host memory of kind k */
static void roundtrip(size_t n, enum hmem k, int async, CUstream st)
{
    size_t hoff = t_rand_range(0, 63), doff = t_rand_range(0, 63), roff = t_rand_range(0, 63);
    struct hbuf src, dst;
    halloc(&src, k, n + 128);
    halloc(&dst, k, n + 2 * GUARD + 64);
    CUdeviceptr dev;
    CK(D.MemAlloc(&dev, n + 128));
    uint64_t salt = t_rand();
    t_fill(src.base + hoff, n, salt);
    t_poison(dst.base, dst.size);
    unsigned char *out = dst.base + GUARD + roff;
    char what[128];
    snprintf(what, sizeof what, "%s %s roundtrip of %zu bytes (offsets %zu/%zu/%zu)",
             hname[k], async ? "async" : "sync", n, hoff, doff, roff);
    if (async) {
        CK(D.MemcpyHtoDAsync(dev + doff, src.base + hoff, n, st));
        CK(D.MemcpyDtoHAsync(out, dev + doff, n, st));
        if (k != H_PAGEABLE)               /* pageable D2H returns with the data in place */
            CK(D.StreamSynchronize(st));
    } else {
        CK(D.MemcpyHtoD(dev + doff, src.base + hoff, n));
        CK(D.MemcpyDtoH(out, dev + doff, n));
    }
    t_expect_fill(out, n, salt, what);
    expect_poison(dst.base, GUARD + roff, what);
    expect_poison(out + n, dst.size - (size_t)(out + n - dst.base), what);
    CK(D.MemFree(dev));
    hfree(&src);
    hfree(&dst);
}

/* PFT_QUICK=1 (the valgrind run) keeps to sizes up to 64 KiB + 1 and fewer
 * rounds */
static int quick(void)
{
    const char *v = getenv("PFT_QUICK");
    return v && *v == '1';
}

static size_t sizes[] = { 1, 2, 3, 7, 8, 15, 63, 64, 65, 511, 4095, 4096, 4097, 65536, 65537,
                          1 << 20, (1 << 20) + 1, (4 << 20) - 3, (8 << 20) + 13 };
#define NSIZES (quick() ? 15 : sizeof sizes / sizeof sizes[0])

static void test_sizes_sync(void **s)
{
    (void)s;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < NSIZES; i++)
            roundtrip(sizes[i], (enum hmem)k, 0, NULL);
}

static void test_sizes_async(void **s)
{
    (void)s;
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < NSIZES; i++) {
            roundtrip(sizes[i], (enum hmem)k, 1, S);
            roundtrip(sizes[i], (enum hmem)k, 1, NULL);   /* the flavour's default stream */
        }
}

static void test_random_sizes(void **s)
{
    (void)s;
    for (int i = 0; i < (quick() ? 6 : 24); i++) {
        size_t n = (size_t)1 << t_rand_range(0, quick() ? 16 : 24);
        n += t_rand_range(0, n);
        roundtrip(n, (enum hmem)t_rand_range(0, 2), (int)t_rand_range(0, 1), t_rand_range(0, 1) ? S : NULL);
    }
}

static void test_64mib(void **s)
{
    (void)s;
    if (quick())
        skip();
    size_t n = (64u << 20) + 4097;
    roundtrip(n, H_PAGEABLE, 0, NULL);
    roundtrip(n, H_PAGEABLE, 1, S);
    roundtrip(n, H_PINNED, 1, S);
}

/* Whether transparent huge pages are in the given mode ("[always]": every
 * anonymous fault, advised or not, so that a byte touched near the
 * destination brings its whole 2 MiB in; "[madvise]": on advice only). */
static int thp_mode(const char *mode)
{
    char buf[80] = {0};
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            buf[0] = 0;
        fclose(f);
    }
    return strstr(buf, mode) != NULL;
}

static int thp_always(void) { return thp_mode("[always]"); }
static int thp_madvise(void) { return thp_mode("[madvise]"); }

/* The VmFlags of the mapping holding p, from /proc/self/smaps ("" if none). */
static void vm_flags(const void *p, char *out, size_t size)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[256];
    int in = 0;
    out[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && !strncmp(line, "VmFlags:", 8))
            snprintf(out, size, "%s", line + 8);
    }
    if (f)
        fclose(f);
}

/* One D2H of n bytes into memory never touched (what .cpu() and a
 * checkpoint save write into), sync or async: every byte arrives, the bytes
 * around it are untouched, and the pages it does not reach stay out of
 * memory (pinfast faults the destination in for its copy, huge pages
 * advised: never more).  The destination is mapped by the program just
 * before, at a random offset past a 2 MiB boundary (`heap` 0): pinfast
 * never advises huge pages on it, the advice would stay on memory it does
 * not own; or a block calloc gives (`heap` 1): under pinfast a block of its
 * own heap (64 bytes past a 2 MiB boundary; where its heap is off, a
 * sanitizer's or valgrind's calloc, not), which with THP on advice it
 * advises huge pages.  *heap_on: the destination was pinfast's. */
static void fresh_round(size_t n, int async, int heap, int *heap_on)
{
    const size_t huge = 2u << 20, page = 4096;
    size_t lead = huge + t_rand_range(1, huge - 1);
    size_t span = lead + n + 3 * huge;
    unsigned char *m = NULL, *base = NULL, *out;
    if (heap) {
        out = calloc(1, n + GUARD); /* its bytes past the copy: a guard of zeros */
        assert_non_null(out);
        lead = (uintptr_t)out & (huge - 1);
    } else {
        m = mmap(NULL, span + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        assert_true(m != MAP_FAILED);
        base = (unsigned char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
        out = base + lead;
        memset(out - GUARD, 0xA5, GUARD); /* the page before the destination: touched */
    }
    int pinfasts = t_pinfast() && heap && lead == 64;
    if (heap_on)
        *heap_on = pinfasts;
    CUdeviceptr dev;
    CK(D.MemAlloc(&dev, n));
    uint64_t salt = t_rand();
    unsigned char *src = malloc(n);
    assert_non_null(src);
    t_fill(src, n, salt);
    CK(D.MemcpyHtoD(dev, src, n));
    free(src);
    if (async) {
        CK(D.MemcpyDtoHAsync(out, dev, n, S));
        CK(D.StreamSynchronize(S));
    } else {
        CK(D.MemcpyDtoH(out, dev, n));
    }
    char what[128];
    snprintf(what, sizeof what, "D2H of %zu bytes into fresh memory %s at +%zu", n,
             heap ? "calloc gave" : "the program mapped", lead);
    t_expect_fill(out, n, salt, what);
    if (!heap)
        expect_poison(out - GUARD, GUARD, what);
    char flags[512];
    vm_flags((void *)(((uintptr_t)out + huge - 1) & ~(uintptr_t)(huge - 1)), flags, sizeof flags);
    /* memory the program mapped itself is never advised: the advice would
     * stay on it (pinfast advises only blocks of its own heap) */
    if (t_pinfast() && !heap && strstr(flags, " hg"))
        fail_msg("%s: advised huge pages on memory pinfast does not own (VmFlags:%s)", what, flags);
    if (pinfasts && thp_madvise() && !strstr(flags, " hg"))
        fail_msg("%s: a block of pinfast's heap, not advised huge pages (VmFlags:%s)", what, flags);
    unsigned char *end = out + n, *tail = (unsigned char *)(((uintptr_t)end + page - 1) & ~(uintptr_t)(page - 1));
    if (heap)
        tail = end + GUARD;
    for (unsigned char *q = end; q < tail; q++)
        if (*q)
            fail_msg("%s: byte %zu past the copy is not 0", what, (size_t)(q - end));
    if (!heap && !thp_always()) { /* the untouched page before the guard and the pages past the copy's last */
        unsigned char before = 0, after[3 * 512] = {0};
        assert_int_equal(mincore(base, page, &before), 0);
        size_t pages = (size_t)(m + span + huge - tail) / page;
        if (pages > sizeof after)
            pages = sizeof after;
        assert_int_equal(mincore(tail, pages * page, after), 0);
        if (before & 1)
            fail_msg("%s: the page 2 MiB before it was brought into memory", what);
        for (size_t i = 0; i < pages; i++)
            if (after[i] & 1)
                fail_msg("%s: page %zu past its end was brought into memory", what, i);
    }
    CK(D.MemFree(dev));
    if (heap)
        free(out);
    else
        munmap(m, span + huge);
}

/* Fresh destinations of 16-40 MiB (faulted in ahead of the copy), sync and
 * async, mapped by the program and calloc'd; and of 3-8 MiB mapped by the
 * program (each chunk a piece of each 2 MiB region it spans). */
static void test_fresh_destination(void **s)
{
    (void)s;
    if (quick())
        skip();
    for (int round = 0; round < 4; round++)
        fresh_round(t_rand_range(16u << 20, 40u << 20), round & 1, 0, NULL);
    for (int round = 0; round < 4; round++)
        fresh_round(t_rand_range(3u << 20, (8u << 20) - 1), round & 1, 0, NULL);
    int heap_on = 0;
    for (int round = 0; round < 4; round++)
        fresh_round(t_rand_range(16u << 20, 40u << 20), round & 1, 1, &heap_on);
    if (t_pinfast() && !heap_on)
        print_message("(pinfast's heap is off here: a calloc'd destination is not advised)\n");
}

/* The threads of pinfast's pool (named pinfast-wN). */
static int pool_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        char path[300], comm[32] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = e->d_name[0] != '.' ? fopen(path, "r") : NULL;
        if (f && fgets(comm, sizeof comm, f) && !strncmp(comm, "pinfast-w", 9))
            n++;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

/* A fresh destination of 256 MiB or more (each chunk's copy faulting its
 * own huge page), as fresh_round checks it: one the program mapped (never
 * advised: the pool stays as it is), then one calloc gave; with the second,
 * under pinfast (its heap on, THP on advice), the pool grows to a thread
 * per CPU, unless PINFAST_THREADS fixes it. */
static void test_fresh_large(void **s)
{
    (void)s;
    if (quick())
        skip();
    /* a staged copy first: the pool as it is sized, whatever ran before */
    size_t n = 1u << 20;
    unsigned char *src = malloc(n);
    assert_non_null(src);
    t_fill(src, n, t_rand());
    CUdeviceptr dev;
    CK(D.MemAlloc(&dev, n));
    CK(D.MemcpyHtoD(dev, src, n));
    CK(D.MemFree(dev));
    free(src);
    int before = pool_threads();
    fresh_round((256u << 20) + t_rand_range(0, 4u << 20), (int)(t_rand() & 1), 0, NULL);
    if (pool_threads() != before)
        fail_msg("%d staging threads after a large D2H into memory the program mapped (%d before)", pool_threads(),
                 before);
    int heap_on = 0;
    fresh_round((256u << 20) + t_rand_range(0, 4u << 20), (int)(t_rand() & 1), 1, &heap_on);
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    int cpus = pf_cpus_within(CPU_COUNT(&set), pf_cpu_quota()), after = pool_threads();
    cpus = cpus > 64 ? 64 : cpus;
    const char *fixed = getenv("PINFAST_THREADS");
    if (!heap_on || !thp_madvise())
        assert_int_equal(after, before);
    else if (fixed && atoi(fixed) > 0)
        assert_int_equal(after, before);
    else if (after != cpus)
        fail_msg("%d staging threads after a large fresh D2H (%d before), not one per CPU (%d)", after, before, cpus);
}

/* Staged copies from a thread with a 128 KiB stack (musl's default, and
 * what some thread pools give theirs): the engine once kept 140 KB of chunk
 * state on the caller's stack.  cmocka may not fail from another thread:
 * the thread counts, the test asserts. */
struct small_stack {
    size_t n;
    uint64_t salt;
    int failures;
};

static void *small_stack_main(void *arg)
{
    struct small_stack *w = arg;
    t_bind_ctx();
    unsigned char *h = malloc(w->n), *o = malloc(w->n);
    CUdeviceptr d = 0;
    size_t bad;
    if (!h || !o || D.MemAlloc(&d, w->n) != CUDA_SUCCESS) {
        w->failures++;
    } else {
        t_fill(h, w->n, w->salt);
        t_poison(o, w->n);
        if (D.MemcpyHtoD(d, h, w->n) != CUDA_SUCCESS || D.MemcpyDtoH(o, d, w->n) != CUDA_SUCCESS ||
            !t_check_fill(o, w->n, w->salt, &bad))
            w->failures++;
    }
    if (d)
        D.MemFree(d);
    free(h);
    free(o);
    return NULL;
}

static void test_small_stack(void **s)
{
    (void)s;
    struct small_stack w = { quick() ? (1u << 20) + 7 : (8u << 20) + 13, t_rand(), 0 };
    pthread_attr_t a;
    pthread_t th;
    assert_int_equal(pthread_attr_init(&a), 0);
    assert_int_equal(pthread_attr_setstacksize(&a, 128 << 10), 0);
    assert_int_equal(pthread_create(&th, &a, small_stack_main, &w), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    pthread_attr_destroy(&a);
    assert_int_equal(w.failures, 0);
}

/* D2D, unified cuMemcpy, peer, managed */
static void test_device_side(void **s)
{
    (void)s;
    size_t n = t_rand_range(1, 3 << 20);
    unsigned char *h = malloc(n), *o = malloc(n + GUARD);
    CUdeviceptr a, b, m;
    CK(D.MemAlloc(&a, n));
    CK(D.MemAlloc(&b, n));
    CK(D.MemAllocManaged(&m, n, CU_MEM_ATTACH_GLOBAL));
    uint64_t salt = t_rand();
    t_fill(h, n, salt);

    CK(D.MemcpyHtoD(a, h, n));
    CK(D.MemcpyDtoD(b, a, n));
    t_poison(o, n + GUARD);
    CK(D.MemcpyDtoH(o, b, n));
    t_expect_fill(o, n, salt, "DtoD");
    expect_poison(o + n, GUARD, "DtoD");

    t_poison(o, n + GUARD);
    CK(D.MemcpyDtoDAsync(b, a, n, S));
    CK(D.MemcpyDtoHAsync(o, b, n, S));
    CK(D.StreamSynchronize(S));
    t_expect_fill(o, n, salt, "DtoDAsync");

    /* unified: host->device, device->managed, managed read directly */
    t_fill(h, n, salt + 1);
    CK(D.Memcpy(a, (CUdeviceptr)(uintptr_t)h, n));
    CK(D.Memcpy(m, a, n));
    t_expect_fill((void *)(uintptr_t)m, n, salt + 1, "cuMemcpy to managed");
    t_poison(o, n + GUARD);
    CK(D.MemcpyAsync((CUdeviceptr)(uintptr_t)o, m, n, S));
    CK(D.StreamSynchronize(S));
    t_expect_fill(o, n, salt + 1, "cuMemcpyAsync managed to pageable");
    /* managed as an H2D/D2H host operand */
    t_fill((void *)(uintptr_t)m, n, salt + 2);
    CK(D.MemcpyHtoD(b, (void *)(uintptr_t)m, n));
    t_poison(o, n + GUARD);
    CK(D.MemcpyDtoH(o, b, n));
    t_expect_fill(o, n, salt + 2, "managed H2D");

    /* peer copies between the primary contexts of devices 0 and 1 */
    CUcontext c1;
    CUdevice d1;
    CK(D.DeviceGet(&d1, 1));
    CK(D.DevicePrimaryCtxRetain(&c1, d1));
    CK(D.MemcpyPeer(b, T_CTX, a, T_CTX, n));
    /* a device-to-device copy may return before it completes, and with
     * per-thread default streams S is not ordered after it */
    CK(D.CtxSynchronize());
    CK(D.MemcpyPeerAsync(a, c1, b, T_CTX, n, S));
    CK(D.StreamSynchronize(S));
    t_poison(o, n + GUARD);
    CK(D.MemcpyDtoH(o, a, n));
    t_expect_fill(o, n, salt + 1, "peer");
    CK(D.DevicePrimaryCtxRelease(d1));

    CK(D.MemFree(a));
    CK(D.MemFree(b));
    CK(D.MemFree(m));
    free(h);
    free(o);
}

/* 2D: host (pitch hp) -> device (pitch dp) -> host (pitch op), random geometry */
static void copy2d_once(enum hmem k, int variant)
{
    size_t W = t_rand_range(1, 3000), Hh = t_rand_range(1, 300);
    size_t x = t_rand_range(0, 50), y = t_rand_range(0, 5); /* each row within its pitch */
    size_t hp = W + x + t_rand_range(0, 100), dp = W + x + t_rand_range(0, 512), op = W + x + t_rand_range(0, 100);
    struct hbuf src, dst;
    halloc(&src, k, (Hh + y) * hp + x + 64);
    halloc(&dst, k, (Hh + y) * op + x + 64);
    CUdeviceptr dev;
    CK(D.MemAlloc(&dev, (Hh + y) * dp + x + 64));
    uint64_t salt = t_rand();
    for (size_t r = 0; r < Hh; r++)
        t_fill(src.base + (y + r) * hp + x, W, salt + r);
    t_poison(dst.base, dst.size);

    CUDA_MEMCPY2D c = { 0 };
    c.srcXInBytes = x; c.srcY = y; c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = src.base; c.srcPitch = hp;
    c.dstXInBytes = x; c.dstY = y; c.dstMemoryType = CU_MEMORYTYPE_DEVICE; c.dstDevice = dev; c.dstPitch = dp;
    c.WidthInBytes = W; c.Height = Hh;
    CUDA_MEMCPY2D d = { 0 };
    d.srcXInBytes = x; d.srcY = y; d.srcMemoryType = variant == 3 ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE;
    d.srcDevice = dev; d.srcPitch = dp;
    d.dstXInBytes = x; d.dstY = y; d.dstMemoryType = CU_MEMORYTYPE_HOST; d.dstHost = dst.base; d.dstPitch = op;
    d.WidthInBytes = W; d.Height = Hh;
    switch (variant) {
    case 0: CK(D.Memcpy2D(&c)); CK(D.Memcpy2D(&d)); break;
    case 1: CK(D.Memcpy2DUnaligned(&c)); CK(D.Memcpy2DUnaligned(&d)); break;
    default:
        CK(D.Memcpy2DAsync(&c, S));
        CK(D.Memcpy2DAsync(&d, S));
        CK(D.StreamSynchronize(S));
        break;
    }
    char what[96];
    for (size_t r = 0; r < Hh; r++) {
        snprintf(what, sizeof what, "2D variant %d %s row %zu (W %zu)", variant, hname[k], r, W);
        t_expect_fill(dst.base + (y + r) * op + x, W, salt + r, what);
        if (r + 1 < Hh)
            expect_poison(dst.base + (y + r) * op + x + W, op - W, what);
    }
    expect_poison(dst.base, y * op + x, "2D before the region");
    CK(D.MemFree(dev));
    hfree(&src);
    hfree(&dst);
}

static void test_2d(void **s)
{
    (void)s;
    for (int i = 0; i < (quick() ? 4 : 12); i++)
        copy2d_once((enum hmem)(i % 3), i % 4);
}

static void copy3d_once(enum hmem k, int async)
{
    size_t W = t_rand_range(1, 700), Hh = t_rand_range(1, 40), Dd = t_rand_range(1, 20);
    size_t hp = W + t_rand_range(0, 64), hh = Hh + t_rand_range(0, 3);
    size_t dp = W + t_rand_range(0, 256), dh = Hh + t_rand_range(0, 3);
    size_t hsz = hp * hh * Dd + 64, dsz = dp * dh * Dd + 64;
    struct hbuf src, dst;
    halloc(&src, k, hsz);
    halloc(&dst, k, hsz);
    CUdeviceptr dev;
    CK(D.MemAlloc(&dev, dsz));
    uint64_t salt = t_rand();
    for (size_t z = 0; z < Dd; z++)
        for (size_t r = 0; r < Hh; r++)
            t_fill(src.base + (z * hh + r) * hp, W, salt + z * 1000 + r);
    t_poison(dst.base, dst.size);
    CUDA_MEMCPY3D c = { 0 }, d = { 0 };
    c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = src.base; c.srcPitch = hp; c.srcHeight = hh;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE; c.dstDevice = dev; c.dstPitch = dp; c.dstHeight = dh;
    c.WidthInBytes = W; c.Height = Hh; c.Depth = Dd;
    d.srcMemoryType = CU_MEMORYTYPE_DEVICE; d.srcDevice = dev; d.srcPitch = dp; d.srcHeight = dh;
    d.dstMemoryType = CU_MEMORYTYPE_HOST; d.dstHost = dst.base; d.dstPitch = hp; d.dstHeight = hh;
    d.WidthInBytes = W; d.Height = Hh; d.Depth = Dd;
    if (async) {
        CK(D.Memcpy3DAsync(&c, S));
        CK(D.Memcpy3DAsync(&d, S));
        CK(D.StreamSynchronize(S));
    } else {
        CK(D.Memcpy3D(&c));
        CK(D.Memcpy3D(&d));
    }
    char what[96];
    for (size_t z = 0; z < Dd; z++)
        for (size_t r = 0; r < Hh; r++) {
            snprintf(what, sizeof what, "3D %s %s z %zu row %zu", hname[k], async ? "async" : "sync", z, r);
            t_expect_fill(dst.base + (z * hh + r) * hp, W, salt + z * 1000 + r, what);
        }
    CK(D.MemFree(dev));
    hfree(&src);
    hfree(&dst);
}

static void test_3d(void **s)
{
    (void)s;
    for (int i = 0; i < (quick() ? 4 : 8); i++)
        copy3d_once((enum hmem)(i % 3), i & 1);
}

/* batches mixing pageable/pinned H2D, then D2H, through both ABIs */
static void test_batch(void **s)
{
    (void)s;
    enum { N = 6 };
    for (int abi = 0; abi < 2; abi++) {
        CUdeviceptr dev[N], dsts[N], srcs[N];
        size_t sizes_[N];
        struct hbuf in[N], out[N];
        uint64_t salt = t_rand();
        for (int i = 0; i < N; i++) {
            sizes_[i] = t_rand_range(1, 2 << 20);
            halloc(&in[i], (enum hmem)(i % 2), sizes_[i]);
            halloc(&out[i], (enum hmem)((i + 1) % 2), sizes_[i]);
            t_fill(in[i].base, sizes_[i], salt + i);
            t_poison(out[i].base, sizes_[i]);
            CK(D.MemAlloc(&dev[i], sizes_[i]));
            dsts[i] = dev[i];
            srcs[i] = (CUdeviceptr)(uintptr_t)in[i].base;
        }
        CUmemcpyAttributes attr = { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM };
        size_t idx = 0, fail_idx = 12345;
        if (abi)
            CK(D.MemcpyBatchAsync(dsts, srcs, sizes_, N, &attr, &idx, 1, S));
        else
            CK(D.MemcpyBatchAsync12(dsts, srcs, sizes_, N, &attr, &idx, 1, &fail_idx, S));
        for (int i = 0; i < N; i++) {
            dsts[i] = (CUdeviceptr)(uintptr_t)out[i].base;
            srcs[i] = dev[i];
        }
        if (abi)
            CK(D.MemcpyBatchAsync(dsts, srcs, sizes_, N, &attr, &idx, 1, S));
        else
            CK(D.MemcpyBatchAsync12(dsts, srcs, sizes_, N, &attr, &idx, 1, &fail_idx, S));
        CK(D.StreamSynchronize(S));
        for (int i = 0; i < N; i++) {
            t_expect_fill(out[i].base, sizes_[i], salt + i, abi ? "batch v2" : "batch 12.8");
            CK(D.MemFree(dev[i]));
            hfree(&in[i]);
            hfree(&out[i]);
        }
    }
}

static void test_batch3d(void **s)
{
    (void)s;
    for (int abi = 0; abi < 2; abi++) {
        size_t W = t_rand_range(1, 500), Hh = t_rand_range(1, 20), Dd = t_rand_range(1, 5);
        size_t n = W * Hh * Dd;
        unsigned char *h = malloc(n), *o = malloc(n);
        CUdeviceptr dev;
        CK(D.MemAlloc(&dev, n));
        uint64_t salt = t_rand();
        t_fill(h, n, salt);
        t_poison(o, n);
        CUDA_MEMCPY3D_BATCH_OP op = { 0 };
        op.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        op.src.op.ptr.ptr = (CUdeviceptr)(uintptr_t)h;
        op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        op.dst.op.ptr.ptr = dev;
        op.extent.width = W; op.extent.height = Hh; op.extent.depth = Dd;
        op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        CUDA_MEMCPY3D_BATCH_OP back = op;
        back.src.op.ptr.ptr = dev;
        back.dst.op.ptr.ptr = (CUdeviceptr)(uintptr_t)o;
        size_t fi;
        if (abi) {
            CK(D.Memcpy3DBatchAsync(1, &op, 0, S));
            CK(D.Memcpy3DBatchAsync(1, &back, 0, S));
        } else {
            CK(D.Memcpy3DBatchAsync12(1, &op, &fi, 0, S));
            CK(D.Memcpy3DBatchAsync12(1, &back, &fi, 0, S));
        }
        CK(D.StreamSynchronize(S));
        t_expect_fill(o, n, salt, "3D batch");
        CK(D.MemFree(dev));
        free(h);
        free(o);
    }
}

/* mapped pinned memory used as a device operand (zero-copy) */
static void test_mapped(void **s)
{
    (void)s;
    size_t n = t_rand_range(1, 1 << 20);
    unsigned char *p, *o = malloc(n);
    CK(D.MemHostAlloc((void **)&p, n, CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr dp;
    CK(D.MemHostGetDevicePointer(&dp, p, 0));
    uint64_t salt = t_rand();
    t_fill(p, n, salt);
    t_poison(o, n);
    CK(D.MemcpyDtoH(o, dp, n));
    t_expect_fill(o, n, salt, "mapped pinned as a device pointer");
    unsigned int flags = 0;
    CK(D.MemHostGetFlags(&flags, p));
    assert_true(flags & CU_MEMHOSTALLOC_DEVICEMAP);
    CK(D.MemFreeHost(p));
    free(o);
}

/* Blocks copied again and again (pinfast's cache registers them), then
 * freed: kept (registered), and the blocks malloc gives next, the same ones
 * under pinfast, move their own bytes; the program's cuCtxSynchronize
 * (twice: a kept block unused through two) gives back every registration,
 * wherever the program's free goes (valgrind's memcheck replaces pinfast's
 * too: nothing is registered there). */
static void test_freed_blocks(void **s)
{
    (void)s;
    CK(D.CtxSynchronize());
    CK(D.CtxSynchronize());
    long before = fake_registered(); /* blocks still the program's */
    size_t n = t_rand_range(2 << 20, 3 << 20);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    for (int round = 0; round < 3; round++) {
        unsigned char *h = malloc(n), *o = malloc(n);
        assert_non_null(h);
        assert_non_null(o);
        for (int i = 0; i < 3; i++)
            assert_int_equal(t_round_trip(h, o, d, n), 0);
        free(h);
        free(o);
    }
    CK(D.MemFree(d));
    CK(D.CtxSynchronize());
    CK(D.CtxSynchronize());
    if (fake_registered() > before)
        fail_msg("%ld registration(s) of freed blocks outlived two cuCtxSynchronize", fake_registered() - before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_sync),
        cmocka_unit_test(test_sizes_async),
        cmocka_unit_test(test_random_sizes),
        cmocka_unit_test(test_64mib),
        cmocka_unit_test(test_fresh_destination),
        cmocka_unit_test(test_fresh_large),
        cmocka_unit_test(test_small_stack),
        cmocka_unit_test(test_device_side),
        cmocka_unit_test(test_2d),
        cmocka_unit_test(test_3d),
        cmocka_unit_test(test_batch),
        cmocka_unit_test(test_batch3d),
        cmocka_unit_test(test_mapped),
        cmocka_unit_test(test_freed_blocks),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
