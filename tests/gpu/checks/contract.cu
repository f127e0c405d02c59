// contract: programs the plain driver runs correctly, in random instances,
// each printing the return code of every call and the count of wrong bytes,
// so that a plain run and a pinfast run can be diffed line by line
// (tests/gpu/checks/contract.sh).  The cases of the contract (docs/design.md):
//   dest      H2D into managed, mapped pinned and device memory, D2H out of
//             them, the destination read by the host at once
//   tail      a synchronous H2D, then a kernel on a non-blocking stream reads
//             the copy's tail
//   capture   a capture in each mode on one thread, while this or another
//             thread copies, frees a pinned block, or allocates one
//   fresh     a new context's first copies made while another thread captures
//   otherctx  copies on a stream of a context that is not current
//   xstream   stream S1 waits on the host (a kernel polling a mapped flag set
//             after S2's copy returns): S2's copy must not wait for S1
//   reset     contexts destroyed and made again, copies in each
// `contract cpu` instead measures CPU seconds while copies wait behind a
// 0.45 s kernel (not diffed: a measurement).
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../samples/check.h"

#define MiB (1ull << 20)

static uint64_t seed = 1;

__global__ static void touch(int* p) { p[threadIdx.x] += 1; }

__global__ static void tail_read(const unsigned char* src, unsigned char* out, size_t n)
{
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = src[i];
}

__global__ static void wait_flag(volatile int* flag)
{
    while (*flag == 0) {
    }
}

__global__ static void spin_for(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

static long diff(const void* a, const void* b, size_t n)
{
    const unsigned char *x = (const unsigned char*)a, *y = (const unsigned char*)b;
    long bad = 0;
    for (size_t i = 0; i < n; i++) bad += x[i] != y[i];
    return bad;
}

static unsigned char* pageable(size_t n)
{
    unsigned char* p = (unsigned char*)malloc(n);
    if (!p) {
        printf("FAIL malloc %zu\n", n);
        exit(3);
    }
    rng_fill(&seed, p, n);
    return p;
}

// ---- dest ------------------------------------------------------------------
static void dest(int rounds)
{
    const char* kinds[] = {"device", "managed", "mapped"};
    for (int r = 0; r < rounds; r++) {
        int k = (int)rng_range(&seed, 0, 2);
        size_t n = rng_range(&seed, 512 * 1024, 64 * MiB), off = rng_range(&seed, 0, 4096);
        unsigned char *src = pageable(n), *back = pageable(n), *mem;
        if (k == 0) CK(cudaMalloc(&mem, n + off));
        else if (k == 1) CK(cudaMallocManaged(&mem, n + off));
        else CK(cudaHostAlloc(&mem, n + off, cudaHostAllocMapped));
        int rc = cudaMemcpy(mem + off, src, n, cudaMemcpyHostToDevice);
        long bad = 0;
        if (k) bad = diff(mem + off, src, n); // the host reads it at once
        if (k) rng_fill(&seed, mem + off, n);
        else rng_fill(&seed, back, n); // poison
        int rc2 = cudaMemcpy(back, mem + off, n, cudaMemcpyDeviceToHost);
        long bad2 = k ? diff(back, mem + off, n) : diff(back, src, n);
        printf("dest %d %s n=%zu off=%zu: h2d %d wrong %ld, d2h %d wrong %ld\n", r, kinds[k], n, off, rc,
               bad, rc2, bad2);
        if (k == 2) CK(cudaFreeHost(mem));
        else CK(cudaFree(mem));
        free(src);
        free(back);
    }
}

// ---- tail ------------------------------------------------------------------
static void tail(int rounds)
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned char* out;
    CK(cudaMalloc(&out, 4096));
    for (int r = 0; r < rounds; r++) {
        size_t n = rng_range(&seed, 1 * MiB, 64 * MiB), t = rng_range(&seed, 1, 4096);
        unsigned char *src = pageable(n), *d, got[4096];
        CK(cudaMalloc(&d, n));
        CK(cudaMemset(d, 0, n));
        CK(cudaDeviceSynchronize());
        int rc = cudaMemcpy(d, src, n, cudaMemcpyHostToDevice);
        tail_read<<<1, 256, 0, s>>>(d + n - t, out, t);
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(got, out, t, cudaMemcpyDeviceToHost));
        printf("tail %d n=%zu last %zu: h2d %d wrong %ld\n", r, n, t, rc, diff(got, src + n - t, t));
        CK(cudaFree(d));
        free(src);
    }
    CK(cudaFree(out));
    CK(cudaStreamDestroy(s));
}

// ---- capture ---------------------------------------------------------------
enum op { OP_H2D_SYNC, OP_D2H_SYNC, OP_H2D_ASYNC, OP_D2H_ASYNC, OP_FREE_HOST, OP_MALLOC_HOST, NOPS };
static const char* op_names[NOPS] = {"h2d-sync", "d2h-sync", "h2d-async+sync", "d2h-async+sync",
                                     "free-host", "malloc-host"};

struct copy_job {
    enum op op;
    size_t n;
    unsigned char *src, *dst, *dev;
    void* pinned;
    cudaStream_t other;
    int rc, rc2;
};

static void run_op(struct copy_job* j)
{
    j->rc2 = 0;
    switch (j->op) {
    case OP_H2D_SYNC: j->rc = cudaMemcpy(j->dev, j->src, j->n, cudaMemcpyHostToDevice); break;
    case OP_D2H_SYNC: j->rc = cudaMemcpy(j->dst, j->dev, j->n, cudaMemcpyDeviceToHost); break;
    case OP_H2D_ASYNC:
        j->rc = cudaMemcpyAsync(j->dev, j->src, j->n, cudaMemcpyHostToDevice, j->other);
        j->rc2 = cudaStreamSynchronize(j->other);
        break;
    case OP_D2H_ASYNC:
        j->rc = cudaMemcpyAsync(j->dst, j->dev, j->n, cudaMemcpyDeviceToHost, j->other);
        j->rc2 = cudaStreamSynchronize(j->other);
        break;
    case OP_FREE_HOST: j->rc = cudaFreeHost(j->pinned); j->pinned = NULL; break;
    case OP_MALLOC_HOST: j->rc = cudaMallocHost(&j->pinned, j->n); break;
    default: break;
    }
}

static void* op_thread(void* arg)
{
    CK(cudaSetDevice(0));
    run_op((struct copy_job*)arg);
    return NULL;
}

// One capture on `cap` in `mode`, with `op` done meanwhile on this thread or another.
static void capture_once(const char* tag, int r, cudaStreamCaptureMode mode, const char* mname, enum op op,
                         int other_thread)
{
    cudaStream_t cap, other;
    CK(cudaStreamCreateWithFlags(&cap, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    int* counter;
    CK(cudaMalloc(&counter, 64 * sizeof(int)));
    CK(cudaMemset(counter, 0, 64 * sizeof(int)));
    struct copy_job j = {};
    j.op = op;
    j.n = rng_range(&seed, 512 * 1024, 16 * MiB);
    j.src = pageable(j.n);
    j.dst = pageable(j.n);
    j.other = other;
    CK(cudaMalloc(&j.dev, j.n));
    CK(cudaMemcpy(j.dev, j.src, j.n, cudaMemcpyHostToDevice)); // a D2H reads this back
    if (op == OP_FREE_HOST) { // a pooled block: allocated, freed, allocated again
        CK(cudaMallocHost(&j.pinned, j.n));
        CK(cudaFreeHost(j.pinned));
        CK(cudaMallocHost(&j.pinned, j.n));
    }
    CK(cudaDeviceSynchronize());
    int rb = cudaStreamBeginCapture(cap, mode);
    touch<<<1, 64, 0, cap>>>(counter);
    if (other_thread) {
        pthread_t t;
        pthread_create(&t, NULL, op_thread, &j);
        pthread_join(t, NULL);
    } else {
        run_op(&j);
    }
    cudaGraph_t g = NULL;
    int re = cudaStreamEndCapture(cap, &g);
    long wrong = -1;
    int launched = -1;
    if (g) {
        cudaGraphExec_t ge;
        launched = cudaGraphInstantiate(&ge, g, 0);
        if (!launched) {
            launched = cudaGraphLaunch(ge, cap);
            CK(cudaStreamSynchronize(cap));
            CK(cudaGraphExecDestroy(ge));
        }
        CK(cudaGraphDestroy(g));
        int c[64];
        CK(cudaMemcpy(c, counter, sizeof c, cudaMemcpyDeviceToHost));
        wrong = 0;
        for (int i = 0; i < 64; i++) wrong += c[i] != 1;
    }
    (void)cudaGetLastError();
    CK(cudaDeviceSynchronize());
    long data = 0;
    if (!j.rc && (op == OP_H2D_SYNC || op == OP_H2D_ASYNC)) {
        CK(cudaMemcpy(j.dst, j.dev, j.n, cudaMemcpyDeviceToHost));
        data = diff(j.dst, j.src, j.n);
    } else if (!j.rc && (op == OP_D2H_SYNC || op == OP_D2H_ASYNC)) {
        data = diff(j.dst, j.src, j.n);
    }
    printf("%s %d %s %s %s n=%zu: begin %d op %d/%d wrong %ld; end %d graph %s launch %d kernel-wrong %ld\n",
           tag, r, mname, other_thread ? "other-thread" : "same-thread", op_names[op], j.n, rb, j.rc, j.rc2,
           data, re, g ? "yes" : "no", launched, wrong);
    if (j.pinned) CK(cudaFreeHost(j.pinned));
    CK(cudaFree(j.dev));
    CK(cudaFree(counter));
    free(j.src);
    free(j.dst);
    CK(cudaStreamDestroy(cap));
    CK(cudaStreamDestroy(other));
}

static const cudaStreamCaptureMode modes[3] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                               cudaStreamCaptureModeRelaxed};
static const char* mode_names[3] = {"global", "thread-local", "relaxed"};

static void capture(int rounds)
{
    for (int r = 0; r < rounds; r++) {
        int m = (int)rng_range(&seed, 0, 2), op = (int)rng_range(&seed, 0, NOPS - 1);
        int other = (int)rng_range(&seed, 0, 1);
        capture_once("capture", r, modes[m], mode_names[m], (enum op)op, other);
    }
}

// A context's first staged copies, made while another thread captures.
static void fresh(int rounds)
{
    for (int r = 0; r < rounds; r++) {
        CK(cudaDeviceReset());
        int m = (int)rng_range(&seed, 0, 2), op = (int)rng_range(&seed, 0, 3);
        capture_once("fresh", r, modes[m], mode_names[m], (enum op)op, 1);
        // and staging afterwards is as correct as ever
        size_t n = rng_range(&seed, 1 * MiB, 32 * MiB);
        unsigned char *src = pageable(n), *back = pageable(n), *d;
        CK(cudaMalloc(&d, n));
        int a = cudaMemcpy(d, src, n, cudaMemcpyHostToDevice);
        int b = cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost);
        printf("fresh %d after: %d %d wrong %ld\n", r, a, b, diff(back, src, n));
        CK(cudaFree(d));
        free(src);
        free(back);
    }
}

// ---- otherctx --------------------------------------------------------------
static void otherctx(int rounds)
{
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    CUcontext primary, c2;
    CU(cuCtxGetCurrent(&primary));
    CUdevice dev;
    CU(cuCtxGetDevice(&dev));
    CU(cuCtxCreate(&c2, NULL, 0, dev));
    CUstream s2;
    CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CU(cuCtxSetCurrent(primary));
    for (int r = 0; r < rounds; r++) {
        size_t n = rng_range(&seed, 512 * 1024, 32 * MiB);
        unsigned char *src = pageable(n), *back = pageable(n);
        CUdeviceptr d;
        int where = (int)rng_range(&seed, 0, 1); // device memory of the stream's context or the current
        if (where) CU(cuCtxSetCurrent(c2));
        CU(cuMemAlloc(&d, n));
        CU(cuCtxSetCurrent(primary));
        int a = cuMemcpyHtoDAsync(d, src, n, s2);
        int b = cuMemcpyDtoHAsync(back, d, n, s2);
        int c = cuStreamSynchronize(s2);
        printf("otherctx %d n=%zu mem-of-%s: h2d %d d2h %d sync %d wrong %ld\n", r, n, where ? "stream" : "current",
               a, b, c, diff(back, src, n));
        CU(cuMemFree(d));
        free(src);
        free(back);
    }
    CU(cuCtxDestroy(c2));
    CU(cuCtxSetCurrent(primary));
}

// ---- xstream ---------------------------------------------------------------
// Thread T1 queues on S1 a kernel that waits for a host flag, then an H2D
// (the plain driver blocks T1 in that copy until the flag is set); meanwhile
// the main thread copies on S2 and only then sets the flag.  A watchdog sets
// it after 3 s and says so: the program would have hung.
static volatile int* flag;
static volatile int released, copied;

static void* watchdog(void*)
{
    for (int i = 0; i < 300 && !copied; i++) usleep(10000);
    released = !copied;
    *flag = 1;
    return NULL;
}

struct s1_job {
    cudaStream_t s1;
    int* fd;
    unsigned char *d1, *a;
    size_t n1;
    int rc;
};

static void* s1_thread(void* arg)
{
    struct s1_job* j = (struct s1_job*)arg;
    CK(cudaSetDevice(0));
    wait_flag<<<1, 1, 0, j->s1>>>(j->fd);
    j->rc = cudaMemcpyAsync(j->d1, j->a, j->n1, cudaMemcpyHostToDevice, j->s1);
    return NULL;
}

static void xstream(int rounds)
{
    int* fh;
    CK(cudaHostAlloc(&fh, sizeof(int), cudaHostAllocMapped));
    flag = fh;
    int* fd;
    CK(cudaHostGetDevicePointer(&fd, fh, 0));
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    for (int r = 0; r < rounds; r++) {
        size_t n1 = rng_range(&seed, 4096, 8 * MiB), n2 = rng_range(&seed, 512 * 1024, 16 * MiB);
        int d2h = (int)rng_range(&seed, 0, 1); // S2 copies out, or in
        unsigned char *a = pageable(n1), *b = pageable(n2), *back = pageable(n2), *d1, *d2;
        CK(cudaMalloc(&d1, n1));
        CK(cudaMalloc(&d2, n2));
        CK(cudaMemcpy(d2, b, n2, cudaMemcpyHostToDevice));
        // S1 first stages a copy of its own, so that slots are fenced on S1
        int r0 = cudaMemcpyAsync(d1, a, n1, cudaMemcpyHostToDevice, s1);
        CK(cudaStreamSynchronize(s1));
        *fh = 0;
        copied = released = 0;
        pthread_t w, t1;
        pthread_create(&w, NULL, watchdog, NULL);
        struct s1_job j = {s1, fd, d1, a, n1, -1};
        pthread_create(&t1, NULL, s1_thread, &j);
        usleep(50000); // T1 is in its copy (plain) or past it (pinfast)
        int r2 = d2h ? cudaMemcpyAsync(back, d2, n2, cudaMemcpyDeviceToHost, s2)
                     : cudaMemcpyAsync(d2, b, n2, cudaMemcpyHostToDevice, s2);
        int r3 = cudaStreamSynchronize(s2);
        copied = 1;
        *fh = 1;
        pthread_join(t1, NULL);
        pthread_join(w, NULL);
        CK(cudaDeviceSynchronize());
        long bad = d2h ? diff(back, b, n2) : 0;
        unsigned char* chk = pageable(n1);
        CK(cudaMemcpy(chk, d1, n1, cudaMemcpyDeviceToHost));
        bad += diff(chk, a, n1);
        if (!d2h) {
            CK(cudaMemcpy(back, d2, n2, cudaMemcpyDeviceToHost));
            bad += diff(back, b, n2);
        }
        printf("xstream %d n1=%zu n2=%zu s2 %s: %d %d %d %d hung %d wrong %ld\n", r, n1, n2, d2h ? "d2h" : "h2d",
               r0, j.rc, r2, r3, (int)released, bad);
        CK(cudaFree(d1));
        CK(cudaFree(d2));
        free(a);
        free(b);
        free(back);
        free(chk);
    }
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    CK(cudaFreeHost(fh));
}

// ---- reset -----------------------------------------------------------------
static void reset(int rounds)
{
    long bad = 0;
    int rcs = 0;
    for (int r = 0; r < rounds; r++) {
        CK(cudaDeviceReset());
        size_t n = rng_range(&seed, 1 * MiB, 8 * MiB);
        unsigned char *src = pageable(n), *back = pageable(n), *d;
        CK(cudaMalloc(&d, n));
        rcs |= cudaMemcpy(d, src, n, cudaMemcpyHostToDevice);
        rcs |= cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost);
        bad += diff(back, src, n);
        CK(cudaFree(d));
        free(src);
        free(back);
    }
    printf("reset %d contexts: codes %d wrong %ld\n", rounds, rcs, bad);
}

// ---- cpu -------------------------------------------------------------------
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static void cpu(void)
{
    size_t n = 64 * MiB;
    unsigned char *h = pageable(n), *d;
    CK(cudaMalloc(&d, n));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int clk;
    CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0)); // kHz
    long long cycles = (long long)clk * 450;                   // 0.45 s
    for (int warm = 0; warm < 2; warm++) {
        CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
    }
    const char* cases[] = {"h2d-sync", "d2h-sync", "h2d-async", "d2h-async"};
    for (int rep = 0; rep < 3; rep++)
        for (int c = 0; c < 4; c++) {
            cudaStream_t st = c < 2 ? 0 : s;
            CK(cudaDeviceSynchronize());
            double w0 = now(), c0 = cpu_seconds();
            spin_for<<<1, 1, 0, st>>>(cycles);
            if (c == 0) CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
            else if (c == 1) CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
            else if (c == 2) CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, st));
            else CK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            double w = now() - w0, cs = cpu_seconds() - c0;
            printf("cpu %s round %d: wall %.3f s cpu %.3f s (%.2f cores)\n", cases[c], rep, w, cs, cs / w);
        }
    CK(cudaFree(d));
    free(h);
}

int main(int argc, char** argv)
{
    const char* what = argc > 1 ? argv[1] : "all";
    int rounds = argc > 2 ? atoi(argv[2]) : 10;
    seed = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    CK(cudaSetDevice(0));
    int all = !strcmp(what, "all");
    if (!strcmp(what, "cpu")) {
        cpu();
        return 0;
    }
    if (all || !strcmp(what, "dest")) dest(rounds);
    if (all || !strcmp(what, "tail")) tail(rounds);
    if (all || !strcmp(what, "capture")) capture(rounds * 3);
    if (all || !strcmp(what, "otherctx")) otherctx(rounds);
    if (all || !strcmp(what, "xstream")) xstream(rounds);
    if (all || !strcmp(what, "fresh")) fresh(rounds / 2 + 1);
    if (all || !strcmp(what, "reset")) reset(70);
    printf("contract done\n");
    return 0;
}
