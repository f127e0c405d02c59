/* One caller thread drives each staged copy: it cuts the copy into chunks,
 * one pinned slot each, hands the host side of every chunk to the workers as
 * a few tasks, and issues each chunk's DMA on the caller's own stream.
 * Issuing from the caller's thread keeps the copy ordered in its stream
 * exactly as the plain call (the per-thread default stream included), and
 * keeps the workers free of any CUDA state.  A slot whose DMA may still run is
 * "fenced" by an event recorded after it; it is reused only once the event
 * has completed.  See docs/design.md. */
#include "engine.h"
#include "../driver/capture.h"
#include "../memory/classify.h"
#include "../base/clock.h"
#include "../driver/driver.h"
#include "../memory/hostmap.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../memory/pending.h"
#include "workers.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_CONTEXTS 64
#define MAX_SLOTS 256
#define MAX_SPLIT 16           /* tasks per chunk */
#define MIN_TASK (32u << 10)   /* smaller host copies cost more to hand out than to do */
#define SPLIT 8                /* tasks a chunk is cut into, size permitting */
#define MAX_TASK (256u << 10)
#define MIN_CHUNK (256u << 10) /* the first chunk of a copy */
#define AUTO_STREAM_BELOW (128u << 20) /* H2D */
/* An H2D copy with streaming stores from LEAN_FROM on is paced: it fills at
 * most LEAN_CHUNKS chunks at once, each cut in LEAN_TASKS, and keeps at
 * most LEAN_AHEAD chunks filling or in DMA.  The DMA reading the slots
 * slows while other slots take streaming stores, and twelve writers
 * unpaced slowed it most (64 MiB: 41.3 GB/s, against 45.9 with six, engine
 * v10 calls 15-17), but six write only ~37-43 GB/s beside a DMA, and twelve
 * paced to the DMA's rate leave it at ~50 (tests/gpu/probe_h2dload, engine
 * v12 call 2).  Twelve held at most five chunks ahead: 64 MiB 43.6 -> 45.8
 * GB/s, 4 of 5 rounds higher (engine v12 call 3). */
#define LEAN_FROM (32u << 20)
#define LEAN_CHUNKS 4
#define LEAN_TASKS 3
#define LEAN_AHEAD 5
#define AUTO_STREAM_FROM (64u << 20)   /* D2H */
#define HELP_MAX MAX_TASK      /* a D2H caller copies no more than this at a time */
/* An H2D caller busy with a 64 KiB task issues a chunk that is ready late:
 * with no task over 32 KiB a 1 MiB H2D's first DMA starts 1.9 us sooner
 * (median 9.9 -> 8.0 us); 1-64 MiB H2D measured level to +2% in four A/Bs
 * (engine v14 calls 2-4, 7).  D2H keeps the larger help: a destination never
 * touched faults in faster with the caller among the copiers (32 KiB for
 * both directions: 4-64 MiB into fresh memory 3-9% slower, calls 2-3). */
#define HELP_MAX_H2D MIN_TASK
#define POLL_PAUSES 32         /* 8 made 4 MiB D2H slower (engine v9, call 7) */
#define TAIL_SPLIT (1u << 20)  /* a D2H copy's last chunks are halved from this size */
/* A caller with nothing to do but wait for a DMA polls this long, then
 * sleeps in the driver: a copy queued behind a long kernel must not cost a
 * core more than the plain driver's own wait. */
#define POLL_NS 200000u

struct slot {
    char *mem;
    CUevent ev;
    int fenced;        /* ev recorded after a DMA that may still use mem */
    uintptr_t owner;   /* the stream the fence is on (see owner()) */
    int busy;          /* held by a copy */
};

/* Pinned slots and events belong to one context.  Records are reused once
 * their context is destroyed (id 0), never freed: a lookup reads them
 * without the lock. */
struct context {
    unsigned long long id;
    CUcontext handle;
    pthread_mutex_t lock;
    int nslots;
    int turn;          /* where the search for a free slot starts */
    int landing;       /* slots held by asynchronous D2H chunks */
    size_t slot_size;
    void *block;       /* the slots' pinned memory */
    struct slot slots[MAX_SLOTS];
};

static struct context *contexts[MAX_CONTEXTS];
static int ncontexts;  /* records made, live or not */
static int live;       /* records of contexts that exist */
static int made;       /* contexts given records, over the run (the report) */
static unsigned long long staged_copies, staged_bytes, pinned_bytes;
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static int warned_pinned, warned_contexts;

/* Builds the slots of context ctx (made current meanwhile, if it is not)
 * into record c.  A context that could get none keeps its record, with no
 * slot, so that its copies pass through without asking again. */
static void create(struct context *c, CUcontext ctx, unsigned long long id) {
    const struct pf_options *o = pf_options();
    size_t size = o->chunk < o->staging ? o->chunk : o->staging;
    size_t n = size ? o->staging / size : 0;
    if (n > MAX_SLOTS)
        n = MAX_SLOTS;
    *c = (struct context){.handle = ctx, .slot_size = size};
    pthread_mutex_init(&c->lock, NULL);
    CUcontext cur = NULL;
    int pushed = PF_CALL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && cur != ctx &&
                 PF_CALL(cuCtxPushCurrent_v2, ctx) == CUDA_SUCCESS;
    void *block = NULL;
    /* portable: any context may copy from it; halve until the driver agrees */
    while (n && PF_CALL(cuMemHostAlloc, &block, n * size, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
        n /= 2;
    int k = 0;
    for (; k < (int)n; k++) {
        c->slots[k].mem = (char *)block + (size_t)k * size;
        if (PF_CALL(cuEventCreate, &c->slots[k].ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
            break;
    }
    if (!k && block)
        PF_CALL(cuMemFreeHost, block);
    if (pushed)
        PF_CALL(cuCtxPopCurrent_v2, &cur);
    if (!k) {
        if (o->staging)
            pf_msg_once(warned_pinned, PF_WARNING,
                        "context %llu: could not pin %zu bytes of staging memory; its pageable copies pass through",
                        id, size);
    } else {
        pf_hostmap_add(block, n * size, PF_MEM_PINFAST, CU_MEMHOSTALLOC_PORTABLE);
        __atomic_fetch_add(&pinned_bytes, n * size, __ATOMIC_RELAXED);
        c->nslots = k;
        c->block = block;
        pf_msg(PF_INFO, "context %llu: %d staging slots of %zu KiB", id, k, size >> 10);
    }
    __atomic_store_n(&c->id, id, __ATOMIC_RELEASE);
    __atomic_fetch_add(&live, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&made, 1, __ATOMIC_RELAXED);
}

static struct context *find(unsigned long long id) {
    int n = __atomic_load_n(&ncontexts, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&contexts[i]->id, __ATOMIC_ACQUIRE) == id)
            return contexts[i];
    return NULL;
}

/* The record of the context a copy on `stream` runs in, made on first use:
 * a stream's context, which may not be the current one, owns the copy's
 * slots and events. */
static struct context *context_of(CUstream stream) {
    CUcontext ctx = NULL;
    unsigned long long id;
    CUresult r = stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD
                     ? PF_CALL(cuCtxGetCurrent, &ctx)
                     : PF_CALL(cuStreamGetCtx, stream, &ctx);
    if (r != CUDA_SUCCESS || !ctx || !pf_context_id(ctx, &id))
        return NULL;
    struct context *c = find(id);
    if (c)
        return c;
    pthread_mutex_lock(&contexts_lock);
    if (!(c = find(id))) {
        for (int i = 0; i < ncontexts && !c; i++) /* a destroyed context's record */
            if (!contexts[i]->id)
                c = contexts[i];
        if (!c && ncontexts < MAX_CONTEXTS && (c = calloc(1, sizeof *c))) {
            contexts[ncontexts] = c;
            __atomic_store_n(&ncontexts, ncontexts + 1, __ATOMIC_RELEASE);
        } else if (!c) {
            pf_msg_once(warned_contexts, PF_WARNING,
                        "more than %d CUDA contexts at once; copies in new ones pass through", MAX_CONTEXTS);
        }
        if (c)
            create(c, ctx, id);
    }
    pthread_mutex_unlock(&contexts_lock);
    return c;
}

void pf_engine_context_gone(CUcontext ctx) {
    pthread_mutex_lock(&contexts_lock);
    for (int i = 0; i < ncontexts; i++) {
        struct context *c = contexts[i];
        if (!c->id || c->handle != ctx)
            continue;
        /* the driver freed the slots and events with the context */
        if (c->block)
            pf_hostmap_remove(c->block, &(struct pf_range){0});
        __atomic_store_n(&c->id, 0, __ATOMIC_RELEASE);
        __atomic_fetch_sub(&live, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&contexts_lock);
}

enum { IDLE, COPYING, DMA };

/* A slot a copy holds, and the chunk it carries. */
struct held {
    struct slot *s;
    size_t off, len; /* the chunk, within the copy */
    int phase;       /* what the chunk waits for */
    int ntasks;
    /* debug log: an H2D chunk's DMA is seen done after the chunk retired,
     * so that time goes straight into its line, log[logged - 1] (0: none) */
    int logged;
    uint64_t taken_ns, dma_ns, dma_end_ns, landed_ns;
    struct pf_task tasks[MAX_SPLIT];
};


/* Who a fence belongs to: the stream handle, or for the per-thread default
 * stream, which is one handle for many streams, the thread. */
static uintptr_t owner(CUstream stream) {
    return stream == CU_STREAM_PER_THREAD ? (uintptr_t)pthread_self() ^ 2 : (uintptr_t)stream;
}

/* The next free slot, taking them in turn: a slot the workers copied out
 * of keeps its lines in their caches for a while, and a DMA into lines
 * that must first be snooped out of a core's cache runs at 21 GB/s against
 * 50 (probe_poll, engine v10).  Taken in turn, a slot comes back after
 * PINFAST_STAGING of other chunks.  A slot fenced on another stream is
 * taken only once its fence is over: that stream may wait for something
 * this copy's caller is yet to do.  Called with the lock held. */
static struct slot *take_slot(struct context *c, uintptr_t who) {
    for (int k = 0; k < c->nslots; k++) {
        int i = (c->turn + k) % c->nslots;
        struct slot *s = &c->slots[i];
        if (s->busy || (s->fenced && s->owner != who && PF_CALL(cuEventQuery, s->ev) != CUDA_SUCCESS))
            continue;
        if (s->owner != who)
            s->fenced = 0;
        c->turn = (i + 1) % c->nslots;
        s->busy = 1;
        return s;
    }
    return NULL;
}

/* Takes up to `want` slots, none if none is free: the copy then passes
 * through rather than wait for other copies, whose streams may wait for
 * this caller.  A copy holds at most half the slots, so copies in the other
 * direction proceed. */
static int acquire(struct context *c, struct held *h, int want, uintptr_t who) {
    int n = 0;
    struct slot *s;
    pthread_mutex_lock(&c->lock);
    while (n < want && (s = take_slot(c, who)))
        h[n++] = (struct held){.s = s, .phase = IDLE};
    pthread_mutex_unlock(&c->lock);
    return n;
}

static void release(struct context *c, struct held *h, int n) {
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < n; i++)
        h[i].s->busy = 0;
    pthread_mutex_unlock(&c->lock);
}

#define TIMELINE 24 /* chunks the debug log details */

/* One chunk's times in the debug log: taken, DMA issued, its end seen, the
 * host copy's first task started and last task ended, the chunk retired. */
struct chunk_log {
    size_t off, len;
    int slot;
    uint64_t taken, dma, dma_end, landed, first, last, seen;
    int ntasks;
    struct { uint64_t start, end; int by; } tasks[MAX_SPLIT];
};

struct plan {
    const struct pf_xfer *x;
    size_t chunk;          /* the largest chunk: a slot */
    size_t ramp;           /* the next chunk's size, doubling up to chunk */
    size_t next;           /* offset of the next chunk */
    enum pf_host_copy kind;
    int lean;              /* H2D paced: see LEAN_FROM */
    /* for the debug log */
    int debug, nchunks, ntasks, helped, nlog;
    uint64_t t0, first_dma_ns, first_task_ns;
    struct chunk_log *log; /* TIMELINE of them */
    const struct slot *slots; /* the context's, to number them */
};

/* A time for the debug line; no clock read when nobody prints it. */
static uint64_t stamp(int debug) { return debug ? pf_now_ns() : 0; }

/* Takes the next chunk: the first ones are small, so that the first DMA
 * starts early and a small copy still overlaps copying and DMA.  A D2H copy
 * ends on smaller chunks too: its last chunk's copy-out is time nothing else
 * overlaps (~30 us for 2 MiB, engine v9 timeline). */
static void take_chunk(struct plan *p, struct held *h) {
    size_t left = p->x->bytes - p->next;
    h->taken_ns = stamp(p->debug);
    h->landed_ns = 0;
    h->logged = 0;
    h->off = p->next;
    h->len = left < p->ramp ? left : p->ramp;
    if (p->x->dir == PF_DIR_D2H && h->len >= TAIL_SPLIT && left < 2 * h->len) {
        size_t half = (left / 2 + 4095) & ~(size_t)4095;
        if (half < h->len)
            h->len = half;
    }
    p->next += h->len;
    p->nchunks++;
    if (p->ramp < p->chunk)
        p->ramp = p->ramp * 2 < p->chunk ? p->ramp * 2 : p->chunk;
}

/* Tasks of a chunk: several, so that the first (small) chunks are ready
 * soon, none so small that handing it out costs more than doing it. */
static size_t task_size(size_t len) {
    size_t task = (len / SPLIT + 4095) & ~(size_t)4095;
    if (task > MAX_TASK)
        task = MAX_TASK;
    if (task < MIN_TASK)
        task = MIN_TASK;
    if (task < (len + MAX_SPLIT - 1) / MAX_SPLIT)
        task = (len + MAX_SPLIT - 1) / MAX_SPLIT;
    return task;
}

/* Queues a host copy as tasks of `task` bytes; returns how many. */
static int cut(struct pf_task *tasks, char *dst, const char *src, size_t len,
               enum pf_host_copy kind, size_t task) {
    int n = 0;
    for (size_t done = 0; done < len; done += task, n++)
        tasks[n] = (struct pf_task){.dst = dst + done, .src = src + done,
                                    .len = len - done < task ? len - done : task, .kind = kind};
    pf_task_submit(tasks, n);
    return n;
}

/* Queues the host side of the slot's chunk as tasks between the slot and the
 * program's memory. */
static void split(const struct plan *p, struct held *h) {
    char *user = (char *)p->x->host + h->off;
    int h2d = p->x->dir == PF_DIR_H2D;
    h->phase = COPYING;
    size_t task = p->lean ? (h->len + LEAN_TASKS - 1) / LEAN_TASKS : task_size(h->len);
    h->ntasks = cut(h->tasks, h2d ? h->s->mem : user, h2d ? user : h->s->mem, h->len, p->kind, task);
}

/* What the debug log tells of a retired chunk. */
static void account(struct plan *p, struct held *h) {
    struct chunk_log l = {.off = h->off, .len = h->len, .slot = (int)(h->s - p->slots),
                          .taken = h->taken_ns, .dma = h->dma_ns, .dma_end = h->dma_end_ns,
                          .landed = h->landed_ns, .seen = pf_now_ns()};
    for (int i = 0; i < h->ntasks; i++) {
        const struct pf_task *t = &h->tasks[i];
        if (!l.first || t->started_ns < l.first)
            l.first = t->started_ns;
        if (t->ended_ns > l.last)
            l.last = t->ended_ns;
        l.tasks[l.ntasks++] = (__typeof__(l.tasks[0])){t->started_ns, t->ended_ns, t->by};
        p->helped += !t->by;
    }
    if (!p->first_task_ns || l.first < p->first_task_ns)
        p->first_task_ns = l.first;
    if (p->nlog < TIMELINE) {
        p->log[p->nlog++] = l;
        h->logged = p->nlog;
    }
    p->ntasks += h->ntasks;
}

static double us(const struct plan *p, uint64_t t) { return t ? (t - p->t0) / 1e3 : -1.0; }

static void print_timeline(const struct plan *p) {
    for (int i = 0; i < p->nlog; i++) {
        const struct chunk_log *l = &p->log[i];
        pf_msg(PF_DEBUG, "  chunk %zu+%zu slot %d us: taken %.1f dma %.1f-%.1f landed %.1f copy %.1f-%.1f retired %.1f",
               l->off, l->len, l->slot, us(p, l->taken), us(p, l->dma), us(p, l->dma_end), us(p, l->landed), us(p, l->first),
               us(p, l->last), us(p, l->seen));
        char line[MAX_SPLIT * 24], *at = line;
        for (int k = 0; k < l->ntasks && at < line + sizeof line - 1; k++)
            at += snprintf(at, sizeof line - (size_t)(at - line), " w%d:%.1f-%.1f", l->tasks[k].by,
                           us(p, l->tasks[k].start), us(p, l->tasks[k].end));
        pf_msg(PF_DEBUG, "    tasks%s", line);
    }
}

static void wait_tasks(struct held *h) {
    for (int i = 0; i < h->ntasks; i++)
        pf_task_wait(&h->tasks[i]);
    h->ntasks = 0;
}

/* CUDA_SUCCESS once the slot's last DMA is complete, else CUDA_ERROR_NOT_READY
 * (or the error the stream met). */
static CUresult unfence(struct slot *s) {
    if (!s->fenced)
        return CUDA_SUCCESS;
    CUresult r = PF_CALL(cuEventQuery, s->ev);
    if (r == CUDA_SUCCESS)
        s->fenced = 0;
    return r;
}

static void pause(void) {
    for (int k = 0; k < POLL_PAUSES; k++)
        pf_relax();
}

/* Returns once the slot's fence is over (or its stream met an error):
 * polls POLL_NS, then sleeps in the driver, which waits as the plain
 * driver's own copies do. */
static CUresult await(struct slot *s) {
    uint64_t t0 = pf_now_ns();
    CUresult r;
    while ((r = unfence(s)) == CUDA_ERROR_NOT_READY) {
        if (pf_now_ns() - t0 > POLL_NS) {
            if ((r = PF_CALL(cuEventSynchronize, s->ev)) == CUDA_SUCCESS)
                s->fenced = 0;
            return r;
        }
        pause();
    }
    return r;
}

static int copying(const struct held *h, int nh) {
    for (int i = 0; i < nh; i++)
        if (h[i].phase == COPYING)
            return 1;
    return 0;
}

/* Issues the DMA of a held chunk and fences its slot. */
static CUresult dma(struct plan *p, struct held *h) {
    const struct pf_xfer *x = p->x;
    h->dma_ns = stamp(p->debug);
    CUresult r = x->dir == PF_DIR_H2D
                     ? PF_CALL(cuMemcpyHtoDAsync_v2, x->dev + h->off, h->s->mem, h->len, x->stream)
                     : PF_CALL(cuMemcpyDtoHAsync_v2, h->s->mem, x->dev + h->off, h->len, x->stream);
    if (r != CUDA_SUCCESS)
        return r;
    h->dma_end_ns = stamp(p->debug);
    if (!p->first_dma_ns)
        p->first_dma_ns = h->dma_end_ns;
    r = PF_CALL(cuEventRecord, h->s->ev, x->stream);
    if (r != CUDA_SUCCESS) {
        /* no fence: make sure the DMA is over before the slot is reused */
        PF_CALL(cuStreamSynchronize, x->stream);
        return r;
    }
    h->s->fenced = 1;
    h->s->owner = owner(x->stream);
    return CUDA_SUCCESS;
}

static int tasks_done(const struct held *h) {
    /* tasks finish roughly in order: ask the last first */
    for (int i = h->ntasks - 1; i >= 0; i--)
        if (!pf_task_done(&h->tasks[i]))
            return 0;
    return 1;
}

/* More chunks to take, and no slot free to take them. */
static int needs_slot(const struct plan *p, const struct held *h, int nh) {
    if (p->next >= p->x->bytes)
        return 0;
    for (int i = 0; i < nh; i++)
        if (h[i].phase == IDLE && !h[i].s->fenced)
            return 0;
    return 1;
}

/* A paced H2D with chunks left, as far ahead of its DMA as it may get:
 * `filling` chunks being copied in, `dmas` fenced slots not seen done. */
static int held_back(const struct plan *p, int filling, int dmas) {
    return p->lean && p->next < p->x->bytes && filling + dmas >= LEAN_AHEAD;
}

/* The caller polls: it issues each DMA the moment its chunk is ready and
 * starts each host copy the moment its DMA is over, in whatever order the
 * workers finish (the chunks are disjoint; a slow worker must not hold the
 * copy engine up), so the copy engine is never idle while the caller does
 * something else.  The caller copies itself only pieces small enough not to
 * delay that (or everything, when there is no worker).
 * H2D chunks go IDLE -> COPYING -> DMA'd, their slot fenced until the DMA is
 * over; an asynchronous call returns once the program's memory has been
 * read, the last DMAs possibly in flight, a synchronous one once they are
 * over, as the plain driver's.  D2H chunks go IDLE -> DMA -> COPYING ->
 * IDLE; the call returns with every byte in place. */
static CUresult run(struct plan *p, struct held *h, int nh, size_t help_max) {
    int fifo[MAX_SLOTS]; /* fenced slots, in fence order: they complete in it */
    int first = 0, count = 0, filling = 0; /* H2D chunks being copied in */
    size_t retired = 0; /* bytes */
    int h2d = p->x->dir == PF_DIR_H2D;
    CUresult err = CUDA_SUCCESS;
    for (int i = 0; i < nh; i++) /* fences left by earlier copies */
        if (h[i].s->fenced)
            fifo[(first + count++) % nh] = i;
    while (retired < p->x->bytes && !err) {
        int progress = 0;
        /* DMAs that are over: D2H chunks to copy out, slots to reuse.  An
         * H2D copy asks only when it needs a slot or is held back (paced):
         * each question is a driver call, made while its finished tasks
         * wait for their DMA (2-3 us late on 1 MiB copies, engine v9
         * timeline) */
        while (count && !err && (!h2d || needs_slot(p, h, nh) || held_back(p, filling, count))) {
            struct held *c = &h[fifo[first]];
            CUresult q = unfence(c->s);
            if (q == CUDA_ERROR_NOT_READY)
                break;
            if (q) {
                err = q;
            } else {
                c->landed_ns = stamp(p->debug);
                if (c->phase == DMA)
                    split(p, c);
                else if (c->logged)
                    p->log[c->logged - 1].landed = c->landed_ns;
            }
            first = (first + 1) % nh;
            count--;
            progress = 1;
        }
        for (int i = 0; i < nh && !err; i++) {
            struct held *c = &h[i];
            if (c->phase == IDLE && !c->s->fenced && p->next < p->x->bytes &&
                (!p->lean || (filling < LEAN_CHUNKS && !held_back(p, filling, count)))) {
                take_chunk(p, c);
                if (h2d) {
                    split(p, c);
                    filling++;
                } else if (!(err = dma(p, c))) {
                    c->phase = DMA;
                    fifo[(first + count++) % nh] = i;
                }
                progress = 1;
            } else if (c->phase == COPYING && tasks_done(c)) {
                if (h2d && !(err = dma(p, c)))
                    fifo[(first + count++) % nh] = i;
                filling -= h2d;
                if (p->debug)
                    account(p, c);
                c->phase = IDLE;
                retired += c->len;
                progress = 1;
            }
        }
        /* nothing moved: let the DMA run a little before asking the
         * driver again, so the caller does not hammer its locks; when
         * only the DMA can move, wait for the oldest one */
        if (!progress && !pf_task_help(help_max)) {
            if (count && !copying(h, nh))
                err = await(h[fifo[first]].s);
            else
                pause();
        }
    }
    if (!err && h2d && !p->x->async && count) { /* they complete in order */
        err = await(h[fifo[(first + count - 1) % nh]].s);
        for (; count && !err; count--, first = (first + 1) % nh)
            h[fifo[first]].s->fenced = 0;
    }
    for (int i = 0; i < nh; i++) { /* after an error */
        if (h[i].phase == COPYING)
            wait_tasks(&h[i]); /* DMA-phase slots stay fenced for whoever comes next */
        h[i].phase = IDLE;
    }
    return err;
}

/* An asynchronous pageable D2H (PINFAST_ASYNC_D2H): each chunk lands in a
 * slot on the caller's stream, and a stream callback moves it into the
 * program's memory when the stream gets there, so the call returns at once,
 * as it does for pinned memory.  cuStreamAddCallback, not cuLaunchHostFunc:
 * its callback runs even after a device error, so the slot always comes back. */
struct landing {
    struct context *c;
    struct slot *s;
    int range; /* the pending host range */
    char *dst;
    size_t len;
    enum pf_host_copy kind;
    struct pf_task tasks[MAX_SPLIT];
};

static void CUDA_CB landed(CUstream stream, CUresult status, void *arg) {
    (void)stream;
    struct landing *l = arg;
    if (status == CUDA_SUCCESS) {
        int n = cut(l->tasks, l->dst, l->s->mem, l->len, l->kind, task_size(l->len));
        for (int i = 0; i < n; i++)
            pf_task_wait(&l->tasks[i]);
    }
    pf_pending_release(l->range);
    struct context *c = l->c;
    pthread_mutex_lock(&c->lock);
    l->s->fenced = 0; /* whatever the fence waited for came before this DMA */
    l->s->busy = 0;
    c->landing--;
    pthread_mutex_unlock(&c->lock);
    free(l);
}

/* A free slot for a landing, if landings hold fewer than half the slots:
 * the other half stays for the copies of other streams, which must never
 * wait on this stream's progress. */
static struct slot *take_landing_slot(struct context *c, uintptr_t who) {
    struct slot *s = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->landing < (c->nslots + 1) / 2 && (s = take_slot(c, who)))
        c->landing++;
    pthread_mutex_unlock(&c->lock);
    return s;
}

static void drop_landing_slot(struct context *c, struct slot *s) {
    struct held h = {.s = s};
    pthread_mutex_lock(&c->lock);
    c->landing--;
    pthread_mutex_unlock(&c->lock);
    release(c, &h, 1);
}

/* Issues landings for a prefix of the copy; returns its length.  The rest
 * (no slot free under the cap, the range table full, no memory) is staged
 * synchronously by the caller. */
static size_t land(const struct pf_xfer *x, struct context *c, enum pf_host_copy kind,
                   CUresult *err) {
    int range = pf_pending_begin(x->host, x->bytes);
    if (range < 0)
        return 0;
    size_t off = 0;
    while (off < x->bytes && !*err) {
        struct slot *s = take_landing_slot(c, owner(x->stream));
        if (!s)
            break;
        struct landing *l = aligned_alloc(_Alignof(struct landing), sizeof *l);
        if (!l) {
            drop_landing_slot(c, s);
            break;
        }
        size_t len = x->bytes - off < c->slot_size ? x->bytes - off : c->slot_size;
        *l = (struct landing){.c = c, .s = s, .range = range, .dst = (char *)x->host + off,
                              .len = len, .kind = kind};
        CUresult r = s->fenced ? PF_CALL(cuStreamWaitEvent, x->stream, s->ev, 0) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS)
            r = PF_CALL(cuMemcpyDtoHAsync_v2, s->mem, x->dev + off, len, x->stream);
        if (r != CUDA_SUCCESS) {
            *err = r;
        } else {
            pf_pending_hold(range);
            /* from here the callback owns l (and may have freed it already) */
            if (PF_CALL(cuStreamAddCallback, x->stream, landed, l, 0) == CUDA_SUCCESS) {
                off += len;
                continue;
            }
            /* no callback: let the DMA finish; the caller redoes this chunk */
            pf_pending_release(range);
            *err = PF_CALL(cuStreamSynchronize, x->stream);
        }
        free(l);
        drop_landing_slot(c, s);
        break;
    }
    pf_pending_release(range);
    return off;
}

/* Why a copy may not be staged, checked before touching anything, so that a
 * copy the driver would reject reaches the driver and gets its own error.
 * While any capture runs, pinfast's queries and waits could invalidate it
 * (tests/gpu/probes/capture_modes.c), and the driver's own copies are
 * allowed: everything passes through.  The device side must be device
 * memory: managed and mapped host memory are read by the host the moment
 * the plain call returns. */
static int stageable(const struct pf_xfer *x, int debug, uint64_t mark[2]) {
    const struct pf_options *o = pf_options();
    if (!o->stage || !o->staging || !x->bytes || x->bytes < o->min_size || !x->host ||
        pf_capturing() || pf_classify_uncached((uintptr_t)x->host) != PF_MEM_PAGEABLE)
        return 0;
    mark[0] = stamp(debug);
    CUstreamCaptureStatus cs;
    if (PF_CALL(cuStreamIsCapturing, x->stream, &cs) != CUDA_SUCCESS ||
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    mark[1] = stamp(debug);
    unsigned type = 0;
    int managed = 0;
    CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
    void *vals[2] = {&type, &managed};
    CUdeviceptr base;
    size_t size;
    if (PF_CALL(cuPointerGetAttributes, 2, attrs, vals, x->dev) != CUDA_SUCCESS ||
        type != CU_MEMORYTYPE_DEVICE || managed ||
        PF_CALL(cuMemGetAddressRange_v2, &base, &size, x->dev) != CUDA_SUCCESS)
        return 0;
    return x->dev - base <= size && x->bytes <= size - (x->dev - base);
}

/* This thread's chunks in hand, on the heap: as a local array they took
 * 140 KB of stack, more than some threads have at all.  Freed with the
 * thread; NULL, and the copy passes through, if there is no memory. */
static pthread_key_t held_key;
static pthread_once_t held_once = PTHREAD_ONCE_INIT;
static __thread struct held *held_mine;
static __thread int held_cap;

static void held_key_create(void) { pthread_key_create(&held_key, free); }

static struct held *held_array(int n) {
    if (held_cap >= n)
        return held_mine;
    pthread_once(&held_once, held_key_create);
    struct held *h = aligned_alloc(_Alignof(struct held), (size_t)n * sizeof *h);
    if (!h)
        return NULL;
    free(held_mine);
    held_mine = h;
    held_cap = n;
    pthread_setspecific(held_key, h);
    return h;
}

/* The staged copy, once stageable() and the context's slots allow it. */
static int staged(const struct pf_xfer *x, CUresult *result, int debug, uint64_t t0, uint64_t mark[2]) {
    uint64_t ts = stamp(debug);
    struct context *c = context_of(x->stream);
    /* a copy holds at most half the slots (acquire) */
    int most = c && c->nslots > 1 ? c->nslots / 2 : 1;
    struct held *h;
    if (!c || !c->nslots || !(h = held_array(most)))
        return 0;
    uint64_t tc = stamp(debug);
    int workers = pf_workers_start(__atomic_load_n(&live, __ATOMIC_RELAXED)), asleep = pf_workers_sleeping();
    const struct pf_options *o = pf_options();
    struct chunk_log log[debug ? TIMELINE : 1];
    struct plan p = {.x = x, .chunk = c->slot_size, .debug = debug, .t0 = t0, .log = log, .slots = c->slots};
    p.ramp = p.chunk < MIN_CHUNK ? p.chunk : MIN_CHUNK;
    p.kind = x->dir == PF_DIR_H2D ? o->copy_h2d : o->copy_d2h;
    /* H2D: streaming stores won at 1 MiB (14.5 vs 11.2 GB/s) and 64 MiB (39.0
     * vs 36.2) and lost at 256 MiB (39.9 vs 42.5) and 1 GiB (44.9 vs 49.2):
     * engine sweeps v5 and v8.  D2H: they lost at 16 MiB (26 vs 34, v8) and
     * tied from 64 MiB on one GPU, where on two they keep the reads for
     * ownership off the memory bus: 1 GiB on both H200s at once 85.6 ->
     * 101.4 GB/s (h200x2-multigpu-v2 logs) */
    if (p.kind == PF_HOST_COPY_AUTO && x->dir == PF_DIR_H2D)
        p.kind = x->bytes < AUTO_STREAM_BELOW ? PF_HOST_COPY_STREAM : PF_HOST_COPY_MEMCPY;
    else if (p.kind == PF_HOST_COPY_AUTO)
        p.kind = x->bytes >= AUTO_STREAM_FROM ? PF_HOST_COPY_STREAM : PF_HOST_COPY_MEMCPY;
    p.lean = x->dir == PF_DIR_H2D && p.kind == PF_HOST_COPY_STREAM && x->bytes >= LEAN_FROM;
    struct pf_xfer rest = *x;
    size_t landed_bytes = 0;
    *result = CUDA_SUCCESS;
    if (x->dir == PF_DIR_D2H && x->async && o->async_d2h) {
        landed_bytes = land(x, c, p.kind, result);
        rest.dev += landed_bytes;
        rest.host = (char *)rest.host + landed_bytes;
        rest.bytes -= landed_bytes;
        p.x = &rest;
    }
    int want = 0; /* slots the copy's chunks fill, `most` at most */
    for (size_t off = 0, r = p.ramp; off < rest.bytes && want < most; want++) {
        off += r;
        r = r * 2 < p.chunk ? r * 2 : p.chunk;
    }
    uint64_t t1 = stamp(debug), t2 = t1, t3 = t1;
    int nh = 0;
    if (rest.bytes && *result == CUDA_SUCCESS) {
        nh = acquire(c, h, want, owner(x->stream));
        if (!nh && !landed_bytes) /* no slot free: nothing done yet */
            return 0;
        if (!nh) /* the landings' rest, as the plain driver would copy it */
            *result = PF_CALL(cuMemcpyDtoHAsync_v2, rest.host, rest.dev, rest.bytes, x->stream);
    }
    if (nh) {
        /* plain pageable H2D copies wait for the stream before reading the
         * source (something queued earlier may still write it) */
        if (x->dir == PF_DIR_H2D && !x->async)
            *result = PF_CALL(cuStreamSynchronize, x->stream);
        t2 = stamp(debug);
        if (*result == CUDA_SUCCESS) {
            /* the workers wake while the caller takes its first chunk; not
             * waited for: with two processes staging, the sleepers' mutex
             * held the caller 15-20 us (h200x2-multigpu-v5 call 4), and a
             * submit finding every worker asleep wakes one anyway */
            pf_workers_active(1);
            pf_workers_wake(0);
            t3 = stamp(debug);
            size_t help_max = x->dir == PF_DIR_H2D ? HELP_MAX_H2D : HELP_MAX;
            *result = run(&p, h, nh, workers ? help_max : (size_t)-1);
            pf_workers_active(-1);
        }
        release(c, h, nh);
    }
    __atomic_fetch_add(&staged_copies, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&staged_bytes, x->bytes, __ATOMIC_RELAXED);
    if (debug) {
        uint64_t t4 = pf_now_ns();
        int processes, budget = pf_workers_budget(&processes);
        pf_msg(PF_DEBUG,
               "staged %s %zu B (%zu landing later): %d chunks, %d tasks (%d by the caller), %d slots, %s; "
               "%d of %d workers asleep, %d may wake (%d processes staging); us: classify %.1f capture %.1f range %.1f context %.1f "
               "plan %.1f slots+sync %.1f wake %.1f first-task %.1f first-dma %.1f end %.1f; result %d",
               x->dir == PF_DIR_H2D ? "H2D" : "D2H", x->bytes, landed_bytes, p.nchunks, p.ntasks, p.helped, nh,
               p.kind == PF_HOST_COPY_STREAM ? "streaming stores" : "memcpy",
               asleep, workers, budget, processes, (mark[0] - t0) / 1e3, (mark[1] - mark[0]) / 1e3,
               (ts - mark[1]) / 1e3, (tc - ts) / 1e3, (t1 - tc) / 1e3, (t2 - t1) / 1e3,
               (t3 - t2) / 1e3,
               p.first_task_ns ? (p.first_task_ns - t0) / 1e3 : -1.0,
               p.first_dma_ns ? (p.first_dma_ns - t0) / 1e3 : -1.0, (t4 - t0) / 1e3, *result);
        print_timeline(&p);
    }
    return 1;
}

int pf_engine_copy(const struct pf_xfer *x, CUresult *result) {
    int debug = pf_log_level() >= PF_DEBUG;
    uint64_t t0 = stamp(debug), mark[2];
    if (!stageable(x, debug, mark))
        return 0;
    /* a staged copy is no cancellation point, as the driver's own is not:
     * cancelled in a wait, its thread would leave slots and locks held */
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    CUstreamCaptureMode mode = pf_capture_relax();
    int done = staged(x, result, debug, t0, mark);
    pf_capture_restore(mode);
    pthread_setcancelstate(cancel, NULL);
    return done;
}

void pf_engine_stats(struct pf_engine_stats *out) {
    out->copies = __atomic_load_n(&staged_copies, __ATOMIC_RELAXED);
    out->bytes = __atomic_load_n(&staged_bytes, __ATOMIC_RELAXED);
    out->pinned_bytes = __atomic_load_n(&pinned_bytes, __ATOMIC_RELAXED);
    out->contexts = __atomic_load_n(&made, __ATOMIC_RELAXED);
    out->threads = pf_workers_count();
    out->worker_seconds = pf_workers_cpu_seconds();
}

void pf_engine_forked(void) {
    /* the parent's contexts are unusable here; their memory stays mapped */
    ncontexts = live = made = 0;
    pf_capture_forked();
    pf_pending_forked();
    staged_copies = staged_bytes = pinned_bytes = 0;
    pthread_mutex_init(&contexts_lock, NULL);
    pf_workers_forked();
}
