// procs: processes, threads and signals around staged copies on the real GPU.
// Each check prints one PASS/FAIL line; the exit status is the number failed.
//   fork-nocuda     after staged copies, fork a child that never touches CUDA
//                   and exits (its exit must not hang nor touch the parent's
//                   CUDA state); the parent's copies still verify
//   fork-exec       a forked child execs this program, which uses CUDA itself
//   fork-first      a process that has not used CUDA forks; the child stages
//                   copies (a server or a Python pool forking its workers)
//   exit-inflight   a process whose thread copies 256 MiB calls exit() from
//                   main meanwhile: it must end with status 0, not crash or hang
//   threads-32      32 threads copy pageable buffers at once, each verified
//   signals         SIGALRM every 0.5 ms (no SA_RESTART, the handler hashes a
//                   buffer and makes a system call) during large copies: every
//                   byte verified, no call fails
#include <cuda_runtime.h>

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../samples/check.h"

#define MiB ((size_t)1 << 20)

static const char *self;

// bytes that differ after n random bytes went to the device and back into
// poisoned pageable memory on stream s
static size_t roundtrip(size_t n, cudaStream_t s, uint64_t seed)
{
    unsigned char *a = (unsigned char *)malloc(n), *b = (unsigned char *)malloc(n);
    void *d;
    if (!a || !b) {
        printf("FAIL out of host memory\n");
        exit(3);
    }
    rng_fill(&seed, a, n);
    memset(b, 0xa5, n);
    CK(cudaMalloc(&d, n));
    CK(cudaMemcpyAsync(d, a, n, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(b, d, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += a[i] != b[i];
    CK(cudaFree(d));
    free(a);
    free(b);
    return bad;
}

// runs this program with one argument; its exit status, or -1 if it died or outlived the limit
static int run_self(const char *mode, int limit_s)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, mode, (char *)NULL);
        _exit(127);
    }
    int status;
    for (int waited = 0; waited < limit_s * 10; waited++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        usleep(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    printf("  %s: still running after %d s, killed\n", mode, limit_s);
    return -1;
}

static int fork_nocuda(void)
{
    size_t bad = roundtrip(8 * MiB + 5, cudaStreamLegacy, 1); // the engine runs: workers exist
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { // no CUDA here: some work, then a normal exit (destructors run)
        uint64_t s = 7, h = 0;
        unsigned char buf[4096];
        for (int i = 0; i < 100; i++) {
            rng_fill(&s, buf, sizeof buf);
            h = hash_bytes(h, buf, sizeof buf);
        }
        exit(h == 0);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    bad += roundtrip(8 * MiB + 5, cudaStreamLegacy, 2);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("  child status %#x, %zu bytes wrong\n", status, bad);
    return ok && !bad;
}

static int cuda_child(void)
{
    size_t bad = roundtrip(16 * MiB + 3, cudaStreamPerThread, 3);
    return bad != 0;
}

// run by a fresh process: fork before any CUDA call, the child copies
static int fork_first(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(roundtrip(8 * MiB + 1, cudaStreamLegacy, 4) != 0);
    int status;
    waitpid(pid, &status, 0);
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static volatile int copying;
static void *copy_forever(void *arg)
{
    (void)arg;
    size_t n = 256 * MiB;
    unsigned char *h = (unsigned char *)malloc(n);
    void *d;
    memset(h, 1, n);
    CK(cudaMalloc(&d, n));
    for (;;) { // once exit() has begun calls may fail: the status is main's to give
        copying = 1;
        if (cudaMemcpy(d, h, n, cudaMemcpyHostToDevice) || cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost))
            for (;;)
                pause();
    }
    return NULL;
}

static int exit_inflight(void)
{
    CK(cudaFree(0));
    pthread_t th;
    if (pthread_create(&th, NULL, copy_forever, NULL))
        return 3;
    while (!copying)
        usleep(100);
    usleep(20000); // well inside the first 256 MiB copy
    exit(0);
}

struct tjob { int id; size_t bad, bytes; };
static void *thread_copies(void *arg)
{
    struct tjob *j = (struct tjob *)arg;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, j->id % 2 ? cudaStreamNonBlocking : cudaStreamDefault));
    uint64_t rs = 1000 + (uint64_t)j->id;
    for (int it = 0; it < 3; it++) {
        size_t n = rng_range(&rs, 512 * 1024, 8 * MiB) | 1;
        // odd threads on their own stream, even ones on their per-thread default stream
        j->bad += roundtrip(n, j->id % 2 ? s : cudaStreamPerThread, rng_next(&rs));
        j->bytes += 2 * n;
    }
    CK(cudaStreamDestroy(s));
    return NULL;
}

static int threads32(void)
{
    pthread_t th[32];
    struct tjob jobs[32];
    for (int i = 0; i < 32; i++) {
        jobs[i] = (struct tjob){i, 0, 0};
        if (pthread_create(&th[i], NULL, thread_copies, &jobs[i]))
            return 0;
    }
    size_t bad = 0, bytes = 0;
    for (int i = 0; i < 32; i++) {
        pthread_join(th[i], NULL);
        bad += jobs[i].bad;
        bytes += jobs[i].bytes;
    }
    printf("  32 threads moved %zu MiB, %zu bytes wrong\n", bytes / MiB, bad);
    return !bad;
}

static volatile sig_atomic_t alarms;
static unsigned char sigbuf[4096];
static volatile uint64_t sigsink;
static void on_alarm(int sig)
{
    (void)sig;
    sigsink ^= hash_bytes(alarms, sigbuf, sizeof sigbuf) + (uint64_t)getppid();
    alarms++;
}

static int signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; // no SA_RESTART: interrupted waits see EINTR
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 500}, {0, 500}};
    setitimer(ITIMER_REAL, &it, NULL);
    size_t bad = 0;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static const size_t sizes[] = {64 * MiB + 7, 256 * MiB, 3 * MiB + 1, 128 * MiB - 3};
    for (int i = 0; i < 4; i++)
        bad += roundtrip(sizes[i], i % 2 ? s : cudaStreamLegacy, 50 + (uint64_t)i);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    CK(cudaStreamDestroy(s));
    printf("  %d signals during the copies, %zu bytes wrong\n", (int)alarms, bad);
    return !bad && alarms > 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    self = "/proc/self/exe";
    if (argc == 2 && !strcmp(argv[1], "cuda-child"))
        return cuda_child();
    if (argc == 2 && !strcmp(argv[1], "exit-inflight"))
        return exit_inflight();
    if (argc == 2 && !strcmp(argv[1], "fork-first"))
        return fork_first();
    // resolve our own path now: /proc/self/exe in a child is the child's
    static char path[4096];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    if (len <= 0)
        return 3;
    path[len] = 0;
    self = path;
    CK(cudaFree(0));
    struct { const char *name; int ok; } r[6];
    r[0].name = "fork-nocuda", r[0].ok = fork_nocuda();
    r[1].name = "fork-exec", r[1].ok = run_self("cuda-child", 120) == 0;
    r[2].name = "exit-inflight", r[2].ok = run_self("exit-inflight", 120) == 0;
    r[3].name = "threads-32", r[3].ok = threads32();
    r[4].name = "signals", r[4].ok = signals();
    r[5].name = "fork-first", r[5].ok = run_self("fork-first", 60) == 0;
    int failed = 0;
    for (int i = 0; i < 6; i++) {
        printf("%s procs %s\n", r[i].ok ? "PASS" : "FAIL", r[i].name);
        failed += !r[i].ok;
    }
    printf("procs: 6 checks, %d failed\n", failed);
    return failed;
}
