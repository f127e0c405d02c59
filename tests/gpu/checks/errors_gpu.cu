// errors_gpu: the error parity table on the real driver.  Every wrapped copy
// entry point pinfast stages or passes through (driver API in both stream
// flavours, and cudaMemcpy(Async) through the runtime), each with each bad
// argument, at 64 B (passed through by pinfast's defaults) and 1 MiB + 3
// (staged), prints one line "api dir size case -> code".  Run plain and under
// pinfast, the tables must be equal.
//
// Each case's outcome must not depend on the cases before it, so the parent
// never touches CUDA and runs the cases in children: cases that may crash or
// leave the process in an undefined state (bogus host pointers and streams,
// destroyed streams and contexts) each in a child of their own; the others in
// a shared child, which ends as soon as a case leaves the context broken
// (cuCtxSynchronize fails; the line says so) or dies (the line says "crash").
// The next child starts at the next case.  Children run several at once.
//
//   errors_gpu [JOBS]     the table on stdout, then "errors_gpu: N cases"
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime.h>

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../samples/check.h"

enum dir { H2D, D2H, D2D };
enum flav { SYNC, ASYNC };
struct api { const char *name; enum dir dir; enum flav flav; int runtime; };
static const struct api apis[] = {
    {"cuMemcpyHtoD_v2", H2D, SYNC, 0},          {"cuMemcpyHtoD_v2_ptds", H2D, SYNC, 0},
    {"cuMemcpyDtoH_v2", D2H, SYNC, 0},          {"cuMemcpyDtoH_v2_ptds", D2H, SYNC, 0},
    {"cuMemcpyHtoDAsync_v2", H2D, ASYNC, 0},    {"cuMemcpyHtoDAsync_v2_ptsz", H2D, ASYNC, 0},
    {"cuMemcpyDtoHAsync_v2", D2H, ASYNC, 0},    {"cuMemcpyDtoHAsync_v2_ptsz", D2H, ASYNC, 0},
    {"cuMemcpy", H2D, SYNC, 0},                 {"cuMemcpy", D2H, SYNC, 0},
    {"cuMemcpy_ptds", H2D, SYNC, 0},            {"cuMemcpy_ptds", D2H, SYNC, 0},
    {"cuMemcpyAsync", H2D, ASYNC, 0},           {"cuMemcpyAsync", D2H, ASYNC, 0},
    {"cuMemcpyAsync_ptsz", H2D, ASYNC, 0},      {"cuMemcpyAsync_ptsz", D2H, ASYNC, 0},
    {"cuMemcpyDtoD_v2", D2D, SYNC, 0},          {"cuMemcpyDtoDAsync_v2", D2D, ASYNC, 0},
    {"cuMemcpy2D_v2", H2D, SYNC, 0},            {"cuMemcpy2D_v2", D2H, SYNC, 0},
    {"cuMemcpy2DAsync_v2", H2D, ASYNC, 0},      {"cuMemcpy2DAsync_v2", D2H, ASYNC, 0},
    {"cuMemcpy3D_v2", H2D, SYNC, 0},            {"cuMemcpy3DAsync_v2", D2H, ASYNC, 0},
    {"cudaMemcpy", H2D, SYNC, 1},               {"cudaMemcpy", D2H, SYNC, 1},
    {"cudaMemcpyAsync", H2D, ASYNC, 1},         {"cudaMemcpyAsync", D2H, ASYNC, 1},
};
#define NAPIS (int)(sizeof apis / sizeof apis[0])
static const char *dirname_[] = {"H2D", "D2H", "D2D"};

enum kase {
    C_VALID, C_NULL_HOST, C_BOGUS_HOST, C_BOGUS_DEV, C_FREED_DEV, C_PAST_END, C_SIZE0, C_SIZE0_NULL,
    C_BOGUS_STREAM, C_DESTROYED_STREAM, C_STREAM_DEAD_CTX, C_NO_CTX, C_DESTROYED_CTX, NCASES
};
static const char *casename[] = {"valid", "NULL-host", "bogus-host(PROT_NONE)", "bogus-device(0x1000)",
                                 "freed-device", "past-the-end", "size-0", "size-0-NULL-host",
                                 "bogus-stream", "destroyed-stream", "stream-of-destroyed-context",
                                 "no-context", "destroyed-context"};
// may crash or leave the process undefined: a child of its own
static int risky(enum kase c)
{
    return c == C_BOGUS_HOST || c == C_BOGUS_STREAM || c == C_DESTROYED_STREAM || c == C_STREAM_DEAD_CTX ||
           c == C_DESTROYED_CTX;
}

static const size_t sizes[] = {64, (1 << 20) + 3};
#define NSIZES 2

struct tcase { int api, size; enum kase k; };
static struct tcase cases[NAPIS * NSIZES * NCASES];
static int ncases;

static int applies(const struct api *a, enum kase k)
{
    int host = k == C_NULL_HOST || k == C_BOGUS_HOST || k == C_SIZE0_NULL;
    int stream = k == C_BOGUS_STREAM || k == C_DESTROYED_STREAM || k == C_STREAM_DEAD_CTX;
    int ctx = k == C_NO_CTX || k == C_DESTROYED_CTX; // the runtime makes its own context current
    return !(host && a->dir == D2D) && !(stream && a->flav == SYNC) && !(ctx && a->runtime);
}

static void label(int i, char *buf, size_t len)
{
    const struct tcase *c = &cases[i];
    const struct api *a = &apis[c->api];
    snprintf(buf, len, "%s %s %zuB %s", a->name, dirname_[a->dir], sizes[c->size], casename[c->k]);
}

// ---- one call ----------------------------------------------------------------------
struct target { CUdeviceptr dev, dev2; void *host; size_t n; CUstream st; };

static CUresult copy2d(const struct api *a, const struct target *t, int three)
{
    CUDA_MEMCPY3D m;
    memset(&m, 0, sizeof m);
    int h2d = a->dir == H2D;
    m.srcMemoryType = h2d ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    m.dstMemoryType = h2d ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    m.srcHost = t->host, m.srcDevice = t->dev, m.dstHost = t->host, m.dstDevice = t->dev;
    m.srcPitch = m.dstPitch = t->n;
    m.WidthInBytes = t->n, m.Height = 1, m.Depth = 1;
    if (three)
        return a->flav == SYNC ? cuMemcpy3D_v2(&m) : cuMemcpy3DAsync_v2(&m, t->st);
    CUDA_MEMCPY2D m2;
    memset(&m2, 0, sizeof m2);
    m2.srcMemoryType = m.srcMemoryType, m2.dstMemoryType = m.dstMemoryType;
    m2.srcHost = m.srcHost, m2.srcDevice = m.srcDevice, m2.dstHost = m.dstHost, m2.dstDevice = m.dstDevice;
    m2.srcPitch = m2.dstPitch = t->n, m2.WidthInBytes = t->n, m2.Height = 1;
    return a->flav == SYNC ? cuMemcpy2D_v2(&m2) : cuMemcpy2DAsync_v2(&m2, t->st);
}

static const char *call(const struct api *a, const struct target *t)
{
    void *dp = (void *)t->dev, *h = t->host;
    size_t n = t->n;
    if (a->runtime) {
        cudaError_t r;
        cudaStream_t s = (cudaStream_t)t->st;
        if (a->dir == H2D)
            r = a->flav == SYNC ? cudaMemcpy(dp, h, n, cudaMemcpyHostToDevice)
                                : cudaMemcpyAsync(dp, h, n, cudaMemcpyHostToDevice, s);
        else
            r = a->flav == SYNC ? cudaMemcpy(h, dp, n, cudaMemcpyDeviceToHost)
                                : cudaMemcpyAsync(h, dp, n, cudaMemcpyDeviceToHost, s);
        return cudaGetErrorName(r);
    }
    CUdeviceptr d = t->dev, hp = (CUdeviceptr)h;
    CUstream s = t->st;
    CUresult r = CUDA_ERROR_UNKNOWN;
    const char *nm = a->name;
    int h2d = a->dir == H2D;
    if (!strcmp(nm, "cuMemcpyHtoD_v2")) r = cuMemcpyHtoD_v2(d, h, n);
    else if (!strcmp(nm, "cuMemcpyHtoD_v2_ptds")) r = cuMemcpyHtoD_v2_ptds(d, h, n);
    else if (!strcmp(nm, "cuMemcpyDtoH_v2")) r = cuMemcpyDtoH_v2(h, d, n);
    else if (!strcmp(nm, "cuMemcpyDtoH_v2_ptds")) r = cuMemcpyDtoH_v2_ptds(h, d, n);
    else if (!strcmp(nm, "cuMemcpyHtoDAsync_v2")) r = cuMemcpyHtoDAsync_v2(d, h, n, s);
    else if (!strcmp(nm, "cuMemcpyHtoDAsync_v2_ptsz")) r = cuMemcpyHtoDAsync_v2_ptsz(d, h, n, s);
    else if (!strcmp(nm, "cuMemcpyDtoHAsync_v2")) r = cuMemcpyDtoHAsync_v2(h, d, n, s);
    else if (!strcmp(nm, "cuMemcpyDtoHAsync_v2_ptsz")) r = cuMemcpyDtoHAsync_v2_ptsz(h, d, n, s);
    else if (!strcmp(nm, "cuMemcpy")) r = h2d ? cuMemcpy(d, hp, n) : cuMemcpy(hp, d, n);
    else if (!strcmp(nm, "cuMemcpy_ptds")) r = h2d ? cuMemcpy_ptds(d, hp, n) : cuMemcpy_ptds(hp, d, n);
    else if (!strcmp(nm, "cuMemcpyAsync")) r = h2d ? cuMemcpyAsync(d, hp, n, s) : cuMemcpyAsync(hp, d, n, s);
    else if (!strcmp(nm, "cuMemcpyAsync_ptsz"))
        r = h2d ? cuMemcpyAsync_ptsz(d, hp, n, s) : cuMemcpyAsync_ptsz(hp, d, n, s);
    else if (!strcmp(nm, "cuMemcpyDtoD_v2")) r = cuMemcpyDtoD_v2(d, t->dev2, n);
    else if (!strcmp(nm, "cuMemcpyDtoDAsync_v2")) r = cuMemcpyDtoDAsync_v2(d, t->dev2, n, s);
    else if (!strncmp(nm, "cuMemcpy2D", 10)) r = copy2d(a, t, 0);
    else if (!strncmp(nm, "cuMemcpy3D", 10)) r = copy2d(a, t, 1);
    const char *name = "?";
    cuGetErrorName(r, &name);
    return name;
}

// ---- one case, in a child ----------------------------------------------------------
static CUcontext primary;
static CUdevice device;

static void *destroy_ctx(void *c)
{
    CU(cuCtxDestroy_v2((CUcontext)c));
    return NULL;
}

static CUcontext new_ctx(void)
{
    CUcontext c;
    CU(cuCtxCreate_v4(&c, NULL, 0, device));
    return c;
}

// prints the case's line; returns 0 if the context is still good afterwards
static int run_case(int i)
{
    const struct tcase *c = &cases[i];
    const struct api *a = &apis[c->api];
    size_t n = sizes[c->size];
    struct target t;
    CU(cuMemAlloc_v2(&t.dev, n));
    CU(cuMemAlloc_v2(&t.dev2, n));
    unsigned char *host = (unsigned char *)malloc(n);
    memset(host, 0x5a, n);
    t.host = host, t.n = n;
    CU(cuStreamCreate(&t.st, CU_STREAM_NON_BLOCKING));
    CUstream own = t.st;
    switch (c->k) {
    case C_VALID: case C_NO_CTX: break;
    case C_NULL_HOST: t.host = NULL; break;
    case C_BOGUS_HOST: // reserved, so no later mapping can land there
        t.host = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        break;
    case C_BOGUS_DEV: t.dev = 0x1000; break;
    case C_FREED_DEV: {
        CUdeviceptr f;
        CU(cuMemAlloc_v2(&f, n));
        CU(cuMemFree_v2(f));
        t.dev = f;
        break;
    }
    case C_PAST_END: t.dev += 1; break;
    case C_SIZE0: t.n = 0; break;
    case C_SIZE0_NULL: t.n = 0, t.host = NULL; break;
    case C_BOGUS_STREAM: t.st = (CUstream)0x1234; break;
    case C_DESTROYED_STREAM: {
        CUstream s;
        CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CU(cuStreamDestroy_v2(s));
        t.st = s;
        break;
    }
    case C_STREAM_DEAD_CTX: {
        CUcontext dead = new_ctx();
        CU(cuStreamCreate(&t.st, CU_STREAM_NON_BLOCKING));
        CU(cuCtxSetCurrent(primary));
        CU(cuCtxDestroy_v2(dead));
        break;
    }
    case C_DESTROYED_CTX: { // current here, destroyed by another thread
        CUcontext dead = new_ctx();
        CU(cuMemAlloc_v2(&t.dev, n));
        pthread_t th;
        if (pthread_create(&th, NULL, destroy_ctx, dead) || pthread_join(th, NULL))
            CU(CUDA_ERROR_OPERATING_SYSTEM);
        break;
    }
    case NCASES: break;
    }
    if (c->k == C_NO_CTX)
        CU(cuCtxSetCurrent(NULL));
    char what[160];
    label(i, what, sizeof what);
    printf("#%d %s -> ", i, what);
    fflush(stdout); // a crash leaves the line's start behind
    const char *code = call(a, &t);
    CU(cuCtxSetCurrent(primary));
    CUresult sync = cuCtxSynchronize();
    const char *sname = "?";
    cuGetErrorName(sync, &sname);
    printf("%s%s%s\n", code, sync ? "; context broken: " : "", sync ? sname : "");
    fflush(stdout);
    if (sync)
        return 1;
    CU(cuStreamDestroy_v2(own));
    CU(cuMemFree_v2(t.dev2));
    if (c->k != C_FREED_DEV && c->k != C_BOGUS_DEV && c->k != C_DESTROYED_CTX)
        CU(cuMemFree_v2(c->k == C_PAST_END ? t.dev - 1 : t.dev));
    free(host);
    return 0;
}

static void child(int from, int to)
{
    alarm(30); // a hang is reported like a crash
    CU(cuInit(0));
    CU(cuDeviceGet(&device, 0));
    CU(cuDevicePrimaryCtxRetain(&primary, device));
    CU(cuCtxSetCurrent(primary));
    for (int i = from; i < to; i++) {
        if (apis[cases[i].api].runtime) // the runtime takes the primary context before the case
            CK(cudaFree(0));
        if (run_case(i))
            break;
    }
    fflush(stdout);
    _exit(0);
}

// ---- the parent ----------------------------------------------------------------------
static char *lines[NAPIS * NSIZES * NCASES];
static int unanswered;

struct job { pid_t pid; int from, to; FILE *out; };

// the lines a finished child wrote; the next case to run, or `to` when done
static int collect(struct job *j, int status)
{
    char buf[512], how[64];
    if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "crash %s", strsignal(WTERMSIG(status)));
    else
        snprintf(how, sizeof how, "exit %d", WEXITSTATUS(status));
    int next = j->from;
    char said[160] = "";
    rewind(j->out);
    while (fgets(buf, sizeof buf, j->out)) {
        int i, off = 0;
        if (sscanf(buf, "#%d %n", &i, &off) != 1 || i < j->from || i >= j->to) {
            if (!said[0]) // what the child said about dying first
                snprintf(said, sizeof said, "%.*s", (int)strcspn(buf, "\n"), buf);
            continue;
        }
        size_t len = strlen(buf + off);
        if (len && buf[off + len - 1] == '\n') {
            lines[i] = strdup(buf + off);
            next = i + 1;
        } else { // the child died inside this case
            if (asprintf(&lines[i], "%s%s\n", buf + off, how) < 0)
                exit(3);
            next = i + 1;
        }
    }
    fclose(j->out);
    if (next == j->from) { // died before its first case
        label(next, buf, sizeof buf);
        if (asprintf(&lines[next], "%s -> no answer, %s%s%s\n", buf, how, said[0] ? ": " : "", said) < 0)
            exit(3);
        unanswered++;
        next++;
    }
    return next;
}

static void start(struct job *j, int from, int to)
{
    j->from = from, j->to = to;
    j->out = tmpfile();
    if (!j->out)
        exit(3);
    fflush(stdout);
    j->pid = fork();
    if (j->pid < 0)
        exit(3);
    if (j->pid == 0) {
        dup2(fileno(j->out), 1);
        child(from, to);
    }
}

// the end of the segment that starts at i: one risky case, or the harmless run up to the next risky one
static int segment_end(int i)
{
    if (risky(cases[i].k))
        return i + 1;
    int e = i + 1;
    while (e < ncases && !risky(cases[e].k))
        e++;
    return e;
}

int main(int argc, char **argv)
{
    int jobs = argc > 1 ? atoi(argv[1]) : 6;
    if (jobs < 1 || jobs > 32)
        jobs = 6;
    for (int a = 0; a < NAPIS; a++)
        for (int s = 0; s < NSIZES; s++)
            for (int k = 0; k < NCASES; k++)
                if (applies(&apis[a], (enum kase)k))
                    cases[ncases++] = (struct tcase){a, s, (enum kase)k};
    struct job run[32];
    int running = 0;
    // segments still to run: [from, to) pairs, a stack
    static int todo[2 * NAPIS * NSIZES * NCASES + 2];
    int ntodo = 0;
    for (int i = 0; i < ncases; i = segment_end(i)) {
        todo[ntodo++] = i;
        todo[ntodo++] = segment_end(i);
    }
    // run in order of start: reverse the stack
    for (int i = 0, j = ntodo - 2; i < j; i += 2, j -= 2) {
        int f = todo[i], t = todo[i + 1];
        todo[i] = todo[j], todo[i + 1] = todo[j + 1];
        todo[j] = f, todo[j + 1] = t;
    }
    while (ntodo || running) {
        while (ntodo && running < jobs) {
            ntodo -= 2;
            start(&run[running++], todo[ntodo], todo[ntodo + 1]);
        }
        int status;
        pid_t pid = wait(&status);
        if (pid < 0)
            break;
        for (int r = 0; r < running; r++)
            if (run[r].pid == pid) {
                int next = collect(&run[r], status);
                if (next < run[r].to) {
                    todo[ntodo++] = next;
                    todo[ntodo++] = run[r].to;
                }
                run[r] = run[--running];
                break;
            }
    }
    for (int i = 0; i < ncases; i++)
        fputs(lines[i], stdout);
    printf("errors_gpu: %d cases, %d without an answer\n", ncases, unanswered);
    return unanswered != 0;
}
