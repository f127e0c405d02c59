/* test_process: processes and threads around staged copies.
 *  - fork: a child that never touches CUDA exits 0 and prints no pinfast
 *    report; a child that execs /bin/true (pinfast preloaded again) too;
 *  - exit(0) while a thread has staged 64 MiB copies in flight: no crash,
 *    no hang (the child is killed after a timeout);
 *  - 32 threads copying at once, each verifying its own data;
 *  - SIGALRM every 100 us (no SA_RESTART) while staged copies run: data
 *    intact, every call returns CUDA_SUCCESS (no EINTR leaks out as an
 *    error, no lost wake-up).
 * Run with PINFAST_MIN_SIZE=0 so that every pageable copy is staged. */
#define _GNU_SOURCE
#include "t.h"
#include "spawn.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

/* one staged round trip, so that pinfast has its threads and pinned memory */
static void roundtrip(size_t n)
{
    unsigned char *h = malloc(n), *o = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    uint64_t salt = t_rand();
    t_fill(h, n, salt);
    CK(D.MemcpyHtoD(d, h, n));
    t_poison(o, n);
    CK(D.MemcpyDtoH(o, d, n));
    t_expect_fill(o, n, salt, "round trip");
    CK(D.MemFree(d));
    free(h);
    free(o);
}

/* forks, runs fn in the child, returns its exit status and its stderr */
static int fork_capture(void (*fn)(void), char *err, size_t errsz)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        close(fds[1]);
        fn();
        _exit(99);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < errsz && (got = read(fds[0], err + n, errsz - n - 1)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            break;
        n += (size_t)got;
    }
    err[n] = 0;
    close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void child_exit(void) { exit(0); }   /* exit, not _exit: atexit handlers and destructors run */

static void child_exec_true(void)
{
    char *argv[] = { "true", NULL };
    execv("/bin/true", argv);
    _exit(98);
}

static void test_fork(void **s)
{
    (void)s;
    roundtrip(3 * MiB);                      /* the parent has made CUDA calls */
    char err[4096];
    int rc = fork_capture(child_exit, err, sizeof err);
    assert_int_equal(rc, 0);
    if (strstr(err, "pinfast"))
        fail_msg("a forked child that made no CUDA call printed:\n%s", err);
    rc = fork_capture(child_exec_true, err, sizeof err);
    assert_int_equal(rc, 0);
    if (*err)
        fail_msg("/bin/true under the preload printed:\n%s", err);
    roundtrip(3 * MiB);                      /* and the parent goes on */
}

/* ---- exit with copies in flight ------------------------------------------------------ */
static atomic_int copies_done;

static void *copy_forever(void *arg)
{
    (void)arg;
    t_bind_ctx();
    size_t n = 64 * MiB;
    unsigned char *h = malloc(n), *o = malloc(n);
    CUdeviceptr d;
    CUstream st;
    /* a blocking stream: the plain copies on the legacy stream and the async
     * ones on st are ordered with each other (no race on d or o) */
    if (!h || !o || D.MemAlloc(&d, n) || D.StreamCreate(&st, CU_STREAM_DEFAULT))
        abort();
    memset(h, 7, n);
    for (;;) {
        D.MemcpyHtoDAsync(d, h, n, st);
        D.MemcpyDtoH(o, d, n);
        D.MemcpyHtoD(d, h, n);
        D.MemcpyDtoHAsync(o, d, n, st);
        atomic_fetch_add(&copies_done, 1);
    }
    return NULL;
}

static int exit_inflight_child(int delay_ms)
{
    if (t_setup(NULL))
        return 30;
    pthread_t th;
    if (pthread_create(&th, NULL, copy_forever, NULL))
        return 31;
    /* once a round of copies is through the next ones are under way: exit
     * somewhere inside them */
    struct timespec nap = { 0, 1000000L };
    while (atomic_load(&copies_done) == 0)
        nanosleep(&nap, NULL);
    struct timespec ts = { delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
    exit(0);
}

static void test_exit_inflight(void **s)
{
    (void)s;
    static const char *delays[] = { "0", "3", "17", "60" };
    for (int i = 0; i < 4; i++) {
        char *argv[] = { "test_process", "exit-inflight", (char *)delays[i], NULL };
        const char *set[] = { t_pinfast() ? "PFT_PINFAST=1" : "PFT_PINFAST=0", NULL };
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = sp_run(argv, t_pinfast(), set, NULL, NULL, 60, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("[ exit     ] exit(0) %s ms into the second round of copies: status %d in %.2f s\n", delays[i], rc,
               (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
        if (rc == -1)
            fail_msg("exit(0) with copies in flight hung (killed after 60 s)");
        if (rc != 0)
            fail_msg("exit(0) with copies in flight: status %d", rc);
    }
}

/* ---- 32 threads ------------------------------------------------------------------------ */
struct worker { int id; int bad; CUresult err; char what[160]; };

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    t_bind_ctx();
    CUstream st;
    CUresult r;
    if ((r = D.StreamCreate(&st, w->id % 3 == 0 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT))) {
        w->err = r;
        return NULL;
    }
    for (int it = 0; it < 4; it++) {
        size_t n = 1 + (size_t)((unsigned)(w->id * 7919 + it * 104729) % (3u << 20));
        unsigned char *h = malloc(n), *o = malloc(n);
        CUdeviceptr d;
        if ((r = D.MemAlloc(&d, n))) {
            w->err = r;
            return NULL;
        }
        uint64_t salt = (uint64_t)w->id << 32 | (uint64_t)it;
        t_fill(h, n, salt);
        memset(o, 0xA5, n);
        int async = (w->id + it) & 1;
        CUstream which = (w->id + it) & 2 ? st : NULL;
        if (async) {
            r = D.MemcpyHtoDAsync(d, h, n, which);
            if (!r)
                r = D.MemcpyDtoHAsync(o, d, n, which);
            if (!r)
                r = D.StreamSynchronize(which);
        } else {
            r = D.MemcpyHtoD(d, h, n);
            if (!r)
                r = D.MemcpyDtoH(o, d, n);
        }
        size_t bad;
        if (r)
            w->err = r;
        else if (!t_check_fill(o, n, salt, &bad)) {
            w->bad = 1;
            snprintf(w->what, sizeof w->what, "thread %d round %d (%s, %zu bytes): wrong byte at %zu",
                     w->id, it, async ? "async" : "sync", n, bad);
        }
        D.MemFree(d);
        free(h);
        free(o);
        if (w->err || w->bad)
            break;
    }
    D.StreamDestroy(st);
    return NULL;
}

static void test_32_threads(void **s)
{
    (void)s;
    enum { N = 32 };
    pthread_t th[N];
    struct worker w[N];
    memset(w, 0, sizeof w);
    for (int i = 0; i < N; i++) {
        w[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        if (w[i].err)
            fail_msg("thread %d: a call returned %d", i, (int)w[i].err);
        if (w[i].bad)
            fail_msg("%s", w[i].what);
    }
}

/* ---- signals ----------------------------------------------------------------------------- */
/* the handler runs on whichever thread the signal hits: a lock-free atomic */
static atomic_int alarms;
static void on_alarm(int sig) { (void)sig; atomic_fetch_add_explicit(&alarms, 1, memory_order_relaxed); }

static void test_signals(void **s)
{
    (void)s;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;                         /* no SA_RESTART: blocking calls see EINTR */
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    struct itimerval it = { { 0, 100 }, { 0, 100 } };
    assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
    CUstream st;
    CK(D.StreamCreate(&st, CU_STREAM_NON_BLOCKING));
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rounds = 0;
    do {
        size_t n = t_rand_range(512 << 10, 9 * MiB);
        unsigned char *h = malloc(n), *o = malloc(n);
        CUdeviceptr d;
        CK(D.MemAlloc(&d, n));
        uint64_t salt = t_rand();
        t_fill(h, n, salt);
        t_poison(o, n);
        if (rounds & 1) {
            CK(D.MemcpyHtoDAsync(d, h, n, st));
            CK(D.MemcpyDtoHAsync(o, d, n, st));
            CK(D.StreamSynchronize(st));
        } else {
            CK(D.MemcpyHtoD(d, h, n));
            CK(D.MemcpyDtoH(o, d, n));
        }
        t_expect_fill(o, n, salt, "copy under SIGALRM");
        CK(D.MemFree(d));
        free(h);
        free(o);
        rounds++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - t0.tv_sec < 2 && rounds < 400);
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    CK(D.StreamDestroy(st));
    printf("[ signals  ] %d round trips, %d SIGALRMs\n", rounds, atomic_load(&alarms));
    assert_true(atomic_load(&alarms) > 10);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "exit-inflight") == 0)
        return exit_inflight_child(atoi(argv[2]));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_exit_inflight),
        cmocka_unit_test(test_32_threads),
        cmocka_unit_test(test_signals),
    };
    return cmocka_run_group_tests(tests, t_setup, NULL);
}
