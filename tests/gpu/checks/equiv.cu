// equiv: equivalence fuzzing on the real GPU.  A seed makes a random but
// well-defined CUDA program: 1-4 host threads, each with its own buffers
// (device, managed, pageable at odd offsets, cudaMallocHost, registered) and
// streams (legacy, per-thread, blocking, non-blocking, and 0 standing for the
// one it means), doing copies through every copy family pinfast wraps that
// the runtime and the driver expose (cudaMemcpy(Async) with every kind,
// cudaMemcpy2D(Async), cuMemcpyHtoD/DtoH(Async), cuMemcpy(Async),
// cuMemcpy2D(Async), the driver ones in both the legacy and the per-thread
// flavour), byte kernels x = x*a+b, host reads and writes, event record/wait
// across streams and synchronisations.  Each program ends with one line
// holding a digest of all its buffers, of every checksum the host took along
// the way and of every failed call; run plain and under pinfast the lines
// must be identical.
//
// The outcome must not depend on timing, so the generator keeps a model of
// pending work: each buffer remembers the streams that may still touch it;
// before a stream touches it, that stream is ordered after them (event
// record/wait or a synchronisation); before the host touches it, the host
// waits for them.  Relied upon, because the CUDA documentation ("API
// synchronization behavior") promises it: a pageable source of a 1-D copy
// to device memory, sync or async, may be reused when the call returns; a sync copy is done
// with its pageable or pinned host operand when it returns.  Everything else
// is treated as pending until a synchronisation.
//
//   equiv FIRST_SEED COUNT      run COUNT programs: "program ..." lines, a summary
//   equiv --print SEED          print the program of one seed, run nothing
#define __CUDA_API_VERSION_INTERNAL 1 // the _v2 and _ptds/_ptsz entry points by name
#include <cuda.h>
#include <cuda_runtime.h>

#include <inttypes.h>
#include <pthread.h>

#include "../samples/check.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define BUILD_NAME "per-thread default stream"
#else
#define BUILD_NAME "legacy default stream"
#endif

// ---- the program ------------------------------------------------------------
enum bkind { B_DEV, B_MANAGED, B_PAGEABLE, B_PINNED, B_REGISTERED };
static const char *bkname[] = {"device", "managed", "pageable", "pinned", "registered"};
#define IS_HOST(k) ((k) >= B_PAGEABLE)

enum { S_LEGACY, S_PT, S_BLOCK, S_NONBLOCK, NSTREAMS };
static const char *sname[] = {"legacy", "per-thread", "blocking", "non-blocking"};
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define S_RUNTIME_DEFAULT S_PT
#else
#define S_RUNTIME_DEFAULT S_LEGACY
#endif

enum api {
    R_MEMCPY, R_MEMCPY2D, D_HTOD, D_DTOH, D_MEMCPY, D_2D, // synchronous
    R_MEMCPY_ASYNC, R_MEMCPY2D_ASYNC, D_HTOD_ASYNC, D_DTOH_ASYNC, D_MEMCPY_ASYNC, D_2D_ASYNC, NAPI
};
static const char *aname[] = {"cudaMemcpy", "cudaMemcpy2D", "cuMemcpyHtoD", "cuMemcpyDtoH",
                              "cuMemcpy", "cuMemcpy2D", "cudaMemcpyAsync", "cudaMemcpy2DAsync",
                              "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyAsync", "cuMemcpy2DAsync"};
#define IS_SYNC(a) ((a) < R_MEMCPY_ASYNC)
#define IS_RUNTIME(a) ((a) == R_MEMCPY || (a) == R_MEMCPY2D || (a) == R_MEMCPY_ASYNC || (a) == R_MEMCPY2D_ASYNC)
#define IS_2D(a) ((a) == R_MEMCPY2D || (a) == D_2D || (a) == R_MEMCPY2D_ASYNC || (a) == D_2D_ASYNC)
static const char *kindname[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};

enum opk { O_COPY, O_KERNEL, O_HOST_FILL, O_HOST_SUM, O_RECORD_WAIT, O_STREAM_SYNC, O_EVENT_SYNC, O_DEV_SYNC };

struct op {
    enum opk k;
    enum api api;
    int ptds;   // driver entry point of the per-thread flavour
    int s, s2;  // stream; s2: the stream s waits for
    int as0;    // pass 0 where 0 means s for this entry point
    int kind;   // cudaMemcpyKind of a runtime copy
    int dst, src, buf;
    size_t doff, soff, off, n;          // 1-D: n bytes; 2D: n = width
    size_t h, dpitch, spitch;           // 2D
    unsigned a, b;                      // kernel
    uint64_t salt;                      // host overwrite
};

struct buf { enum bkind kind; size_t cap; int owner; size_t mis; };

#define MAXT 4
#define MAXBUF 32
#define MAXOPS 160
struct prog {
    uint64_t seed;
    int nthreads, nbufs;
    struct buf b[MAXBUF];
    int nops[MAXT];
    struct op ops[MAXT][MAXOPS];
    size_t bytes;
};

// ---- generation ---------------------------------------------------------------
struct gen {
    struct prog *p;
    int t;
    uint64_t rs;
    unsigned pend[MAXBUF]; // streams of this thread that may still touch a buffer
    size_t budget;
};

static size_t rr(struct gen *g, size_t lo, size_t hi) { return rng_range(&g->rs, lo, hi); }
static int chance(struct gen *g, int pct) { return (int)(rng_next(&g->rs) % 100) < pct; }

// generation stops ROOM short of MAXOPS, more than one step can emit
#define ROOM 16
static struct op *emit(struct gen *g, enum opk k)
{
    struct prog *p = g->p;
    if (p->nops[g->t] >= MAXOPS) {
        printf("FAIL generator: more than %d operations\n", MAXOPS);
        exit(3);
    }
    struct op *o = &p->ops[g->t][p->nops[g->t]++];
    memset(o, 0, sizeof *o);
    o->k = k;
    return o;
}

static void forget_stream(struct gen *g, int s)
{
    for (int b = 0; b < g->p->nbufs; b++)
        g->pend[b] &= ~(1u << s);
}

// the host waits until no stream touches buffer b
static void host_idle(struct gen *g, int b)
{
    while (g->pend[b]) {
        int s = __builtin_ctz(g->pend[b]);
        int how = (int)rr(g, 0, 9);
        struct op *o = emit(g, how == 0 ? O_DEV_SYNC : how <= 3 ? O_EVENT_SYNC : O_STREAM_SYNC);
        if (how == 0) {
            memset(g->pend, 0, sizeof g->pend);
            return;
        }
        o->s = s;
        forget_stream(g, s);
    }
}

// stream s is ordered after every other stream that may touch buffer b
static void order_after(struct gen *g, int s, int b)
{
    unsigned others = g->pend[b] & ~(1u << s);
    while (others) {
        int t = __builtin_ctz(others);
        others &= others - 1;
        int wait = chance(g, 80);
        struct op *o = emit(g, wait ? O_RECORD_WAIT : O_STREAM_SYNC);
        o->s = wait ? s : t;
        o->s2 = t;
        if (wait)
            g->pend[b] &= ~(1u << t);
        else
            forget_stream(g, t);
    }
}

static int pick_buf(struct gen *g, int host, int managed_ok, size_t need, int except)
{
    int cand[MAXBUF], n = 0;
    for (int b = 0; b < g->p->nbufs; b++) {
        const struct buf *B = &g->p->b[b];
        int fits = B->kind == B_MANAGED ? managed_ok : IS_HOST(B->kind) == host;
        if (B->owner == g->t && B->cap >= need && fits && b != except)
            cand[n++] = b;
    }
    return n ? cand[rr(g, 0, (size_t)n - 1)] : -1;
}

// mostly small, many around the staging thresholds and chunk sizes, a few up to 64 MiB
static size_t pick_len(struct gen *g)
{
    int c = (int)rr(g, 0, 99);
    size_t n;
    if (c < 30)
        n = (size_t)1 << rr(g, 0, 12), n += rr(g, 0, n);
    else if (c < 45)
        n = (size_t)1 << rr(g, 12, 18), n += rr(g, 0, n);
    else if (c < 82) {
        static const size_t unit[] = {256 * KiB, 512 * KiB, 2 * MiB};
        n = unit[rr(g, 0, 2)] * rr(g, 1, 4) + rr(g, 0, 2) - 1;
    } else if (c < 97)
        n = (size_t)1 << rr(g, 18, 23), n += rr(g, 0, n);
    else
        n = rr(g, 16 * MiB, 64 * MiB);
    return n > g->budget / 4 ? rr(g, 1, 4096) : n;
}

static size_t pick_off(struct gen *g, size_t cap, size_t span)
{
    size_t room = cap - span;
    if (room == 0)
        return 0;
    if (chance(g, 25) && room >= 4096)
        return 4096 * rr(g, 0, room / 4096 > 4 ? 4 : room / 4096);
    return rr(g, 0, room < 63 ? room : 63);
}

static int stream_of(const struct op *o)
{
    if (!IS_SYNC(o->api))
        return o->s;
    if (IS_RUNTIME(o->api))
        return S_RUNTIME_DEFAULT;
    return o->ptds ? S_PT : S_LEGACY;
}

// what the operands need before a copy, and leave behind after it
static void copy_model(struct gen *g, const struct op *o, int before)
{
    int s = stream_of(o);
    int bs[2] = {o->src, o->dst};
    // with managed memory on either side no host-side promise is relied upon
    int managed = g->p->b[o->src].kind == B_MANAGED || g->p->b[o->dst].kind == B_MANAGED;
    for (int side = 0; side < 2; side++) {
        int b = bs[side];
        enum bkind k = g->p->b[b].kind;
        int pageable = k == B_PAGEABLE, hostsync = IS_HOST(k);
        if (before) {
            if (pageable) // the CPU reads or writes it during the call
                host_idle(g, b);
            else
                order_after(g, s, b);
        } else {
            int to_dev = g->p->b[o->dst].kind == B_DEV;
            int done = IS_SYNC(o->api) ? hostsync : side == 0 && pageable && to_dev && !IS_2D(o->api);
            if (!done || managed)
                g->pend[b] |= 1u << s;
        }
    }
}

static void gen_copy(struct gen *g)
{
    struct op o;
    memset(&o, 0, sizeof o);
    o.k = O_COPY;
    o.api = (enum api)rr(g, 0, NAPI - 1);
    o.ptds = !IS_RUNTIME(o.api) && chance(g, 50);
    o.s = (int)rr(g, 0, NSTREAMS - 1);
    o.as0 = chance(g, 40);
    // direction: 0 H2D, 1 D2H, 2 D2D, 3 H2H
    int dir;
    switch (o.api) {
    case D_HTOD: case D_HTOD_ASYNC: dir = 0; break;
    case D_DTOH: case D_DTOH_ASYNC: dir = 1; break;
    default: dir = (int)rr(g, 0, 3); break;
    }
    int managed_ok = o.api == D_MEMCPY || o.api == D_MEMCPY_ASYNC ||
                     ((o.api == R_MEMCPY || o.api == R_MEMCPY_ASYNC) && chance(g, 50));
    size_t dspan, sspan;
    if (IS_2D(o.api)) {
        int big = chance(g, 20);
        o.n = big ? rr(g, 64 * KiB, 600 * KiB) : rr(g, 1, 3000);
        o.h = big ? rr(g, 2, 8) : rr(g, 1, 48);
        o.spitch = o.n + (chance(g, 30) ? 0 : rr(g, 1, 300));
        o.dpitch = o.n + (chance(g, 30) ? 0 : rr(g, 1, 300));
        sspan = (o.h - 1) * o.spitch + o.n;
        dspan = (o.h - 1) * o.dpitch + o.n;
    } else {
        o.n = dspan = sspan = pick_len(g);
    }
    for (int tries = 0;; tries++) {
        if (tries == 4)
            return;
        o.src = pick_buf(g, dir == 0 || dir == 3, managed_ok, sspan, -1);
        o.dst = o.src < 0 ? -1 : pick_buf(g, dir == 1 || dir == 3, managed_ok, dspan, o.src);
        if (o.dst >= 0)
            break;
        if (!IS_2D(o.api))
            o.n = dspan = sspan = o.n / 3 + 1;
    }
    o.doff = pick_off(g, g->p->b[o.dst].cap, dspan);
    o.soff = pick_off(g, g->p->b[o.src].cap, sspan);
    int managed = g->p->b[o.dst].kind == B_MANAGED || g->p->b[o.src].kind == B_MANAGED;
    static const int dirkind[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                  cudaMemcpyDeviceToDevice, cudaMemcpyHostToHost};
    o.kind = managed || chance(g, 30) ? cudaMemcpyDefault : dirkind[dir];
    size_t moved = IS_2D(o.api) ? o.n * o.h : o.n;
    g->budget -= moved < g->budget ? moved : g->budget;
    g->p->bytes += moved;
    copy_model(g, &o, 1);
    struct op *e = emit(g, O_COPY);
    *e = o;
    copy_model(g, e, 0);
}

static void gen_kernel(struct gen *g)
{
    int b = pick_buf(g, 0, 1, 1, -1);
    if (b < 0)
        return;
    int s = (int)rr(g, 0, NSTREAMS - 1);
    order_after(g, s, b);
    struct op *o = emit(g, O_KERNEL);
    o->s = s;
    o->as0 = chance(g, 40);
    o->buf = b;
    size_t cap = g->p->b[b].cap;
    o->n = rr(g, 1, cap);
    o->off = pick_off(g, cap, o->n);
    o->a = (unsigned)rr(g, 0, 255) | 1;
    o->b = (unsigned)rr(g, 0, 255);
    g->pend[b] |= 1u << s;
}

static void gen_host(struct gen *g, enum opk k)
{
    int b = pick_buf(g, 1, 1, 1, -1);
    if (b < 0)
        return;
    size_t cap = g->p->b[b].cap;
    host_idle(g, b);
    struct op *o = emit(g, k);
    o->buf = b;
    o->n = rr(g, 1, cap < 4 * MiB ? cap : 4 * MiB);
    o->off = pick_off(g, cap, o->n);
    o->salt = rng_next(&g->rs);
}

static void add_buf(struct prog *p, struct gen *g, enum bkind k, size_t cap, int owner)
{
    if (p->nbufs < MAXBUF)
        p->b[p->nbufs++] = (struct buf){k, cap, owner, rr(g, 1, 63)};
}

static size_t pick_cap(struct gen *g, enum bkind k)
{
    static const size_t caps[] = {64 * KiB, 1 * MiB, 3 * MiB, 9 * MiB};
    return caps[rr(g, 0, k == B_MANAGED ? 1 : 3)] + rr(g, 0, 255); // managed: small
}

static void generate(struct prog *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->seed = seed;
    struct gen g0 = {p, 0, seed * 0x2545F4914F6CDD1Dull + 1, {0}, 0};
    p->nthreads = (int)rr(&g0, 1, MAXT);
    int huge = chance(&g0, 15);
    for (int t = 0; t < p->nthreads; t++) {
        int nh = (int)rr(&g0, 3, 5), nd = (int)rr(&g0, 2, 3);
        add_buf(p, &g0, B_PAGEABLE, pick_cap(&g0, B_PAGEABLE), t); // one of each side at least
        add_buf(p, &g0, B_DEV, pick_cap(&g0, B_DEV), t);
        for (int i = 1; i < nh; i++) {
            enum bkind k = (enum bkind)rr(&g0, B_MANAGED, B_REGISTERED);
            add_buf(p, &g0, k, pick_cap(&g0, k), t);
        }
        for (int i = 1; i < nd; i++)
            add_buf(p, &g0, B_DEV, pick_cap(&g0, B_DEV), t);
        if (huge && t == 0) {
            add_buf(p, &g0, B_PAGEABLE, 64 * MiB + 192, t);
            add_buf(p, &g0, B_DEV, 64 * MiB + 192, t);
        }
    }
    for (int t = 0; t < p->nthreads; t++) {
        struct gen g = {p, t, rng_next(&g0.rs), {0}, 160 * MiB};
        int n = (int)rr(&g, 15, 45);
        for (int i = 0; i < n && p->nops[t] < MAXOPS - ROOM; i++) {
            int c = (int)rr(&g, 0, 99);
            if (c < 60)
                gen_copy(&g);
            else if (c < 72)
                gen_kernel(&g);
            else if (c < 78)
                gen_host(&g, O_HOST_SUM);
            else if (c < 84)
                gen_host(&g, O_HOST_FILL);
            else if (c < 90) {
                struct op *o = emit(&g, O_STREAM_SYNC);
                if (o)
                    forget_stream(&g, o->s = (int)rr(&g, 0, NSTREAMS - 1));
            } else if (c < 92) {
                if (emit(&g, O_DEV_SYNC))
                    memset(g.pend, 0, sizeof g.pend);
            } else {
                struct op *o = emit(&g, O_RECORD_WAIT);
                if (o)
                    o->s = (int)rr(&g, 0, NSTREAMS - 1), o->s2 = (int)rr(&g, 0, NSTREAMS - 1);
            }
        }
    }
}

static void describe(const struct prog *p)
{
    printf("program %" PRIu64 " (%s build): %d threads\n", p->seed, BUILD_NAME, p->nthreads);
    for (int b = 0; b < p->nbufs; b++)
        printf("  b%d: %s, %zu bytes, thread %d%s\n", b, bkname[p->b[b].kind], p->b[b].cap, p->b[b].owner,
               p->b[b].kind == B_PAGEABLE ? " (odd base)" : "");
    for (int t = 0; t < p->nthreads; t++)
        for (int i = 0; i < p->nops[t]; i++) {
            const struct op *o = &p->ops[t][i];
            printf("  t%d #%-3d ", t, i);
            switch (o->k) {
            case O_COPY:
                printf("%s%s%s%s on %s%s: b%d+%zu <- b%d+%zu n=%zu", aname[o->api], o->ptds ? "[ptds]" : "",
                       IS_RUNTIME(o->api) ? " " : "", IS_RUNTIME(o->api) ? kindname[o->kind] : "",
                       sname[stream_of(o)], o->as0 && !IS_SYNC(o->api) ? " (as 0 where it means that)" : "",
                       o->dst, o->doff, o->src, o->soff, o->n);
                if (IS_2D(o->api))
                    printf(" h=%zu dpitch=%zu spitch=%zu", o->h, o->dpitch, o->spitch);
                break;
            case O_KERNEL:
                printf("kernel x=x*%u+%u on %s: b%d+%zu n=%zu", o->a, o->b, sname[o->s], o->buf, o->off, o->n);
                break;
            case O_HOST_FILL: printf("host overwrites b%d+%zu n=%zu", o->buf, o->off, o->n); break;
            case O_HOST_SUM: printf("host checksums b%d+%zu n=%zu", o->buf, o->off, o->n); break;
            case O_RECORD_WAIT: printf("event recorded on %s, waited for on %s", sname[o->s2], sname[o->s]); break;
            case O_STREAM_SYNC: printf("cudaStreamSynchronize(%s)", sname[o->s]); break;
            case O_EVENT_SYNC: printf("event recorded on %s, cudaEventSynchronize", sname[o->s]); break;
            case O_DEV_SYNC: printf("cudaDeviceSynchronize"); break;
            }
            putchar('\n');
        }
}

// ---- running a program ------------------------------------------------------------
__global__ void axpb(unsigned char *p, size_t n, unsigned a, unsigned b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned char)(p[i] * a + b);
}

__global__ void pattern(unsigned char *p, size_t n, uint64_t salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = (salt + (i >> 3)) * 0x9E3779B97F4A7C15ull;
        p[i] = (unsigned char)((x ^ (x >> 29)) >> (8 * (i & 7)));
    }
}

static unsigned grid(size_t n) { return (unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024); }

static struct prog P;
static unsigned char *base[MAXBUF]; // what the program uses (pageable: at an odd offset)
static void *raw[MAXBUF];

struct tstate {
    int t;
    cudaStream_t st[NSTREAMS];
    cudaEvent_t ev;
    uint64_t digest;  // checksums and failed calls, in program order
    long errors;
};

// the handle of symbolic stream s, or 0 where the entry point reads 0 as s
static cudaStream_t handle(const struct tstate *ts, const struct op *o, int zero_means)
{
    if (o->as0 && o->s == zero_means)
        return 0;
    return ts->st[o->s];
}

static void note(struct tstate *ts, int t, int i, int rc)
{
    ts->digest = hash_mix(ts->digest ^ ((uint64_t)(unsigned)rc << 32 | (uint64_t)i));
    if (rc) {
        ts->errors++;
        fprintf(stderr, "program %" PRIu64 " t%d #%d returned %d\n", P.seed, t, i, rc);
    }
}

static int run_copy(struct tstate *ts, const struct op *o)
{
    unsigned char *d = base[o->dst] + o->doff, *s = base[o->src] + o->soff;
    CUdeviceptr dd = (CUdeviceptr)d, ds = (CUdeviceptr)s;
    cudaMemcpyKind kind = (cudaMemcpyKind)o->kind;
    cudaStream_t rs = handle(ts, o, S_RUNTIME_DEFAULT);
    CUstream cs = (CUstream)handle(ts, o, o->ptds ? S_PT : S_LEGACY);
    CUDA_MEMCPY2D m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = P.b[o->src].kind == B_DEV ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    m.dstMemoryType = P.b[o->dst].kind == B_DEV ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    m.srcHost = s, m.srcDevice = ds, m.srcPitch = o->spitch;
    m.dstHost = d, m.dstDevice = dd, m.dstPitch = o->dpitch;
    m.WidthInBytes = o->n, m.Height = o->h;
    switch (o->api) {
    case R_MEMCPY: return cudaMemcpy(d, s, o->n, kind);
    case R_MEMCPY_ASYNC: return cudaMemcpyAsync(d, s, o->n, kind, rs);
    case R_MEMCPY2D: return cudaMemcpy2D(d, o->dpitch, s, o->spitch, o->n, o->h, kind);
    case R_MEMCPY2D_ASYNC: return cudaMemcpy2DAsync(d, o->dpitch, s, o->spitch, o->n, o->h, kind, rs);
    case D_HTOD: return o->ptds ? cuMemcpyHtoD_v2_ptds(dd, s, o->n) : cuMemcpyHtoD_v2(dd, s, o->n);
    case D_DTOH: return o->ptds ? cuMemcpyDtoH_v2_ptds(d, ds, o->n) : cuMemcpyDtoH_v2(d, ds, o->n);
    case D_MEMCPY: return o->ptds ? cuMemcpy_ptds(dd, ds, o->n) : cuMemcpy(dd, ds, o->n);
    case D_2D: return o->ptds ? cuMemcpy2D_v2_ptds(&m) : cuMemcpy2D_v2(&m);
    case D_HTOD_ASYNC:
        return o->ptds ? cuMemcpyHtoDAsync_v2_ptsz(dd, s, o->n, cs) : cuMemcpyHtoDAsync_v2(dd, s, o->n, cs);
    case D_DTOH_ASYNC:
        return o->ptds ? cuMemcpyDtoHAsync_v2_ptsz(d, ds, o->n, cs) : cuMemcpyDtoHAsync_v2(d, ds, o->n, cs);
    case D_MEMCPY_ASYNC:
        return o->ptds ? cuMemcpyAsync_ptsz(dd, ds, o->n, cs) : cuMemcpyAsync(dd, ds, o->n, cs);
    case D_2D_ASYNC: return o->ptds ? cuMemcpy2DAsync_v2_ptsz(&m, cs) : cuMemcpy2DAsync_v2(&m, cs);
    case NAPI: break;
    }
    return -1;
}

static int run_op(struct tstate *ts, const struct op *o)
{
    switch (o->k) {
    case O_COPY: return run_copy(ts, o);
    case O_KERNEL:
        axpb<<<grid(o->n), 256, 0, handle(ts, o, S_RUNTIME_DEFAULT)>>>(base[o->buf] + o->off, o->n, o->a, o->b);
        return cudaGetLastError();
    case O_HOST_FILL: {
        uint64_t s = o->salt;
        rng_fill(&s, base[o->buf] + o->off, o->n);
        return 0;
    }
    case O_HOST_SUM:
        ts->digest = hash_bytes(ts->digest, base[o->buf] + o->off, o->n);
        return 0;
    case O_RECORD_WAIT: {
        int rc = cudaEventRecord(ts->ev, ts->st[o->s2]);
        return rc ? rc : cudaStreamWaitEvent(ts->st[o->s], ts->ev, 0);
    }
    case O_STREAM_SYNC: return cudaStreamSynchronize(ts->st[o->s]);
    case O_EVENT_SYNC: {
        int rc = cudaEventRecord(ts->ev, ts->st[o->s]);
        return rc ? rc : cudaEventSynchronize(ts->ev);
    }
    case O_DEV_SYNC: return cudaDeviceSynchronize();
    }
    return -1;
}

static void *thread_main(void *arg)
{
    struct tstate *ts = (struct tstate *)arg;
    // the runtime makes the primary context current in this thread; the
    // driver-API copies of the program need it
    CK(cudaFree(0));
    for (int i = 0; i < P.nops[ts->t]; i++)
        note(ts, ts->t, i, run_op(ts, &P.ops[ts->t][i]));
    for (int s = 0; s < NSTREAMS; s++) // the thread's work is done when it ends
        note(ts, ts->t, -1, cudaStreamSynchronize(ts->st[s]));
    return NULL;
}

static void alloc_bufs(void)
{
    uint64_t fillrs = P.seed ^ 0xfeedface;
    for (int b = 0; b < P.nbufs; b++) {
        size_t cap = P.b[b].cap;
        switch (P.b[b].kind) {
        case B_DEV: CK(cudaMalloc(&raw[b], cap)); break;
        case B_MANAGED: CK(cudaMallocManaged(&raw[b], cap)); break;
        case B_PINNED: CK(cudaMallocHost(&raw[b], cap)); break;
        case B_PAGEABLE: raw[b] = malloc(cap + P.b[b].mis); break;
        case B_REGISTERED:
            if (posix_memalign(&raw[b], 4096, cap))
                raw[b] = NULL;
            break;
        }
        if (!raw[b]) {
            printf("FAIL out of host memory\n");
            exit(3);
        }
        base[b] = (unsigned char *)raw[b] + (P.b[b].kind == B_PAGEABLE ? P.b[b].mis : 0);
        if (P.b[b].kind == B_DEV)
            pattern<<<grid(cap), 256>>>(base[b], cap, rng_next(&fillrs));
        else
            rng_fill(&fillrs, base[b], cap);
        if (P.b[b].kind == B_REGISTERED)
            CK(cudaHostRegister(raw[b], cap, cudaHostRegisterDefault));
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
}

// all buffers, in order, device ones read back through pinned memory
static uint64_t digest_and_free(uint64_t h, unsigned char *scratch)
{
    for (int b = 0; b < P.nbufs; b++) {
        unsigned char *p = base[b];
        if (P.b[b].kind == B_DEV) {
            CK(cudaMemcpy(scratch, p, P.b[b].cap, cudaMemcpyDeviceToHost));
            p = scratch;
        }
        h = hash_bytes(h, p, P.b[b].cap);
        switch (P.b[b].kind) {
        case B_DEV: case B_MANAGED: CK(cudaFree(raw[b])); break;
        case B_PINNED: CK(cudaFreeHost(raw[b])); break;
        case B_REGISTERED: CK(cudaHostUnregister(raw[b])); free(raw[b]); break;
        case B_PAGEABLE: free(raw[b]); break;
        }
    }
    return h;
}

static void streams_of(struct tstate *ts)
{
    ts->st[S_LEGACY] = cudaStreamLegacy;
    ts->st[S_PT] = cudaStreamPerThread;
    CK(cudaStreamCreateWithFlags(&ts->st[S_BLOCK], cudaStreamDefault));
    CK(cudaStreamCreateWithFlags(&ts->st[S_NONBLOCK], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ts->ev, cudaEventDisableTiming));
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 3 && !strcmp(argv[1], "--print")) {
        generate(&P, strtoull(argv[2], NULL, 0));
        describe(&P);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: equiv FIRST_SEED COUNT | equiv --print SEED\n");
        return 64;
    }
    uint64_t first = strtoull(argv[1], NULL, 0);
    long count = strtol(argv[2], NULL, 0), ops = 0, errors = 0;
    unsigned char *scratch;
    CK(cudaMallocHost(&scratch, 64 * MiB + 192));
    struct tstate ts[MAXT];
    for (int t = 0; t < MAXT; t++) {
        ts[t].t = t;
        streams_of(&ts[t]);
    }
    double bytes = 0;
    for (long i = 0; i < count; i++) {
        generate(&P, first + (uint64_t)i);
        alloc_bufs();
        pthread_t th[MAXT];
        for (int t = 0; t < P.nthreads; t++) {
            ts[t].digest = P.seed;
            ts[t].errors = 0;
            if (pthread_create(&th[t], NULL, thread_main, &ts[t])) {
                printf("FAIL pthread_create\n");
                return 3;
            }
        }
        uint64_t h = P.seed;
        long perr = 0, pops = 0;
        for (int t = 0; t < P.nthreads; t++) {
            pthread_join(th[t], NULL);
            h = hash_mix(h ^ ts[t].digest);
            perr += ts[t].errors;
            pops += P.nops[t];
        }
        CK(cudaDeviceSynchronize());
        h = digest_and_free(h, scratch);
        printf("program %" PRIu64 " threads %d ops %ld MiB %.1f errors %ld digest %016" PRIx64 "\n", P.seed,
               P.nthreads, pops, P.bytes / (double)MiB, perr, h);
        ops += pops;
        errors += perr;
        bytes += (double)P.bytes;
    }
    printf("equiv (%s build): %ld programs, %ld operations, %.0f MiB copied, %ld failed calls\n", BUILD_NAME,
           count, ops, bytes / MiB, errors);
    return errors != 0;
}
