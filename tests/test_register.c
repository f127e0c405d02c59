/* test_register: the registration cache (shim/memory/register.c) tries to
 * break it.  A range copied three times is registered (the fake counts
 * registrations: fakecuda_registered); then its memory changes owner (free,
 * munmap, mremap, madvise, brk, realloc, shmdt, mmap over it) and new memory
 * with new random bytes takes its address: a copy from it and into it must
 * see the new memory.  The fake pins registered pages truly (fake_mem.c): a
 * registration dropped late copies the old pages, and fails these checks;
 * each case also checks that no registration outlived the call.  Besides:
 * the program's own registrations get the driver's answers, asynchronous
 * copies through a registration keep the pageable copies' host semantics,
 * threads copy and free at once, a range over registrations registers only
 * the pages they lack and undoes none of them, a forked child and exit() leave nothing
 * registered, a copy through a registration waits for its DMA asleep and
 * learns its pace only from DMAs that started at once.  pinfast registers on a thread of its own, and unregisters
 * freed blocks there: the cases wait for it, and check that a range being
 * registered is staged meanwhile, that munmap, madvise and fork of one wait
 * for it, and that a freed block is not given out again while registered.
 * Runs plain (the same expectations) and under pinfast. */
#define _GNU_SOURCE
#include "report.h"
#include "t.h"
#include "spawn.h"

#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define N (4 * MiB)
#define PAGE ((size_t)4096)

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* A sanitizer's malloc comes before pinfast in the preload list: its free
 * and realloc never reach pinfast's, and pinfast then registers nothing
 * (docs/design.md); the cases still check the bytes and the hooks. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OWN_MALLOC 0
#else
#define OWN_MALLOC 1
#endif

static CUstream stream;
static CUdeviceptr dev;
static unsigned char *pinned;

static int none_registered(void *arg)
{
    (void)arg;
    return !fake_registered();
}

static int any_registered(void *arg)
{
    (void)arg;
    return fake_registered() > 0;
}

static int setup(void **state)
{
    CUstream other;
    if (t_setup_streams(state, &stream, &other) || D.MemAlloc(&dev, 4 * N) ||
        D.MemHostAlloc((void **)&pinned, 4 * N, 0))
        return -1;
    return 0;
}

/* An H2D from r and a D2H into it, each checked through pinned memory. */
static void round_trip(unsigned char *r, size_t n, const char *what)
{
    uint64_t a = t_rand(), b = t_rand();
    t_fill(r, n, a);
    CK(D.MemcpyHtoD(dev, r, n));
    t_poison(pinned, n);
    CK(D.MemcpyDtoH(pinned, dev, n));
    t_expect_fill(pinned, n, a, what);
    t_fill(pinned, n, b);
    CK(D.MemcpyHtoD(dev, pinned, n));
    t_poison(r, n);
    CK(D.MemcpyDtoH(r, dev, n));
    t_expect_fill(r, n, b, what);
}

/* Three round trips: under pinfast, r is registered by then, or soon
 * after (the registrar's), the copies meanwhile staged. */
static void make_registered(unsigned char *r, size_t n)
{
    for (int i = 0; i < 3; i++)
        round_trip(r, n, "a range copied again and again");
    if (t_pinfast() && OWN_MALLOC && !t_await(fake_registered_at, r))
        fail_msg("a range copied three times was not registered");
}

/* A heap block of N bytes, registered under pinfast, then filled with salt. */
static unsigned char *registered_block(uint64_t *salt)
{
    unsigned char *r = malloc(N);
    assert_non_null(r);
    make_registered(r, N);
    t_fill(r, N, *salt = t_rand());
    return r;
}

/* Right after the call that gave r's memory away: nothing registered. */
static void expect_dropped(const char *call, int own_malloc)
{
    long n = fake_registered();
    if (t_pinfast() && own_malloc && n)
        fail_msg("%s: %ld registration(s) outlived it", call, n);
}

/* After free(): the registrar unregisters the block, then frees it. */
static void expect_released(const char *call)
{
    if (t_pinfast() && OWN_MALLOC && !t_await(none_registered, NULL))
        fail_msg("%s: %ld registration(s) outlived it by seconds", call, fake_registered());
}

/* malloc(n) after a block of n bytes at r was freed, until it gives r's
 * memory again (for a second at most): it must not be registered any more
 * then. */
static unsigned char *malloc_again(uintptr_t r, size_t n)
{
    struct timespec nap = {0, 100 * 1000};
    unsigned char *q = malloc(n);
    for (int i = 0; i < 10000 && q && (uintptr_t)q != r; i++) {
        free(q);
        nanosleep(&nap, NULL);
        q = malloc(n);
    }
    assert_non_null(q);
    if ((uintptr_t)q == r && fake_registered_at(q))
        fail_msg("malloc gave a freed block's memory again while it was still registered");
    return q;
}

static unsigned char *map(void *at, size_t n)
{
    void *p = mmap(at, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0),
                   -1, 0);
    assert_true(p != MAP_FAILED);
    if (at)
        assert_ptr_equal(p, at);
    return p;
}

/* ---- memory changing owner, then new memory at the same address ------------------ */
static void test_free_mmapped(void **s)
{
    (void)s;
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    for (int round = 0; round < 3; round++) {
        size_t n = t_rand_range(2 * MiB, N) | 1; /* not a whole number of pages */
        unsigned char *r = malloc(n);
        assert_non_null(r);
        make_registered(r, n);
        uintptr_t was = (uintptr_t)r;
        free(r);
        unsigned char *q = malloc_again(was, n);
        expect_released("free");
        round_trip(q, n, "new memory after free");
        free(q);
    }
}

/* A block of the heap: freed into the top, which glibc trims and grows
 * again with no exported call. */
static void test_free_heap(void **s)
{
    (void)s;
    mallopt(M_MMAP_THRESHOLD, 64 * MiB);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    for (int round = 0; round < 3; round++) {
        unsigned char *r = malloc(N);
        assert_non_null(r);
        make_registered(r, N);
        uintptr_t was = (uintptr_t)r;
        free(r);
        unsigned char *q = malloc_again(was, N);
        expect_released("free (heap)");
        round_trip(q, N, "new heap memory after free");
        free(q);
    }
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
}

static void test_reallocate(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(&salt);
    unsigned char *q = realloc(r, 3 * N);
    assert_non_null(q);
    expect_dropped("realloc", OWN_MALLOC);
    t_expect_fill(q, N, salt, "realloc kept the contents");
    unsigned char *o = malloc(N); /* may take the old address */
    round_trip(o, N, "new memory after realloc");
    round_trip(q, 3 * N, "the reallocated block");
    free(o);
    free(q);
}

static void test_munmap(void **s)
{
    (void)s;
    unsigned char *r = map(NULL, N);
    make_registered(r, N);
    assert_int_equal(munmap(r, N), 0);
    expect_dropped("munmap", 1);
    r = map(r, N);
    round_trip(r, N, "new memory after munmap");
    munmap(r, N);
}

/* ---- a range over registrations: only what they lack is registered ---------------- */
/* Round trips of [r, r+n) for up to 5 s (the registrar works between them)
 * until every page of it is registered, in `want` registrations, none
 * undone meanwhile: undoing synchronises the device. */
static void expect_registered_whole(unsigned char *r, size_t n, long want, unsigned long undone,
                                    const char *what)
{
    if (!t_pinfast() || !OWN_MALLOC)
        return;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int whole = 0;
    do {
        round_trip(r, n, what);
        whole = fake_registered() == want;
        for (size_t off = 0; off < n && whole; off += PAGE)
            whole = fake_registered_at(r + off);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (!whole && t.tv_sec - t0.tv_sec < 5);
    if (!whole)
        fail_msg("%s: %ld registration(s) (want %ld), not every page registered", what, fake_registered(), want);
    if (fake_calls("cuMemHostUnregister") != undone)
        fail_msg("%s: %lu registration(s) undone on the way", what, fake_calls("cuMemHostUnregister") - undone);
}

/* A buffer copied in growing prefixes (a benchmark's sweep, a batch that
 * grows): each longer prefix registers the pages it lacks, one registration
 * each, and goes through all of them.  2 N in all: the default cap is the
 * locked-memory limit, often 8 MiB. */
static void test_growing_prefixes(void **s)
{
    (void)s;
    unsigned char *r = map(NULL, 2 * N);
    make_registered(r, N / 2);
    unsigned long undone = fake_calls("cuMemHostUnregister");
    for (size_t n = N; n <= 2 * N; n += N / 2)
        for (int i = 0; i < 3; i++)
            round_trip(r, n, "a longer prefix of a registration");
    expect_registered_whole(r, 2 * N, 4, undone, "growing prefixes");
    assert_int_equal(munmap(r, 2 * N), 0);
    expect_dropped("munmap of a range registered in pieces", 1);
    r = map(r, 2 * N);
    round_trip(r, 2 * N, "new memory after munmap of a range registered in pieces");
    munmap(r, 2 * N);
}

/* Two ranges side by side, each copied again and again, then copies across
 * both: through the two registrations, neither undone. */
static void test_across_neighbours(void **s)
{
    (void)s;
    unsigned char *r = map(NULL, 2 * N);
    make_registered(r + N, N);
    make_registered(r, N);
    unsigned long undone = fake_calls("cuMemHostUnregister");
    expect_registered_whole(r, 2 * N, 2, undone, "neighbours");
    round_trip(r + N / 2 + 8, N, "a copy across two registrations");
    assert_int_equal(munmap(r + N, N), 0);
    expect_dropped("munmap of one of two neighbours", 0);
    if (t_pinfast() && OWN_MALLOC && (fake_registered() != 1 || !fake_registered_at(r)))
        fail_msg("munmap of one of two neighbours: %ld registration(s) left, the other's %s", fake_registered(),
                 fake_registered_at(r) ? "among them" : "not");
    round_trip(r, N, "the neighbour left after munmap of the other");
    munmap(r, N);
}

static void test_mremap(void **s)
{
    (void)s;
    unsigned char *r = map(NULL, N), *to = map(NULL, N);
    make_registered(r, N);
    uint64_t salt = t_rand();
    t_fill(r, N, salt);
    assert_ptr_equal(mremap(r, N, N, MREMAP_MAYMOVE | MREMAP_FIXED, to), to);
    expect_dropped("mremap", 1);
    t_expect_fill(to, N, salt, "the moved pages");
    r = map(r, N);
    round_trip(r, N, "new memory after mremap");
    round_trip(to, N, "the moved pages");
    munmap(r, N);
    munmap(to, N);
}

static void test_madvise(void **s)
{
    (void)s;
    unsigned char *r = map(NULL, N);
    make_registered(r, N);
    assert_int_equal(madvise(r, N, MADV_DONTNEED), 0);
    expect_dropped("madvise(MADV_DONTNEED)", 1);
    for (size_t i = 0; i < N; i += PAGE)
        if (r[i])
            fail_msg("anonymous memory after MADV_DONTNEED reads %d at %zu, not 0", r[i], i);
    round_trip(r, N, "memory after MADV_DONTNEED");
    munmap(r, N);
}

static void test_mmap_fixed(void **s)
{
    (void)s;
    unsigned char *r = map(NULL, N);
    make_registered(r, N);
    assert_ptr_equal(mmap(r, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), r);
    expect_dropped("mmap(MAP_FIXED)", 1);
    round_trip(r, N, "new memory mapped over it");
    munmap(r, N);
}

static void test_shmdt(void **s)
{
    (void)s;
    int id = shmget(IPC_PRIVATE, N, IPC_CREAT | 0600);
    assert_true(id >= 0);
    unsigned char *r = shmat(id, NULL, 0);
    assert_true(r != (void *)-1);
    shmctl(id, IPC_RMID, NULL);
    make_registered(r, N);
    assert_int_equal(shmdt(r), 0);
    expect_dropped("shmdt", 1);
    id = shmget(IPC_PRIVATE, N, IPC_CREAT | 0600);
    assert_true(id >= 0);
    assert_ptr_equal(shmat(id, r, 0), r);
    shmctl(id, IPC_RMID, NULL);
    round_trip(r, N, "a new segment at the same address");
    shmdt(r);
}

/* The heap's top given back with sbrk and taken again: zeros, then new data. */
static void test_brk(void **s)
{
    (void)s;
    /* room at the heap's top, so that malloc does not move the break meanwhile */
    mallopt(M_TOP_PAD, 64 * MiB);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    free(malloc(1));
    size_t grow = N + 2 * PAGE;
    char *old = sbrk((intptr_t)grow);
    assert_true(old != (void *)-1);
    unsigned char *r = (unsigned char *)(((uintptr_t)old + PAGE - 1) & ~(PAGE - 1));
    make_registered(r, N);
    assert_ptr_equal(sbrk(-(intptr_t)grow), old + grow);
    expect_dropped("sbrk (negative)", 1);
    assert_ptr_equal(sbrk((intptr_t)grow), old);
    for (size_t i = 0; i < N; i += PAGE)
        if (r[i])
            fail_msg("the break's new pages read %d at %zu, not 0", r[i], i);
    round_trip(r, N, "the heap's top taken again");
    assert_ptr_equal(sbrk(-(intptr_t)grow), old + grow);
    mallopt(M_TOP_PAD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
}

/* ---- ranges the registrar is registering ------------------------------------------ */
/* A round trip makes r due (its 2nd sighting): the registrar registers it
 * while the next round trip runs (staged meanwhile: its bytes are checked);
 * then its memory goes: munmap and madvise wait for the registration and
 * undo it before returning. */
static void test_while_registering(void **s)
{
    (void)s;
    for (int round = 0; round < 6; round++) {
        unsigned char *r = map(NULL, N);
        round_trip(r, N, "a range becoming due");
        round_trip(r, N, "a range being registered");
        if (round & 1) {
            assert_int_equal(munmap(r, N), 0);
            expect_dropped("munmap while registering", 1);
            r = map(r, N);
        } else {
            assert_int_equal(madvise(r, N, MADV_DONTNEED), 0);
            expect_dropped("madvise while registering", 1);
        }
        round_trip(r, N, "new memory after a range being registered went");
        munmap(r, N);
    }
}

/* ---- the program's own registrations ---------------------------------------------- */
static void test_own_registrations(void **s)
{
    (void)s;
    unsigned char *r = map(NULL, N);
    make_registered(r, N);
    /* inside pinfast's registration: the driver's answer without pinfast */
    CK(D.MemHostRegister(r + PAGE, 2 * PAGE, 0));
    round_trip(r, N, "a range the program registered a part of");
    round_trip(r, N, "a range the program registered a part of");
    CK(D.MemHostUnregister(r + PAGE));
    CK_EQ(D.MemHostUnregister(r), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    munmap(r, N);
    /* pinfast's registration is not the program's to undo */
    r = map(NULL, N);
    make_registered(r, N);
    CK_EQ(D.MemHostUnregister(r), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    round_trip(r, N, "after an unregistration the driver refused");
    /* the whole range, registered by the program over pinfast's */
    make_registered(r, N);
    CK(D.MemHostRegister(r, N, CU_MEMHOSTREGISTER_PORTABLE));
    unsigned flags = 0;
    CK(D.MemHostGetFlags(&flags, r));
    assert_int_equal(flags, CU_MEMHOSTREGISTER_PORTABLE);
    round_trip(r, N, "the program's registration");
    CK(D.MemHostUnregister(r));
    CK_EQ(D.MemHostUnregister(r), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    munmap(r, N);
    expect_dropped("munmap", 1);
}

/* ---- the pageable copies' host semantics through a registration ------------------- */
static void CUDA_CB sleep_20ms(void *arg)
{
    (void)arg;
    usleep(20000);
}

/* Odd rounds queue the copies behind work on their stream (a host function
 * and an H2D writing the destination first): an H2D lands after that work,
 * in stream order (under pinfast it is staged then: waiting for the
 * registered copy would wait for the stream). */
static void test_async(void **s)
{
    (void)s;
    unsigned char *r = malloc(N);
    assert_non_null(r);
    make_registered(r, N);
    for (int round = 0; round < 8; round++) {
        /* an H2D has read its source when it returns */
        uint64_t a = t_rand();
        t_fill(r, N, a);
        if (round & 1) {
            t_poison(pinned + 2 * N, N);
            CK(D.LaunchHostFunc(stream, sleep_20ms, NULL));
            CK(D.MemcpyHtoDAsync(dev, pinned + 2 * N, N, stream));
        }
        CK(D.MemcpyHtoDAsync(dev, r, N, stream));
        t_fill(r, N, t_rand());
        CK(D.StreamSynchronize(stream));
        t_poison(pinned, N);
        CK(D.MemcpyDtoH(pinned, dev, N));
        t_expect_fill(pinned, N, a, "the source of an asynchronous H2D, overwritten once it returned");
        /* a D2H has landed when it returns */
        uint64_t b = t_rand();
        t_fill(pinned, N, b);
        CK(D.MemcpyHtoD(dev, pinned, N));
        t_poison(r, N);
        CK(D.MemcpyDtoHAsync(r, dev, N, stream));
        t_expect_fill(r, N, b, "the destination of an asynchronous D2H, read once it returned");
    }
    free(r);
}

/* ---- copies the driver is handed as they are, questions, in a registered range ----- */
static void CUDA_CB hold(void *arg) { usleep((useconds_t)(uintptr_t)arg); }
#define HOLD_US 3000

static void test_passed_through(void **s)
{
    (void)s;
    unsigned char *r = malloc(N), *never = malloc(64);
    assert_true(r && never);
    for (int round = 0; round < 6; round++) {
        make_registered(r, N);
        size_t n = 1 + (size_t)t_rand_range(0, 128 * 1024), at = (size_t)t_rand_range(0, N - n);
        /* a D2H too small to stage, behind work on its stream: landed on return */
        uint64_t b = t_rand();
        t_fill(pinned, n, b);
        CK(D.MemcpyHtoD(dev, pinned, n));
        t_poison(r + at, n);
        CK(D.LaunchHostFunc(stream, hold, (void *)(uintptr_t)HOLD_US));
        CK(D.MemcpyDtoHAsync(r + at, dev, n, stream));
        t_expect_fill(r + at, n, b, "a small asynchronous D2H into a registered range, read once it returned");
        /* a 2D H2D too small to stage, behind work: its source is free once it returns */
        size_t w = 1 + (size_t)t_rand_range(0, 4096), h = 1 + (size_t)t_rand_range(0, 16), pitch = w + 64;
        unsigned char *src = r + (size_t)t_rand_range(0, N - h * pitch);
        uint64_t a = t_rand();
        for (size_t y = 0; y < h; y++)
            t_fill(src + y * pitch, w, a + y);
        CUDA_MEMCPY2D m = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = pitch,
                           .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = w,
                           .WidthInBytes = w, .Height = h};
        CK(D.LaunchHostFunc(stream, hold, (void *)(uintptr_t)HOLD_US));
        CK(D.Memcpy2DAsync(&m, stream));
        t_poison(src, h * pitch);
        CK(D.StreamSynchronize(stream));
        t_poison(pinned, w * h);
        CK(D.MemcpyDtoH(pinned, dev, w * h));
        for (size_t y = 0; y < h; y++)
            t_expect_fill(pinned + y * w, w, a + y, "a small 2D H2D from a registered range, overwritten once it returned");
    }
    /* asked about a registered range, the driver answers as for pageable memory */
    make_registered(r, N);
    unsigned flags = 7, never_flags = 7;
    CK_EQ(D.MemHostGetFlags(&flags, r + PAGE), D.MemHostGetFlags(&never_flags, never));
    CUdeviceptr p = 0, never_p = 0;
    CK_EQ(D.MemHostGetDevicePointer(&p, r + PAGE, 0), D.MemHostGetDevicePointer(&never_p, never, 0));
    unsigned type = 7, never_type = 7;
    CK_EQ(D.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)(r + PAGE)),
          D.PointerGetAttribute(&never_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)never));
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
    unsigned t1 = 7, t2 = 7;
    int m1 = 7, m2 = 7;
    void *v1[] = {&t1, &m1}, *v2[] = {&t2, &m2};
    CK(D.PointerGetAttributes(2, attrs, v1, (CUdeviceptr)(uintptr_t)(r + PAGE)));
    CK(D.PointerGetAttributes(2, attrs, v2, (CUdeviceptr)(uintptr_t)never));
    assert_int_equal(t1, t2);
    assert_int_equal(m1, m2);
    assert_int_equal(t1, 0); /* unknown to the driver: pageable */
    free(r);
    free(never);
}

/* ---- threads copying and freeing at once ------------------------------------------ */
#define THREADS 4
struct worker {
    CUdeviceptr dev;
    unsigned char *pinned;
    uint64_t salt;
    int failed;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    t_bind_ctx();
    for (int it = 0; it < 12 && !w->failed; it++) {
        size_t n = MiB + (size_t)((w->salt + (uint64_t)it * 7919) % MiB);
        unsigned char *r = malloc(n);
        for (int k = 0; k < 3 && r && !w->failed; k++) {
            size_t bad;
            uint64_t a = w->salt * 1000 + (uint64_t)(it * 3 + k);
            t_fill(r, n, a);
            memset(w->pinned, 0xA5, n);
            w->failed |= D.MemcpyHtoD(w->dev, r, n) || D.MemcpyDtoH(w->pinned, w->dev, n) ||
                         !t_check_fill(w->pinned, n, a, &bad);
            t_fill(w->pinned, n, a + 1);
            memset(r, 0x5A, n);
            w->failed |= D.MemcpyHtoD(w->dev, w->pinned, n) || D.MemcpyDtoH(r, w->dev, n) ||
                         !t_check_fill(r, n, a + 1, &bad);
        }
        free(r);
    }
    return NULL;
}

static void test_threads(void **s)
{
    (void)s;
    struct worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){.salt = t_rand()};
        CK(D.MemAlloc(&w[i].dev, 2 * MiB));
        CK(D.MemHostAlloc((void **)&w[i].pinned, 2 * MiB, 0));
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        if (w[i].failed)
            fail_msg("thread %d: a copy failed or moved the wrong bytes", i);
        CK(D.MemFree(w[i].dev));
        CK(D.MemFreeHost(w[i].pinned));
    }
    expect_released("every block freed");
}

/* ---- fork and exit ------------------------------------------------------------------ */
/* fork(): the parent's registrations are undone first (`call` checks), the
 * child has none and r's bytes (salt), and writes and frees its own copy;
 * the parent's r keeps its bytes. */
static void fork_and_check(unsigned char *r, uint64_t salt, const char *call)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (!pid) {
        size_t bad;
        if (t_pinfast() && fake_registered())
            _exit(41); /* the child inherited a registration */
        if (!t_check_fill(r, N, salt, &bad))
            _exit(42);
        memset(r, 0x77, N); /* the child's own copy */
        free(r);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    expect_dropped(call, 1);
    t_expect_fill(r, N, salt, "the parent's memory after the child wrote its own");
}

static void test_fork(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(&salt);
    fork_and_check(r, salt, "fork (in the parent)");
    CK(D.MemcpyHtoD(dev, r, N));
    t_poison(pinned, N);
    CK(D.MemcpyDtoH(pinned, dev, N));
    t_expect_fill(pinned, N, salt, "the parent's H2D after fork");
    make_registered(r, N);
    free(r);
}

/* fork() as the registrar registers: the parent waits for it and undoes it. */
static void test_fork_registering(void **s)
{
    (void)s;
    unsigned char *r = malloc(N);
    assert_non_null(r);
    round_trip(r, N, "a range becoming due");
    uint64_t salt = t_rand();
    t_fill(r, N, salt);
    fork_and_check(r, salt, "fork while registering (in the parent)");
    make_registered(r, N);
    free(r);
    expect_released("free after fork");
}

/* A child's start: the driver and its context, h and o of n bytes on the
 * heap, d of n on the device, then `trips` checked round trips (under
 * pinfast, registered from the third).  0, or the child's exit status. */
static int child_start(size_t n, unsigned char **h, unsigned char **o, CUdeviceptr *d, int trips)
{
    if (drv_load_from_env(&D) || drv_context0(&D, &T_CTX))
        return 44;
    *h = malloc(n);
    *o = malloc(n);
    if (!*h || !*o || D.MemAlloc(d, n))
        return 45;
    for (int i = 0; i < trips; i++)
        if (t_round_trip(*h, *o, *d, n))
            return 46;
    return 0;
}

/* Runs this binary again as `--<what>-child`, under pinfast when this run
 * is, with the "K=V" entries of `more` (NULL-terminated, or NULL), its
 * standard error into the file err (NULL: this one's). */
static int run_child(const char *what, const char *const *more, const char *err)
{
    char flag[32], *argv[] = {"test_register", flag, NULL};
    const char *set[8] = {t_pinfast() ? "PFT_PINFAST=1" : "PFT_PINFAST=0"};
    snprintf(flag, sizeof flag, "--%s-child", what);
    for (int i = 0; more && more[i] && i < 6; i++)
        set[i + 1] = more[i];
    return sp_run(argv, t_pinfast(), set, NULL, err, 120, NULL);
}

/* A fresh directory for a test's files (removed with sp_rmdir), and the
 * path of `name` in it. */
static const char *child_dir(const char *tag, const char *name, char *path, size_t n)
{
    const char *dir = sp_tmpdir(tag);
    assert_non_null(dir);
    snprintf(path, n, "%s/%s", dir, name);
    return dir;
}

/* child_start, then h copied twice H2D: registered after the second (under
 * pinfast, waited for). */
static int child_start_registered(size_t n, unsigned char **h, unsigned char **o, CUdeviceptr *d)
{
    int rc = child_start(n, h, o, d, 0);
    for (int i = 0; i < 2 && !rc; i++)
        rc = D.MemcpyHtoD(*d, *h, n) ? 45 : 0;
    if (!rc && t_pinfast() && OWN_MALLOC && !t_await(fake_registered_at, *h))
        rc = 47;
    return rc;
}

/* The child of test_exit: registers a range, then exits; its first atexit
 * handler (run last) checks that nothing is registered any more. */
static void at_exit_check(void)
{
    if (fake_registered())
        _exit(43);
}

static int exit_child(void)
{
    atexit(at_exit_check);
    CUdeviceptr d;
    unsigned char *h, *o;
    int rc = child_start(N, &h, &o, &d, 3);
    if (rc)
        return rc;
    if (t_pinfast() && OWN_MALLOC && !t_await(any_registered, NULL))
        return 47;
    /* freed just before exit: the registrar has them still, the exit
     * handler unregisters and frees them */
    free(h);
    free(o);
    exit(0);
}

static void test_exit(void **s)
{
    (void)s;
    assert_int_equal(run_child("exit", NULL, NULL), 0);
}

static void CUDA_CB sleep_50ms(void *arg)
{
    (void)arg;
    usleep(50000);
}

/* Copies through a registration queued behind 50 ms of other work, again
 * and again, in a process that has timed no DMA yet: their DMAs' pace is
 * not learned from them, so that the next copy, on an idle stream, does not
 * sleep through 50 ms it will not take.  Each copy checked. */
static int pace_child(void)
{
    CUdeviceptr d;
    size_t n = N; /* at least the size a DMA is timed from */
    unsigned char *h, *o;
    int rc = child_start_registered(n, &h, &o, &d);
    if (rc)
        return rc;
    /* what a round trip takes here (a sanitizer's build is slow): twice
     * one of half the bytes, too few to teach the pace */
    double t0 = t_now();
    if (t_round_trip(h, o, d, n / 2))
        return 46;
    double base = 2 * (t_now() - t0);
    for (int i = 0; i < 6; i++)
        if (D.LaunchHostFunc(NULL, sleep_50ms, NULL) || D.MemcpyHtoD(d, h, n)) /* waits for it first */
            return 45;
    for (int i = 0; i < 3; i++) {
        t0 = t_now();
        if (t_round_trip(h, o, d, n))
            return 46;
        double t = t_now() - t0;
        if (t > 2 * base + 0.01) {
            fprintf(stderr, "a round trip on an idle stream took %.1f ms (%.1f ms before), after copies behind "
                    "50 ms of work\n", t * 1e3, base * 1e3);
            return 48;
        }
    }
    return 0;
}

static void test_pace_behind_work(void **s)
{
    (void)s;
    assert_int_equal(run_child("pace", NULL, NULL), 0);
}

static void CUDA_CB spin_100us(void *arg)
{
    (void)arg;
    for (double t0 = t_now(); t_now() - t0 < 100e-6;)
        ;
}

/* Copies through a registration queued behind work shorter than the wait
 * for their start (POLL_NS): timed from when that work is over, so they
 * are given the learned pace.  The debug line of each says the time the
 * pace gave it. */
static int short_child(void)
{
    CUdeviceptr d;
    unsigned char *h, *o;
    int rc = child_start_registered(N, &h, &o, &d);
    if (rc)
        return rc;
    for (int i = 0; i < 8; i++) /* the pace, learned on an idle stream */
        if (D.MemcpyHtoD(d, h, N))
            return 45;
    fputs("-- behind short work\n", stderr);
    for (int i = 0; i < 8; i++)
        if (D.LaunchHostFunc(NULL, spin_100us, NULL) || D.MemcpyHtoD(d, h, N))
            return 45;
    return 0;
}

/* The debug lines of short_child's copies behind the work: how many, and
 * how many were given a pace. */
static void short_lines(const char *err, int *lines, int *paced)
{
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    char line[512], want[64];
    int behind = 0;
    snprintf(want, sizeof want, "registered H2D %zu B, sync", (size_t)N);
    *lines = *paced = 0;
    while (fgets(line, sizeof line, f)) {
        behind |= !strncmp(line, "-- behind short work", 20);
        const char *e = strstr(line, "(expected ");
        if (!behind || !strstr(line, want))
            continue;
        ++*lines;
        *paced += e && atof(e + 10) > 0;
    }
    fclose(f);
}

/* Half of them at least, in one of five tries: a loaded machine may keep
 * the fake's stream from the work for longer than the wait, and a copy
 * preempted before it looks may find the work over even without the wait. */
static void test_pace_behind_short_work(void **s)
{
    (void)s;
    if (!t_pinfast() || !OWN_MALLOC)
        skip();
    char err[256];
    const char *dir = child_dir("short", "err", err, sizeof err);
    /* no random delay per operation: the work ahead is the 100 us alone */
    const char *more[] = {"PINFAST_LOG=debug", "PINFAST_STATS=off", "FAKECUDA_DELAY_US=0", NULL};
    int lines = 0, paced = 0;
    for (int k = 0; k < 5 && paced < 4; k++) {
        assert_int_equal(run_child("short", more, err), 0);
        short_lines(err, &lines, &paced);
        if (lines != 8)
            break;
    }
    sp_rmdir(dir);
    if (lines != 8 || paced < 4)
        fail_msg("%d debug lines of copies behind 100 us of work (8 wanted), %d of them paced (4 wanted)", lines, paced);
}

/* Slow DMAs (FAKECUDA_DELAY_US): copies through a registration wait for
 * theirs asleep, not spinning a core in the driver as it does for an event
 * not made blocking (the fake as the real driver, tests/fake/fake_stream.c).
 * The caller's CPU time stays under a third of the copies' time; each copy
 * checked. */
static int wait_child(void)
{
    CUdeviceptr d;
    size_t n = N / 2; /* both registered under an 8 MiB locked-memory limit */
    unsigned char *h, *o;
    int rc = child_start(n, &h, &o, &d, 3);
    if (rc)
        return rc;
    int registered = t_pinfast() && OWN_MALLOC;
    if (registered && (!t_await(fake_registered_at, h) || !t_await(fake_registered_at, o)))
        return 47;
    struct timespec c0, c1;
    double w0 = t_now();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    for (int i = 0; i < 12; i++)
        if (t_round_trip(h, o, d, n))
            return 46;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double wall = t_now() - w0;
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    if (registered && cpu > wall / 3) {
        fprintf(stderr, "copies through a registration: %.3f s of CPU in %.3f s\n", cpu, wall);
        return 48;
    }
    return 0;
}

static void test_wait_sleeps(void **s)
{
    (void)s;
    const char *more[] = {"FAKECUDA_DELAY_US=20000", NULL};
    assert_int_equal(run_child("wait", more, NULL), 0);
}

/* The report's estimate of what the registrations saved (JSON): in each
 * direction, the registered rows' bytes at the staged rows' pace less the
 * registered rows' time, and their bytes at the staging CPU per GiB, from
 * the rows and staging figures of the same report. */
static void test_report_saved(void **s)
{
    (void)s;
    if (!t_pinfast() || !OWN_MALLOC)
        skip();
    char file[256], stats_file[300];
    const char *dir = child_dir("saved", "r.json", file, sizeof file);
    snprintf(stats_file, sizeof stats_file, "PINFAST_STATS_FILE=%s", file);
    const char *more[] = {"FAKECUDA_DELAY_US=20000", "PINFAST_STATS=json", stats_file, NULL};
    assert_int_equal(run_child("wait", more, NULL), 0);
    static struct report r;
    if (report_read(file, &r))
        fail_msg("report: %s", r.err);
    assert_true(r.reg.present && r.reg.copies > 0);
    double want = 0, want_cpu = 0, gib = (double)(1 << 30);
    int any = 0;
    for (int d = 0; d < 2; d++) {
        double st_bytes = 0, st_s = 0, rg_bytes = 0, rg_s = 0;
        for (int i = 0; i < r.nt; i++) {
            const struct rep_row *w = &r.t[i];
            if (strcmp(w->direction, d ? "D2H" : "H2D") || w->gbps < 0)
                continue;
            if (!strcmp(w->path, "staged"))
                st_bytes += (double)w->bytes, st_s += w->seconds;
            else if (!strcmp(w->path, "registered"))
                rg_bytes += (double)w->bytes, rg_s += w->seconds;
        }
        if (!st_bytes || !st_s || !rg_bytes)
            continue;
        any = 1;
        want += rg_bytes * st_s / st_bytes - rg_s;
        want_cpu += r.staging.cpu_seconds / ((double)r.staging.bytes / gib) * rg_bytes / gib;
    }
    assert_true(any); /* the first copies of each range were staged */
    if (fabs(r.reg.saved_seconds - want) > 1e-5 + 1e-3 * fabs(want) ||
        fabs(r.reg.saved_cpu_seconds - want_cpu) > 1e-5 + 1e-3 * want_cpu)
        fail_msg("saved %.6f s and %.6f CPU s, where the rows give %.6f and %.6f", r.reg.saved_seconds,
                 r.reg.saved_cpu_seconds, want, want_cpu);
    sp_rmdir(dir);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--exit-child"))
        return exit_child();
    if (argc > 1 && !strcmp(argv[1], "--wait-child"))
        return wait_child();
    if (argc > 1 && !strcmp(argv[1], "--pace-child"))
        return pace_child();
    if (argc > 1 && !strcmp(argv[1], "--short-child"))
        return short_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_mmapped),
        cmocka_unit_test(test_free_heap),
        cmocka_unit_test(test_reallocate),
        cmocka_unit_test(test_munmap),
        cmocka_unit_test(test_growing_prefixes),
        cmocka_unit_test(test_across_neighbours),
        cmocka_unit_test(test_mremap),
        cmocka_unit_test(test_madvise),
        cmocka_unit_test(test_mmap_fixed),
        cmocka_unit_test(test_shmdt),
        cmocka_unit_test(test_brk),
        cmocka_unit_test(test_while_registering),
        cmocka_unit_test(test_own_registrations),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_passed_through),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_fork_registering),
        cmocka_unit_test(test_exit),
        cmocka_unit_test(test_wait_sleeps),
        cmocka_unit_test(test_pace_behind_work),
        cmocka_unit_test(test_pace_behind_short_work),
        cmocka_unit_test(test_report_saved),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
