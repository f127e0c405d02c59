/* test_fuzz: equivalence fuzzing.  A seed makes a random but well-defined
 * CUDA program: several threads, each with its own streams (legacy,
 * per-thread, blocking, non-blocking, priority) and buffers (device, managed,
 * pageable, pinned, registered), doing copies through every wrapped API in
 * both stream flavours, host functions standing in for kernels (checksum or
 * overwrite a host buffer), host-side reads and writes, event record/wait,
 * stream/event/context synchronisation, and a shared device + host buffer
 * pair handed from thread to thread through an event.  The program runs in a
 * child without pinfast and in a child with it (fork + exec of this binary);
 * each child writes a digest of every final buffer, of every checksum taken
 * during the run and of every non-success return code.  The digests must be
 * identical.
 *
 * "Well-defined" is kept by a model of pending work at generation time: each
 * buffer remembers the streams that may still touch it; before an operation
 * on stream S touches it, the generator orders S after them (event
 * record/wait or a synchronisation), and before the host touches it, it waits
 * for them.  The documented host-side semantics are relied upon on purpose
 * (they are part of the contract): a pageable source of a 1-D copy may be
 * reused as soon as the call returns; a pageable destination of a 1-D copy
 * holds the data when the call returns; a plain (sync) H2D/D2H from or to
 * pageable/pinned memory is complete on the host side when it returns.
 *
 * Environment: PFT_FUZZ_SEED (first seed, default 1; "time" for a fresh
 * one), PFT_FUZZ_PROGRAMS (default 30), PFT_FUZZ_VERBOSE=1 (print every
 * program).  A failure prints the seed, the pinfast settings and the program;
 * rerun it with PFT_FUZZ_SEED=<seed> PFT_FUZZ_PROGRAMS=1.
 * Internal: test_fuzz child <seed> <digest file> runs one program. */
#define _GNU_SOURCE
#include "t.h"
#include "spawn.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ---- deterministic randomness (independent of t_seed) ----------------------- */
static uint64_t rs;
static uint64_t rnd(void)
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static size_t rr(size_t lo, size_t hi) { return lo + (size_t)(rnd() % (uint64_t)(hi - lo + 1)); }
static int chance(int pct) { return (int)(rnd() % 100) < pct; }

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static void pat_fill(unsigned char *p, size_t n, uint64_t salt)
{
    uint64_t k = mix(salt + 0x1234567);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = mix(k + i);
        memcpy(p + i, &v, 8);
    }
    for (uint64_t v = mix(k + i); i < n; i++)
        p[i] = (unsigned char)(v >> (8 * (i & 7)));
}

static uint64_t hash(const unsigned char *p, size_t n)
{
    uint64_t h = 0x84222325cbf29ce4ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        h = mix(h ^ v) + i;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return mix(h);
}

/* ---- the program ------------------------------------------------------------- */
enum bkind { B_DEV, B_MANAGED, B_PAGEABLE, B_PINNED, B_ALLOCHOST, B_REGISTERED, B_NKINDS };
static const char *bkname[] = { "dev", "managed", "pageable", "pinned", "allochost", "registered" };
#define IS_HOST(k) ((k) != B_DEV)             /* host-addressable */

enum { S_LEGACY, S_PT, S_BLOCK, S_NONBLOCK, S_PRIO, NSTREAMS };
static const char *sname[] = { "legacy", "per-thread", "blocking", "non-blocking", "priority" };

enum api {
    A_HTOD, A_DTOH, A_DTOD, A_MEMCPY, A_PEER, A_2D, A_2DU, A_3D,       /* sync */
    A_HTOD_ASYNC, A_DTOH_ASYNC, A_DTOD_ASYNC, A_MEMCPY_ASYNC, A_PEER_ASYNC,
    A_2D_ASYNC, A_3D_ASYNC, A_BATCH, A_BATCH12, A_BATCH3D, A_BATCH3D12, A_NAPI
};
static const char *aname[] = {
    "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD", "cuMemcpy", "cuMemcpyPeer", "cuMemcpy2D",
    "cuMemcpy2DUnaligned", "cuMemcpy3D", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
    "cuMemcpyDtoDAsync", "cuMemcpyAsync", "cuMemcpyPeerAsync", "cuMemcpy2DAsync",
    "cuMemcpy3DAsync", "cuMemcpyBatchAsync(13.0)", "cuMemcpyBatchAsync(12.8)",
    "cuMemcpy3DBatchAsync(13.0)", "cuMemcpy3DBatchAsync(12.8)",
};
#define IS_SYNC(a) ((a) <= A_3D)

enum opk {
    O_COPY, O_FN_SUM, O_FN_FILL, O_FN_SLEEP, O_HOST_FILL, O_HOST_SUM, O_RECORD_WAIT,
    O_STREAM_SYNC, O_EVENT_SYNC, O_CTX_SYNC, O_ACQUIRE, O_RELEASE
};

#define MAXSEG 3
struct seg { int dst, src; size_t doff, soff, len; };
struct op {
    enum opk k;
    enum api api;
    int ptds;            /* per-thread flavour of the entry point */
    int s, s2;           /* symbolic streams (s2: what s waits for / syncs) */
    int null_handle;     /* pass 0 for s where it means s in this flavour */
    int nseg;
    struct seg g[MAXSEG];
    size_t W, H, Dd, dpitch, spitch, dheight, sheight;    /* 2D/3D; 1-D: W = len */
    int buf;             /* host ops */
    size_t off, n;
    unsigned usec;
    int log;             /* checksum slot */
    int turn;
    uint64_t salt;
};

struct buf { enum bkind kind; size_t cap; int owner; /* thread, or -1: shared */ size_t mis; };

#define MAXT 4
#define MAXBUF 40
#define MAXOPS 400
#define MAXTURNS 8
struct prog {
    uint64_t seed;
    int nthreads, nbufs, nturns;
    struct buf b[MAXBUF];
    int turn_owner[MAXTURNS];
    int nops[MAXT];
    struct op ops[MAXT][MAXOPS];
    int nlogs[MAXT];
    int path;            /* DRV_GPA / DRV_DIRECT / DRV_DLSYM */
    int config;          /* pinfast settings, see configs[] */
    int delay_us;        /* FAKECUDA_DELAY_US */
    size_t bytes;
};

static const char *const configs[][5] = {
    { "PINFAST_MIN_SIZE=0", NULL },
    { "PINFAST_MIN_SIZE=0", "PINFAST_CHUNK=64K", "PINFAST_STAGING=256K", NULL },
    { NULL },                                             /* the defaults */
    { "PINFAST_MIN_SIZE=0", "PINFAST_THREADS=1", NULL },
    { "PINFAST_MIN_SIZE=0", "PINFAST_STAGING=100K", NULL },   /* one slot */
    { "PINFAST_MIN_SIZE=0", "PINFAST_COPY_H2D=memcpy", "PINFAST_COPY_D2H=stream", "PINFAST_THREADS=3", NULL },
};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])

/* ---- generation --------------------------------------------------------------- */
struct gen {
    struct prog *p;
    int t;
    unsigned pend[MAXBUF];     /* streams of this thread that may still touch a buffer */
    int own_shared;
    size_t budget;
};

static struct op *emit(struct gen *g, enum opk k)
{
    struct prog *p = g->p;
    if (p->nops[g->t] >= MAXOPS)
        return NULL;
    struct op *o = &p->ops[g->t][p->nops[g->t]++];
    memset(o, 0, sizeof *o);
    o->k = k;
    o->ptds = chance(50);
    o->log = -1;
    return o;
}

static int d0(int ptds) { return ptds ? S_PT : S_LEGACY; }

static void forget_stream(struct gen *g, int s)
{
    for (int b = 0; b < g->p->nbufs; b++)
        g->pend[b] &= ~(1u << s);
}

/* the host waits until no stream touches buffer b */
static void host_idle(struct gen *g, int b)
{
    while (g->pend[b]) {
        int s = __builtin_ctz(g->pend[b]);
        int how = (int)rr(0, 9);
        if (how == 0) {
            if (emit(g, O_CTX_SYNC))
                memset(g->pend, 0, sizeof g->pend);
        } else if (how <= 3) {
            struct op *o = emit(g, O_EVENT_SYNC);
            if (o)
                o->s = s;
            forget_stream(g, s);
        } else {
            struct op *o = emit(g, O_STREAM_SYNC);
            if (o)
                o->s = s;
            forget_stream(g, s);
        }
        if (g->p->nops[g->t] >= MAXOPS)   /* out of room: a context sync does it all */
            memset(g->pend, 0, sizeof g->pend);
    }
}

/* stream s is ordered after every stream that may touch buffer b */
static void order_after(struct gen *g, int s, int b)
{
    unsigned others = g->pend[b] & ~(1u << s);
    while (others) {
        int t = __builtin_ctz(others);
        others &= others - 1;
        if (chance(80)) {
            struct op *o = emit(g, O_RECORD_WAIT);
            if (o) {
                o->s = s;
                o->s2 = t;
            }
            g->pend[b] &= ~(1u << t);
        } else {
            struct op *o = emit(g, O_STREAM_SYNC);
            if (o)
                o->s = t;
            forget_stream(g, t);
        }
    }
}

/* usable buffers (own, and shared while held) of a side */
static int pick_buf(struct gen *g, int want_dev, size_t need)
{
    int cand[MAXBUF], n = 0;
    for (int b = 0; b < g->p->nbufs; b++) {
        const struct buf *B = &g->p->b[b];
        if (B->owner != g->t && !(B->owner < 0 && g->own_shared))
            continue;
        if (B->cap < need)
            continue;
        if (want_dev == 1 && !(B->kind == B_DEV || B->kind == B_MANAGED))
            continue;
        if (want_dev == 0 && !IS_HOST(B->kind))
            continue;
        cand[n++] = b;
    }
    return n ? cand[rr(0, (size_t)n - 1)] : -1;
}

/* sizes: mostly small, many around the chunk boundaries, a few large */
static size_t pick_len(struct gen *g)
{
    int c = (int)rr(0, 99);
    size_t n;
    if (c < 30)
        n = (size_t)1 << rr(0, 12), n += rr(0, n);
    else if (c < 45)
        n = (size_t)1 << rr(12, 18), n += rr(0, n);
    else if (c < 82) {
        static const size_t unit[] = { 256 * KiB, 512 * KiB, 2 * MiB };
        n = unit[rr(0, 2)] * rr(1, 4);
        n = n + rr(0, 2) - 1;
    } else if (c < 97)
        n = (size_t)1 << rr(18, 23), n += rr(0, n);
    else
        n = rr(16 * MiB, 64 * MiB);
    if (n > g->budget / 4)
        n = rr(1, 4096);
    return n;
}

static size_t pick_off(size_t cap, size_t span)
{
    size_t room = cap - span;
    if (room == 0)
        return 0;
    if (chance(25) && room >= 4096)
        return 4096 * rr(0, room / 4096 > 4 ? 4 : room / 4096);
    return rr(0, room < 63 ? room : 63);
}

/* both operands of one copy; dirs: 0 H2D, 1 D2H, 2 D2D, 3 H2H */
static int pick_pair(struct gen *g, int dir, size_t span_d, size_t span_s, struct seg *sg, int *used, int nused)
{
    for (int tries = 0; tries < 20; tries++) {
        int d = pick_buf(g, dir == 1 || dir == 3 ? 0 : 1, span_d);
        int s = pick_buf(g, dir == 0 || dir == 3 ? 0 : 1, span_s);
        if (d < 0 || s < 0 || d == s)
            continue;
        int clash = 0;
        for (int i = 0; i < nused; i++)
            clash |= used[i] == d || used[i] == s;
        if (clash)
            continue;
        sg->dst = d;
        sg->src = s;
        sg->doff = pick_off(g->p->b[d].cap, span_d);
        sg->soff = pick_off(g->p->b[s].cap, span_s);
        return 0;
    }
    return -1;
}

static int pick_stream(int ptds, int allow_legacy)
{
    (void)ptds;
    for (;;) {
        int s = (int)rr(0, NSTREAMS - 1);
        if (s != S_LEGACY || allow_legacy)
            return s;
    }
}

/* PINFAST_ASYNC_D2H=1 in both children: the program is made for its semantics */
static int async_d2h(void)
{
    const char *v = getenv("PINFAST_ASYNC_D2H");
    return v && !strcmp(v, "1");
}

/* what a copy's operands need before it, and leave behind after it */
static void copy_model(struct gen *g, struct op *o, int before)
{
    int sync = IS_SYNC(o->api);
    int s = sync ? d0(o->ptds) : o->s;
    int one_d = o->api == A_HTOD || o->api == A_DTOH || o->api == A_MEMCPY ||
                o->api == A_HTOD_ASYNC || o->api == A_DTOH_ASYNC || o->api == A_MEMCPY_ASYNC;
    int d2d = o->api == A_DTOD || o->api == A_PEER;
    for (int i = 0; i < o->nseg; i++) {
        int bs[2] = { o->g[i].src, o->g[i].dst };
        for (int side = 0; side < 2; side++) {
            int b = bs[side];
            enum bkind k = g->p->b[b].kind;
            int pageable = k == B_PAGEABLE;
            int hostsync = k == B_PAGEABLE || k == B_PINNED || k == B_ALLOCHOST || k == B_REGISTERED;
            if (before) {
                /* an async copy reads a pageable source when it is called */
                if (side == 0 && pageable && !sync)
                    host_idle(g, b);
                else
                    order_after(g, s, b);
            } else {
                int done;
                if (sync)
                    done = hostsync && !d2d;
                else /* consumed / in place at return; with PINFAST_ASYNC_D2H=1 (docs/options.md) an
                      * asynchronous D2H lands on its stream, and the program waits for it */
                    done = one_d && pageable && !(side == 1 && async_d2h());
                if (!done)
                    g->pend[b] |= 1u << s;
            }
        }
    }
}

static void gen_copy(struct gen *g)
{
    struct op tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.k = O_COPY;
    tmp.log = -1;
    tmp.ptds = chance(50);
    tmp.api = (enum api)rr(0, A_NAPI - 1);
    tmp.salt = rnd();
    int batch = tmp.api >= A_BATCH;
    tmp.s = IS_SYNC(tmp.api) ? d0(tmp.ptds) : pick_stream(tmp.ptds, !batch);
    tmp.null_handle = chance(40) && ((tmp.s == S_LEGACY && !tmp.ptds) || (tmp.s == S_PT && tmp.ptds));
    int used[2 * MAXSEG], nused = 0;
    switch (tmp.api) {
    case A_2D: case A_2DU: case A_2D_ASYNC: case A_3D: case A_3D_ASYNC: {
        int three = tmp.api == A_3D || tmp.api == A_3D_ASYNC;
        int big = chance(20);
        tmp.W = big ? rr(64 * KiB, 600 * KiB) : rr(1, 3000);
        tmp.H = big ? rr(2, 8) : rr(1, 48);
        tmp.Dd = three ? rr(1, 6) : 1;
        tmp.spitch = tmp.W + (chance(30) ? 0 : rr(1, 300));
        tmp.dpitch = tmp.W + (chance(30) ? 0 : rr(1, 300));
        tmp.sheight = tmp.H + (three && chance(50) ? rr(1, 3) : 0);
        tmp.dheight = tmp.H + (three && chance(50) ? rr(1, 3) : 0);
        size_t sspan = ((tmp.Dd - 1) * tmp.sheight + tmp.H - 1) * tmp.spitch + tmp.W;
        size_t dspan = ((tmp.Dd - 1) * tmp.dheight + tmp.H - 1) * tmp.dpitch + tmp.W;
        tmp.nseg = 1;
        if (pick_pair(g, (int)rr(0, 2), dspan, sspan, &tmp.g[0], used, 0))
            return;
        tmp.g[0].len = tmp.W * tmp.H * tmp.Dd;
        break;
    }
    case A_BATCH: case A_BATCH12: case A_BATCH3D: case A_BATCH3D12: {
        int three = tmp.api >= A_BATCH3D;
        tmp.nseg = (int)rr(1, three ? 2 : MAXSEG);
        if (three) {
            tmp.W = rr(1, 4000);
            tmp.H = rr(1, 20);
            tmp.Dd = rr(1, 4);
        }
        for (int i = 0; i < tmp.nseg; i++) {
            size_t len = three ? tmp.W * tmp.H * tmp.Dd : pick_len(g);
            if (!three && len > 16 * MiB)
                len = rr(1, 16 * MiB);
            int dir = (int)rr(0, 2);
            if (pick_pair(g, dir, len, len, &tmp.g[i], used, nused)) {
                tmp.nseg = i;
                break;
            }
            tmp.g[i].len = len;
            used[nused++] = tmp.g[i].dst;
            used[nused++] = tmp.g[i].src;
        }
        if (tmp.nseg == 0)
            return;
        break;
    }
    default: {
        int dir;
        switch (tmp.api) {
        case A_HTOD: case A_HTOD_ASYNC: dir = 0; break;
        case A_DTOH: case A_DTOH_ASYNC: dir = 1; break;
        case A_DTOD: case A_DTOD_ASYNC: case A_PEER: case A_PEER_ASYNC: dir = 2; break;
        default: dir = (int)rr(0, 3); break;
        }
        size_t len = pick_len(g);
        tmp.nseg = 1;
        int ok = 0;
        for (int tries = 0; tries < 4 && !ok; tries++, len = len / 3 + 1)
            ok = pick_pair(g, dir, len, len, &tmp.g[0], used, 0) == 0;
        if (!ok)
            return;
        tmp.g[0].len = len;
        tmp.W = len;
        break;
    }
    }
    for (int i = 0; i < tmp.nseg; i++)
        g->budget -= tmp.g[i].len < g->budget ? tmp.g[i].len : g->budget;
    copy_model(g, &tmp, 1);
    struct op *o = emit(g, O_COPY);
    if (!o)
        return;
    *o = tmp;
    copy_model(g, o, 0);
}

static void gen_hostfn(struct gen *g, enum opk k)
{
    int b = pick_buf(g, 0, 1);
    if (b < 0)
        return;
    int s = pick_stream(0, 1);
    size_t cap = g->p->b[b].cap;
    size_t n = rr(1, cap < 3 * MiB ? cap : 3 * MiB);
    order_after(g, s, b);
    struct op *o = emit(g, k);
    if (!o)
        return;
    o->s = s;
    o->null_handle = chance(40) && ((s == S_LEGACY && !o->ptds) || (s == S_PT && o->ptds));
    o->buf = b;
    o->n = n;
    o->off = pick_off(cap, n);
    o->salt = rnd();
    if (k == O_FN_SUM || k == O_HOST_SUM)
        o->log = g->p->nlogs[g->t]++;
    g->pend[b] |= 1u << s;
}

static void gen_host(struct gen *g, enum opk k)
{
    int b = pick_buf(g, 0, 1);
    if (b < 0)
        return;
    size_t cap = g->p->b[b].cap;
    size_t n = rr(1, cap < 4 * MiB ? cap : 4 * MiB);
    host_idle(g, b);
    struct op *o = emit(g, k);
    if (!o)
        return;
    o->buf = b;
    o->n = n;
    o->off = pick_off(cap, n);
    o->salt = rnd();
    if (k == O_HOST_SUM)
        o->log = g->p->nlogs[g->t]++;
}

/* the shared pair changes hands: join every stream that touched it into one,
 * record the hand-over event there */
static void gen_release(struct gen *g, int turn)
{
    int r = pick_stream(0, 1);
    for (int b = 0; b < g->p->nbufs; b++)
        if (g->p->b[b].owner < 0)
            order_after(g, r, b);
    struct op *o = emit(g, O_RELEASE);
    if (o) {
        o->s = r;
        o->turn = turn;
    }
    for (int b = 0; b < g->p->nbufs; b++)
        if (g->p->b[b].owner < 0)
            g->pend[b] = 0;
    g->own_shared = 0;
}

static void gen_acquire(struct gen *g, int turn)
{
    int s = pick_stream(0, 1);
    struct op *o = emit(g, O_ACQUIRE);
    if (o) {
        o->s = s;
        o->turn = turn;
    }
    for (int b = 0; b < g->p->nbufs; b++)
        if (g->p->b[b].owner < 0)
            g->pend[b] = 1u << s;
    g->own_shared = 1;
}

static void add_buf(struct prog *p, enum bkind k, size_t cap, int owner)
{
    if (p->nbufs == MAXBUF)
        return;
    p->b[p->nbufs++] = (struct buf){ k, cap, owner, rr(0, 63) };
}

static size_t pick_cap(int huge)
{
    static const size_t caps[] = { 64 * KiB, 1 * MiB, 3 * MiB, 9 * MiB };
    if (huge)
        return 64 * MiB + 192;
    return caps[rr(0, 3)] + rr(0, 255);
}

static void generate(struct prog *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    rs = seed;
    p->seed = seed;
    p->nthreads = (int)rr(1, MAXT);
    p->path = (int)rr(0, 2);
    p->config = (int)rr(0, NCONFIGS - 1);
    static const int delays[] = { 0, 50, 200 };
    p->delay_us = delays[rr(0, 2)];
    int huge = chance(15);
    for (int t = 0; t < p->nthreads; t++) {
        int nh = (int)rr(3, 5), nd = (int)rr(2, 4);
        add_buf(p, B_PAGEABLE, pick_cap(0), t);        /* every thread has one of each side */
        add_buf(p, B_DEV, pick_cap(0), t);
        for (int i = 1; i < nh; i++)
            add_buf(p, (enum bkind)rr(B_MANAGED, B_REGISTERED), pick_cap(0), t);
        for (int i = 1; i < nd; i++)
            add_buf(p, chance(80) ? B_DEV : B_MANAGED, pick_cap(0), t);
        if (huge && t == 0) {
            add_buf(p, B_PAGEABLE, pick_cap(1), t);
            add_buf(p, B_DEV, pick_cap(1), t);
        }
    }
    add_buf(p, B_DEV, pick_cap(0), -1);                 /* the shared pair */
    add_buf(p, (enum bkind)rr(B_PAGEABLE, B_REGISTERED), pick_cap(0), -1);
    p->nturns = p->nthreads > 1 ? (int)rr(2, MAXTURNS) : (int)rr(0, 2);
    for (int i = 0; i < p->nturns; i++)
        p->turn_owner[i] = (int)rr(0, (size_t)p->nthreads - 1);

    for (int t = 0; t < p->nthreads; t++) {
        struct gen g = { .p = p, .t = t, .budget = 160 * MiB };
        int n = (int)rr(15, 45);
        int turns[MAXTURNS], nt = 0;
        for (int i = 0; i < p->nturns; i++)
            if (p->turn_owner[i] == t)
                turns[nt++] = i;
        /* spread the held windows over the thread's ops */
        int next_turn = 0;
        for (int i = 0; i < n; i++) {
            if (!g.own_shared && next_turn < nt && chance(100 * (nt - next_turn) / (n - i + 1) + 5))
                gen_acquire(&g, turns[next_turn++]);
            else if (g.own_shared && chance(20))
                gen_release(&g, turns[next_turn - 1]);
            int c = (int)rr(0, 99);
            if (c < 62)
                gen_copy(&g);
            else if (c < 70)
                gen_hostfn(&g, O_FN_SUM);
            else if (c < 76)
                gen_hostfn(&g, O_FN_FILL);
            else if (c < 79) {
                struct op *o = emit(&g, O_FN_SLEEP);
                if (o) {
                    o->s = pick_stream(0, 1);
                    o->usec = (unsigned)rr(1, 300);
                }
            } else if (c < 85)
                gen_host(&g, O_HOST_SUM);
            else if (c < 90)
                gen_host(&g, O_HOST_FILL);
            else if (c < 94) {
                struct op *o = emit(&g, O_STREAM_SYNC);
                if (o) {
                    o->s = pick_stream(0, 1);
                    forget_stream(&g, o->s);
                }
            } else if (c < 96) {
                if (emit(&g, O_CTX_SYNC))
                    memset(g.pend, 0, sizeof g.pend);
            } else {
                struct op *o = emit(&g, O_RECORD_WAIT);
                if (o) {
                    o->s = pick_stream(0, 1);
                    o->s2 = pick_stream(0, 1);
                }
            }
        }
        while (next_turn < nt || g.own_shared) {
            if (g.own_shared)
                gen_release(&g, turns[next_turn - 1]);
            else
                gen_acquire(&g, turns[next_turn++]);
        }
        p->bytes += 160 * MiB - g.budget;
    }
}

static void describe_op(FILE *f, const struct prog *p, int t, int i)
{
    const struct op *o = &p->ops[t][i];
    fprintf(f, "  t%d #%-3d ", t, i);
    const char *fl = o->ptds ? "ptds" : "legacy";
    switch (o->k) {
    case O_COPY:
        fprintf(f, "%s [%s] on %s%s", aname[o->api], fl,
                IS_SYNC(o->api) ? sname[d0(o->ptds)] : sname[o->s], o->null_handle ? " (as 0)" : "");
        for (int k = 0; k < o->nseg; k++)
            fprintf(f, " | b%d(%s)+%zu <- b%d(%s)+%zu n=%zu", o->g[k].dst, bkname[p->b[o->g[k].dst].kind],
                    o->g[k].doff, o->g[k].src, bkname[p->b[o->g[k].src].kind], o->g[k].soff, o->g[k].len);
        if (o->api == A_2D || o->api == A_2DU || o->api == A_2D_ASYNC || o->api == A_3D ||
            o->api == A_3D_ASYNC || o->api >= A_BATCH3D)
            fprintf(f, " W=%zu H=%zu D=%zu dpitch=%zu spitch=%zu dh=%zu sh=%zu", o->W, o->H, o->Dd,
                    o->dpitch, o->spitch, o->dheight, o->sheight);
        break;
    case O_FN_SUM: case O_FN_FILL:
        fprintf(f, "cuLaunchHostFunc(%s) [%s] on %s%s b%d+%zu n=%zu", o->k == O_FN_SUM ? "checksum" : "overwrite",
                fl, sname[o->s], o->null_handle ? " (as 0)" : "", o->buf, o->off, o->n);
        break;
    case O_FN_SLEEP: fprintf(f, "cuLaunchHostFunc(sleep %u us) [%s] on %s", o->usec, fl, sname[o->s]); break;
    case O_HOST_FILL: fprintf(f, "host overwrites b%d+%zu n=%zu", o->buf, o->off, o->n); break;
    case O_HOST_SUM: fprintf(f, "host checksums b%d+%zu n=%zu", o->buf, o->off, o->n); break;
    case O_RECORD_WAIT: fprintf(f, "cuEventRecord on %s, cuStreamWaitEvent on %s [%s]", sname[o->s2], sname[o->s], fl); break;
    case O_STREAM_SYNC: fprintf(f, "cuStreamSynchronize(%s) [%s]", sname[o->s], fl); break;
    case O_EVENT_SYNC: fprintf(f, "cuEventRecord on %s + cuEventSynchronize [%s]", sname[o->s], fl); break;
    case O_CTX_SYNC: fprintf(f, "cuCtxSynchronize"); break;
    case O_ACQUIRE: fprintf(f, "take the shared pair (turn %d): cuStreamWaitEvent on %s", o->turn, sname[o->s]); break;
    case O_RELEASE: fprintf(f, "hand the shared pair on (turn %d): cuEventRecord on %s", o->turn, sname[o->s]); break;
    }
    if (o->log >= 0)
        fprintf(f, " -> log %d", o->log);
    fputc('\n', f);
}

static void describe(FILE *f, const struct prog *p)
{
    fprintf(f, "program seed %" PRIu64 ": %d threads, resolution %s, FAKECUDA_DELAY_US=%d, pinfast:",
            p->seed, p->nthreads, drv_path_name((enum drv_path)p->path), p->delay_us);
    for (int i = 0; configs[p->config][i]; i++)
        fprintf(f, " %s", configs[p->config][i]);
    fprintf(f, "%s\n", configs[p->config][0] ? "" : " defaults");
    for (int b = 0; b < p->nbufs; b++)
        fprintf(f, "  b%d: %s, %zu bytes, %s\n", b, bkname[p->b[b].kind], p->b[b].cap,
                p->b[b].owner < 0 ? "shared" : p->b[b].owner == 0 ? "thread 0" : p->b[b].owner == 1 ? "thread 1"
                : p->b[b].owner == 2 ? "thread 2" : "thread 3");
    for (int t = 0; t < p->nthreads; t++)
        for (int i = 0; i < p->nops[t]; i++)
            describe_op(f, p, t, i);
}

/* ---- the child: run one program ------------------------------------------------------ */
static struct prog P;
static struct drv DT[2];                  /* [0] legacy flavour, [1] per-thread */
static CUcontext CTX;
static char *hostp[MAXBUF];               /* host address of host-addressable buffers */
static CUdeviceptr devp[MAXBUF];
static void *rawp[MAXBUF];
static uint64_t logs[MAXT][MAXOPS];
static CUresult rcs[MAXT][MAXOPS];
static CUevent handover;
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cv = PTHREAD_COND_INITIALIZER;
static int turn_now;

struct tstate { int t; CUstream st[NSTREAMS]; CUevent ev[4]; int nextev; };

static CUstream handle(struct tstate *ts, const struct op *o, int s, int allow_null)
{
    if (allow_null && o->null_handle)
        return NULL;
    if (s == S_LEGACY)
        return CU_STREAM_LEGACY;
    if (s == S_PT)
        return CU_STREAM_PER_THREAD;
    return ts->st[s];
}

static uintptr_t addr(int b, size_t off)
{
    return (P.b[b].kind == B_DEV ? (uintptr_t)devp[b] : (uintptr_t)hostp[b]) + off;
}

static CUmemorytype mtype(int b, uint64_t salt)
{
    enum bkind k = P.b[b].kind;
    if (salt & 1)                                   /* unified addressing: either works */
        return CU_MEMORYTYPE_UNIFIED;
    return k == B_DEV || k == B_MANAGED ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
}

static void side3d(CUDA_MEMCPY3D *m, int dst, int b, size_t off, size_t slack, uint64_t salt)
{
    CUmemorytype t = mtype(b, salt >> (dst ? 1 : 2));
    if (P.b[b].kind == B_DEV && t == CU_MEMORYTYPE_HOST)
        t = CU_MEMORYTYPE_DEVICE;
    uintptr_t a = addr(b, 0);
    /* put part of the offset in X (no further than the pitch beyond the
     * row: the driver refuses a row past its pitch), part in the base */
    size_t x = off / 2 < slack ? off / 2 : slack, base = off - x;
    if (dst) {
        m->dstMemoryType = t;
        m->dstXInBytes = x;
        if (t == CU_MEMORYTYPE_HOST)
            m->dstHost = (void *)(a + base);
        else
            m->dstDevice = a + base;
    } else {
        m->srcMemoryType = t;
        m->srcXInBytes = x;
        if (t == CU_MEMORYTYPE_HOST)
            m->srcHost = (const void *)(a + base);
        else
            m->srcDevice = a + base;
    }
}

struct fnarg { unsigned char *p; size_t n; uint64_t salt; uint64_t *log; unsigned usec; };
static struct fnarg fnargs[MAXT][MAXOPS];

static void fn_sum(void *a) { struct fnarg *f = a; *f->log = hash(f->p, f->n); }
static void fn_fill(void *a) { struct fnarg *f = a; pat_fill(f->p, f->n, f->salt); }
static void fn_sleep(void *a) { usleep(((struct fnarg *)a)->usec); }

static CUresult run_copy(struct tstate *ts, const struct op *o)
{
    const struct drv *d = &DT[o->ptds];
    CUstream st = handle(ts, o, o->s, 1);
    const struct seg *g = &o->g[0];
    uintptr_t dst = addr(g->dst, g->doff), src = addr(g->src, g->soff);
    size_t n = g->len;
    switch (o->api) {
    case A_HTOD: return d->MemcpyHtoD(dst, (const void *)src, n);
    case A_DTOH: return d->MemcpyDtoH((void *)dst, src, n);
    case A_DTOD: return d->MemcpyDtoD(dst, src, n);
    case A_MEMCPY: return d->Memcpy(dst, src, n);
    case A_PEER: return d->MemcpyPeer(dst, CTX, src, CTX, n);
    case A_HTOD_ASYNC: return d->MemcpyHtoDAsync(dst, (const void *)src, n, st);
    case A_DTOH_ASYNC: return d->MemcpyDtoHAsync((void *)dst, src, n, st);
    case A_DTOD_ASYNC: return d->MemcpyDtoDAsync(dst, src, n, st);
    case A_MEMCPY_ASYNC: return d->MemcpyAsync(dst, src, n, st);
    case A_PEER_ASYNC: return d->MemcpyPeerAsync(dst, CTX, src, CTX, n, st);
    case A_2D: case A_2DU: case A_2D_ASYNC: case A_3D: case A_3D_ASYNC: {
        CUDA_MEMCPY3D m;
        memset(&m, 0, sizeof m);
        side3d(&m, 1, g->dst, g->doff, o->dpitch - o->W, o->salt);
        side3d(&m, 0, g->src, g->soff, o->spitch - o->W, o->salt);
        m.WidthInBytes = o->W;
        m.Height = o->H;
        m.Depth = o->Dd;
        m.dstPitch = o->dpitch;
        m.srcPitch = o->spitch;
        m.dstHeight = o->dheight;
        m.srcHeight = o->sheight;
        if (o->api == A_3D)
            return d->Memcpy3D(&m);
        if (o->api == A_3D_ASYNC)
            return d->Memcpy3DAsync(&m, st);
        CUDA_MEMCPY2D c = {
            .srcXInBytes = m.srcXInBytes, .srcMemoryType = m.srcMemoryType, .srcHost = m.srcHost,
            .srcDevice = m.srcDevice, .srcPitch = m.srcPitch,
            .dstXInBytes = m.dstXInBytes, .dstMemoryType = m.dstMemoryType, .dstHost = m.dstHost,
            .dstDevice = m.dstDevice, .dstPitch = m.dstPitch,
            .WidthInBytes = o->W, .Height = o->H,
        };
        if (o->api == A_2D)
            return d->Memcpy2D(&c);
        if (o->api == A_2DU)
            return d->Memcpy2DUnaligned(&c);
        return d->Memcpy2DAsync(&c, st);
    }
    case A_BATCH: case A_BATCH12: {
        CUdeviceptr ds[MAXSEG], ss[MAXSEG];
        size_t sz[MAXSEG], idx = 0, fail = 0;
        for (int i = 0; i < o->nseg; i++) {
            ds[i] = addr(o->g[i].dst, o->g[i].doff);
            ss[i] = addr(o->g[i].src, o->g[i].soff);
            sz[i] = o->g[i].len;
        }
        CUmemcpyAttributes attr = { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM };
        if (o->api == A_BATCH)
            return d->MemcpyBatchAsync(ds, ss, sz, (size_t)o->nseg, &attr, &idx, 1, st);
        return d->MemcpyBatchAsync12(ds, ss, sz, (size_t)o->nseg, &attr, &idx, 1, &fail, st);
    }
    case A_BATCH3D: case A_BATCH3D12: {
        CUDA_MEMCPY3D_BATCH_OP ops[MAXSEG];
        memset(ops, 0, sizeof ops);
        for (int i = 0; i < o->nseg; i++) {
            ops[i].src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
            ops[i].src.op.ptr.ptr = addr(o->g[i].src, o->g[i].soff);
            ops[i].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
            ops[i].dst.op.ptr.ptr = addr(o->g[i].dst, o->g[i].doff);
            ops[i].extent.width = o->W;
            ops[i].extent.height = o->H;
            ops[i].extent.depth = o->Dd;
            ops[i].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        }
        size_t fail = 0;
        if (o->api == A_BATCH3D)
            return d->Memcpy3DBatchAsync((size_t)o->nseg, ops, 0, st);
        return d->Memcpy3DBatchAsync12((size_t)o->nseg, ops, &fail, 0, st);
    }
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

static CUresult run_op(struct tstate *ts, int i)
{
    const struct op *o = &P.ops[ts->t][i];
    const struct drv *d = &DT[o->ptds];
    struct fnarg *fa = &fnargs[ts->t][i];
    CUresult r;
    switch (o->k) {
    case O_COPY: return run_copy(ts, o);
    case O_FN_SUM: case O_FN_FILL: case O_FN_SLEEP:
        *fa = (struct fnarg){ (unsigned char *)hostp[o->buf] + o->off, o->n, o->salt,
                              o->log >= 0 ? &logs[ts->t][o->log] : NULL, o->usec };
        return d->LaunchHostFunc(handle(ts, o, o->s, 1),
                                 o->k == O_FN_SUM ? fn_sum : o->k == O_FN_FILL ? fn_fill : fn_sleep, fa);
    case O_HOST_FILL: pat_fill((unsigned char *)hostp[o->buf] + o->off, o->n, o->salt); return CUDA_SUCCESS;
    case O_HOST_SUM:
        logs[ts->t][o->log] = hash((unsigned char *)hostp[o->buf] + o->off, o->n);
        return CUDA_SUCCESS;
    case O_RECORD_WAIT: {
        CUevent e = ts->ev[ts->nextev++ % 4];
        if ((r = d->EventRecord(e, handle(ts, o, o->s2, 0))))
            return r;
        return d->StreamWaitEvent(handle(ts, o, o->s, 0), e, 0);
    }
    case O_STREAM_SYNC: return d->StreamSynchronize(handle(ts, o, o->s, 0));
    case O_EVENT_SYNC: {
        CUevent e = ts->ev[ts->nextev++ % 4];
        if ((r = d->EventRecord(e, handle(ts, o, o->s, 0))))
            return r;
        return d->EventSynchronize(e);
    }
    case O_CTX_SYNC: return d->CtxSynchronize();
    case O_ACQUIRE:
        pthread_mutex_lock(&turn_lock);
        while (turn_now != o->turn)
            pthread_cond_wait(&turn_cv, &turn_lock);
        pthread_mutex_unlock(&turn_lock);
        return d->StreamWaitEvent(handle(ts, o, o->s, 0), handover, 0);
    case O_RELEASE:
        r = d->EventRecord(handover, handle(ts, o, o->s, 0));
        pthread_mutex_lock(&turn_lock);
        turn_now = o->turn + 1;
        pthread_cond_broadcast(&turn_cv);
        pthread_mutex_unlock(&turn_lock);
        return r;
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

static void *thread_main(void *arg)
{
    struct tstate *ts = arg;
    if (DT[0].CtxSetCurrent(CTX))
        abort();
    if (DT[0].StreamCreate(&ts->st[S_BLOCK], CU_STREAM_DEFAULT) ||
        DT[0].StreamCreate(&ts->st[S_NONBLOCK], CU_STREAM_NON_BLOCKING) ||
        DT[0].StreamCreateWithPriority(&ts->st[S_PRIO], CU_STREAM_NON_BLOCKING, -1))
        abort();
    for (int i = 0; i < 4; i++)
        if (DT[0].EventCreate(&ts->ev[i], CU_EVENT_DISABLE_TIMING))
            abort();
    for (int i = 0; i < P.nops[ts->t]; i++)
        rcs[ts->t][i] = run_op(ts, i);
    /* streams and events go away with work possibly queued: legal */
    for (int s = S_BLOCK; s < NSTREAMS; s++)
        DT[0].StreamDestroy(ts->st[s]);
    return NULL;
}

static int child(uint64_t seed, const char *out)
{
    generate(&P, seed);
    if (drv_load(&DT[0], (enum drv_path)P.path, 0) || drv_load(&DT[1], (enum drv_path)P.path, 1))
        return 10;
    const struct drv *d = &DT[0];
    if (drv_context0(d, &CTX))
        return 11;
    /* buffers, with known contents */
    unsigned char *stage;
    size_t maxcap = 0;
    for (int b = 0; b < P.nbufs; b++)
        if (P.b[b].cap > maxcap)
            maxcap = P.b[b].cap;
    if (d->MemHostAlloc((void **)&stage, maxcap, 0))
        return 12;
    for (int b = 0; b < P.nbufs; b++) {
        size_t cap = P.b[b].cap;
        CUresult r = CUDA_SUCCESS;
        switch (P.b[b].kind) {
        case B_DEV: r = d->MemAlloc(&devp[b], cap); break;
        case B_MANAGED: r = d->MemAllocManaged(&devp[b], cap, CU_MEM_ATTACH_GLOBAL); hostp[b] = (char *)devp[b]; break;
        case B_PAGEABLE:
            rawp[b] = malloc(cap + 64);
            hostp[b] = (char *)rawp[b] + P.b[b].mis;      /* odd alignments */
            break;
        case B_PINNED: r = d->MemHostAlloc(&rawp[b], cap, 0); hostp[b] = rawp[b]; break;
        case B_ALLOCHOST: r = d->MemAllocHost(&rawp[b], cap); hostp[b] = rawp[b]; break;
        case B_REGISTERED:
            rawp[b] = aligned_alloc(4096, (cap + 4095) & ~(size_t)4095);
            hostp[b] = rawp[b];
            r = rawp[b] ? d->MemHostRegister(rawp[b], cap, 0) : CUDA_ERROR_OUT_OF_MEMORY;
            break;
        default: break;
        }
        if (r || (IS_HOST(P.b[b].kind) && !hostp[b]))
            return 13;
        if (P.b[b].kind == B_DEV) {
            pat_fill(stage, cap, 1000 + (uint64_t)b);
            if (d->MemcpyHtoD(devp[b], stage, cap))
                return 14;
        } else {
            pat_fill((unsigned char *)hostp[b], cap, 1000 + (uint64_t)b);
        }
    }
    if (d->EventCreate(&handover, CU_EVENT_DISABLE_TIMING) || d->CtxSynchronize())
        return 15;
    pthread_t th[MAXT];
    struct tstate ts[MAXT];
    memset(ts, 0, sizeof ts);
    for (int t = 0; t < P.nthreads; t++) {
        ts[t].t = t;
        if (pthread_create(&th[t], NULL, thread_main, &ts[t]))
            return 16;
    }
    for (int t = 0; t < P.nthreads; t++)
        pthread_join(th[t], NULL);
    if (d->CtxSynchronize())
        return 17;
    FILE *f = fopen(out, "w");
    if (!f)
        return 18;
    for (int b = 0; b < P.nbufs; b++) {
        const unsigned char *p = (const unsigned char *)hostp[b];
        if (P.b[b].kind == B_DEV) {
            /* read back through pinned memory: pinfast passes that through */
            if (d->MemcpyDtoH(stage, devp[b], P.b[b].cap))
                return 19;
            p = stage;
        }
        fprintf(f, "buffer b%d (%s): %016" PRIx64 "\n", b, bkname[P.b[b].kind], hash(p, P.b[b].cap));
    }
    for (int t = 0; t < P.nthreads; t++) {
        for (int i = 0; i < P.nlogs[t]; i++)
            fprintf(f, "checksum t%d log %d: %016" PRIx64 "\n", t, i, logs[t][i]);
        for (int i = 0; i < P.nops[t]; i++)
            if (rcs[t][i])
                fprintf(f, "t%d #%d returned %d\n", t, i, (int)rcs[t][i]);
    }
    fclose(f);
    return 0;
}

/* ---- the parent ------------------------------------------------------------------------ */
static const char *dir;
static int programs_run, programs_failed;
static long long ops_run;

static void show_file(const char *what, const char *file)
{
    char *s = sp_slurp(file, NULL);
    if (s && *s)
        printf("---- %s ----\n%s", what, s);
    free(s);
}

/* 0: identical */
static int run_one(uint64_t seed, int verbose)
{
    static struct prog p;
    generate(&p, seed);
    for (int t = 0; t < p.nthreads; t++)
        ops_run += p.nops[t];
    if (verbose)
        describe(stdout, &p);
    char sd[64], dg[2][300], er[2][300], delay[64];
    snprintf(sd, sizeof sd, "%" PRIu64, seed);
    snprintf(delay, sizeof delay, "FAKECUDA_DELAY_US=%d", p.delay_us);
    int rc[2];
    for (int v = 0; v < 2; v++) {
        snprintf(dg[v], sizeof dg[v], "%s/%s-%" PRIu64 ".digest", dir, v ? "pinfast" : "plain", seed);
        snprintf(er[v], sizeof er[v], "%s/%s-%" PRIu64 ".err", dir, v ? "pinfast" : "plain", seed);
        const char *set[12];
        int k = 0;
        set[k++] = delay;
        set[k++] = "PINFAST_STATS=off";
        for (int i = 0; v && configs[p.config][i]; i++)
            set[k++] = configs[p.config][i];
        set[k] = NULL;
        char *argv[] = { "test_fuzz", "child", sd, dg[v], NULL };
        rc[v] = sp_run(argv, v, set, NULL, er[v], 120, NULL);
    }
    char *a = sp_slurp(dg[0], NULL), *b = sp_slurp(dg[1], NULL);
    int bad = rc[0] != 0 || rc[1] != 0 || !a || !b || strcmp(a, b) != 0;
    /* a plain run that returned errors means a bad program, not a pinfast bug */
    int invalid = rc[0] == 0 && a && strstr(a, "returned");
    if (bad || invalid) {
        printf("\n==== FUZZ FAILURE: seed %" PRIu64 " (rerun: PFT_FUZZ_SEED=%" PRIu64 " PFT_FUZZ_PROGRAMS=1)\n",
               seed, seed);
        printf("plain child: %s %d; pinfast child: %s %d\n", rc[0] == -1 ? "timed out," : "exit", rc[0],
               rc[1] == -1 ? "timed out," : "exit", rc[1]);
        if (invalid)
            printf("the plain run itself returned errors: the generated program is invalid\n");
        if (a && b) {
            /* the first lines that differ */
            char *la = a, *lb = b;
            int shown = 0;
            while (*la && *lb && shown < 12) {
                char *ea = strchr(la, '\n'), *eb = strchr(lb, '\n');
                if (!ea || !eb)
                    break;
                *ea = *eb = 0;
                if (strcmp(la, lb)) {
                    printf("  plain:   %s\n  pinfast: %s\n", la, lb);
                    shown++;
                }
                la = ea + 1;
                lb = eb + 1;
            }
        }
        show_file("plain stderr", er[0]);
        show_file("pinfast stderr", er[1]);
        if (!verbose)
            describe(stdout, &p);
        fflush(stdout);
    }
    free(a);
    free(b);
    return bad || invalid;
}

static void test_equivalence(void **s)
{
    (void)s;
    const char *sv = getenv("PFT_FUZZ_SEED"), *nv = getenv("PFT_FUZZ_PROGRAMS");
    const char *vv = getenv("PFT_FUZZ_VERBOSE");
    uint64_t first = 1;
    if (sv && strcmp(sv, "time") == 0)
        first = (uint64_t)time(NULL) * 1000 + (uint64_t)getpid() % 1000;
    else if (sv)
        first = strtoull(sv, NULL, 0);
    int n = nv ? atoi(nv) : 30;
    dir = sp_tmpdir("fuzz");
    assert_non_null(dir);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        programs_run++;
        if (run_one(first + (uint64_t)i, vv && *vv == '1'))
            programs_failed++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("[ fuzz     ] %d programs (seeds %" PRIu64 "..%" PRIu64 "), %lld operations, %d failed, %.1f s\n",
           programs_run, first, first + (uint64_t)n - 1, ops_run, programs_failed,
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    if (!programs_failed)
        sp_rmdir(dir);
    else
        printf("[ fuzz     ] digests and stderr kept in %s\n", dir);
    if (programs_failed)
        fail_msg("%d of %d programs differ with pinfast", programs_failed, programs_run);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "child") == 0) {
        alarm(110);          /* a hang dies here rather than at the parent's kill */
        return child(strtoull(argv[2], NULL, 0), argv[3]);
    }
    if (argc == 3 && strcmp(argv[1], "show") == 0) {
        static struct prog p;
        generate(&p, strtoull(argv[2], NULL, 0));
        describe(stdout, &p);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equivalence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
