/* test_multidev: two devices at once.  A child process (plain, or under
 * pinfast with a JSON report) runs one thread per device, each with its own
 * context (the device's primary context, or one it created) and stream,
 * copying pageable buffers of random sizes (1 B..16 MiB) in and out, with a
 * peer copy to the other device in between, through poisoned destinations;
 * every byte is checked.  The parent checks the child's status and, under
 * pinfast, its report: two contexts with a staging block each, and exactly
 * the pageable copies of PINFAST_MIN_SIZE or more staged, in both
 * directions, peer copies passed through. */
#define _GNU_SOURCE
#include "t.h"
#include "report.h"
#include "spawn.h"
#include "base/cpu_quota.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB (1u << 10)
#define MiB (1u << 20)
#define MAX_BYTES (16 * MiB)
#define GUARD 64                 /* poisoned bytes past each destination */
#define MIN_SIZE (256 * KiB)     /* PINFAST_MIN_SIZE of the child */
#define STAGING (8 * MiB)        /* PINFAST_STAGING of the child */
#define NDEV 2

/* ---- the child: one thread per device ------------------------------------------- */
struct worker {
    int dev;
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr mine, for_peer;  /* on this device; for_peer is the other thread's */
    uint64_t rng;
    int iters;
    int arrived;                 /* barrier waits done, of 2 */
    char err[512];
    /* what pinfast must have staged of this thread's copies */
    unsigned long staged_h2d, staged_d2h, peer;
    unsigned long long staged_bytes;
};

static struct worker W[NDEV];
/* each thread waits twice: before its copies (the other's for_peer exists)
 * and after them (nobody copies into for_peer any more) */
static pthread_barrier_t ready;

static void arrive(struct worker *w)
{
    w->arrived++;
    pthread_barrier_wait(&ready);
}

static void note(struct worker *w, const char *fmt, ...)
{
    if (w->err[0])
        return;
    int n = snprintf(w->err, sizeof w->err, "device %d: ", w->dev);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err + n, sizeof w->err - (size_t)n, fmt, ap);
    va_end(ap);
}

#define TRY(expr)                                                       \
    do {                                                                \
        CUresult r_ = (expr);                                           \
        if (r_ != CUDA_SUCCESS) {                                       \
            note(w, "%s returned %d", #expr, (int)r_);                  \
            return 0;                                                   \
        }                                                               \
    } while (0)

/* t_rand is not thread-safe: each worker has its own xorshift64* */
static uint64_t wrand(struct worker *w)
{
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ULL;
}

/* 1 B..16 MiB: the first copy of each thread large (so that both contexts
 * stage), then half of them staged sizes, half spread over the powers of two */
static size_t random_size(struct worker *w, int it)
{
    if (it == 0)
        return MAX_BYTES - (size_t)(wrand(w) % 4096);
    if (wrand(w) & 1)
        return MIN_SIZE + (size_t)(wrand(w) % (MAX_BYTES - MIN_SIZE + 1));
    size_t top = (size_t)1 << (wrand(w) % 25);
    return 1 + (size_t)(wrand(w) % top);
}

/* dst must hold the fill of salt and the guard its poison */
static int expect(struct worker *w, const unsigned char *dst, size_t n, uint64_t salt, const char *what)
{
    size_t bad;
    if (!t_check_fill(dst, n, salt, &bad)) {
        note(w, "%s of %zu bytes: byte %zu is wrong", what, n, bad);
        return 0;
    }
    for (size_t i = 0; i < GUARD; i++)
        if (dst[n + i] != 0xA5) {
            note(w, "%s of %zu bytes wrote byte %zu past the end", what, n, i);
            return 0;
        }
    return 1;
}

static void count_staged(struct worker *w, size_t n, unsigned long *dir)
{
    if (n >= MIN_SIZE) {
        (*dir)++;
        w->staged_bytes += n;
    }
}

/* One round: host -> own device -> back, own device -> other device -> back.
 * Async rounds queue everything on the worker's stream and synchronise once,
 * so the stream order of staged and peer copies is what is checked. */
static int round_trip(struct worker *w, int it, unsigned char *src, unsigned char *dst)
{
    const struct worker *other = &W[1 - w->dev];
    size_t n = random_size(w, it);
    int async = (int)(wrand(w) & 1);
    uint64_t salt = ((uint64_t)w->dev << 32) | (uint64_t)it;
    t_fill(src, n, salt);
    t_poison(dst, n + GUARD);
    if (async) {
        TRY(D.MemcpyHtoDAsync(w->mine, src, n, w->stream));
        TRY(D.MemcpyDtoHAsync(dst, w->mine, n, w->stream));
        TRY(D.StreamSynchronize(w->stream));
    } else {
        TRY(D.MemcpyHtoD(w->mine, src, n));
        TRY(D.MemcpyDtoH(dst, w->mine, n));
    }
    if (!expect(w, dst, n, salt, async ? "async round trip" : "round trip"))
        return 0;
    t_poison(dst, n + GUARD);
    if (async) {
        TRY(D.MemcpyPeerAsync(other->for_peer, other->ctx, w->mine, w->ctx, n, w->stream));
        TRY(D.MemcpyDtoHAsync(dst, other->for_peer, n, w->stream));
        TRY(D.StreamSynchronize(w->stream));
    } else {
        TRY(D.MemcpyPeer(other->for_peer, other->ctx, w->mine, w->ctx, n));
        /* a device-to-device copy may return before it completes */
        TRY(D.CtxSynchronize());
        TRY(D.MemcpyDtoH(dst, other->for_peer, n));
    }
    if (!expect(w, dst, n, salt, async ? "async peer copy" : "peer copy"))
        return 0;
    count_staged(w, n, &w->staged_h2d);
    count_staged(w, n, &w->staged_d2h);
    count_staged(w, n, &w->staged_d2h);
    w->peer++;
    return 1;
}

static int work(struct worker *w, unsigned char *src, unsigned char *dst)
{
    TRY(D.CtxSetCurrent(w->ctx));
    TRY(D.StreamCreate(&w->stream, CU_STREAM_NON_BLOCKING));
    TRY(D.MemAlloc(&w->mine, MAX_BYTES));
    TRY(D.MemAlloc(&w->for_peer, MAX_BYTES));
    arrive(w);
    for (int it = 0; it < w->iters; it++)
        if (!round_trip(w, it, src, dst))
            return 0;
    arrive(w);
    TRY(D.MemFree(w->mine));
    TRY(D.MemFree(w->for_peer));
    TRY(D.StreamDestroy(w->stream));
    return 1;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    unsigned char *src = malloc(MAX_BYTES), *dst = malloc(MAX_BYTES + GUARD);
    if (!src || !dst)
        note(w, "out of memory");
    else
        work(w, src, dst);
    while (w->arrived < 2)              /* a failed thread must not strand the other */
        arrive(w);
    free(src);
    free(dst);
    return NULL;
}

/* mode "primary" or "created"; writes the expected staging counts to file */
static int child(const char *mode, const char *file)
{
    if (t_setup(NULL))
        return 30;
    int created = strcmp(mode, "created") == 0, ndev = 0;
    if (D.DeviceGetCount(&ndev) || ndev < NDEV) {
        fprintf(stderr, "need %d devices, the driver has %d\n", NDEV, ndev);
        return 31;
    }
    const char *quick = getenv("PFT_QUICK");
    for (int k = 0; k < NDEV; k++) {
        CUdevice dev;
        struct worker *w = &W[k];
        w->dev = k;
        w->rng = t_rand() | 1;
        w->iters = quick && *quick == '1' ? 4 : 16;
        if (D.DeviceGet(&dev, k))
            return 32;
        if (created ? D.CtxCreate(&w->ctx, 0, dev) || D.CtxPopCurrent(NULL)
                    : D.DevicePrimaryCtxRetain(&w->ctx, dev))
            return 33;
    }
    if (pthread_barrier_init(&ready, NULL, NDEV))
        return 34;
    pthread_t th[NDEV];
    for (int k = 0; k < NDEV; k++)
        if (pthread_create(&th[k], NULL, worker_main, &W[k]))
            return 35;
    int rc = 0;
    unsigned long h2d = 0, d2h = 0, peer = 0;
    unsigned long long bytes = 0;
    for (int k = 0; k < NDEV; k++) {
        pthread_join(th[k], NULL);
        if (W[k].err[0]) {
            fprintf(stderr, "%s\n", W[k].err);
            rc = 36;
        }
        h2d += W[k].staged_h2d;
        d2h += W[k].staged_d2h;
        peer += W[k].peer;
        bytes += W[k].staged_bytes;
        if (created && D.CtxDestroy(W[k].ctx))
            rc = 37;
    }
    pthread_barrier_destroy(&ready);
    FILE *f = fopen(file, "w");
    if (!f)
        return 38;
    fprintf(f, "%lu %lu %lu %llu\n", h2d, d2h, peer, bytes);
    return fclose(f) || rc ? (rc ? rc : 38) : 0;
}

/* ---- the parent ----------------------------------------------------------------- */
static int group_setup(void **s)
{
    t_seed();
    return sp_dir_setup(s);
}

/* calls of the report's rows matching direction, memory and path */
static long calls(const struct report *r, const char *direction, const char *memory, const char *path)
{
    long n = 0;
    for (int i = 0; i < r->nt; i++)
        if (!strcmp(r->t[i].direction, direction) && !strcmp(r->t[i].memory, memory) &&
            !strcmp(r->t[i].path, path))
            n += r->t[i].calls;
    return n;
}

/* The pool pinfast should start with NDEV contexts staging and no
 * PINFAST_THREADS: 16 per context, at most three of four CPUs (the CPU
 * quota's, where it allows fewer) leaving two at least (at least 1). */
static int default_threads(void)
{
    cpu_set_t set;
    int cpus = pf_cpus_within(sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1, pf_cpu_quota());
    int most = cpus * 3 / 4 < cpus - 2 ? cpus * 3 / 4 : cpus - 2, n = (most < 16 ? most : 16) * NDEV;
    n = n < most ? n : most;
    return n > 0 ? n : 1;
}

/* threads: PINFAST_THREADS, 0 for the default */
static void run(const char *mode, int threads)
{
    static struct report r;
    char json[300], counts[300], errf[300], stats[320], seed[64];
    snprintf(json, sizeof json, "%s/%s.json", sp_dir, mode);
    snprintf(counts, sizeof counts, "%s/%s.txt", sp_dir, mode);
    snprintf(errf, sizeof errf, "%s/%s.err", sp_dir, mode);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", json);
    snprintf(seed, sizeof seed, "PFT_SEED=%llu", (unsigned long long)t_rand());
    char nthreads[64];
    snprintf(nthreads, sizeof nthreads, "PINFAST_THREADS=%d", threads);
    const char *set[] = { "PINFAST_STATS=json", stats, "PINFAST_MIN_SIZE=256K", "PINFAST_STAGING=8M",
                          "PINFAST_CHUNK=1M", nthreads, "PINFAST_DISABLE=0", seed,
                          t_pinfast() ? "PFT_PINFAST=1" : "PFT_PINFAST=0", NULL };
    char *argv[] = { "test_multidev", (char *)mode, counts, NULL };
    int rc = sp_run(argv, t_pinfast(), set, "/dev/null", errf, 280, NULL);
    if (rc != 0) {
        char *err = sp_slurp(errf, NULL);
        fail_msg("%s: child status %d (%s)\n%s", mode, rc, seed, err ? err : "");
    }
    unsigned long h2d, d2h, peer;
    unsigned long long bytes;
    char *c = sp_slurp(counts, NULL);
    if (!c || sscanf(c, "%lu %lu %lu %llu", &h2d, &d2h, &peer, &bytes) != 4)
        fail_msg("%s: no counts from the child", mode);
    free(c);
    print_message("%s: %lu H2D and %lu D2H copies of 256 KiB or more (%llu bytes), %lu peer copies\n",
                  mode, h2d, d2h, bytes, peer);
    if (!t_pinfast())
        return;
    if (report_read(json, &r))
        fail_msg("%s: report: %s", mode, r.err);
    assert_int_equal(r.staging.contexts, NDEV);
    /* pinned as copies need them, 4 slots at a time, at most STAGING a context */
    if (r.staging.pinned_bytes < (long long)NDEV * 4 * MiB || r.staging.pinned_bytes > (long long)NDEV * STAGING ||
        r.staging.pinned_bytes % (4 * MiB))
        fail_msg("%s: %lld bytes of staging pinned in %d contexts of at most %zu", mode, r.staging.pinned_bytes,
                 NDEV, STAGING);
    assert_int_equal(r.staging.copies, (long long)(h2d + d2h));
    assert_int_equal(r.staging.bytes, (long long)bytes);
    assert_int_equal(calls(&r, "H2D", "pageable", "staged"), (long)h2d);
    assert_int_equal(calls(&r, "D2H", "pageable", "staged"), (long)d2h);
    assert_int_equal(calls(&r, "D2D", "device", "passthrough"), (long)peer);
    /* the pool grows as the second context starts staging */
    assert_int_equal(r.staging.threads, threads ? threads : default_threads());
}

static void test_primary(void **s) { (void)s; run("primary", 3); }
static void test_created(void **s) { (void)s; run("created", 3); }
static void test_default_pool(void **s) { (void)s; run("primary", 0); }

int main(int argc, char **argv)
{
    if (argc == 3)
        return child(argv[1], argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_primary),
        cmocka_unit_test(test_created),
        cmocka_unit_test(test_default_pool),
    };
    return cmocka_run_group_tests(tests, group_setup, sp_dir_teardown);
}
