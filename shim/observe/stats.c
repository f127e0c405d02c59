#include "stats.h"
#include "callsite.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../engine/engine.h"
#include "latepin.h"
#include "../base/options.h"
#include "../memory/pool.h"
#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Live counts: time in ticks (pf_ticks), converted when reported. */
struct counter {
    uint64_t calls, errors, bytes, ticks;
};

/* A counter as reported: summed over the threads, time in ns. */
struct cell {
    uint64_t calls, errors, bytes, ns;
};

#define BUCKETS 48 /* sizes by power of two: [2^k, 2^(k+1)); bucket 0 also holds 0 */
#define BLOCKS 256 /* threads counting at once in blocks of their own; more share one */

/* What the copy path counts.  A thread's own block is written only by that
 * thread, with plain loads and stores (atomic, for the report's reads); a
 * block outlives its thread and goes to the next new one: counts are sums. */
struct block {
    struct counter copies[PF_COPY_API_COUNT][PF_DIR_COUNT][PF_MEM_COUNT][PF_PATH_COUNT];
    struct counter sizes[PF_DIR_COUNT][BUCKETS];
    struct counter trips; /* round trips: calls and bytes */
    struct block *next;
    int owned; /* a running thread counts in it; under lock */
};

/* Threads beyond BLOCKS, and a thread after its block went back: atomic adds. */
static struct block shared;
static struct block *blocks; /* every block made, newest first; never freed */
static int nblocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;
static int keyed; /* key made: a block can go back when its thread ends */
static __thread struct block *mine;

static struct counter allocs[PF_ALLOC_API_COUNT];
int pf_stats_used;
static uint64_t start_ns;

#define PF_API_NAME_(id, name) name,
static const char *const copy_names[] = {PF_COPY_APIS(PF_API_NAME_)};
static const char *const alloc_names[] = {PF_ALLOC_APIS(PF_API_NAME_)};
#undef PF_API_NAME_
static const char *const dir_names[] = {"H2D", "D2H", "D2D", "H2H", "mixed"};
static const char *const mem_names[] = {"pageable", "pinned", "pinfast", "managed",
                                        "device", "mixed", "unknown"};
static const char *const path_names[] = {"passthrough", "staged"};

static void add_atomic(struct counter *c, size_t bytes, uint64_t ticks, int result) {
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->ticks, ticks, __ATOMIC_RELAXED);
    if (result)
        __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&c->bytes, bytes, __ATOMIC_RELAXED);
}

/* No lock prefix: only this thread writes v. */
static inline void bump(uint64_t *v, uint64_t by) {
    __atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + by, __ATOMIC_RELAXED);
}

static inline void add(struct block *b, struct counter *c, size_t bytes, uint64_t ticks,
                       int result) {
    if (__builtin_expect(b == &shared, 0)) {
        add_atomic(c, bytes, ticks, result);
        return;
    }
    bump(&c->calls, 1);
    bump(&c->ticks, ticks);
    if (result)
        bump(&c->errors, 1);
    else
        bump(&c->bytes, bytes);
}

/* A later destructor of the ending thread counts in the shared block. */
static void thread_ends(void *p) {
    struct block *b = p;
    mine = &shared;
    pthread_mutex_lock(&lock);
    b->owned = 0;
    pthread_mutex_unlock(&lock);
}

static void make_key(void) { keyed = !pthread_key_create(&key, thread_ends); }

/* This thread's block: one a thread that ended left, or a new one (mmap:
 * zero pages, touched only where counted), or the shared one. */
__attribute__((cold)) static struct block *claim(void) {
    pthread_once(&once, make_key);
    struct block *b = NULL;
    pthread_mutex_lock(&lock);
    if (keyed) {
        for (b = blocks; b && b->owned; b = b->next)
            ;
        if (!b && nblocks < BLOCKS) {
            void *p = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
            if (p != MAP_FAILED) {
                b = p;
                b->next = blocks;
                blocks = b;
                nblocks++;
            }
        }
        if (b)
            b->owned = 1;
    }
    pthread_mutex_unlock(&lock);
    if (b && pthread_setspecific(key, b)) {
        thread_ends(b);
        b = NULL;
    }
    return mine = b ? b : &shared;
}

static inline struct block *block(void) {
    struct block *b = mine;
    return __builtin_expect(b != NULL, 1) ? b : claim();
}

static int bucket(size_t bytes) {
    int k = bytes ? 63 - __builtin_clzll((unsigned long long)bytes) : 0;
    return k < BUCKETS ? k : BUCKETS - 1;
}

/* A call that ended just now and took ticks; out of line, so that the
 * common path saves no registers for it. */
__attribute__((cold)) static void trace(const char *api, const char *dir, const char *mem,
                                        const char *path, size_t bytes, uint64_t ticks,
                                        int result) {
    uint64_t ns = pf_ticks_to_ns(ticks);
    pf_trace(api, dir, mem, path, bytes, pf_now_ns() - ns, ns, result);
}

__thread struct pf_time_sampler pf_time_sampler;

/* A thread's first small copies, and every copy when each is to be timed. */
unsigned pf_time_weight_slow(void) {
    struct pf_time_sampler *t = &pf_time_sampler;
    if (t->small < PF_TIME_EXACT && ++t->small == PF_TIME_EXACT)
        t->rng = (uint32_t)(uintptr_t)t * 2654435761u | 1; /* a stream per thread */
    return 1;
}

void pf_stats_copy(enum pf_copy_api api, enum pf_dir dir, enum pf_mem mem, enum pf_path path,
                   size_t bytes, uint64_t ticks, int result) {
    struct block *b = block();
    add(b, &b->copies[api][dir][mem][path], bytes, ticks, result);
    add(b, &b->sizes[dir][bucket(bytes)], bytes, ticks, result);
    if (!result && mem == PF_MEM_PAGEABLE && (dir == PF_DIR_H2D || dir == PF_DIR_D2H))
        pf_latepin_copy(bytes);
    if (__builtin_expect(pf_options()->trace != NULL, 0))
        trace(copy_names[api], dir_names[dir], mem_names[mem], path_names[path], bytes, ticks,
              result);
    /* last, a tail call: its stack walks are no part of the traced call */
    pf_callsite_copy(result ? 0 : bytes, ticks);
}

void pf_stats_alloc(enum pf_alloc_api api, size_t bytes, uint64_t ticks, int result) {
    add_atomic(&allocs[api], bytes, ticks, result);
    if (pf_options()->trace)
        trace(alloc_names[api], "-", "-", "-", bytes, ticks, result);
}

void pf_stats_round_trip(size_t bytes) {
    struct block *b = block();
    add(b, &b->trips, bytes, 0, 0);
}

/* No thread is inside claim() or thread_ends() while the process forks. */
void pf_stats_fork_prepare(void) { pthread_mutex_lock(&lock); }
void pf_stats_fork_done(void) { pthread_mutex_unlock(&lock); }

/* Only the forking thread lives on in the child: it keeps its block, the
 * other threads' blocks are free for the child's new threads. */
static void clear(struct block *b) {
    memset(b->copies, 0, sizeof b->copies);
    memset(b->sizes, 0, sizeof b->sizes);
    memset(&b->trips, 0, sizeof b->trips);
}

void pf_stats_forked(void) {
    pthread_mutex_unlock(&lock);
    clear(&shared);
    for (struct block *b = blocks; b; b = b->next) {
        clear(b);
        b->owned = b == mine;
    }
    memset(allocs, 0, sizeof allocs);
    pf_callsite_reset();
    pf_latepin_reset();
    pf_stats_used = 0;
    start_ns = pf_now_ns();
}

__attribute__((constructor)) static void stats_start(void) { start_ns = pf_now_ns(); }

/* A bounded buffer flushed with write(2): no stdio state, no allocation. */
struct out {
    int fd, failed;
    size_t len;
    char buf[8192];
};

static void flush(struct out *o) {
    size_t off = 0;
    while (off < o->len && !o->failed) {
        ssize_t w = write(o->fd, o->buf + off, o->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            o->failed = errno ? errno : EIO;
        else
            off += (size_t)w;
    }
    o->len = 0;
}

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    if (o->len + (size_t)n > sizeof o->buf)
        flush(o);
    memcpy(o->buf + o->len, line, (size_t)n);
    o->len += (size_t)n;
}

/* Copies still in flight on other threads at exit keep counting. */
static void sum_into(struct cell *s, const struct counter *c) {
    s->calls += __atomic_load_n(&c->calls, __ATOMIC_RELAXED);
    s->errors += __atomic_load_n(&c->errors, __ATOMIC_RELAXED);
    s->bytes += __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
    s->ns += __atomic_load_n(&c->ticks, __ATOMIC_RELAXED);
}

static struct cell snap(const struct counter *c) {
    struct cell s = {0, 0, 0, 0};
    sum_into(&s, c);
    s.ns = pf_ticks_to_ns(s.ns);
    return s;
}

/* The copy counters of all blocks, summed once for the report. */
static struct {
    struct cell copies[PF_COPY_API_COUNT][PF_DIR_COUNT][PF_MEM_COUNT][PF_PATH_COUNT];
    struct cell sizes[PF_DIR_COUNT][BUCKETS];
    struct cell trips;
} sum;

static void sum_block(const struct block *b) {
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++)
                    sum_into(&sum.copies[a][d][m][p], &b->copies[a][d][m][p]);
    for (int d = 0; d < PF_DIR_COUNT; d++)
        for (int k = 0; k < BUCKETS; k++)
            sum_into(&sum.sizes[d][k], &b->sizes[d][k]);
    sum_into(&sum.trips, &b->trips);
}

/* Ticks summed first, converted once per cell. */
static void gather(void) {
    memset(&sum, 0, sizeof sum);
    sum_block(&shared);
    pthread_mutex_lock(&lock);
    for (const struct block *b = blocks; b; b = b->next)
        sum_block(b);
    pthread_mutex_unlock(&lock);
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++)
                    sum.copies[a][d][m][p].ns = pf_ticks_to_ns(sum.copies[a][d][m][p].ns);
    for (int d = 0; d < PF_DIR_COUNT; d++)
        for (int k = 0; k < BUCKETS; k++)
            sum.sizes[d][k].ns = pf_ticks_to_ns(sum.sizes[d][k].ns);
}

static double gbps(const struct cell *c) { return c->ns ? (double)c->bytes / (double)c->ns : 0.0; }

static double per_gib(double seconds, unsigned long long bytes) {
    return bytes ? seconds / ((double)bytes / (1 << 30)) : 0.0;
}

static int is_sync(int a) {
    return a == PF_API_MEMCPY || a == PF_API_HTOD || a == PF_API_DTOH || a == PF_API_DTOD ||
           a == PF_API_PEER || a == PF_API_M2D || a == PF_API_M2D_UNALIGNED || a == PF_API_M3D;
}

/* Whether a row's time inside the calls is its transfer's: a synchronous
 * copy, or one pinfast staged and finished before returning (all but an
 * asynchronous D2H under PINFAST_ASYNC_D2H).  An asynchronous pass-through
 * copy returns once queued: its bytes over that time are no transfer rate. */
static int has_rate(int a, int d, int p) {
    if (is_sync(a))
        return 1;
    return p == PF_PATH_STAGED && !(d == PF_DIR_D2H && pf_options()->async_d2h);
}

/* A row's GB/s as printed: fmt for a number, or `none` where it has no rate. */
static const char *rate_text(char *buf, size_t size, const char *fmt, const char *none, int a,
                             int d, int p, const struct cell *c) {
    if (!has_rate(a, d, p))
        return none;
    snprintf(buf, size, fmt, gbps(c));
    return buf;
}

/* Sum of the copy rows that `keep` selects; with rated, only rows that have
 * a transfer rate. */
static struct cell total(int (*keep)(int a, int d, int m, int p), int rated) {
    struct cell t = {0, 0, 0, 0};
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++)
                    if (keep(a, d, m, p) && (!rated || has_rate(a, d, p))) {
                        const struct cell c = sum.copies[a][d][m][p];
                        t.calls += c.calls, t.errors += c.errors, t.bytes += c.bytes, t.ns += c.ns;
                    }
    return t;
}

static int any_copy(int a, int d, int m, int p) { return (void)a, (void)d, (void)m, (void)p, 1; }
static int sync_copy(int a, int d, int m, int p) { return (void)d, (void)m, (void)p, is_sync(a); }
static int driver_pageable(int a, int d, int m, int p) {
    return (void)a, m == PF_MEM_PAGEABLE && p == PF_PATH_PASSTHROUGH && d != PF_DIR_H2H;
}
static int staged(int a, int d, int m, int p) { return (void)a, (void)d, (void)m, p == PF_PATH_STAGED; }

/* " at X GB/s" over the rows of a total that have a rate; "" when none has. */
static const char *at_rate(char *buf, size_t size, struct cell c) {
    if (!c.ns)
        return "";
    snprintf(buf, size, " at %.2f GB/s", gbps(&c));
    return buf;
}

#define TINY_BUCKETS 12 /* copies under 4 KiB */

struct advice {
    const char *kind;
    char text[320];
};

__attribute__((format(printf, 3, 4))) static void say(struct advice *a, const char *kind,
                                                       const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->text, sizeof a->text, fmt, ap);
    va_end(ap);
    a->kind = kind;
}

/* What the program should change, each with the numbers that show it; the
 * thresholds keep quiet about what costs a program little. */
static int advise(struct advice *adv, double wall) {
    int n = 0;
    struct cell tiny = {0, 0, 0, 0};
    for (int d = 0; d < PF_DIR_COUNT; d++)
        for (int k = 0; k < TINY_BUCKETS; k++) {
            const struct cell c = sum.sizes[d][k];
            tiny.calls += c.calls, tiny.bytes += c.bytes, tiny.ns += c.ns;
        }
    double tiny_s = (double)tiny.ns * 1e-9;
    if (tiny.calls >= 1000 && tiny_s >= 0.01 * wall)
        say(&adv[n++], "tiny-copies",
            "%llu copies under 4 KiB spent %.3f s in the copy calls (%.1f%% of the run) for "
            "%llu bytes: batch them into fewer, larger copies",
            (unsigned long long)tiny.calls, tiny_s, 100 * tiny_s / wall,
            (unsigned long long)tiny.bytes);
    struct cell sync = total(sync_copy, 0);
    double sync_s = (double)sync.ns * 1e-9;
    if (sync.calls >= 100 && sync_s >= 0.1 * wall)
        say(&adv[n++], "synchronous-copies",
            "%llu synchronous copies kept the CPU waiting %.3f s (%.1f%% of the run): "
            "cudaMemcpyAsync on streams lets copies overlap kernels and CPU work",
            (unsigned long long)sync.calls, sync_s, 100 * sync_s / wall);
    struct cell drv = total(driver_pageable, 0);
    char at[40];
    if (drv.bytes >= (64u << 20))
        say(&adv[n++], "pageable-memory",
            "%.1f MiB of pageable memory went through the driver's own path%s "
            "(copies under PINFAST_MIN_SIZE, or ones pinfast could not stage): pinned "
            "buffers move at the link's speed",
            drv.bytes / 1048576.0, at_rate(at, sizeof at, total(driver_pageable, 1)));
    struct cell stg = total(staged, 0);
    struct pf_engine_stats e;
    pf_engine_stats(&e);
    if (stg.bytes >= (64u << 20))
        say(&adv[n++], "pin-buffers",
            "pinfast staged %.1f MiB of pageable copies%s, for %.3f s of CPU "
            "time: buffers allocated pinned (cudaMallocHost, pin_memory=True) would need "
            "neither",
            stg.bytes / 1048576.0, at_rate(at, sizeof at, total(staged, 1)), e.worker_seconds);
    struct cell rt = sum.trips;
    if (rt.calls >= 10)
        say(&adv[n++], "round-trips",
            "%llu buffers (%.1f MiB) were copied to the host and straight back with 64 "
            "sampled words unchanged: keep such data on the GPU",
            (unsigned long long)rt.calls, rt.bytes / 1048576.0);
    struct cell reg = snap(&allocs[PF_API_HOST_REGISTER]);
    if (reg.calls >= 20)
        say(&adv[n++], "register-churn",
            "%llu cuMemHostRegister calls took %.3f s: register a buffer once and reuse it",
            (unsigned long long)reg.calls, (double)reg.ns * 1e-9);
    struct pf_pool_stats pl;
    pf_pool_stats(&pl);
    if (pl.hits + pl.misses >= 20)
        say(&adv[n++], "pinned-churn",
            "%llu pinned allocations (%llu served by pinfast's pool, saving %.3f s): "
            "allocate pinned buffers once and reuse them",
            pl.hits + pl.misses, pl.hits, pl.saved_seconds);
    struct pf_latepin_stats lp;
    pf_latepin_stats(&lp);
    if (lp.bytes >= (64u << 20))
        say(&adv[n++], "late-pinning",
            "%llu pinned allocations (%.1f MiB) had sizes already copied from pageable "
            "memory, holding up to %.1f MiB pinned beside the pageable buffers: pinning an "
            "existing buffer (tensor.pin_memory()) allocates and copies it; allocate it "
            "pinned from the start (pin_memory=True, cudaMallocHost)",
            (unsigned long long)lp.count, lp.bytes / 1048576.0, lp.peak_bytes / 1048576.0);
    return n;
}

/* JSON string contents: the advice texts hold no quote or backslash. */
static void report_extras_json(struct out *o, double wall) {
    struct cell all = total(any_copy, 0), rt = sum.trips;
    put(o,
        "\"summary\":{\"copy_seconds\":%.6f,\"share_of_wall\":%.4f,\"round_trips\":%llu,"
        "\"round_trip_bytes\":%llu},\n\"histogram\":{",
        (double)all.ns * 1e-9, wall > 0 ? (double)all.ns * 1e-9 / wall : 0.0,
        (unsigned long long)rt.calls, (unsigned long long)rt.bytes);
    const char *dsep = "";
    for (int d = 0; d < PF_DIR_COUNT; d++) {
        const char *sep = "";
        int any = 0;
        for (int k = 0; k < BUCKETS; k++) {
            const struct cell c = sum.sizes[d][k];
            if (!c.calls)
                continue;
            if (!any++)
                put(o, "%s\n\"%s\":[", dsep, dir_names[d]), dsep = ",";
            put(o, "%s{\"from\":%llu,\"calls\":%llu,\"bytes\":%llu,\"seconds\":%.9f}", sep,
                k ? 1ull << k : 0ull, (unsigned long long)c.calls,
                (unsigned long long)c.bytes, (double)c.ns * 1e-9);
            sep = ",";
        }
        if (any)
            put(o, "]");
    }
    put(o, "},\n\"advice\":[");
    struct advice adv[9];
    int n = advise(adv, wall);
    for (int i = 0; i < n; i++)
        put(o, "%s\n{\"kind\":\"%s\",\"text\":\"%s\"}", i ? "," : "", adv[i].kind, adv[i].text);
    put(o, "\n]");
}

static void report_extras_text(struct out *o, double wall) {
    struct cell all = total(any_copy, 0);
    put(o, "pinfast: %.3f s inside copy calls, %.1f%% of the run\n", (double)all.ns * 1e-9,
        wall > 0 ? 100 * (double)all.ns * 1e-9 / wall : 0.0);
    static const char *const unit[] = {"B", "K", "M", "G", "T"};
    for (int d = 0; d < PF_DIR_COUNT; d++) {
        char line[400];
        size_t len = 0;
        for (int k = 0; k < BUCKETS && len < sizeof line - 40; k++) {
            const struct cell c = sum.sizes[d][k];
            if (c.calls)
                len += (size_t)snprintf(line + len, sizeof line - len, " %llu%s:%llu",
                                        1ull << (k % 10), unit[k / 10],
                                        (unsigned long long)c.calls);
        }
        if (len)
            put(o, "pinfast: sizes %s (from, calls):%s\n", dir_names[d], line);
    }
    struct advice adv[9];
    int n = advise(adv, wall);
    for (int i = 0; i < n; i++)
        put(o, "pinfast: advice: %s\n", adv[i].text);
}

/* ---- where from ------------------------------------------------------------ */

static struct pf_site sites[PF_CALLSITE_MAX]; /* 64 KiB: not on the stack */

static int desc(uint64_t x, uint64_t y) { return (x < y) - (x > y); }
static int by_bytes(const void *a, const void *b) {
    const struct pf_site *x = a, *y = b;
    return desc(x->bytes, y->bytes) ? desc(x->bytes, y->bytes) : desc(x->ns, y->ns);
}
static int by_time(const void *a, const void *b) {
    const struct pf_site *x = a, *y = b;
    return desc(x->ns, y->ns) ? desc(x->ns, y->ns) : desc(x->bytes, y->bytes);
}

static void callsites_json(struct out *o) {
    struct pf_site rest;
    int n = pf_callsite_collect(sites, PF_CALLSITE_MAX, &rest);
    qsort(sites, (size_t)n, sizeof *sites, by_bytes);
    put(o, ",\n\"callsites\":{\"sampling\":%d,\"sites\":[", pf_options()->callsites);
    for (int i = 0; i < n; i++) {
        const struct pf_site *s = &sites[i];
        put(o,
            "%s\n{\"library\":\"%s\",\"symbol\":\"%s\",\"offset\":%llu,\"address\":\"0x%llx\","
            "\"calls\":%llu,\"bytes\":%llu,\"seconds\":%.9f,\"samples\":%llu,\"estimated\":%s}",
            i ? "," : "", s->library, s->symbol, (unsigned long long)s->offset,
            (unsigned long long)s->address, (unsigned long long)s->calls,
            (unsigned long long)s->bytes, (double)s->ns * 1e-9, (unsigned long long)s->samples,
            s->estimated ? "true" : "false");
    }
    put(o,
        "\n],\n\"other\":{\"calls\":%llu,\"bytes\":%llu,\"seconds\":%.9f,\"samples\":%llu,"
        "\"estimated\":%s}}",
        (unsigned long long)rest.calls, (unsigned long long)rest.bytes, (double)rest.ns * 1e-9,
        (unsigned long long)rest.samples, rest.estimated ? "true" : "false");
}

#define TOP_SITES 10

static void callsites_text(struct out *o) {
    struct pf_site rest;
    int n = pf_callsite_collect(sites, PF_CALLSITE_MAX, &rest);
    for (int pass = 0; pass < 2 && n; pass++) {
        qsort(sites, (size_t)n, sizeof *sites, pass ? by_time : by_bytes);
        put(o, "pinfast: where from, by %s (~: estimated from 1 in %d small copies):\n",
            pass ? "time" : "bytes", pf_options()->callsites);
        put(o, "pinfast:  %14s %11s %10s  %s\n", "bytes", "seconds", "calls", "site");
        for (int i = 0; i < n && i < TOP_SITES; i++) {
            const struct pf_site *s = &sites[i];
            put(o, "pinfast: %c%14llu %11.6f %10llu  %s%s%s+0x%llx\n", s->estimated ? '~' : ' ',
                (unsigned long long)s->bytes, (double)s->ns * 1e-9, (unsigned long long)s->calls,
                s->library, s->symbol[0] ? " " : "", s->symbol, (unsigned long long)s->offset);
        }
    }
    if (rest.samples)
        put(o, "pinfast: sites beyond the first %d: %llu calls, %llu bytes, %.6f s\n",
            PF_CALLSITE_MAX, (unsigned long long)rest.calls, (unsigned long long)rest.bytes,
            (double)rest.ns * 1e-9);
}

/* The launcher's rank ("x": none given) and the short host name, as %r and
 * %h give them in file names, so that a report says which file it is. */
struct whoami {
    char rank[72], host[72];
};
static void whoami(struct whoami *w) {
    /* each fits: a rank has at most 9 digits, a host name is cut at 71 bytes */
    pf_options_file("%r", w->rank, sizeof w->rank);
    pf_options_file("%h", w->host, sizeof w->host);
}

static void report_json(struct out *o, double wall) {
    put(o, "{\"schema\":\"pinfast-report/1.2\",\"pid\":%d,\"wall_seconds\":%.6f,\n\"transfers\":[",
        (int)getpid(), wall);
    const char *sep = "\n";
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++) {
                    const struct cell *c = &sum.copies[a][d][m][p];
                    if (!c->calls)
                        continue;
                    char rate[32];
                    put(o,
                        "%s{\"api\":\"%s\",\"direction\":\"%s\",\"memory\":\"%s\",\"path\":\"%s\","
                        "\"calls\":%llu,\"errors\":%llu,\"bytes\":%llu,\"seconds\":%.9f,\"gbps\":%s}",
                        sep, copy_names[a], dir_names[d], mem_names[m], path_names[p],
                        (unsigned long long)c->calls, (unsigned long long)c->errors,
                        (unsigned long long)c->bytes, (double)c->ns * 1e-9,
                        rate_text(rate, sizeof rate, "%.3f", "null", a, d, p, c));
                    sep = ",\n";
                }
    put(o, "\n],\n\"allocations\":[");
    sep = "\n";
    for (int a = 0; a < PF_ALLOC_API_COUNT; a++) {
        const struct cell s_ = snap(&allocs[a]), *c = &s_;
        if (!c->calls)
            continue;
        put(o, "%s{\"api\":\"%s\",\"calls\":%llu,\"errors\":%llu,\"bytes\":%llu,\"seconds\":%.9f}",
            sep, alloc_names[a], (unsigned long long)c->calls, (unsigned long long)c->errors,
            (unsigned long long)c->bytes, (double)c->ns * 1e-9);
        sep = ",\n";
    }
    struct pf_engine_stats e;
    struct pf_pool_stats pl;
    pf_engine_stats(&e);
    pf_pool_stats(&pl);
    put(o,
        "\n],\n\"staging\":{\"copies\":%llu,\"bytes\":%llu,\"pinned_bytes\":%llu,"
        "\"contexts\":%d,\"threads\":%d,\"copy_cpu_seconds\":%.6f,\"cpu_seconds_per_gib\":%.6f},\n",
        e.copies, e.bytes, e.pinned_bytes, e.contexts, e.threads, e.worker_seconds,
        per_gib(e.worker_seconds, e.bytes));
    put(o,
        "\"pool\":{\"hits\":%llu,\"misses\":%llu,\"idle_bytes\":%llu,\"peak_idle_bytes\":%llu,"
        "\"trimmed\":%llu,\"saved_seconds\":%.6f,\"sync_seconds\":%.6f},\n",
        pl.hits, pl.misses, pl.idle_bytes, pl.peak_idle_bytes, pl.trimmed, pl.saved_seconds,
        pl.sync_seconds);
    report_extras_json(o, wall);
    if (pf_options()->callsites)
        callsites_json(o);
    struct whoami w;
    whoami(&w);
    /* host names hold letters, digits and dashes only: no JSON escapes */
    put(o, ",\n\"rank\":%s,\"host\":\"%s\"}\n", strcmp(w.rank, "x") ? w.rank : "null", w.host);
}

static void report_text(struct out *o, double wall) {
    struct whoami w;
    whoami(&w);
    put(o, "pinfast: transfer report, pid %d%s%s on %s, %.3f s since start\n", (int)getpid(),
        strcmp(w.rank, "x") ? ", rank " : "", strcmp(w.rank, "x") ? w.rank : "", w.host, wall);
    put(o, "pinfast: %-20s %-5s %-9s %-11s %10s %6s %14s %11s %9s\n", "api", "dir", "memory",
        "path", "calls", "errors", "bytes", "seconds", "GB/s");
    for (int a = 0; a < PF_COPY_API_COUNT; a++)
        for (int d = 0; d < PF_DIR_COUNT; d++)
            for (int m = 0; m < PF_MEM_COUNT; m++)
                for (int p = 0; p < PF_PATH_COUNT; p++) {
                    const struct cell *c = &sum.copies[a][d][m][p];
                    char rate[32];
                    if (c->calls)
                        put(o, "pinfast: %-20s %-5s %-9s %-11s %10llu %6llu %14llu %11.6f %9s\n",
                            copy_names[a], dir_names[d], mem_names[m], path_names[p],
                            (unsigned long long)c->calls, (unsigned long long)c->errors,
                            (unsigned long long)c->bytes, (double)c->ns * 1e-9,
                            rate_text(rate, sizeof rate, "%.2f", "-", a, d, p, c));
                }
    for (int a = 0; a < PF_ALLOC_API_COUNT; a++) {
        const struct cell s_ = snap(&allocs[a]), *c = &s_;
        if (c->calls)
            put(o, "pinfast: %-20s %-5s %-9s %-11s %10llu %6llu %14llu %11.6f\n", alloc_names[a],
                "-", "-", "-", (unsigned long long)c->calls, (unsigned long long)c->errors,
                (unsigned long long)c->bytes, (double)c->ns * 1e-9);
    }
    struct pf_engine_stats e;
    struct pf_pool_stats pl;
    pf_engine_stats(&e);
    pf_pool_stats(&pl);
    if (e.copies)
        put(o, "pinfast: staging: %llu copies, %.1f MiB, %d threads, %.1f MiB pinned in %d "
               "context(s), %.3f s of copy CPU time (%.3f s per GiB)\n",
            e.copies, e.bytes / 1048576.0, e.threads, e.pinned_bytes / 1048576.0, e.contexts,
            e.worker_seconds, per_gib(e.worker_seconds, e.bytes));
    if (pl.hits + pl.misses)
        put(o, "pinfast: pinned pool: %llu hits, %llu misses, %.1f MiB idle (peak %.1f), %llu "
               "trimmed, %.3f s of allocation saved, %.3f s synchronising at free\n",
            pl.hits, pl.misses, pl.idle_bytes / 1048576.0, pl.peak_idle_bytes / 1048576.0,
            pl.trimmed, pl.saved_seconds, pl.sync_seconds);
    report_extras_text(o, wall);
    if (pf_options()->callsites)
        callsites_text(o);
}

void pf_stats_report(void) {
    const struct pf_options *opt = pf_options();
    if (!__atomic_load_n(&pf_stats_used, __ATOMIC_RELAXED) || opt->disable ||
        opt->stats == PF_STATS_OFF)
        return;
    static struct out o; /* 8 KiB: not on the stack of an exiting thread */
    o.fd = STDERR_FILENO;
    o.failed = 0;
    o.len = 0;
    char path[4096];
    if (opt->stats_file) {
        if (pf_options_file(opt->stats_file, path, sizeof path)) {
            pf_msg(PF_WARNING, "PINFAST_STATS_FILE is too long; report goes to stderr");
        } else {
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0)
                pf_msg(PF_WARNING, "cannot write the report to %s (%s); report goes to stderr",
                       path, strerror(errno));
            else
                o.fd = fd;
        }
    }
    double wall = (double)(pf_now_ns() - start_ns) * 1e-9;
    gather();
    if (opt->stats == PF_STATS_JSON)
        report_json(&o, wall);
    else
        report_text(&o, wall);
    flush(&o);
    if (o.failed)
        pf_msg(PF_WARNING, "writing the report failed (%s)", strerror(o.failed));
    if (o.fd != STDERR_FILENO)
        close(o.fd);
}
