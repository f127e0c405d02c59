/* test_register: the registration cache (shim/memory/register.c) and
 * pinfast's heap (shim/memory/heap.c) try to break them.  Only blocks of
 * pinfast's heap (malloc and its family from PINFAST_REGISTER_MIN on) are
 * ever registered: a block copied again and again is (the fake counts
 * registrations: fakecuda_registered), memory the program maps itself and
 * a thread's stack never are, however often they are copied, so that a
 * stack reused by a later thread, or a mapping made again at the same
 * address, moves its new bytes.  Nothing is unregistered inline (the fake
 * counts cuMemHostUnregister calls, each a device-wide wait on a GPU): not
 * in free, munmap, madvise, mprotect, realloc, fork, a copy, nor the
 * program's own cuMemHostRegister/cuMemHostUnregister over a registered
 * block, which get the answers they would get without pinfast; a change
 * under a registration retires it (its copies staged, the bytes the
 * program's) and it is undone at the program's cuCtxSynchronize, as is a
 * freed block kept unused for two of them.  A freed registered block is
 * kept registered and given to the next malloc of its size: its copies go
 * through the registration at once (the report's registrations.copies).
 * The fake pins registered pages truly (fake_mem.c): a copy through a
 * registration that is no longer the program's memory moves the old pages,
 * and fails these checks.  Besides: asynchronous copies through a
 * registration keep the pageable copies' host semantics, threads copy and
 * free at once, a forked child and exit() leave nothing registered, a copy
 * through a registration waits for its DMA asleep and learns its pace only
 * from DMAs that started at once.  pinfast registers on a thread of its
 * own: the cases wait for it.  Runs plain (the same expectations, bytes
 * and answers) and under pinfast; each case ends with the program's
 * cuCtxSynchronize, after which nothing of it may stay registered. */
#define _GNU_SOURCE
#include "batch_ops.h"
#include "report.h"
#include "t.h"
#include "spawn.h"

#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define N (4 * MiB)
#define BLK (2 * MiB) /* heap blocks: three registered fit an 8 MiB locked-memory limit */
#define PAGE ((size_t)4096)

/* A sanitizer's malloc comes before pinfast in the preload list: pinfast's
 * heap is off, and nothing is registered (docs/design.md); the cases still
 * check the bytes and the answers. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OWN_MALLOC 0
#else
#define OWN_MALLOC 1
#endif

/* pinfast's heap serves the program's large blocks, and registers them */
static int heap(void) { return t_pinfast() && OWN_MALLOC; }

static CUstream stream;
static CUdeviceptr dev;
static unsigned char *pinned;

static int any_registered(void *arg)
{
    (void)arg;
    return fake_registered() > 0;
}

static int setup(void **state)
{
    CUstream other;
    /* plain: the blocks of 1 MiB and more are glibc's own mappings, so that
     * unmapping or mapping over a part of one leaves its heap whole (its
     * threshold would move up past them as they are freed) */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    if (t_setup_streams(state, &stream, &other) || D.MemAlloc(&dev, 4 * N) ||
        D.MemHostAlloc((void **)&pinned, 4 * N, 0))
        return -1;
    return 0;
}

/* After each case, which frees what it allocates: the program waits for
 * its context (twice: a kept block is given back when unused for two),
 * and nothing is registered any more. */
static int settle(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++)
        if (D.CtxSynchronize())
            return -1;
    if (fake_registered()) {
        fprintf(stderr, "%ld registration(s) left after two cuCtxSynchronize\n", fake_registered());
        return -1;
    }
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

/* Three round trips: under pinfast, a heap block is registered by then, or
 * soon after (the registrar's), the copies meanwhile staged. */
static void make_registered(unsigned char *r, size_t n)
{
    for (int i = 0; i < 3; i++)
        round_trip(r, n, "a block copied again and again");
    if (heap() && !t_await(fake_registered_at, r))
        fail_msg("a heap block copied three times was not registered");
}

/* A heap block of n bytes, registered under pinfast, then filled with salt. */
static unsigned char *registered_block(size_t n, uint64_t *salt)
{
    unsigned char *r = malloc(n);
    assert_non_null(r);
    make_registered(r, n);
    t_fill(r, n, *salt = t_rand());
    return r;
}

static unsigned long unregisters(void) { return fake_calls("cuMemHostUnregister"); }

/* Whether the block freed at `was` is still registered (an address, no
 * longer a pointer the program may use). */
static int registered_at(const volatile uintptr_t *was) { return fake_registered_at((void *)*was); }

/* Under pinfast, no cuMemHostUnregister since `before`, for 100 ms (the
 * library before this design unregistered on its registrar thread, soon
 * after the call): none, inline or behind it.  (Without pinfast, or its
 * heap, the program's own calls reach the fake, which counts them.) */
static void expect_no_unregister(unsigned long before, const char *call)
{
    if (!heap())
        return;
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 10 && unregisters() == before; i++)
        nanosleep(&nap, NULL);
    if (unregisters() != before)
        fail_msg("%s: %lu cuMemHostUnregister call(s), each a wait for the whole device", call,
                 unregisters() - before);
}

static unsigned char *map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

/* The whole pages inside [p, p+n) */
static unsigned char *page_up(const unsigned char *p) { return (unsigned char *)(((uintptr_t)p + PAGE - 1) & ~(PAGE - 1)); }

/* ---- memory pinfast did not allocate is never registered --------------------------- */
/* Whether any page of [p, p+n) is registered. */
static int any_page_registered(unsigned char *p, size_t n)
{
    for (size_t off = 0; off < n; off += PAGE)
        if (fake_registered_at(p + off))
            return 1;
    return fake_registered_at(p + n - 1);
}

/* Memory the program maps itself, copied again and again (a file's pages,
 * a shared segment, its own pool): staged every time, never registered;
 * unmapped and mapped again at the same address, its new bytes move. */
static void test_mapped_never_registered(void **s)
{
    (void)s;
    long before = fake_registered();
    unsigned char *r = map(N);
    for (int i = 0; i < 6; i++)
        round_trip(r, N, "memory the program mapped, copied again and again");
    struct timespec nap = {0, 50 * 1000 * 1000};
    nanosleep(&nap, NULL); /* the registrar's time, had it been handed the range */
    round_trip(r, N, "memory the program mapped, copied again and again");
    if (t_pinfast() && (any_page_registered(r, N) || fake_registered() != before))
        fail_msg("memory the program mapped itself was registered (%ld registration(s))", fake_registered() - before);
    /* the same address, new pages: by a raw system call, which no wrapper sees */
    assert_ptr_equal((void *)syscall(SYS_mmap, r, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                                     -1, 0), r);
    round_trip(r, N, "new memory mapped at the same address by a raw system call");
    munmap(r, N);
}

/* A thread's stack buffer (a 64 MiB stack, which glibc unmaps as the
 * thread ends: too large for its cache, by a call no wrapper sees) copied
 * again and again; a later thread's stack at the same address moves its
 * own bytes.  Each thread reports by its result (cmocka fails on the main
 * thread only). */
#define STACK ((size_t)64 << 20)
struct stack_run { uint64_t salt; uintptr_t at; int bad, registered; };

/* A round trip of buf through the device, checked: 0, or what failed. */
static int checked_trip(unsigned char *buf, size_t n, uint64_t salt)
{
    size_t bad;
    t_fill(buf, n, salt);
    if (D.MemcpyHtoD(dev, buf, n))
        return 1;
    t_poison(pinned, n);
    if (D.MemcpyDtoH(pinned, dev, n) || !t_check_fill(pinned, n, salt, &bad))
        return 2;
    t_fill(pinned, n, salt + 1);
    if (D.MemcpyHtoD(dev, pinned, n))
        return 1;
    t_poison(buf, n);
    if (D.MemcpyDtoH(buf, dev, n) || !t_check_fill(buf, n, salt + 1, &bad))
        return 3;
    return 0;
}

static void *stack_user(void *arg)
{
    struct stack_run *run = arg;
    unsigned char buf[N];
    t_bind_ctx();
    run->at = (uintptr_t)buf;
    for (int i = 0; i < 4 && !run->bad; i++)
        run->bad = checked_trip(buf, N, run->salt + 2 * (uint64_t)i);
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL); /* the registrar's time, had it been handed the range */
    run->registered = t_pinfast() && any_page_registered(buf, N);
    return NULL;
}

static void test_stack_reused(void **s)
{
    (void)s;
    pthread_attr_t attr;
    assert_int_equal(pthread_attr_init(&attr), 0);
    assert_int_equal(pthread_attr_setstacksize(&attr, STACK), 0);
    uintptr_t first = 0;
    int same = 0, registered = 0;
    for (int round = 0; round < 4; round++) {
        struct stack_run run = {.salt = t_rand()};
        pthread_t th;
        assert_int_equal(pthread_create(&th, &attr, stack_user, &run), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
        static const char *const what[] = {"", "an H2D failed", "an H2D from a thread's stack moved the wrong bytes",
                                           "a D2H into a thread's stack did not land there"};
        if (run.bad)
            fail_msg("round %d (stack buffer at %#lx, %s the first's): %s", round, (unsigned long)run.at,
                     run.at == first ? "at" : "not at", what[run.bad]);
        registered += run.registered;
        same += round && run.at == first;
        first = round ? first : run.at;
    }
    pthread_attr_destroy(&attr);
    print_message("a later thread's stack buffer at the first's address in %d of 3 rounds\n", same);
    if (registered)
        fail_msg("a thread's stack buffer was registered (%d of 4 rounds)", registered);
}

/* ---- a freed block is kept registered and given out again -------------------------- */
/* malloc/free/malloc of one size: the same block, still registered (under
 * pinfast), its bytes whatever the program writes. */
static void test_reuse_registered(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned long before = unregisters();
    long made = fake_calls("cuMemHostRegister_v2");
    for (int round = 0; round < 4; round++) {
        volatile uintptr_t was = (uintptr_t)r;
        free(r);
        unsigned char *q = malloc(BLK);
        assert_non_null(q);
        if (heap() && ((uintptr_t)q != was || !fake_registered_at(q)))
            fail_msg("malloc after free of a registered block of its size: %p, %s (the block was %#lx)", (void *)q,
                     fake_registered_at(q) ? "registered" : "not registered", (unsigned long)was);
        r = q;
        round_trip(r, BLK, "a block malloc gave again");
    }
    expect_no_unregister(before, "free and malloc again of a registered block");
    if (t_pinfast() && fake_calls("cuMemHostRegister_v2") != (unsigned long)made)
        fail_msg("a block given out again was registered again (%lu registration(s))",
                 fake_calls("cuMemHostRegister_v2") - (unsigned long)made);
    /* calloc's block is all zeros, never a kept one */
    volatile uintptr_t was = (uintptr_t)r;
    free(r);
    unsigned char *z = calloc(1, BLK);
    assert_non_null(z);
    if (heap() && (uintptr_t)z == was)
        fail_msg("calloc gave a kept block");
    for (size_t i = 0; i < BLK; i++)
        if (z[i])
            fail_msg("byte %zu of a calloc'd block is %#x", i, z[i]);
    free(z);
}

/* The child of test_reuse_report: two blocks malloc'd, copied, freed, six
 * times over; from the second time on, the same blocks, registered before
 * their first copy. */
static int reuse_child(void)
{
    CUdeviceptr d;
    if (drv_load_from_env(&D) || drv_context0(&D, &T_CTX) || D.MemAlloc(&d, BLK))
        return 44;
    unsigned char *h0 = NULL, *o0 = NULL;
    for (int round = 0; round < 6; round++) {
        unsigned char *h = malloc(BLK), *o = malloc(BLK);
        if (!h || !o)
            return 45;
        if (round && heap() && (!((h == h0 && o == o0) || (h == o0 && o == h0)) || !fake_registered_at(h) ||
                                !fake_registered_at(o))) {
            fprintf(stderr, "round %d: blocks %p and %p (%sregistered, %sregistered), the first round's %p and %p\n",
                    round, (void *)h, (void *)o, fake_registered_at(h) ? "" : "not ",
                    fake_registered_at(o) ? "" : "not ", (void *)h0, (void *)o0);
            return 47;
        }
        for (int i = 0; i < 3; i++) {
            int rc = t_round_trip(h, o, d, BLK);
            if (rc)
                return rc;
        }
        if (!round && heap() && (!t_await(fake_registered_at, h) || !t_await(fake_registered_at, o)))
            return 48;
        h0 = round ? h0 : h;
        o0 = round ? o0 : o;
        free(h);
        free(o);
    }
    return 0;
}

/* A freed registered block is kept registered through the program's first
 * cuCtxSynchronize, unused, and undone at its second. */
static void test_kept_until_synchronized(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    volatile uintptr_t was = (uintptr_t)r;
    unsigned long before = unregisters();
    free(r);
    expect_no_unregister(before, "free of a registered block");
    if (heap() && !registered_at(&was))
        fail_msg("a freed registered block was unregistered before the program waited for its context");
    CK(D.CtxSynchronize());
    if (heap() && (!registered_at(&was) || unregisters() != before))
        fail_msg("a freed block, kept registered, was undone at the first cuCtxSynchronize after its free");
    CK(D.CtxSynchronize());
    if (registered_at(&was) || (heap() && unregisters() != before + 1))
        fail_msg("a freed block kept unused through two cuCtxSynchronize: %s, %lu unregistration(s)",
                 registered_at(&was) ? "still registered" : "unregistered", unregisters() - before);
}

/* Two blocks copied twice, due for registration, then freed, while the
 * registrar spends 0.3 s on each (a slow registration): the one it was not
 * making when the program waited for its context is never registered.
 * Made after that wait, of memory the program freed, it would outlast the
 * waits that undo a kept block's registration. */
static void test_freed_due_not_registered(void **s)
{
    (void)s;
    if (!heap())
        return;
    fake_register_delay(300 * 1000);
    unsigned char *a = malloc(BLK), *b = malloc(BLK);
    assert_non_null(a);
    assert_non_null(b);
    round_trip(a, BLK, "a block made due");
    round_trip(b, BLK, "a block made due behind another");
    volatile uintptr_t was[2] = {(uintptr_t)a, (uintptr_t)b};
    free(a);
    free(b);
    CK(D.CtxSynchronize());
    int made = 0;
    for (int i = 0; i < 300 && made < 2; i++) { /* both made within 3 s, where they are */
        usleep(10 * 1000);
        made = registered_at(&was[0]) + registered_at(&was[1]);
    }
    fake_register_delay(0);
    if (made > 1)
        fail_msg("a block freed while due for registration was registered after the program's cuCtxSynchronize");
}

/* Copied twice (due: the registrar registers it now), then its pages
 * advised away: no unregistration inline; the program's bytes move. */
static void test_changed_while_registering(void **s)
{
    (void)s;
    for (int round = 0; round < 6; round++) {
        unsigned char *r = malloc(BLK);
        assert_non_null(r);
        round_trip(r, BLK, "a block becoming due");
        unsigned long before = unregisters();
        unsigned char *lo = page_up(r);
        assert_int_equal(madvise(lo, (size_t)(r + BLK - lo) & ~(PAGE - 1), MADV_DONTNEED), 0);
        expect_no_unregister(before, "madvise(MADV_DONTNEED) of a block being registered");
        round_trip(r, BLK, "a block advised away while being registered");
        round_trip(r, BLK, "a block advised away while being registered");
        free(r);
        CK(D.CtxSynchronize());
    }
}

static int run_child(const char *what, const char *const *more, const char *err);
static const char *child_dir(const char *tag, const char *name, char *path, size_t n);

/* Blocks malloc'd, copied and freed in a loop of one size (a training
 * step's, an inference loop's): the same blocks from the second round on,
 * registered before their first copy (the child checks), and the report
 * says their copies went through the registrations: two made, from the
 * second round on every copy through them. */
static void test_reuse_report(void **s)
{
    (void)s;
    if (!heap())
        skip();
    char file[256], stats_file[300];
    const char *dir = child_dir("reuse", "r.json", file, sizeof file);
    snprintf(stats_file, sizeof stats_file, "PINFAST_STATS_FILE=%s", file);
    const char *more[] = {"PINFAST_STATS=json", stats_file, NULL};
    assert_int_equal(run_child("reuse", more, NULL), 0);
    static struct report r;
    if (report_read(file, &r))
        fail_msg("report: %s", r.err);
    sp_rmdir(dir);
    assert_true(r.reg.present);
    print_message("registered %lld, copies through them %lld, heap blocks %lld, reused %lld\n", r.reg.registered,
                  r.reg.copies, r.reg.heap_blocks, r.reg.heap_reused);
    if (r.reg.registered != 2 || r.reg.copies < 5 * 6 || r.reg.heap_reused < 5 * 2)
        fail_msg("6 rounds of 2 blocks, 6 copies each: %lld registration(s), %lld copies through them, %lld blocks "
                 "reused (2, at least 30 and 10 wanted)", r.reg.registered, r.reg.copies, r.reg.heap_reused);
}

/* glibc raises its mmap threshold to the size of a mapped block the
 * program frees, and keeps its heap's top up to twice that: blocks of
 * 256 KiB freed all at once stay in its heap, not given back to the
 * system to be faulted in again.  1 when it gave its top back. */
static int libc_gave_back(size_t big, int by_realloc, size_t live)
{
    enum { K = 256 << 10 };
    unsigned char *volatile b = malloc(big);
    if (!b)
        return 1;
    b[0] = 1;
    if (by_realloc ? realloc(b, 0) != NULL : (free(b), 0))
        return 1;
    unsigned char *v[128];
    size_t n = live / K < 128 ? live / K : 128;
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = malloc(K)) || !memset(v[i], (int)i, K))
            return 1;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    struct mallinfo2 m = mallinfo2();
    if (m.arena >= live)
        return 0;
    fprintf(stderr, "after %s of %zu MiB, %zu MiB of 256 KiB blocks freed: glibc's heap holds %zu MiB\n",
            by_realloc ? "realloc(p, 0)" : "free", big / MiB, live / MiB, m.arena / MiB);
    return 1;
}

/* The child of test_libc_keeps_top: glibc's thresholds as the program left
 * them (the parent's setup fixes them). */
static int top_child(void) { return libc_gave_back(8 * MiB, 0, 6 * MiB) || libc_gave_back(16 * MiB, 1, 20 * MiB); }

/* The program's large frees move glibc's thresholds as without pinfast,
 * whose heap serves those blocks: by free and by realloc(p, 0). */
static void test_libc_keeps_top(void **s)
{
    (void)s;
    if (!OWN_MALLOC)
        skip(); /* a sanitizer's malloc: no glibc heap to keep */
    assert_int_equal(run_child("top", NULL, NULL), 0);
}

/* ---- the memory of a registered block changed: no unregistration inline ----------- */
/* The program lets a registered block go (free) and makes an unrelated
 * small copy: no unregistration; the block is kept registered. */
static void test_free_no_unregister(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned char *small = malloc(4096);
    assert_non_null(small);
    unsigned long before = unregisters();
    volatile uintptr_t was = (uintptr_t)r;
    free(r);
    t_fill(small, 4096, salt);
    CK(D.MemcpyHtoDAsync(dev, small, 4096, stream));
    CK(D.StreamSynchronize(stream));
    expect_no_unregister(before, "free of a registered block, then a small copy");
    if (heap() && !registered_at(&was))
        fail_msg("a freed registered block was unregistered");
    free(small);
}

/* madvise(MADV_DONTNEED) over a registered block: no unregistration; the
 * program reads zeros (the fake keeps a registered page's contents, where
 * the kernel gives new zero pages: not checked there), and its new bytes
 * move both ways (the retired registration is not used); the
 * unregistration comes at the program's cuCtxSynchronize. */
static void test_madvise(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned char *lo = page_up(r);
    size_t n = (size_t)(r + BLK - lo) & ~(PAGE - 1);
    int pinned_pages = fake_registered_at(lo);
    unsigned long before = unregisters();
    assert_int_equal(madvise(lo, n, MADV_DONTNEED), 0);
    expect_no_unregister(before, "madvise(MADV_DONTNEED) over a registered block");
    if (!pinned_pages)
        for (size_t i = 0; i < n; i += PAGE / 4)
            if (lo[i])
                fail_msg("memory after MADV_DONTNEED reads %#x at %zu, not 0", lo[i], i);
    round_trip(r, BLK, "a block after MADV_DONTNEED");
    round_trip(r, BLK, "a block after MADV_DONTNEED");
    expect_no_unregister(before, "copies of a block after madvise(MADV_DONTNEED)");
    if (heap() && !fake_registered_at(r))
        fail_msg("a block after madvise(MADV_DONTNEED): its registration was undone before the program waited");
    CK(D.CtxSynchronize());
    if (t_pinfast() && unregisters() != before + (heap() ? 1 : 0))
        fail_msg("cuCtxSynchronize after madvise(MADV_DONTNEED) of a registered block: %lu unregistration(s), "
                 "not %d", unregisters() - before, heap());
    if (fake_registered_at(r))
        fail_msg("a retired registration outlived the program's cuCtxSynchronize");
    round_trip(r, BLK, "a block after its registration was undone");
    free(r);
}

/* munmap of whole pages inside a registered block, mprotect of it
 * read-only and back: no unregistration; the rest of the block moves its
 * bytes; freed, the block's registration is undone at the program's
 * cuCtxSynchronize. */
static void test_munmap_mprotect(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned long before = unregisters();
    assert_int_equal(mprotect(page_up(r), 2 * PAGE, PROT_READ), 0);
    expect_no_unregister(before, "mprotect(PROT_READ) of a part of a registered block");
    CK(D.MemcpyHtoD(dev, r, BLK));
    t_poison(pinned, BLK);
    CK(D.MemcpyDtoH(pinned, dev, BLK));
    t_expect_fill(pinned, BLK, salt, "an H2D from a block made read-only");
    assert_int_equal(mprotect(page_up(r), 2 * PAGE, PROT_READ | PROT_WRITE), 0);
    round_trip(r, BLK, "a block made writable again");
    unsigned char *hole = page_up(r) + BLK / 2;
    assert_int_equal(munmap(hole, 2 * PAGE), 0);
    expect_no_unregister(before, "munmap of whole pages inside a registered block");
    size_t head = (size_t)(hole - r);
    round_trip(r, head, "the part of a block before the pages unmapped");
    round_trip(hole + 2 * PAGE, (size_t)(r + BLK - hole) - 2 * PAGE, "the part of a block after the pages unmapped");
    free(r);
    expect_no_unregister(before, "free of a block with a hole");
    CK(D.CtxSynchronize());
    if (t_pinfast() && unregisters() != before + (heap() ? 1 : 0))
        fail_msg("cuCtxSynchronize after munmap in a registered block: %lu unregistration(s), not %d",
                 unregisters() - before, heap());
}

/* The pages of a registered block replaced (an mmap over them): the
 * registration is retired; copies of the new pages, however small, move
 * the new bytes, and undo nothing (they are staged). */
static void test_mapped_over(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned char *lo = page_up(r);
    unsigned long before = unregisters();
    assert_ptr_equal(mmap(lo, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), lo);
    expect_no_unregister(before, "mmap(MAP_FIXED) over a registered block");
    for (size_t n = 4096; n <= MiB; n *= 4) {
        char what[96];
        snprintf(what, sizeof what, "a copy of %zu bytes of new pages mapped over a registered block", n);
        round_trip(lo + MiB - n, n, what);
        round_trip(lo, n, what);
    }
    round_trip(r, BLK, "a block with new pages mapped over a part");
    /* staged, however small: passed to the driver, a copy would need the
     * retired registration undone first, a wait for the whole device */
    expect_no_unregister(before, "copies over new pages mapped over a registered block");
    free(r);
}

/* A block the program made read-only in part (a guard page, a JIT's code)
 * and freed as it is, as glibc allows: the next malloc of its size gets
 * memory it can write, all of it. */
static void test_protected_block_freed(void **s)
{
    (void)s;
    for (int registered = 0; registered < 2; registered++) {
        uint64_t salt;
        unsigned char *r = registered ? registered_block(BLK, &salt) : malloc(BLK);
        assert_non_null(r);
        unsigned char *guard = page_up(r) + BLK / 2;
        assert_int_equal(mprotect(guard, PAGE, PROT_READ), 0);
        free(r);
        unsigned char *q = malloc(BLK);
        assert_non_null(q);
        memset(q, 0x5A, BLK); /* a fault here: a read-only page given out again */
        round_trip(q, BLK, "a block malloc gave after one with a read-only page was freed");
        free(q);
        CK(D.CtxSynchronize());
    }
}

/* realloc of no block is malloc: a buffer grown from nothing (CPython's
 * bytearray) comes from pinfast's heap, and is registered when copied
 * again and again. */
static void test_realloc_from_nothing(void **s)
{
    (void)s;
    unsigned char *r = realloc(NULL, BLK);
    assert_non_null(r);
    make_registered(r, BLK);
    free(r);
}

/* realloc of a registered block: moved by a copy (it keeps its bytes), no
 * unregistration; the old block is kept registered. */
static void test_reallocate(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned long before = unregisters();
    unsigned char *q = realloc(r, 3 * BLK);
    assert_non_null(q);
    expect_no_unregister(before, "realloc of a registered block");
    t_expect_fill(q, BLK, salt, "realloc kept the contents");
    round_trip(q, 3 * BLK, "the reallocated block");
    unsigned char *o = malloc(BLK); /* may take the old block */
    assert_non_null(o);
    round_trip(o, BLK, "a block malloc gave after realloc");
    q = realloc(q, BLK / 2 + 4096);
    assert_non_null(q);
    round_trip(q, BLK / 2 + 4096, "a block shrunk by realloc");
    free(o);
    free(q);
    expect_no_unregister(before, "realloc and free of blocks");
}

/* fork(): no unregistration in the parent; the child has none of its
 * registrations, r's bytes (salt), and writes and frees its own copy; the
 * parent's r keeps its bytes and its registration. */
static void fork_and_check(unsigned char *r, size_t n, uint64_t salt, const char *call)
{
    unsigned long before = unregisters();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (!pid) {
        size_t bad;
        if (t_pinfast() && fake_registered())
            _exit(41); /* the child inherited a registration */
        if (!t_check_fill(r, n, salt, &bad))
            _exit(42);
        memset(r, 0x77, n); /* the child's own copy */
        free(r);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    expect_no_unregister(before, call);
    t_expect_fill(r, n, salt, "the parent's memory after the child wrote its own");
}

static void test_fork(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    fork_and_check(r, BLK, salt, "fork (in the parent)");
    if (heap() && !fake_registered_at(r))
        fail_msg("fork undid a registration");
    CK(D.MemcpyHtoD(dev, r, BLK));
    t_poison(pinned, BLK);
    CK(D.MemcpyDtoH(pinned, dev, BLK));
    t_expect_fill(pinned, BLK, salt, "the parent's H2D after fork");
    round_trip(r, BLK, "the parent's block after fork");
    free(r);
}

/* fork() as the registrar registers: nothing waits for it, nothing is
 * undone. */
static void test_fork_registering(void **s)
{
    (void)s;
    unsigned char *r = malloc(BLK);
    assert_non_null(r);
    round_trip(r, BLK, "a block becoming due");
    uint64_t salt = t_rand();
    t_fill(r, BLK, salt);
    fork_and_check(r, BLK, salt, "fork while registering (in the parent)");
    make_registered(r, BLK);
    free(r);
}

/* ---- the program's own registrations ---------------------------------------------- */
/* Over a block pinfast registered: the driver's answers without pinfast
 * (SUCCESS, its flags, SUCCESS, then NOT_REGISTERED), answered from
 * pinfast's registration (no driver call: none undone), which stays; an
 * unregistration of memory the program never registered: NOT_REGISTERED. */
static void test_own_registrations(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned long before = unregisters();
    CK(D.MemHostRegister(r, BLK, CU_MEMHOSTREGISTER_PORTABLE));
    unsigned flags = 0;
    CK(D.MemHostGetFlags(&flags, r + PAGE));
    /* (the driver reports every registration mapped, under unified addressing) */
    assert_int_equal(flags & ~(unsigned)CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_PORTABLE);
    CK_EQ(D.MemHostRegister(r, BLK, CU_MEMHOSTREGISTER_PORTABLE), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    round_trip(r, BLK, "the program's registration");
    CK(D.MemHostUnregister(r));
    CK_EQ(D.MemHostUnregister(r), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    expect_no_unregister(before, "the program's cuMemHostRegister/Unregister over a registered block");
    if (heap() && !fake_registered_at(r))
        fail_msg("the program's registration and unregistration undid pinfast's");
    round_trip(r, BLK, "a block after the program's registration went");
    /* never the program's to undo */
    CK_EQ(D.MemHostUnregister(r), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    expect_no_unregister(before, "the program's cuMemHostUnregister of a registered block it did not register");
    /* a part of it, then the whole with other flags: the driver's answers */
    CK(D.MemHostRegister(r + PAGE, 2 * PAGE, 0));
    round_trip(r, BLK, "a block the program registered a part of");
    CK(D.MemHostUnregister(r + PAGE));
    CK_EQ(D.MemHostUnregister(r + PAGE), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CK(D.MemHostRegister(r, BLK, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP));
    round_trip(r, BLK, "a block the program registered");
    CK(D.MemHostUnregister(r));
    CK_EQ(D.MemHostUnregister(r), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    free(r);
}

/* Several registrations of the program's in one registered block: each
 * succeeds and is undone by its own cuMemHostUnregister, one sharing a page
 * with another too, one meeting another's bytes is refused, as without
 * pinfast, with no device wait.  A registration of the program's over a block whose other
 * half it then advises away stays the program's through its
 * cuCtxSynchronize: its cuMemHostUnregister still succeeds. */
static void test_own_registrations_several(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned long before = unregisters();
    CK(D.MemHostRegister(r + PAGE, PAGE + 8, 0));
    CK(D.MemHostRegister(r + 5 * PAGE, PAGE + 8, CU_MEMHOSTREGISTER_PORTABLE));
    CK(D.MemHostRegister(r + 2 * PAGE + 100, 16, 0));
    CK_EQ(D.MemHostRegister(r + 2 * PAGE, 16, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    unsigned flags = 0;
    CK(D.MemHostGetFlags(&flags, r + 5 * PAGE));
    assert_int_equal(flags & ~(unsigned)CU_MEMHOSTREGISTER_DEVICEMAP, CU_MEMHOSTREGISTER_PORTABLE);
    round_trip(r, BLK, "a block the program registered two parts of");
    CK(D.MemHostUnregister(r + 5 * PAGE));
    CK(D.MemHostUnregister(r + PAGE));
    CK(D.MemHostUnregister(r + 2 * PAGE + 100));
    CK_EQ(D.MemHostUnregister(r + PAGE), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    expect_no_unregister(before, "the program's registrations of two parts of a registered block");
    CK(D.MemHostRegister(r, BLK / 2, 0));
    unsigned char *away = page_up(r + BLK / 2);
    assert_int_equal(madvise(away, PAGE, MADV_DONTNEED), 0);
    memset(away, 0, PAGE);
    t_fill(r, BLK / 2, salt);
    CK(D.CtxSynchronize());
    CK(D.CtxSynchronize());
    CK(D.MemHostUnregister(r));
    round_trip(r, BLK, "a block after the program's registration went");
    free(r);
}

/* Two rows of a page from host memory h (H2D) or into it. */
static CUDA_MEMCPY2D rows_2d(int h2d, unsigned char *h)
{
    CUDA_MEMCPY2D m = {.WidthInBytes = PAGE, .Height = 2, .srcPitch = PAGE, .dstPitch = PAGE};
    m.srcMemoryType = h2d ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    m.dstMemoryType = h2d ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    m.srcHost = m.dstHost = h;
    m.srcDevice = m.dstDevice = dev;
    return m;
}

/* A copy that starts in the program's own registration and runs past its
 * end, both ways, synchronous and asynchronous, linear, 2D, 3D or to an
 * array: refused (CUDA_ERROR_INVALID_VALUE), as the driver refuses it
 * without pinfast (tests/gpu/probes/probe_reg_pieces.c,
 * tests/gpu/checks/register_check.c), though pinfast's registration of
 * the whole block would take it; within the registration, or from before
 * it into it, it is made. */
/* Batches whose middle copy runs from the program's registration past its
 * end (`past`), both ways, on both ABIs, linear and 3D: refused there, the
 * copy before it made, the one after not; failIdx that copy's, or none
 * (SIZE_MAX) for a 3D batch (the driver's answers:
 * tests/gpu/probes/probe_reg_pieces.c); unless an op of a 3D batch has
 * parameters the driver refuses first; a 3D op's location hint of a type
 * the driver does not know changes nothing. */
static CUresult batch_of_three(int three, int v1, CUdeviceptr *d, CUdeviceptr *s, size_t *z, size_t *fail)
{
    CUmemcpyAttributes at = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    size_t ai = 0;
    if (!three)
        return v1 ? D.MemcpyBatchAsync12(d, s, z, 3, &at, &ai, 1, fail, stream)
                  : D.MemcpyBatchAsync(d, s, z, 3, &at, &ai, 1, stream);
    CUDA_MEMCPY3D_BATCH_OP op[3];
    pft_batch_ops(op, d, s, z, 3);
    return v1 ? D.Memcpy3DBatchAsync12(3, op, fail, 0, stream) : D.Memcpy3DBatchAsync(3, op, 0, stream);
}

static void batch_past(unsigned char *past)
{
    static unsigned char zero[4 * PAGE], got[PAGE];
    size_t z[3] = {PAGE, 2 * PAGE, PAGE};
    memset(pinned, 0xC3, 2 * PAGE);
    for (int form = 0; form < 8; form++) {
        int h2d = form & 1, v1 = form >> 1 & 1, three = form >> 2;
        CUdeviceptr d[3], s[3], side = dev + 16 * PAGE;
        size_t fail = 12345, want = three ? SIZE_MAX : 1;
        CK(D.MemcpyHtoD(side, zero, sizeof zero));
        for (int i = 0; i < 3; i += 2) {
            d[i] = h2d ? side + (size_t)i * PAGE : (CUdeviceptr)(uintptr_t)(pinned + 2 * PAGE + (size_t)i * PAGE);
            s[i] = h2d ? (CUdeviceptr)(uintptr_t)(pinned + (size_t)i / 2 * PAGE) : side + (size_t)i * PAGE;
        }
        d[1] = h2d ? dev : (CUdeviceptr)(uintptr_t)past;
        s[1] = h2d ? (CUdeviceptr)(uintptr_t)past : dev;
        CUresult r = batch_of_three(three, v1, d, s, z, &fail);
        CK(D.StreamSynchronize(stream));
        if (r != CUDA_ERROR_INVALID_VALUE || (v1 && fail != want))
            fail_msg("%s %s batch (%s ABI) with a copy past the program's registration: %d, failIdx %zu (%d, %zu "
                     "wanted)", h2d ? "H2D" : "D2H", three ? "3D" : "linear", v1 ? "12.8" : "13.0", (int)r, fail,
                     (int)CUDA_ERROR_INVALID_VALUE, want);
        for (int i = 0; h2d && i < 3; i += 2) {
            CK(D.MemcpyDtoH(got, side + (size_t)i * PAGE, PAGE));
            if ((got[0] == 0xC3) != !i)
                fail_msg("a refused %s batch's copy %d %s", three ? "3D" : "linear", i,
                         i ? "was made" : "was not made");
        }
    }
    /* a 3D batch whose third op the driver refuses before moving any (a
     * zero extent, H100): that op's failIdx, the first op not made */
    CUdeviceptr side = dev + 16 * PAGE, d[3] = {side, dev, side + 2 * PAGE};
    CUdeviceptr s[3] = {(CUdeviceptr)(uintptr_t)pinned, (CUdeviceptr)(uintptr_t)past, (CUdeviceptr)(uintptr_t)pinned};
    CUDA_MEMCPY3D_BATCH_OP op[3];
    size_t fail = 12345;
    CK(D.MemcpyHtoD(side, zero, sizeof zero));
    pft_batch_ops(op, d, s, z, 3);
    op[2].extent.width = 0;
    CUresult r = D.Memcpy3DBatchAsync12(3, op, &fail, 0, stream);
    CK(D.StreamSynchronize(stream));
    CK(D.MemcpyDtoH(got, side, PAGE));
    if (r != CUDA_ERROR_INVALID_VALUE || fail != 2 || got[0] == 0xC3)
        fail_msg("a 3D batch past the program's registration with an op of no extent: %d, failIdx %zu, the first op "
                 "%s (%d, 2, not made wanted)", (int)r, fail, got[0] == 0xC3 ? "made" : "not made",
                 (int)CUDA_ERROR_INVALID_VALUE);
    /* a location hint of a type the driver does not know it takes in a 3D
     * op (H100): refused at the copy past the registration all the same */
    CK(D.MemcpyHtoD(side, zero, sizeof zero));
    pft_batch_ops(op, d, s, z, 3);
    op[1].src.op.ptr.locHint.type = (CUmemLocationType)99;
    fail = 12345;
    r = D.Memcpy3DBatchAsync12(3, op, &fail, 0, stream);
    CK(D.StreamSynchronize(stream));
    CK(D.MemcpyDtoH(got, side, PAGE));
    if (r != CUDA_ERROR_INVALID_VALUE || fail != SIZE_MAX || got[0] != 0xC3)
        fail_msg("a 3D batch past the program's registration with a hint of type 99: %d, failIdx %zu, the first op "
                 "%s (%d, SIZE_MAX, made wanted)", (int)r, fail, got[0] == 0xC3 ? "made" : "not made",
                 (int)CUDA_ERROR_INVALID_VALUE);
}

static void test_own_registration_overrun(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned char *mine = r + 2 * PAGE, *past = mine + PAGE;
    CK(D.MemHostRegister(mine, 2 * PAGE, 0));
    CK_EQ(D.MemcpyHtoD(dev, past, 2 * PAGE), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyDtoH(past, dev, 2 * PAGE), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyHtoDAsync(dev, past, 2 * PAGE, stream), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyDtoHAsync(past, dev, 2 * PAGE, stream), CUDA_ERROR_INVALID_VALUE);
    for (int h2d = 0; h2d < 2; h2d++) {
        CUDA_MEMCPY2D m = rows_2d(h2d, past);
        CK_EQ(D.Memcpy2D(&m), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.Memcpy2DAsync(&m, stream), CUDA_ERROR_INVALID_VALUE);
        CUDA_MEMCPY3D v = {.srcMemoryType = m.srcMemoryType, .srcHost = m.srcHost, .srcDevice = m.srcDevice,
                           .srcPitch = PAGE, .srcHeight = 1, .dstMemoryType = m.dstMemoryType,
                           .dstHost = m.dstHost, .dstDevice = m.dstDevice, .dstPitch = PAGE, .dstHeight = 1,
                           .WidthInBytes = PAGE, .Height = 1, .Depth = 2};
        CK_EQ(D.Memcpy3D(&v), CUDA_ERROR_INVALID_VALUE);
        m = rows_2d(h2d, mine); /* within it */
        CK(D.Memcpy2D(&m));
    }
    CUarray a;
    CUDA_ARRAY_DESCRIPTOR ad = {.Width = 4 * PAGE, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
    CK(D.ArrayCreate(&a, &ad));
    CK_EQ(D.MemcpyHtoA(a, 0, past, 2 * PAGE), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyAtoH(past, a, 0, 2 * PAGE), CUDA_ERROR_INVALID_VALUE);
    CK(D.MemcpyHtoA(a, 0, mine, 2 * PAGE));
    CK(D.ArrayDestroy(a));
    CK(D.StreamSynchronize(stream));
    batch_past(past);
    round_trip(mine, 2 * PAGE, "a copy within the program's registration");
    round_trip(r, 4 * PAGE, "a copy from before the program's registration to its end");
    CK(D.MemHostUnregister(mine));
    round_trip(past, 2 * PAGE, "a copy past where the program's registration ended, once undone");
    free(r);
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

/* The driver's synchronous copies pinfast made so far, either form. */
static unsigned long sync_calls(void)
{
    return fake_calls("cuMemcpyHtoD_v2") + fake_calls("cuMemcpyHtoD_v2_ptds") + fake_calls("cuMemcpyDtoH_v2") +
           fake_calls("cuMemcpyDtoH_v2_ptds");
}

/* k checked synchronous round trips through r; returns the driver's
 * synchronous calls pinfast made for them. */
static unsigned long sync_round_trips(unsigned char *r, int k, const char *what)
{
    unsigned long c0 = sync_calls();
    for (int i = 0; i < k; i++) {
        uint64_t a = t_rand();
        t_fill(r, N, a);
        CK(D.MemcpyHtoD(dev, r, N));
        t_poison(r, N);
        CK(D.MemcpyDtoH(r, dev, N));
        t_expect_fill(r, N, a, what);
    }
    return sync_calls() - c0;
}

/* Synchronous copies through a registration, on an idle stream, once their
 * DMAs' pace is known to be short: each ends in the driver's synchronous
 * call (the fake counts pinfast's calls), not in an event pinfast waits
 * for.  Behind work, on the legacy stream or on a blocking stream the
 * legacy stream waits for, one does not (the driver's wait would spin
 * through it); nor in a context made to block in its waits.  Each copy
 * checked. */
static void test_sync_in_driver(void **s)
{
    (void)s;
    unsigned char *r = malloc(N);
    assert_non_null(r);
    make_registered(r, N);
    unsigned long behind = 0, idle = sync_round_trips(r, 40, "a synchronous round trip through a registration");
    /* in a context whose waits block, the driver's call would sleep past
     * the DMA's end: pinfast waits on its event */
    CK(D.CtxSetFlags(CU_CTX_SCHED_BLOCKING_SYNC));
    unsigned long blocking = sync_round_trips(r, 10, "a synchronous round trip through a registration, blocking waits");
    CK(D.CtxSetFlags(CU_CTX_SCHED_AUTO));
    /* a per-thread default stream does not wait for the blocking stream */
    for (int on_blocking = 0; on_blocking < (D.ptds ? 1 : 2); on_blocking++) {
        uint64_t b = t_rand();
        t_fill(r, N, b);
        CK(D.LaunchHostFunc(on_blocking ? stream : NULL, sleep_20ms, NULL));
        unsigned long c0 = sync_calls();
        CK(D.MemcpyHtoD(dev, r, N)); /* waits for the work first */
        behind += sync_calls() - c0;
        t_poison(pinned, N);
        CK(D.MemcpyDtoH(pinned, dev, N));
        t_expect_fill(pinned, N, b, "a synchronous H2D through a registration behind 20 ms of work");
    }
    free(r);
    if (heap() && (!idle || behind || blocking))
        fail_msg("%lu of 80 idle copies, %lu behind work and %lu of 20 in a blocking-sync context ended in the "
                 "driver's synchronous call",
                 idle, behind, blocking);
}

/* The first copy of a context from a block of pinfast's heap: an H2D
 * registers the block at once and goes direct, where staging would first
 * pin the context's slots (the fake counts pinfast's registrations of its
 * own memory, advised MADV_DONTFORK); a
 * D2H is staged, as is an H2D of a quarter of its block (the rest may be
 * untouched).  (A block over 64 MiB is staged too: over this test's
 * locked-memory limit, it could not be registered either way.)  Each in a
 * context of its own; each copy checked. */
static void test_first_copy_registers(void **s)
{
    (void)s;
    static const struct { size_t block, copy; int d2h, pins; } cases[] = {
        {N, N, 0, 0}, {N, N, 1, 1}, {N, N / 2, 0, 1}};
    CUdevice device;
    CK(D.CtxGetDevice(&device));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = cases[i].copy;
        unsigned char *b = malloc(cases[i].block);
        assert_non_null(b);
        CUcontext ctx;
        CUdeviceptr d;
        CK(D.CtxCreate(&ctx, 0, device));
        CK(D.MemAlloc(&d, n));
        uint64_t salt = t_rand();
        t_fill(cases[i].d2h ? pinned : b, n, salt);
        if (cases[i].d2h)
            CK(D.MemcpyHtoD(d, pinned, n));
        t_poison(cases[i].d2h ? b : pinned, n);
        long allocs = fake_registered_dontfork();
        if (cases[i].d2h)
            CK(D.MemcpyDtoH(b, d, n));
        else
            CK(D.MemcpyHtoD(d, b, n));
        allocs = fake_registered_dontfork() - allocs;
        if (!cases[i].d2h)
            CK(D.MemcpyDtoH(pinned, d, n));
        t_expect_fill(cases[i].d2h ? b : pinned, n, salt, "a context's first copy");
        CK(D.CtxDestroy(ctx));
        free(b);
        if (heap() && !allocs != !cases[i].pins)
            fail_msg("a context's first %s of %zu MiB from a block of %zu MiB: %ld slot pinnings, expected %s",
                     cases[i].d2h ? "D2H" : "H2D", n / MiB, cases[i].block / MiB, allocs,
                     cases[i].pins ? "some" : "none");
    }
}

/* The resident pages among the whole pages of [p, p+n). */
static size_t resident_pages(unsigned char *p, size_t n)
{
    unsigned char *lo = page_up(p), v[1024];
    size_t pages = (size_t)(p + n - lo) / PAGE, k = 0;
    assert_true(pages <= sizeof v);
    assert_int_equal(mincore(lo, pages * PAGE, v), 0);
    for (size_t i = 0; i < pages; i++)
        k += v[i] & 1;
    return k;
}

/* A block the program uses the start of (a buffer allocated large, filled
 * small), copied again and again: not registered, nor any page of it made
 * resident.  Registering pins every page, and the pages never touched
 * would become resident: the program would see its memory grow; and a
 * registration of its start only would make the driver refuse a copy
 * across the registration's end (tests/gpu/probes/probe_reg_pieces.c).
 * Once the program has used it whole, it is registered whole, and a small
 * copy across where the used part ended goes through.  (With huge pages on
 * always, the kernel faults in the whole 2 MiB page the used part ends in:
 * the rest starts after it.) */
static void test_registers_whole_blocks(void **s)
{
    (void)s;
    size_t block = 3 * MiB, used = MiB, across = (size_t)64 << 10;
    unsigned char *b = malloc(block);
    assert_non_null(b);
    for (int i = 0; i < 3; i++)
        round_trip(b, used, "the used start of a block");
    /* the registrar measures it within a few ms of its second copy */
    for (int i = 0; i < 100; i++, usleep(2000))
        if (fake_registered_at(b))
            fail_msg("a block used at its start only was registered (%d ms after its third copy)", 2 * i);
    unsigned char *rest = (unsigned char *)(((uintptr_t)b + used + BLK - 1) & ~(uintptr_t)(BLK - 1));
    size_t n = (size_t)(b + block - rest), resident = resident_pages(rest, n);
    if (heap() && resident)
        fail_msg("%zu of the %zu pages the program never touched were made resident", resident, n / PAGE);
    for (int i = 0; i < 6; i++)
        round_trip(b, block, "a block used whole");
    if (heap() && !t_await(fake_registered_at, b + block - 1))
        fail_msg("a block used whole, copied six times, was not registered whole");
    round_trip(b + used - across, 2 * across, "a small copy across where the used part ended");
    free(b);
}

/* ---- copies the driver is handed as they are, questions, in a registered range ----- */
static void CUDA_CB hold(void *arg) { usleep((useconds_t)(uintptr_t)arg); }
#define HOLD_US 3000

/* Small asynchronous H2D copies on an idle stream while a block of
 * pinfast's heap is registered: from another block, which no registration
 * holds, they pass to the driver (no event recorded for each: not
 * bounced); from the registered one they are bounced, or taken through the
 * registration: passed to the driver as they are, each would be waited
 * for.  Every byte lands. */
static void test_small_async_beside(void **s)
{
    (void)s;
    unsigned char *r = malloc(BLK), *q = malloc(BLK);
    assert_true(r && q);
    make_registered(r, BLK);
    enum { COPIES = 100, SIZE = 64 };
    unsigned char *from[2] = { q, r };
    unsigned long records[2];
    for (int k = 0; k < 2; k++) {
        uint64_t salt = t_rand();
        t_fill(from[k], COPIES * SIZE, salt);
        unsigned long before = fake_calls("cuEventRecord");
        for (int i = 0; i < COPIES; i++) {
            CK(D.MemcpyHtoDAsync(dev + (size_t)i * SIZE, from[k] + (size_t)i * SIZE, SIZE, stream));
            if (i % 25 == 24)
                CK(D.StreamSynchronize(stream));
        }
        records[k] = fake_calls("cuEventRecord") - before;
        CK(D.StreamSynchronize(stream));
        t_poison(pinned, COPIES * SIZE);
        CK(D.MemcpyDtoH(pinned, dev, COPIES * SIZE));
        t_expect_fill(pinned, COPIES * SIZE, salt,
                      k ? "small copies from a registered block" : "small copies beside one");
    }
    if (heap() && records[0] > 2)
        fail_msg("%lu events recorded for %d small copies from a block no registration holds: bounced, "
                 "not passed to the driver", records[0], COPIES);
    if (heap() && records[1] < COPIES)
        fail_msg("%lu events recorded for %d small copies from a registered block: passed to the driver "
                 "as they are", records[1], COPIES);
    free(q);
    free(r);
}

/* Copies too small to stage from a block no registration holds (nor is
 * due or being made), while another block is registered: passed to the
 * driver without a question of pinfast's, as when nothing is registered
 * (the engine's first is cuStreamIsCapturing). */
static void test_small_copies_beside_ask_nothing(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt), *q = malloc(BLK);
    assert_non_null(q);
    size_t n = 64 * 1024;
    t_fill(q, n, salt);
    unsigned long asked = fake_calls("cuStreamIsCapturing");
    for (int i = 0; i < 8; i++)
        CK(D.MemcpyHtoD(dev, q, n));
    asked = fake_calls("cuStreamIsCapturing") - asked;
    t_poison(pinned, n);
    CK(D.MemcpyDtoH(pinned, dev, n));
    t_expect_fill(pinned, n, salt, "a small copy beside a registered block");
    if (heap() && asked)
        fail_msg("%lu capture questions for 8 small copies from a block no registration holds", asked);
    free(q);
    free(r);
}

/* A copy through a registration asks the driver nothing of its host side
 * (the registration answers it: the program's pageable memory) nor of the
 * current context for the registrar (the block is registered): with the
 * caches cold, as between a program's large copies, each question costs
 * 2-3 us.  What is left: the device side's pointer attributes, and the
 * stream's context. */
static void test_registered_copies_ask_little(void **s)
{
    (void)s;
    uint64_t salt;
    unsigned char *r = registered_block(BLK, &salt);
    unsigned long attrs = fake_calls("cuPointerGetAttributes"), current = fake_calls("cuCtxGetCurrent");
    for (int i = 0; i < 8; i++)
        CK(D.MemcpyHtoD(dev, r, BLK));
    attrs = fake_calls("cuPointerGetAttributes") - attrs;
    current = fake_calls("cuCtxGetCurrent") - current;
    t_poison(pinned, BLK);
    CK(D.MemcpyDtoH(pinned, dev, BLK));
    t_expect_fill(pinned, BLK, salt, "a synchronous H2D through a registration");
    if (heap() && (attrs > 8 || current > 8))
        fail_msg("8 copies through a registration asked the driver %lu pointer attributes and %lu current contexts, "
                 "8 of each at most",
                 attrs, current);
    free(r);
}

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
}

/* ---- exit ----------------------------------------------------------------------------- */
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
    if (!rc) /* written: a block never touched is not registered */
        memset(*h, 1, n);
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
    if (argc > 1 && !strcmp(argv[1], "--reuse-child"))
        return reuse_child();
    if (argc > 1 && !strcmp(argv[1], "--top-child"))
        return top_child();
#define CASE(f) cmocka_unit_test_teardown(f, settle)
    const struct CMUnitTest tests[] = {
        CASE(test_mapped_never_registered),
        CASE(test_stack_reused),
        CASE(test_reuse_registered),
        CASE(test_reuse_report),
        CASE(test_kept_until_synchronized),
        CASE(test_changed_while_registering),
        CASE(test_freed_due_not_registered),
        CASE(test_free_no_unregister),
        CASE(test_madvise),
        CASE(test_munmap_mprotect),
        CASE(test_mapped_over),
        CASE(test_protected_block_freed),
        CASE(test_reallocate),
        CASE(test_realloc_from_nothing),
        CASE(test_libc_keeps_top),
        CASE(test_fork),
        CASE(test_fork_registering),
        CASE(test_own_registrations),
        CASE(test_own_registrations_several),
        CASE(test_async),
        CASE(test_sync_in_driver),
        CASE(test_first_copy_registers),
        CASE(test_registers_whole_blocks),
        CASE(test_own_registration_overrun),
        CASE(test_small_async_beside),
        CASE(test_small_copies_beside_ask_nothing),
        CASE(test_registered_copies_ask_little),
        CASE(test_passed_through),
        CASE(test_threads),
        CASE(test_exit),
        CASE(test_wait_sleeps),
        CASE(test_pace_behind_work),
        CASE(test_pace_behind_short_work),
        CASE(test_report_saved),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
