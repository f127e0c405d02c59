/* test_stats: the report's counts when many threads copy, as pinfast keeps
 * them (a block of counters per thread, reused by later threads, a shared
 * block beyond 256 threads).  The binary re-executes itself as a child under
 * pinfast; the child makes random small copies from many threads and writes
 * down what it did (e-<pid>.txt); the parent checks the JSON report
 * (r-<pid>.json) against it: rows, size histogram and round trips exact.
 *  - threads: 8 threads at once, 4 of them ending while the other 4 copy on
 *    beside 4 new ones (which take the blocks of those that ended), then 270
 *    counting at once (more than there are blocks), and the main thread;
 *  - fork: threads copy, then the main thread forks while they are alive;
 *    the forked child (main thread and a new thread; no thread under
 *    ThreadSanitizer) makes copies of its own: each process's report holds
 *    its own copies only;
 *  - timed: copies the fake driver makes slow (FAKECUDA_DELAY_US): the time
 *    the report gives them is within [0.95, 1.01] of what the child measured
 *    around the calls (pinfast's clock converted to seconds);
 *  - sampled: 4024 tiny slow copies, past the 1024 a thread has timed
 *    exactly: 1 in 8 of the rest is timed and counted 8 times, and the time
 *    reported is within [0.80, 1.20] of what the child measured (a delay
 *    of the machine on one timed copy counts 8 times; a wrong weight would
 *    be off by a factor of 3).
 * Under the plain variant the children only run. */
#define _GNU_SOURCE
#include "report.h"
#include "spawn.h"
#include "t.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KiB 1024u
#define MAXSIZE (64 * KiB)     /* below PINFAST_MIN_SIZE: every copy passes through */
#define SLICE (2 * MAXSIZE)    /* a thread's own device memory: two halves for DtoD */
#define THREADS 12             /* waves one and two */
#define MANY 270               /* wave three: more than pinfast's 256 blocks */
#define ROUND_TRIP_MIN (512 * KiB) /* pinfast's smallest round trip (PF_ROUNDTRIP_MIN_BYTES, shim/observe/round_trips.h) */
#define ROUND_TRIP_MAX (640 * KiB) /* under the PINFAST_MIN_SIZE the children run with */
#define BUCKETS 48
/* ThreadSanitizer starts no thread in the child of a process with threads. */
#ifdef __SANITIZE_THREAD__
#define THREAD_IN_FORKED_CHILD 0
#else
#define THREAD_IN_FORKED_CHILD 1
#endif

/* ---- what a child does and writes down ------------------------------------------ */
enum op { H2D, D2H, H2D_ASYNC, H2D_PINNED, D2D, ROUND_TRIP, NOPS };
enum dir { DIR_H2D, DIR_D2H, DIR_D2D, NDIRS };
static const char *const dir_name[] = {"H2D", "D2H", "D2D"};
/* the report's row of each op (a round trip is one D2H and one H2D row) */
static const struct { const char *api, *memory; enum dir dir; } row_of[] = {
    [H2D] = {"cuMemcpyHtoD", "pageable", DIR_H2D},
    [D2H] = {"cuMemcpyDtoH", "pageable", DIR_D2H},
    [H2D_ASYNC] = {"cuMemcpyHtoDAsync", "pageable", DIR_H2D},
    [H2D_PINNED] = {"cuMemcpyHtoD", "pinned", DIR_H2D},
    [D2D] = {"cuMemcpyDtoD", "device", DIR_D2D},
};

struct count { unsigned long long calls, bytes; };
struct tally {
    struct count rows[NOPS], hist[NDIRS][BUCKETS], trips;
};

static void tally_copy(struct tally *t, enum op op, size_t n)
{
    int k = n ? 63 - __builtin_clzll(n) : 0;
    t->rows[op].calls++, t->rows[op].bytes += n;
    t->hist[row_of[op].dir][k].calls++, t->hist[row_of[op].dir][k].bytes += n;
}

static void tally_add(struct tally *to, const struct tally *t)
{
    struct count *a = (struct count *)to;
    const struct count *b = (const struct count *)t;
    for (size_t i = 0; i < sizeof *t / sizeof *b; i++)
        a[i].calls += b[i].calls, a[i].bytes += b[i].bytes;
}

static struct drv d;
static CUcontext ctx;
static CUdeviceptr dev, dev_rt; /* dev_rt: round trips, ROUND_TRIP_MAX a worker */
static void *pinned;
/* In the forked child: zero-byte copies only, which the fake makes without
 * taking its lock (a thread of the parent may have held it at the fork). */
static int forked;

struct worker {
    pthread_t t;
    int index, nops, half; /* half: copies before the mid barrier; -1: none */
    unsigned char ops[64];
    unsigned sizes[64];
    pthread_barrier_t *start, *mid;
    struct tally tally;
    int err;
};

/* One op from the caller's buffers; 0 on success. */
static int run_op(struct worker *w, unsigned char *out, unsigned char *in, unsigned char *rt,
                  enum op op, size_t n)
{
    CUdeviceptr a = dev + (CUdeviceptr)w->index * SLICE, b = a + MAXSIZE;
    switch (op) {
    case H2D: return d.MemcpyHtoD(a, out, n);
    case D2H: return d.MemcpyDtoH(in, a, n);
    case H2D_ASYNC: return d.MemcpyHtoDAsync(a, out, n, NULL);
    case H2D_PINNED: return d.MemcpyHtoD(a, pinned, n);
    case D2D: return d.MemcpyDtoD(b, a, n);
    case ROUND_TRIP: /* out and straight back, unchanged (the first THREADS workers) */
        a = dev_rt + (CUdeviceptr)w->index * ROUND_TRIP_MAX;
        return d.MemcpyDtoH(rt, a, n) || d.MemcpyHtoD(a, rt, n);
    default: return -1;
    }
}

static void record(struct tally *t, enum op op, size_t n)
{
    if (op != ROUND_TRIP) {
        tally_copy(t, op, n);
        return;
    }
    tally_copy(t, D2H, n);
    tally_copy(t, H2D, n);
    t->trips.calls++, t->trips.bytes += n;
}

static void *work(void *p)
{
    struct worker *w = p;
    /* H2D reads only out, D2H writes only in: no round trip but the planned ones */
    unsigned char *out = malloc(MAXSIZE), *in = malloc(MAXSIZE);
    unsigned char *rt = malloc(w->index < THREADS ? ROUND_TRIP_MAX : 1);
    if (!out || !in || !rt || d.CtxSetCurrent(ctx)) {
        w->err = 1;
        return NULL;
    }
    t_fill(out, MAXSIZE, (uint64_t)w->index);
    if (w->start)
        pthread_barrier_wait(w->start);
    for (int i = 0; i < w->nops && !w->err; i++) {
        if (i == w->half)
            pthread_barrier_wait(w->mid);
        if (run_op(w, out, in, rt, (enum op)w->ops[i], w->sizes[i]))
            w->err = 2;
        else
            record(&w->tally, (enum op)w->ops[i], w->sizes[i]);
    }
    if (w->half == w->nops)
        pthread_barrier_wait(w->mid);
    free(out);
    free(in);
    free(rt);
    return NULL;
}

/* A random plan of nops copies (from the main thread: t_rand is not shared). */
static void plan(struct worker *w, int index, int nops)
{
    memset(w, 0, sizeof *w);
    w->index = index;
    w->nops = nops;
    w->half = -1;
    for (int i = 0; i < nops; i++) {
        w->ops[i] = (unsigned char)t_rand_range(H2D, forked || index >= THREADS ? D2D : ROUND_TRIP);
        int trip = w->ops[i] == ROUND_TRIP;
        w->sizes[i] = forked ? 0
                             : (unsigned)t_rand_range(trip ? ROUND_TRIP_MIN : 0,
                                                      trip ? ROUND_TRIP_MAX : MAXSIZE);
    }
}

static int start(struct worker *w)
{
    return pthread_create(&w->t, NULL, work, w);
}

static int finish(struct worker *w, struct tally *t)
{
    if (pthread_join(w->t, NULL) || w->err)
        return 1;
    tally_add(t, &w->tally);
    return 0;
}

static int setup_child(void)
{
    if (drv_load(&d, DRV_GPA, 0) || drv_context0(&d, &ctx) ||
        d.MemAlloc(&dev, (size_t)(MANY + THREADS + 1) * SLICE) ||
        d.MemAlloc(&dev_rt, (size_t)THREADS * ROUND_TRIP_MAX) ||
        d.MemHostAlloc(&pinned, MAXSIZE, 0))
        return 1;
    t_fill(pinned, MAXSIZE, 99);
    return 0;
}

static int write_down(const char *dir, const struct tally *t, double seconds)
{
    char file[600];
    snprintf(file, sizeof file, "%s/e-%d.txt", dir, (int)getpid());
    FILE *f = fopen(file, "w");
    if (!f)
        return 1;
    for (int op = 0; op < ROUND_TRIP; op++) /* a round trip counts as a D2H and an H2D */
        if (t->rows[op].calls)
            fprintf(f, "T %s %s %s %llu %llu\n", row_of[op].api, dir_name[row_of[op].dir],
                    row_of[op].memory, t->rows[op].calls, t->rows[op].bytes);
    for (int k = 0; k < NDIRS; k++)
        for (int b = 0; b < BUCKETS; b++)
            if (t->hist[k][b].calls)
                fprintf(f, "H %s %llu %llu %llu\n", dir_name[k], b ? 1ull << b : 0ull,
                        t->hist[k][b].calls, t->hist[k][b].bytes);
    fprintf(f, "R %llu %llu\n", t->trips.calls, t->trips.bytes);
    if (seconds >= 0)
        fprintf(f, "S %.9f\n", seconds);
    return fclose(f) != 0;
}

/* The main thread's own copies, as worker `index`. */
static int main_copies(int index, int nops, struct tally *t)
{
    static struct worker w;
    plan(&w, index, nops);
    work(&w);
    if (w.err)
        return 1;
    tally_add(t, &w.tally);
    return 0;
}

static int child_threads(const char *dir)
{
    static struct worker w[THREADS], many[MANY];
    struct tally t = {0};
    pthread_barrier_t start1, mid, start3, mid3;
    if (setup_child() || main_copies(THREADS + MANY, 20, &t))
        return 10;
    pthread_barrier_init(&start1, NULL, 8);
    pthread_barrier_init(&mid, NULL, 8);
    for (int i = 0; i < THREADS; i++) {
        plan(&w[i], i, (int)t_rand_range(20, 64));
        w[i].start = i < 8 ? &start1 : NULL;
        w[i].mid = &mid;
        w[i].half = i < 4 ? -1 : i < 8 ? w[i].nops / 2 : 0;
    }
    for (int i = 0; i < 8; i++)
        if (start(&w[i]))
            return 11;
    for (int i = 0; i < 4; i++) /* these end: their blocks go back */
        if (finish(&w[i], &t))
            return 12;
    for (int i = 8; i < THREADS; i++) /* and are taken by these, while 4..7 copy on */
        if (start(&w[i]))
            return 13;
    for (int i = 4; i < THREADS; i++)
        if (finish(&w[i], &t))
            return 14;
    pthread_barrier_init(&start3, NULL, MANY);
    pthread_barrier_init(&mid3, NULL, MANY);
    for (int i = 0; i < MANY; i++) { /* all counting at once: some in no block of their own */
        plan(&many[i], THREADS + i, 3);
        many[i].start = &start3;
        many[i].mid = &mid3;
        many[i].half = 1;
        if (start(&many[i]))
            return 15;
    }
    for (int i = 0; i < MANY; i++)
        if (finish(&many[i], &t))
            return 16;
    if (d.CtxSynchronize() || write_down(dir, &t, -1))
        return 17;
    return 0;
}

static int child_fork(const char *dir)
{
    static struct worker w[3];
    struct tally t = {0};
    pthread_barrier_t idle;
    if (setup_child() || main_copies(3, (int)t_rand_range(5, 30), &t))
        return 20;
    pthread_barrier_init(&idle, NULL, 4);
    for (int i = 0; i < 3; i++) {
        plan(&w[i], i, (int)t_rand_range(20, 64));
        w[i].mid = &idle;
        w[i].half = w[i].nops; /* alive, done copying, while the main thread forks */
        if (start(&w[i]))
            return 21;
    }
    pthread_barrier_wait(&idle);
    if (d.CtxSynchronize()) /* the fake's stream threads idle: none holds its lock */
        return 22;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return 23;
    if (pid == 0) { /* the parent's threads are gone; their blocks are free */
        struct tally c = {0};
        forked = 1;
        static struct worker cw;
        plan(&cw, 0, (int)t_rand_range(5, 40));
        if (main_copies(1, (int)t_rand_range(5, 40), &c) ||
            (THREAD_IN_FORKED_CHILD && (start(&cw) || finish(&cw, &c))) || write_down(dir, &c, -1))
            exit(24);
        exit(0);
    }
    for (int i = 0; i < 3; i++)
        if (finish(&w[i], &t))
            return 25;
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
        return 26;
    if (main_copies(3, (int)t_rand_range(5, 30), &t) || d.CtxSynchronize() ||
        write_down(dir, &t, -1))
        return 27;
    return 0;
}

/* count copies of 1 to most bytes, timed around each call */
/* the parent checks a sampled estimate, with a wider margin */
static int sampled;

static int child_timed(const char *dir, int count, size_t most)
{
    struct tally t = {0};
    double seconds = 0;
    unsigned char *h = malloc(MAXSIZE);
    if (!h || setup_child())
        return 30;
    t_fill(h, MAXSIZE, 7);
    for (int i = 0; i < count; i++) {
        size_t n = t_rand_range(1, most);
        double t0 = t_now();
        if (d.MemcpyHtoD(dev, h, n))
            return 31;
        seconds += t_now() - t0;
        tally_copy(&t, H2D, n);
    }
    free(h);
    return write_down(dir, &t, seconds) ? 32 : 0;
}

/* ---- the parent's checks --------------------------------------------------------- */

/* Holds the report of the process whose expectations are in file e. */
static void check(const char *dir, const char *e)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, e);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int pid = atoi(e + 2);
    snprintf(path, sizeof path, "%s/r-%d.json", dir, pid);
    struct report *r = calloc(1, sizeof *r);
    assert_non_null(r);
    if (report_read(path, r))
        fail_msg("report %s: %s", path, r->err);
    char *raw = sp_slurp(path, NULL);
    assert_non_null(raw);
    char line[256], api[48], direction[16], memory[16];
    unsigned long long calls, bytes, from, all_calls = 0;
    int buckets = 0;
    double seconds = -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "T %47s %15s %15s %llu %llu", api, direction, memory, &calls,
                   &bytes) == 5) {
            unsigned long long got_calls = 0, got_bytes = 0;
            double got_seconds = 0;
            for (int i = 0; i < r->nt; i++)
                if (!strcmp(r->t[i].api, api) && !strcmp(r->t[i].direction, direction) &&
                    !strcmp(r->t[i].memory, memory)) {
                    got_calls += (unsigned long long)r->t[i].calls;
                    got_bytes += (unsigned long long)r->t[i].bytes;
                    got_seconds += r->t[i].seconds;
                    assert_int_equal(r->t[i].errors, 0);
                }
            if (got_calls != calls || got_bytes != bytes)
                fail_msg("pid %d, %s %s %s: %llu calls, %llu bytes; the child made %llu, %llu", pid,
                         api, direction, memory, got_calls, got_bytes, calls, bytes);
            all_calls += calls;
            seconds = got_seconds;
        } else if (sscanf(line, "H %15s %llu %llu %llu", direction, &from, &calls, &bytes) == 4) {
            char want[200];
            snprintf(want, sizeof want, "{\"from\":%llu,\"calls\":%llu,\"bytes\":%llu,", from,
                     calls, bytes);
            char *h = strstr(raw, "\"histogram\":"), *end = h ? strstr(h, "\"advice\"") : NULL;
            char key[32];
            snprintf(key, sizeof key, "\"%s\":[", direction);
            char *row = h ? strstr(h, key) : NULL;
            char *found = row ? strstr(row, want) : NULL;
            char *next = row ? strchr(row, ']') : NULL;
            if (!found || !end || found > end || found > next)
                fail_msg("pid %d: no histogram entry %s for %s", pid, want, direction);
            buckets++;
        } else if (sscanf(line, "R %llu %llu", &calls, &bytes) == 2) {
            char want[120];
            snprintf(want, sizeof want, "\"round_trips\":%llu,\"round_trip_bytes\":%llu}", calls,
                     bytes);
            if (!strstr(raw, want))
                fail_msg("pid %d: %s expected", pid, want);
        } else {
            double s;
            assert_int_equal(sscanf(line, "S %lf", &s), 1);
            double lo = sampled ? 0.80 : 0.95, hi = sampled ? 1.20 : 1.01;
            if (seconds < lo * s || seconds > hi * s)
                fail_msg("pid %d: the report gives %.6f s, the child measured %.6f s", pid,
                         seconds, s);
        }
    }
    fclose(f);
    unsigned long long rows = 0;
    for (int i = 0; i < r->nt; i++)
        rows += (unsigned long long)r->t[i].calls;
    if (rows != all_calls)
        fail_msg("pid %d: %llu copies in the report, the child made %llu", pid, rows, all_calls);
    int entries = 0;
    for (char *p = strstr(raw, "{\"from\":"); p; p = strstr(p + 1, "{\"from\":"))
        entries++;
    assert_int_equal(entries, buckets);
    free(raw);
    free(r);
}

/* Runs the child in mode and checks the report of each process that wrote
 * down what it did; returns how many. */
static int run_and_check(const char *mode, const char *const *extra)
{
    const char *dir = sp_tmpdir(mode);
    assert_non_null(dir);
    char file[600], expect[600], seed[64];
    snprintf(file, sizeof file, "PINFAST_STATS_FILE=%s/r-%%p.json", dir);
    snprintf(expect, sizeof expect, "PFT_EXPECT_DIR=%s", dir);
    snprintf(seed, sizeof seed, "PFT_SEED=%llu", (unsigned long long)t_rand());
    /* round trips of 512-640 KiB pass through like every other copy */
    const char *set[8] = {file, expect, seed, "PINFAST_STATS=json", "PINFAST_MIN_SIZE=1M"};
    int n = 5;
    for (int i = 0; extra && extra[i]; i++)
        set[n++] = extra[i];
    set[n] = NULL;
    char *argv[] = {"test_stats", (char *)mode, NULL};
    assert_int_equal(sp_run(argv, t_pinfast(), set, NULL, NULL, 240, NULL), 0);
    int checked = 0;
    DIR *dd = opendir(dir);
    struct dirent *e;
    while (t_pinfast() && dd && (e = readdir(dd)))
        if (!strncmp(e->d_name, "e-", 2)) {
            check(dir, e->d_name);
            checked++;
        }
    if (dd)
        closedir(dd);
    sp_rmdir(dir);
    return checked;
}

static void test_threads(void **s)
{
    (void)s;
    int n = run_and_check("threads", NULL);
    assert_int_equal(n, t_pinfast() ? 1 : 0);
}

static void test_fork(void **s)
{
    (void)s;
    int n = run_and_check("fork", NULL);
    assert_int_equal(n, t_pinfast() ? 2 : 0);
}

static void test_timed(void **s)
{
    (void)s;
    const char *extra[] = {"FAKECUDA_DELAY_US=4000", "PINFAST_CALLSITES=0", NULL};
    int n = run_and_check("timed", extra);
    assert_int_equal(n, t_pinfast() ? 1 : 0);
}

static void test_sampled(void **s)
{
    (void)s;
    const char *extra[] = {"FAKECUDA_DELAY_US=400", "PINFAST_CALLSITES=0", NULL};
    sampled = 1;
    int n = run_and_check("sampled", extra);
    sampled = 0;
    assert_int_equal(n, t_pinfast() ? 1 : 0);
}

int main(int argc, char **argv)
{
    t_seed();
    if (argc > 1) {
        const char *dir = getenv("PFT_EXPECT_DIR");
        if (!dir)
            return 2;
        if (!strcmp(argv[1], "threads"))
            return child_threads(dir);
        if (!strcmp(argv[1], "fork"))
            return child_fork(dir);
        if (!strcmp(argv[1], "timed"))
            return child_timed(dir, 40, MAXSIZE);
        if (!strcmp(argv[1], "sampled"))
            return child_timed(dir, 4024, 64);
        return 3;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_timed),
        cmocka_unit_test(test_sampled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
