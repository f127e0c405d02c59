/* One caller thread drives each staged copy: it cuts the copy into chunks,
 * one pinned slot each, hands the host side of every chunk to the workers as
 * a few tasks, and issues each chunk's DMA on the caller's own stream, in
 * order.  Issuing from the caller's thread keeps the copy ordered in its
 * stream exactly as the plain call (the per-thread default stream included),
 * and keeps the workers free of any CUDA state.  A slot whose DMA may still
 * run is "fenced" by an event recorded after it; it is reused only once the
 * event has completed. */
#include "engine.h"
#include "driver.h"
#include "hostmap.h"
#include "message.h"
#include "options.h"
#include "workers.h"

#include <pthread.h>
#include <stdlib.h>

#define MAX_CONTEXTS 64
#define MAX_SLOTS 256
#define MAX_SPLIT 16           /* tasks per chunk */
#define MIN_TASK (64u << 10)   /* smaller host copies cost more to hand out than to do */

struct slot {
    char *mem;
    CUevent ev;
    int fenced;        /* ev recorded after a DMA that may still use mem */
    int busy;          /* held by a copy */
    unsigned long seq; /* when it was fenced: the oldest fence completes first */
};

/* Pinned slots and events belong to one context. */
struct context {
    unsigned long long id;
    pthread_mutex_t lock;
    pthread_cond_t freed;
    int nslots;
    size_t slot_size;
    struct slot slots[MAX_SLOTS];
};

static struct context *contexts[MAX_CONTEXTS];
static int ncontexts;
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long fence_seq;
static int warned_pinned, warned_contexts;

/* Builds a context's slots; NULL (and the copy passes through) on failure. */
static struct context *create(unsigned long long id) {
    const struct pf_options *o = pf_options();
    size_t size = o->chunk < o->staging ? o->chunk : o->staging;
    size_t n = size ? o->staging / size : 0;
    if (n > MAX_SLOTS)
        n = MAX_SLOTS;
    struct context *c = calloc(1, sizeof *c);
    if (!c || !n) {
        free(c);
        return NULL;
    }
    void *block = NULL;
    /* portable: any context may copy from it; halve until the driver agrees */
    while (n && PF_CALL(cuMemHostAlloc, &block, n * size, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
        n /= 2;
    if (!n) {
        pf_msg_once(warned_pinned, PF_WARNING,
                    "could not pin %zu bytes of staging memory; pageable copies pass through",
                    size);
        free(c);
        return NULL;
    }
    int k = 0;
    for (; k < (int)n; k++) {
        c->slots[k].mem = (char *)block + (size_t)k * size;
        if (PF_CALL(cuEventCreate, &c->slots[k].ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
            break;
    }
    if (!k) {
        PF_CALL(cuMemFreeHost, block);
        free(c);
        return NULL;
    }
    pf_hostmap_add(block, n * size, PF_MEM_PINFAST, CU_MEMHOSTALLOC_PORTABLE);
    c->id = id;
    c->nslots = k;
    c->slot_size = size;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->freed, NULL);
    pf_msg(PF_INFO, "context %llu: %d staging slots of %zu KiB", id, k, size >> 10);
    return c;
}

/* The current context's state, created on first use.  Context ids are never
 * reused, so a destroyed context's state is simply never found again. */
static struct context *current(void) {
    CUcontext ctx = NULL;
    unsigned long long id;
    if (PF_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx ||
        PF_CALL(cuCtxGetId, ctx, &id) != CUDA_SUCCESS)
        return NULL;
    int n = __atomic_load_n(&ncontexts, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (contexts[i]->id == id)
            return contexts[i];
    struct context *c = NULL;
    pthread_mutex_lock(&contexts_lock);
    for (int i = 0; i < ncontexts && !c; i++)
        if (contexts[i]->id == id)
            c = contexts[i];
    if (!c && ncontexts < MAX_CONTEXTS && (c = create(id))) {
        contexts[ncontexts] = c;
        __atomic_store_n(&ncontexts, ncontexts + 1, __ATOMIC_RELEASE);
    } else if (!c && ncontexts == MAX_CONTEXTS) {
        pf_msg_once(warned_contexts, PF_WARNING,
                    "more than %d CUDA contexts; copies in new ones pass through", MAX_CONTEXTS);
    }
    pthread_mutex_unlock(&contexts_lock);
    return c;
}

/* A slot a copy holds, and the chunk it carries. */
struct held {
    struct slot *s;
    int chunk;  /* -1: none */
    int phase;  /* what the chunk waits for */
    int ntasks;
    struct pf_task tasks[MAX_SPLIT];
};

enum { IDLE, COPYING, DMA };

/* Takes up to `want` free slots, waiting for one if none is free.  A copy
 * holds at most half the slots, so copies in the other direction proceed. */
static int acquire(struct context *c, struct held *h, int want) {
    int n = 0;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        for (int i = 0; i < c->nslots && n < want; i++)
            if (!c->slots[i].busy) {
                c->slots[i].busy = 1;
                h[n++] = (struct held){.s = &c->slots[i], .chunk = -1, .phase = IDLE};
            }
        if (n)
            break;
        pthread_cond_wait(&c->freed, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

static void release(struct context *c, struct held *h, int n) {
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < n; i++)
        h[i].s->busy = 0;
    pthread_cond_broadcast(&c->freed);
    pthread_mutex_unlock(&c->lock);
}

struct plan {
    const struct pf_xfer *x;
    size_t chunk, task;
    int nchunks;
};

static size_t chunk_len(const struct plan *p, int k) {
    size_t off = (size_t)k * p->chunk;
    return p->x->bytes - off < p->chunk ? p->x->bytes - off : p->chunk;
}

/* Queues the host side of chunk k as tasks between the slot and the program's memory. */
static void split(const struct plan *p, struct held *h, int k) {
    size_t off = (size_t)k * p->chunk, len = chunk_len(p, k);
    char *user = (char *)p->x->host + off;
    h->chunk = k;
    h->phase = COPYING;
    h->ntasks = 0;
    for (size_t done = 0; done < len; done += p->task) {
        size_t n = len - done < p->task ? len - done : p->task;
        struct pf_task *t = &h->tasks[h->ntasks++];
        if (p->x->dir == PF_DIR_H2D)
            pf_task_submit(t, h->s->mem + done, user + done, n);
        else
            pf_task_submit(t, user + done, h->s->mem + done, n);
    }
}

static void wait_tasks(struct held *h) {
    for (int i = 0; i < h->ntasks; i++)
        pf_task_wait(&h->tasks[i]);
    h->ntasks = 0;
}

/* Waits until the slot's last DMA is complete. */
static CUresult unfence(struct slot *s, int block) {
    if (!s->fenced)
        return CUDA_SUCCESS;
    CUresult r = block ? PF_CALL(cuEventSynchronize, s->ev) : PF_CALL(cuEventQuery, s->ev);
    if (r == CUDA_SUCCESS)
        s->fenced = 0;
    return r;
}

/* Issues the DMA of a held chunk and fences its slot. */
static CUresult dma(const struct plan *p, struct held *h) {
    size_t off = (size_t)h->chunk * p->chunk, len = chunk_len(p, h->chunk);
    const struct pf_xfer *x = p->x;
    CUresult r = x->dir == PF_DIR_H2D
                     ? PF_CALL(cuMemcpyHtoDAsync_v2, x->dev + off, h->s->mem, len, x->stream)
                     : PF_CALL(cuMemcpyDtoHAsync_v2, h->s->mem, x->dev + off, len, x->stream);
    if (r != CUDA_SUCCESS)
        return r;
    r = PF_CALL(cuEventRecord, h->s->ev, x->stream);
    if (r != CUDA_SUCCESS) {
        /* no fence: make sure the DMA is over before the slot is reused */
        PF_CALL(cuStreamSynchronize, x->stream);
        return r;
    }
    h->s->fenced = 1;
    h->s->seq = __atomic_add_fetch(&fence_seq, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

/* H2D: host copy into a slot, then its DMA; the copy returns once the
 * program's memory has been read, with the last DMAs possibly in flight. */
static CUresult h2d(const struct plan *p, struct held *h, int nh) {
    int order[MAX_SLOTS]; /* held slots in chunk order */
    int first = 0, count = 0, next = 0, issued = 0;
    CUresult err = CUDA_SUCCESS;
    while (issued < p->nchunks && !err) {
        for (int i = 0; i < nh && next < p->nchunks; i++) {
            if (h[i].chunk >= 0)
                continue;
            CUresult q = unfence(h[i].s, 0);
            if (q == CUDA_ERROR_NOT_READY)
                continue;
            if (q) {
                err = q;
                break;
            }
            split(p, &h[i], next++);
            order[(first + count++) % nh] = i;
        }
        if (err)
            break;
        if (!count) { /* every slot waits for its DMA: wait for the oldest */
            struct held *oldest = &h[0];
            for (int i = 1; i < nh; i++)
                if (h[i].s->seq < oldest->s->seq)
                    oldest = &h[i];
            err = unfence(oldest->s, 1);
            continue;
        }
        struct held *c = &h[order[first]];
        wait_tasks(c);
        err = dma(p, c);
        c->chunk = -1;
        c->phase = IDLE;
        first = (first + 1) % nh;
        count--;
        issued++;
    }
    for (; count; count--, first = (first + 1) % nh) /* after an error */
        wait_tasks(&h[order[first]]);
    return err;
}

/* D2H: DMA into a slot, then the host copy out of it once the DMA is
 * complete; the copy returns with every byte in place. */
static CUresult d2h(const struct plan *p, struct held *h, int nh) {
    int order[MAX_SLOTS];
    int first = 0, count = 0, next = 0, done = 0;
    CUresult err = CUDA_SUCCESS;
    while (done < p->nchunks && !err) {
        for (int i = 0; i < nh && next < p->nchunks && !err; i++) {
            if (h[i].chunk >= 0)
                continue;
            if ((err = unfence(h[i].s, 1))) /* an H2D's DMA may still read it */
                break;
            h[i].chunk = next++;
            h[i].phase = DMA;
            if ((err = dma(p, &h[i]))) {
                h[i].chunk = -1;
                h[i].phase = IDLE;
                break;
            }
            order[(first + count++) % nh] = i;
        }
        if (err)
            break;
        /* start the host copies of every chunk whose DMA is over, in order */
        for (int k = 0; k < count && !err; k++) {
            struct held *c = &h[order[(first + k) % nh]];
            if (c->phase != DMA)
                continue;
            CUresult q = unfence(c->s, k == 0);
            if (q == CUDA_ERROR_NOT_READY)
                break;
            if (q)
                err = q;
            else
                split(p, c, c->chunk);
        }
        if (err)
            break;
        struct held *c = &h[order[first]];
        wait_tasks(c);
        c->chunk = -1;
        c->phase = IDLE;
        first = (first + 1) % nh;
        count--;
        done++;
    }
    for (; count; count--, first = (first + 1) % nh) {
        struct held *c = &h[order[first]];
        wait_tasks(c); /* DMA-phase slots stay fenced for whoever comes next */
        c->chunk = -1;
    }
    return err;
}

/* Why a copy may not be staged, checked before touching anything, so that a
 * copy the driver would reject reaches the driver and gets its own error. */
static int stageable(const struct pf_xfer *x) {
    const struct pf_options *o = pf_options();
    if (!o->stage || !o->staging || !x->bytes || x->bytes < o->min_size || !x->host)
        return 0;
    CUstreamCaptureStatus cs;
    if (PF_CALL(cuStreamIsCapturing, x->stream, &cs) != CUDA_SUCCESS ||
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 0;
    CUdeviceptr base;
    size_t size;
    if (PF_CALL(cuMemGetAddressRange_v2, &base, &size, x->dev) != CUDA_SUCCESS)
        return 0;
    return x->dev - base <= size && x->bytes <= size - (x->dev - base);
}

int pf_engine_copy(const struct pf_xfer *x, CUresult *result) {
    if (!stageable(x))
        return 0;
    struct context *c = current();
    if (!c)
        return 0;
    int workers = pf_workers_start();
    struct plan p = {.x = x, .chunk = c->slot_size};
    p.nchunks = (int)((x->bytes + p.chunk - 1) / p.chunk);
    int want = c->nslots > 1 ? c->nslots / 2 : 1;
    if (want > p.nchunks)
        want = p.nchunks;
    /* plain pageable H2D copies wait for the stream before reading the
     * source (something queued earlier may still write it) */
    if (x->dir == PF_DIR_H2D && !x->async) {
        CUresult r = PF_CALL(cuStreamSynchronize, x->stream);
        if (r != CUDA_SUCCESS) {
            *result = r;
            return 1;
        }
    }
    struct held h[MAX_SLOTS / 2 + 1];
    int nh = acquire(c, h, want);
    /* enough tasks for every worker and the caller, none too small */
    size_t in_flight = (size_t)nh * p.chunk < x->bytes ? (size_t)nh * p.chunk : x->bytes;
    size_t task = (in_flight / (size_t)(workers + 1) + 4095) & ~(size_t)4095;
    if (task < MIN_TASK)
        task = MIN_TASK;
    if (task < (p.chunk + MAX_SPLIT - 1) / MAX_SPLIT)
        task = (p.chunk + MAX_SPLIT - 1) / MAX_SPLIT;
    p.task = task;
    *result = x->dir == PF_DIR_H2D ? h2d(&p, h, nh) : d2h(&p, h, nh);
    release(c, h, nh);
    return 1;
}

void pf_engine_forked(void) {
    /* the parent's contexts are unusable here; their memory stays mapped */
    ncontexts = 0;
    pthread_mutex_init(&contexts_lock, NULL);
    pf_workers_forked();
}
