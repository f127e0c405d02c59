/* test_bounce: asynchronous H2D copies from pageable memory under
 * PINFAST_MIN_SIZE go through the bounce area (engine/bounce.c): they
 * return without waiting for their stream (the fake, like the driver, makes
 * a pageable asynchronous H2D wait for it: the .plain run checks that it
 * does), land the bytes the source held at the call, in stream order with
 * staged copies, D2D and D2H, pass through when the area is full, in a
 * capture, and for bad input, in contexts made and destroyed, and across a
 * fork.  Each case
 * runs against the fake alone (.plain) and under pinfast (.pinfast). */
#define _GNU_SOURCE
#include "t.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define HOLD_US 400000 /* how long a "kernel" keeps its stream busy */
#define DRIVER_SMALL (64 * KiB) /* the driver stages copies up to this in shared memory */

static CUstream blocking, nonblocking;

static int setup(void **state) { return t_setup_streams(state, &blocking, &nonblocking); }

/* A long-running kernel on the stream. */
static void CUDA_CB hold(void *arg) { usleep((useconds_t)(uintptr_t)arg); }

static void hold_stream(CUstream s, unsigned us) { CK(D.LaunchHostFunc(s, hold, (void *)(uintptr_t)us)); }

/* Device bytes as a pageable buffer (D2H is synchronous for pageable). */
static void expect_device(CUdeviceptr d, const unsigned char *want, size_t n, const char *what)
{
    unsigned char *back = malloc(n);
    t_poison(back, n);
    CK(D.MemcpyDtoH(back, d, n));
    for (size_t i = 0; i < n; i++)
        if (back[i] != want[i])
            fail_msg("%s: byte %zu of %zu is 0x%02x, not 0x%02x", what, i, n, back[i], want[i]);
    free(back);
}

/* ---- no wait --------------------------------------------------------------------- */
/* `copies` asynchronous H2D of n bytes on st (`who` names it), queued
 * behind a long kernel, each source overwritten right after its call:
 * under pinfast with the default area they return before the kernel ends,
 * plain only after it (`plain_why` says why the fake must wait); every
 * byte lands. */
static void burst_behind_kernel(const char *who, CUstream st, size_t n, size_t copies, const char *plain_why,
                                const char *what)
{
    int whole = !getenv("PINFAST_BOUNCE"); /* bounce.small's area does not hold a burst */
    size_t size = copies * n;
    unsigned char *h = malloc(n), *want = malloc(size);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, size));
    t_fill(want, size, t_rand());
    hold_stream(st, HOLD_US);
    double t0 = t_now();
    for (size_t i = 0; i < copies; i++) {
        memcpy(h, want + i * n, n);
        CK(D.MemcpyHtoDAsync(d + i * n, h, n, st));
        t_poison(h, n);
    }
    double took = t_now() - t0;
    if (t_pinfast() && whole && took > HOLD_US * 0.5e-6)
        fail_msg("%s: %zu asynchronous H2D of %zu bytes waited %.3f s for the kernel before them", who, copies, n,
                 took);
    if (!t_pinfast() && took < HOLD_US * 0.75e-6)
        fail_msg("%s: the fake returned from %zu pageable asynchronous H2D of %zu bytes after %.3f s, %s", who,
                 copies, n, took, plain_why);
    CK(D.StreamSynchronize(st));
    expect_device(d, want, size, what);
    CK(D.MemFree(d));
    free(h);
    free(want);
}

/* A burst of small copies behind a long kernel, more than the driver stages
 * without waiting (FAKE_STAGING, as the real one: tests/fake/fake.h), returns
 * at once under pinfast (all of it fits the default area) and after the
 * kernel without it; the sources overwritten right after each call change
 * nothing that lands. */
static void test_no_wait_behind_kernel(void **s)
{
    (void)s;
    CUstream streams[] = {blocking, nonblocking, NULL};
    for (int k = 0; k < 3; k++) {
        size_t n = t_rand_range(8 * KiB, 16 * KiB);
        char who[32];
        snprintf(who, sizeof who, "stream %d", k);
        burst_behind_kernel(who, streams[k], n, (4 * MiB) / n,
                            "not waiting for the stream as the driver does past its staging",
                            "bounced copies whose sources were overwritten after the call");
    }
}

/* ---- an idle stream -------------------------------------------------------------- */
/* Small copies on streams that keep up, 100 at a time between waits, are
 * passed to the driver, which stages them without waiting: a bounce would
 * only add its copy, DMA and fence.  pinfast records an event (a mark)
 * after every 1 MiB of them, a bounce one after each: fewer than one
 * record in 16 copies.  Every byte lands. */
static void test_idle_stream_passes(void **s)
{
    (void)s;
    CUstream streams[] = {blocking, nonblocking, NULL};
    enum { COPIES = 1000 };
    const size_t most = 4 * KiB;
    size_t len[COPIES];
    CUdeviceptr d;
    CK(D.MemAlloc(&d, COPIES * most));
    unsigned char *want = malloc(COPIES * most), *back = malloc(COPIES * most), *h = malloc(most);
    for (int k = 0; k < 3; k++) {
        t_fill(want, COPIES * most, t_rand());
        unsigned long records = fake_calls("cuEventRecord");
        for (size_t i = 0; i < COPIES; i++) {
            len[i] = t_rand_range(1, most);
            memcpy(h, want + i * most, len[i]);
            CK(D.MemcpyHtoDAsync(d + i * most, h, len[i], streams[k]));
            t_poison(h, len[i]);
            if (i % 100 == 99)
                CK(D.StreamSynchronize(streams[k]));
        }
        records = fake_calls("cuEventRecord") - records;
        if (records > COPIES / 16)
            fail_msg("stream %d: %lu events recorded for %d small copies on a stream that keeps up: they were "
                     "bounced, not passed to the driver", k, records, COPIES);
        CK(D.StreamSynchronize(streams[k]));
        CK(D.MemcpyDtoH(back, d, COPIES * most));
        for (size_t i = 0; i < COPIES; i++)
            if (memcmp(back + i * most, want + i * most, len[i]))
                fail_msg("stream %d: copy %zu of %zu bytes did not land", k, i, len[i]);
    }
    CK(D.MemFree(d));
    free(want);
    free(back);
    free(h);
}

/* Once a burst behind a kernel has been bounced and the stream has caught
 * up, the small copies after it pass to the driver again at once: bouncing
 * lasts only while the copies passed before may still fill the driver's
 * staging.  100 copies after the burst record at most a mark or two.  Of
 * the burst's 16 KiB copies, 32 pass before the first mark, 32 more before
 * the question that finds it not over, and the rest are bounced: 125, so
 * that a gate asking again only every fourth bounced copy would go on
 * bouncing the small copies after the burst (it did, one record each). */
static void test_after_burst_passes(void **s)
{
    (void)s;
    const size_t n = 16 * KiB, copies = 32 + 32 + 125;
    unsigned char *h = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, copies * n));
    t_fill(h, n, t_rand());
    hold_stream(nonblocking, HOLD_US / 4);
    for (size_t i = 0; i < copies; i++)
        CK(D.MemcpyHtoDAsync(d + i * n, h, n, nonblocking));
    CK(D.StreamSynchronize(nonblocking));
    unsigned long records = fake_calls("cuEventRecord");
    for (size_t i = 0; i < 100; i++)
        CK(D.MemcpyHtoDAsync(d + i * 64, h, 64, nonblocking));
    records = fake_calls("cuEventRecord") - records;
    if (records > 2)
        fail_msg("%lu events recorded for 100 small copies on a stream that caught up after a burst: they "
                 "were still bounced", records);
    CK(D.StreamSynchronize(nonblocking));
    expect_device(d, h, 64, "a small copy after the burst");
    CK(D.MemFree(d));
    free(h);
}

/* ---- streams in turn ------------------------------------------------------------ */
/* One thread's copies of 16 KiB alternating between two streams, each
 * behind a long kernel, 3.5 MiB a stream: more than the driver stages for
 * one stream without waiting (FAKE_STAGING).  Counted a stream at a time,
 * the first 2 MiB of each pass and the rest are bounced (192 copies, within
 * the area's PF_BOUNCE_FENCES): the burst returns before the kernels end,
 * and after them without pinfast.  Counted afresh at each switch, every
 * copy passed and the burst waited. */
static void test_streams_alternate(void **s)
{
    (void)s;
    const size_t per_stream = 3 * MiB + 512 * KiB;
    CUstream st[2] = {nonblocking, NULL};
    CK(D.StreamCreate(&st[1], CU_STREAM_NON_BLOCKING));
    size_t n = 16 * KiB, copies = 2 * (per_stream / n), size = copies * n;
    unsigned char *h = malloc(n), *want = malloc(size);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, size));
    t_fill(want, size, t_rand());
    hold_stream(st[0], HOLD_US);
    hold_stream(st[1], HOLD_US);
    double t0 = t_now();
    for (size_t i = 0; i < copies; i++) {
        memcpy(h, want + i * n, n);
        CK(D.MemcpyHtoDAsync(d + i * n, h, n, st[i % 2]));
        t_poison(h, n);
    }
    double took = t_now() - t0;
    if (t_pinfast() && !getenv("PINFAST_BOUNCE") && took > HOLD_US * 0.5e-6)
        fail_msg("%zu asynchronous H2D of %zu bytes alternating between two busy streams waited %.3f s for the "
                 "kernels before them",
                 copies, n, took);
    if (!t_pinfast() && took < HOLD_US * 0.75e-6)
        fail_msg("the fake returned from %zu pageable asynchronous H2D of %zu bytes on two busy streams after "
                 "%.3f s, not waiting past a stream's staging as the driver does",
                 copies, n, took);
    CK(D.StreamSynchronize(st[0]));
    CK(D.StreamSynchronize(st[1]));
    expect_device(d, want, size, "copies alternating between two busy streams");
    CK(D.StreamDestroy(st[1]));
    CK(D.MemFree(d));
    free(h);
    free(want);
}

/* Two threads, each a burst of 2 MiB of 16 KiB copies onto one stream
 * behind a long kernel, started together: 4 MiB, more than the driver
 * stages for a stream (FAKE_STAGING).  Each counting its share of the
 * marks' bytes, the bursts return before the kernel ends, and after it
 * without pinfast.  Each counting the whole, both passed 2 MiB and one of
 * them waited. */
struct burster {
    CUdeviceptr d;
    const unsigned char *want;
    pthread_barrier_t *go;
    double took;
    int failures;
};

static void *burster_main(void *arg)
{
    struct burster *b = arg;
    const size_t n = 16 * KiB;
    t_bind_ctx();
    unsigned char *h = malloc(n);
    pthread_barrier_wait(b->go);
    double t0 = t_now();
    for (size_t at = 0; at < 2 * MiB; at += n) {
        memcpy(h, b->want + at, n);
        b->failures += D.MemcpyHtoDAsync(b->d + at, h, n, nonblocking) != CUDA_SUCCESS;
        t_poison(h, n);
    }
    b->took = t_now() - t0;
    free(h);
    return NULL;
}

static void test_threads_burst(void **s)
{
    (void)s;
    struct burster b[2];
    pthread_t th[2];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    for (int i = 0; i < 2; i++) {
        b[i] = (struct burster){.want = malloc(2 * MiB), .go = &go};
        t_fill((unsigned char *)b[i].want, 2 * MiB, t_rand());
        CK(D.MemAlloc(&b[i].d, 2 * MiB));
    }
    hold_stream(nonblocking, HOLD_US);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, burster_main, &b[i]), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&go);
    double took = b[0].took > b[1].took ? b[0].took : b[1].took;
    if (t_pinfast() && !getenv("PINFAST_BOUNCE") && took > HOLD_US * 0.5e-6)
        fail_msg("two threads' bursts of 2 MiB onto one busy stream: one waited %.3f s for the kernel before them",
                 took);
    if (!t_pinfast() && took < HOLD_US * 0.75e-6)
        fail_msg("the fake returned from two threads' bursts of 2 MiB onto one busy stream after %.3f s, not "
                 "waiting past the stream's staging as the driver does",
                 took);
    CK(D.StreamSynchronize(nonblocking));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(b[i].failures, 0);
        expect_device(b[i].d, b[i].want, 2 * MiB, "two threads' bursts onto one busy stream");
        CK(D.MemFree(b[i].d));
        free((void *)b[i].want);
    }
}

/* Two bursts of 1200 copies of 4 KiB behind a long kernel: past the 2 MiB
 * that pass, more than the area's first PF_BOUNCE_FENCES_STEP fences are
 * wanted, and the copies past them pass on into the driver's staging,
 * which is full at 768 (FAKE_STAGING).  The first burst may wait, as it
 * does without pinfast; the area then makes more fences, and the second
 * returns before the kernel ends.  With the fences fixed at 256, the
 * second waited too. */
static void test_fences_grow(void **s)
{
    (void)s;
    const size_t n = 4 * KiB, copies = 1200;
    unsigned char *h = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, copies * n));
    t_fill(h, n, t_rand());
    double took[2];
    for (int round = 0; round < 2; round++) {
        hold_stream(nonblocking, HOLD_US);
        double t0 = t_now();
        for (size_t i = 0; i < copies; i++)
            CK(D.MemcpyHtoDAsync(d + i * n, h, n, nonblocking));
        took[round] = t_now() - t0;
        CK(D.StreamSynchronize(nonblocking));
    }
    if (t_pinfast() && !getenv("PINFAST_BOUNCE") && took[1] > HOLD_US * 0.5e-6)
        fail_msg("a second burst of %zu copies of %zu bytes behind a kernel waited %.3f s for it (the first: %.3f s): "
                 "the bounce area made no more fences",
                 copies, n, took[1], took[0]);
    if (!t_pinfast() && took[1] < HOLD_US * 0.75e-6)
        fail_msg("the fake returned from %zu pageable asynchronous H2D of %zu bytes behind a kernel after %.3f s, "
                 "not waiting past its staging as the driver does",
                 copies, n, took[1]);
    expect_device(d + (copies - 1) * n, h, n, "the last copy of a burst");
    CK(D.MemFree(d));
    free(h);
}

/* ---- copies over 64 KiB ---------------------------------------------------------- */
/* The driver takes two pageable copies over 64 KiB behind longer work
 * without waiting, and waits at the third (FAKE_STAGING_LARGE, as the H200:
 * tests/fake/fake.h).  A burst of a dozen returns at once under pinfast,
 * all but the first bounced (the area holds them), and after the kernel
 * without it; every byte lands.  When such copies were counted by their
 * bytes as the small ones are, the first eight passed and the third of
 * them waited. */
static void test_large_behind_kernel(void **s)
{
    (void)s;
    CUstream streams[] = {blocking, nonblocking, NULL};
    for (int k = 0; k < 3; k++) {
        char who[32];
        snprintf(who, sizeof who, "stream %d", k);
        burst_behind_kernel(who, streams[k], t_rand_range(DRIVER_SMALL + 1, 256 * KiB), 12,
                            "not waiting at the third as the driver does",
                            "copies over 64 KiB whose sources were overwritten after the call");
    }
}

/* The ask before each copy of such a burst: the mark recorded on the
 * stream at the copy before answers alone, without the stream's own
 * answer, and with no capture counted nothing asks whether the stream
 * captures (0.2 us a copy less on an H200,
 * docs/results/2026-11-30-h200-large-copy-ask).  Only the burst's first
 * copy, with no mark yet, asks the stream.  Every byte lands. */
static void test_large_ask_calls(void **s)
{
    (void)s;
    enum { COPIES = 12 };
    size_t n = 128 * KiB;
    unsigned char *h = malloc(n), *want = malloc(COPIES * n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, COPIES * n));
    t_fill(want, COPIES * n, t_rand());
    hold_stream(nonblocking, HOLD_US);
    unsigned long queries = fake_calls("cuStreamQuery");
    for (int i = 0; i < COPIES; i++) {
        memcpy(h, want + i * n, n);
        CK(D.MemcpyHtoDAsync(d + i * n, h, n, nonblocking));
        t_poison(h, n);
    }
    queries = fake_calls("cuStreamQuery") - queries;
    CK(D.StreamSynchronize(nonblocking));
    if (t_pinfast() && queries > 1)
        fail_msg("%lu stream queries for a burst of %d copies of %zu bytes behind a kernel", queries, COPIES, n);
    expect_device(d, want, COPIES * n, "a burst of copies over 64 KiB behind a kernel");
    CK(D.MemFree(d));
    free(h);
    free(want);
}

/* Copies over 64 KiB on an idle stream, each waited for, pass to the
 * driver with no mark: the stream's own answer says nothing is queued.
 * Counted as the small ones, they recorded a mark every fourth copy;
 * bounced, one each. */
static void test_large_idle_passes(void **s)
{
    (void)s;
    enum { COPIES = 200 };
    size_t n = 128 * KiB;
    unsigned char *h = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    unsigned long records = fake_calls("cuEventRecord");
    for (int i = 0; i < COPIES; i++) {
        t_fill(h, n, (uint64_t)i);
        CK(D.MemcpyHtoDAsync(d, h, n, nonblocking));
        CK(D.StreamSynchronize(nonblocking));
    }
    records = fake_calls("cuEventRecord") - records;
    if (t_pinfast() && records > 2)
        fail_msg("%lu events recorded for %d copies of %zu bytes on an idle stream", records, COPIES, n);
    expect_device(d, h, n, "the last copy over 64 KiB on an idle stream");
    CK(D.MemFree(d));
    free(h);
}

/* ---- order --------------------------------------------------------------------- */
/* Random copies on one stream into one device buffer, mirrored in a model:
 * small asynchronous H2D (bounced), large ones (staged), D2D within the
 * buffer, asynchronous D2H into pageable and pinned memory, each source
 * overwritten right after its call.  The stream starts each round behind a
 * short kernel, so that the copies queue. */
static void test_order_mixed(void **s)
{
    (void)s;
    const size_t size = 8 * MiB;
    CUdeviceptr d, scratch;
    CK(D.MemAlloc(&d, size));
    CK(D.MemAlloc(&scratch, size));
    unsigned char *model = malloc(size), *src = malloc(size), *out = malloc(size), *pin;
    CK(D.MemAllocHost((void **)&pin, size));
    t_fill(model, size, t_rand());
    CK(D.MemcpyHtoD(d, model, size));
    CUstream streams[] = {blocking, nonblocking, NULL};
    for (int round = 0; round < 24; round++) {
        CUstream st = streams[t_rand_range(0, 2)];
        hold_stream(st, 2000);
        for (int op = 0; op < 40; op++) {
            int kind = (int)t_rand_range(0, 9);
            size_t n = kind < 6 ? t_rand_range(1, 64 * KiB) : t_rand_range(1, 3 * MiB);
            if (kind == 6)
                n = t_rand_range(512 * KiB, 3 * MiB); /* staged */
            size_t at = t_rand_range(0, size - n), from = t_rand_range(0, size - n);
            if (kind <= 6) { /* H2D, the source overwritten at once */
                t_fill(src, n, t_rand());
                if (op % 2)
                    CK(D.MemcpyHtoDAsync(d + at, src, n, st));
                else
                    CK(D.MemcpyAsync(d + at, (CUdeviceptr)(uintptr_t)src, n, st));
                memcpy(model + at, src, n);
                t_poison(src, n);
            } else if (kind == 7) { /* D2D through the scratch buffer, stream-ordered */
                CK(D.MemcpyDtoDAsync(scratch, d + from, n, st));
                CK(D.MemcpyDtoDAsync(d + at, scratch, n, st));
                memmove(model + at, model + from, n);
            } else if (kind == 8) { /* D2H into pageable memory: in place on return */
                t_poison(out, n);
                CK(D.MemcpyDtoHAsync(out, d + from, n, st));
                if (memcmp(out, model + from, n))
                    fail_msg("round %d op %d: a D2H of %zu bytes read what the model does not hold", round, op, n);
            } else { /* D2H into pinned memory, read after a sync */
                t_poison(pin, n);
                CK(D.MemcpyDtoHAsync(pin, d + from, n, st));
                CK(D.StreamSynchronize(st));
                if (memcmp(pin, model + from, n))
                    fail_msg("round %d op %d: a pinned D2H of %zu bytes read what the model does not hold", round, op, n);
            }
        }
        CK(D.StreamSynchronize(st));
        expect_device(d, model, size, "the buffer after a round of mixed copies");
    }
    CK(D.MemFreeHost(pin));
    CK(D.MemFree(d));
    CK(D.MemFree(scratch));
    free(model);
    free(src);
    free(out);
}

/* ---- a full area --------------------------------------------------------------- */
/* More copies behind one kernel than the area's 256 fences hold (and, in
 * bounce.small, than its 64K): those past them pass through, all land.  In
 * all they are more than the driver stages without waiting (FAKE_STAGING):
 * with the default area the 256 bounced leave the driver too few to wait
 * for, so the whole burst returns at once; without pinfast it waits. */
static void test_area_full(void **s)
{
    (void)s;
    for (int round = 0; round < 3; round++) {
        char who[32];
        snprintf(who, sizeof who, "round %d", round);
        burst_behind_kernel(who, blocking, 8 * KiB, 450, "not waiting past its staging",
                            "copies bounced and passed through");
    }
}

/* ---- threads sharing a stream ------------------------------------------------------- */
/* Threads bouncing on one stream at once record their fences in an order
 * of their own, not the order they took the area's space in: a fence over
 * says nothing of an older one recorded after it.  Four threads copy small
 * random blocks, each into its own device region, the source overwritten
 * at once, through an area made short of space often (bounce.small); every
 * byte lands.  When the newest fence over gave back all the older ones,
 * bounce.small failed 1 run in 10 (a block overwritten in the area before
 * its DMA read it).  cmocka may not fail from another thread: they count. */
struct sharer {
    CUdeviceptr d;
    unsigned char *want;
    size_t size;
    uint64_t salt;
    int failures;
};

#define SHARERS 4

static void *sharer_main(void *arg)
{
    struct sharer *t = arg;
    t_bind_ctx();
    unsigned char *h = malloc(4 * KiB);
    uint64_t x = t->salt;
    for (size_t at = 0; at < t->size;) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 1 + (size_t)(x >> 33) % (4 * KiB);
        if (n > t->size - at)
            n = t->size - at;
        memcpy(h, t->want + at, n);
        t->failures += D.MemcpyHtoDAsync(t->d + at, h, n, nonblocking) != CUDA_SUCCESS;
        memset(h, 0xEE, n);
        at += n;
    }
    free(h);
    return NULL;
}

static void test_threads_one_stream(void **s)
{
    (void)s;
    const size_t size = 2 * MiB;
    struct sharer t[SHARERS];
    pthread_t th[SHARERS];
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < SHARERS; i++) {
            t[i] = (struct sharer){.size = size, .salt = t_rand(), .want = malloc(size)};
            CK(D.MemAlloc(&t[i].d, size));
            t_poison(t[i].want, size);
            CK(D.MemcpyHtoD(t[i].d, t[i].want, size));
            t_fill(t[i].want, size, t_rand());
        }
        CK(D.CtxSynchronize());
        for (int i = 0; i < SHARERS; i++)
            assert_int_equal(pthread_create(&th[i], NULL, sharer_main, &t[i]), 0);
        for (int i = 0; i < SHARERS; i++)
            assert_int_equal(pthread_join(th[i], NULL), 0);
        CK(D.StreamSynchronize(nonblocking));
        for (int i = 0; i < SHARERS; i++) {
            assert_int_equal(t[i].failures, 0);
            expect_device(t[i].d, t[i].want, size, "a thread's copies on a shared stream");
            CK(D.MemFree(t[i].d));
            free(t[i].want);
        }
    }
}

/* ---- contexts ------------------------------------------------------------------- */
/* Contexts made, bounced into and destroyed, again and again: a destroyed
 * context's area is forgotten, the next gets its own; and a stream of a
 * context that is not current bounces through its own context's area. */
static void test_contexts(void **s)
{
    (void)s;
    for (int round = 0; round < 40; round++) {
        CUcontext c, popped;
        CK(D.CtxCreate(&c, 0, 0));
        CUstream st;
        CK(D.StreamCreate(&st, CU_STREAM_NON_BLOCKING));
        size_t n = t_rand_range(1, 256 * KiB);
        CUdeviceptr d;
        CK(D.MemAlloc(&d, n));
        unsigned char *h = malloc(n), *want = malloc(n);
        t_fill(want, n, t_rand());
        memcpy(h, want, n);
        if (round % 2) { /* from the main context, the stream's not current */
            CK(D.CtxPopCurrent(&popped));
            CK(D.CtxSetCurrent(T_CTX));
            CK(D.MemcpyHtoDAsync(d, h, n, st));
            t_poison(h, n);
            CK(D.StreamSynchronize(st));
            CK(D.CtxPushCurrent(c));
        } else {
            hold_stream(st, 2000);
            CK(D.MemcpyHtoDAsync(d, h, n, st));
            t_poison(h, n);
            CK(D.StreamSynchronize(st));
        }
        expect_device(d, want, n, "a copy in a context made for it");
        CK(D.MemFree(d));
        CK(D.StreamDestroy(st));
        CK(D.CtxPopCurrent(&popped));
        CK(D.CtxDestroy(c));
        free(h);
        free(want);
    }
    CK(D.CtxSetCurrent(T_CTX));
}

/* ---- fork ------------------------------------------------------------------------ */
/* A child forked after bounces forgets the area (it may use no CUDA state
 * of its parent) and exits cleanly, destructors run; the parent bounces on. */
static void test_fork(void **s)
{
    (void)s;
    size_t n = 4 * KiB;
    unsigned char *h = malloc(n), *want = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    for (int round = 0; round < 3; round++) {
        t_fill(want, n, t_rand());
        memcpy(h, want, n);
        hold_stream(blocking, 2000);
        CK(D.MemcpyHtoDAsync(d, h, n, blocking));
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            exit(0);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            fail_msg("round %d: the child ended with status 0x%x", round, st);
        t_poison(h, n);
        CK(D.StreamSynchronize(blocking));
        expect_device(d, want, n, "a copy bounced before a fork");
    }
    CK(D.MemFree(d));
    free(h);
    free(want);
}

/* ---- captures ------------------------------------------------------------------- */
/* A captured copy reads its source when the graph runs: it passes through. */
static void test_capture(void **s)
{
    (void)s;
    CUstream st;
    CK(D.StreamCreate(&st, CU_STREAM_NON_BLOCKING));
    for (int round = 0; round < 6; round++) {
        size_t n = t_rand_range(1, 64 * KiB);
        unsigned char *h = malloc(n), *want = malloc(n);
        CUdeviceptr d;
        CK(D.MemAlloc(&d, n));
        t_fill(h, n, t_rand());
        CK(D.StreamBeginCapture(st, round % 2 ? CU_STREAM_CAPTURE_MODE_GLOBAL : CU_STREAM_CAPTURE_MODE_RELAXED));
        CK(D.MemcpyHtoDAsync(d, h, n, st));
        CUgraph g;
        CK(D.StreamEndCapture(st, &g));
        CUgraphExec ge;
        CK(D.GraphInstantiateWithFlags(&ge, g, 0));
        t_fill(want, n, t_rand());
        memcpy(h, want, n); /* what the graph reads when it runs */
        CK(D.GraphLaunch(ge, st));
        CK(D.StreamSynchronize(st));
        expect_device(d, want, n, "a captured copy, launched after its source changed");
        CK(D.GraphExecDestroy(ge));
        CK(D.GraphDestroy(g));
        CK(D.MemFree(d));
        free(h);
        free(want);
    }
    CK(D.StreamDestroy(st));
}

/* ---- bad input ------------------------------------------------------------------ */
/* The driver's own answers: zero bytes, NULL source, a bad stream, an
 * unknown or too short device range; managed and mapped destinations are
 * copied as the driver copies them. */
static void test_bad_input(void **s)
{
    (void)s;
    unsigned char *h = malloc(4096);
    t_fill(h, 4096, t_rand());
    CUdeviceptr d;
    CK(D.MemAlloc(&d, 4096));
    CK(D.MemcpyHtoDAsync(d, h, 0, blocking));
    CK(D.MemcpyHtoDAsync(d, NULL, 0, blocking));
    CK_EQ(D.MemcpyHtoDAsync(d, NULL, 64, blocking), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyHtoDAsync(d, h, 64, (CUstream)(uintptr_t)0x1234560), CUDA_ERROR_INVALID_HANDLE);
    CK_EQ(D.MemcpyHtoDAsync(d + 4000, h, 200, blocking), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyHtoDAsync((CUdeviceptr)(1ULL << 61), h, 64, blocking), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyAsync(d, (CUdeviceptr)(uintptr_t)h, 0, blocking), CUDA_SUCCESS);
    CK_EQ(D.MemcpyAsync(d + 4000, (CUdeviceptr)(uintptr_t)h, 200, blocking), CUDA_ERROR_INVALID_VALUE);
    CK(D.StreamSynchronize(blocking));
    CUdeviceptr managed;
    CK(D.MemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
    CK(D.MemcpyHtoDAsync(managed, h, 4096, blocking));
    CK(D.StreamSynchronize(blocking));
    if (memcmp((void *)(uintptr_t)managed, h, 4096))
        fail_msg("managed memory after an asynchronous H2D into it");
    void *mapped;
    CUdeviceptr md;
    CK(D.MemHostAlloc(&mapped, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    CK(D.MemHostGetDevicePointer(&md, mapped, 0));
    CK(D.MemcpyAsync(md, (CUdeviceptr)(uintptr_t)h, 4096, blocking));
    CK(D.StreamSynchronize(blocking));
    if (memcmp(mapped, h, 4096))
        fail_msg("mapped memory after an asynchronous copy into it");
    CK(D.MemFreeHost(mapped));
    CK(D.MemFree(managed));
    CK(D.MemFree(d));
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_wait_behind_kernel),
        cmocka_unit_test(test_idle_stream_passes),
        cmocka_unit_test(test_after_burst_passes),
        cmocka_unit_test(test_streams_alternate),
        cmocka_unit_test(test_threads_burst),
        cmocka_unit_test(test_fences_grow),
        cmocka_unit_test(test_large_behind_kernel),
        cmocka_unit_test(test_large_ask_calls),
        cmocka_unit_test(test_large_idle_passes),
        cmocka_unit_test(test_order_mixed),
        cmocka_unit_test(test_area_full),
        cmocka_unit_test(test_threads_one_stream),
        cmocka_unit_test(test_contexts),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_capture),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
