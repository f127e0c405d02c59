/* fake_stream.c - streams, events, stream capture, graphs, host functions.
 *
 * Every stream (a context's legacy stream, each thread's per-thread default
 * stream, created streams) has its own worker thread that runs a FIFO of ops
 * later, after an optional random delay (FAKECUDA_DELAY_US, default 0..50 us),
 * so asynchronous work really completes late and ordering bugs show up.
 *
 * Ordering model (CUDA "stream synchronization behavior"):
 *  - ops of one stream run in order;
 *  - an op queued on the legacy stream first waits for everything queued
 *    before it on the blocking streams (created without
 *    CU_STREAM_NON_BLOCKING, and per-thread default streams) of its context;
 *  - an op queued on a blocking stream first waits for everything queued
 *    before it on the legacy stream;
 *  - cuStreamWaitEvent queues a no-op that waits for the event's op;
 *  - cuStreamQuery of the legacy stream answers NOT_READY while a blocking
 *    stream of its context has work, as the driver's does.
 * Dependencies are (stream, sequence number) pairs taken at enqueue time, so
 * they always point backwards and cannot form a cycle.
 *
 * Handles are pointers to our structs, but every handle is first looked up
 * in a registry (a list under fake_lock): a bogus or destroyed handle gives
 * CUDA_ERROR_INVALID_HANDLE instead of being dereferenced.  Structs are
 * reference counted because deps, events and sync waiters may outlive a
 * cuStreamDestroy (which, like the real one, returns at once and lets queued
 * work finish).
 *
 * Capture modes (measured on driver 580, capture_modes.log in
 * docs/results/2026-11-24-h100-contract/logs.log): a call the driver deems potentially unsafe (cuEventQuery,
 * cuEventSynchronize, cuStreamSynchronize and cuStreamQuery of any stream,
 * cuMemHostAlloc, cuMemAllocHost, cuMemFreeHost, cuCtxSynchronize) is
 * prohibited while the calling thread's mode is not RELAXED and a capture
 * begun in GLOBAL mode is under way anywhere, or the calling thread itself
 * began one in THREAD_LOCAL mode.  cuCtxSynchronize is also prohibited,
 * whatever the modes, while any capture is under way in its context.  A
 * prohibited call returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, does
 * nothing, and invalidates the captures that prohibit it: they report
 * CU_STREAM_CAPTURE_STATUS_INVALIDATED, drop what is captured afterwards, and
 * end with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no graph.  A capture is
 * under way until it ends, invalidated or not.  Copies, cuEventRecord,
 * cuEventCreate, cuStreamGetCtx, cuStreamIsCapturing stay allowed.  Calls on
 * the capturing stream itself keep their own rule (sync copies, synchronize
 * and query fail, the capture goes on; the real driver invalidates it).
 */
#define _GNU_SOURCE
#include "fake.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t fake_cv = PTHREAD_COND_INITIALIZER;

static struct fake_stream *g_streams;
/* Streams that went away are kept, never freed, like contexts: a new stream
 * never gets a dead one's address, so a stale handle stays invalid (streams
 * of destroyed contexts included). */
static struct fake_stream *g_dead_streams;
static unsigned g_seed = 12345;

struct fake_event {
    uint32_t magic;
    struct fake_ctx *ctx;
    unsigned flags;
    struct fake_stream *s;      /* stream of the last record, or NULL */
    uint64_t seq;               /* sequence number of the last record's op */
    int refs;
    int has_time;
    struct timespec t;
    struct fake_event *next;
};
#define FAKE_EVENT_MAGIC 0xE7E7E7E7u
static struct fake_event *g_events;

struct fake_graph {
    uint32_t magic;
    int is_exec;
    struct fake_op **ops;
    size_t n, cap;
    struct fake_graph *next;
};
#define FAKE_GRAPH_MAGIC 0x6A6A6A6Au
static struct fake_graph *g_graphs;
static unsigned long long g_capture_id;

/* ---- ops ---------------------------------------------------------------- */
struct fake_op *fake_op_new(enum fake_op_kind kind)
{
    struct fake_op *op = calloc(1, sizeof *op);
    if (op)
        op->kind = kind;
    return op;
}

void fake_op_free(struct fake_op *op)
{
    if (!op)
        return;
    free(op->deps);
    free(op->owned);
    free(op);
}

void fake_copy_run(const struct fake_copy *cp)
{
    for (size_t z = 0; z < cp->depth; z++)
        for (size_t y = 0; y < cp->height; y++)
            memmove(cp->dst + (z * cp->dheight + y) * cp->dpitch,
                    cp->src + (z * cp->sheight + y) * cp->spitch, cp->width);
}

/* ---- reference counting (fake_lock held) ---------------------------------- */
static void stream_unref_locked(struct fake_stream *s)
{
    if (--s->refs > 0)
        return;
    for (struct fake_stream **p = &g_streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    s->magic = 0;
    s->next = g_dead_streams;
    g_dead_streams = s;
}

/* Waits until s has run its op seq, asleep or spinning: the real driver
 * spins a core in cuStreamSynchronize, and in cuEventSynchronize on an
 * event made without CU_EVENT_BLOCKING_SYNC, in a context of default
 * scheduling (tests/gpu/probes/probe_waits.c,
 * docs/results/2026-11-25-h100-waits-asleep); contexts made with
 * CU_CTX_SCHED_BLOCKING_SYNC are not modelled.  The reference keeps s alive
 * should it be destroyed meanwhile. */
static void stream_wait_seq_locked(struct fake_stream *s, uint64_t seq, int spin)
{
    s->refs++;
    while (s->completed < seq) {
        if (!spin) {
            pthread_cond_wait(&fake_cv, &fake_lock);
            continue;
        }
        pthread_mutex_unlock(&fake_lock);
        sched_yield();
        pthread_mutex_lock(&fake_lock);
    }
    stream_unref_locked(s);
}

static void event_unref_locked(struct fake_event *e)
{
    if (--e->refs > 0)
        return;
    if (e->s)
        stream_unref_locked(e->s);
    e->magic = 0;
    free(e);
}

/* ---- worker -------------------------------------------------------------- */
static void *worker(void *arg)
{
    struct fake_stream *s = arg;
    pthread_mutex_lock(&fake_lock);
    for (;;) {
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&fake_cv, &fake_lock);
        if (!s->head)
            break;                        /* destroyed and drained */
        struct fake_op *op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        for (size_t i = 0; i < op->ndeps; i++) {
            while (op->deps[i].s->completed < op->deps[i].seq)
                pthread_cond_wait(&fake_cv, &fake_lock);
            stream_unref_locked(op->deps[i].s);
        }
        unsigned delay = fake_delay_us();
        unsigned sleep_us = delay ? (unsigned)rand_r(&s->rng) % (delay + 1) : 0;
        pthread_mutex_unlock(&fake_lock);

        if (sleep_us)
            usleep(sleep_us);
        switch (op->kind) {
        case OP_COPY:   fake_copy_run(&op->cp); break;
        case OP_HOSTFN: op->fn(op->user); break;
        default:        break;            /* OP_FREE: op->owned is freed below */
        }

        pthread_mutex_lock(&fake_lock);
        if (op->kind == OP_EVENT) {
            if (op->ev->s == s && op->ev->seq == op->seq) {
                clock_gettime(CLOCK_MONOTONIC, &op->ev->t);
                op->ev->has_time = 1;
            }
            event_unref_locked(op->ev);
        }
        s->completed = op->seq;
        s->staged -= op->staged;
        s->staged_large -= op->staged_large;
        pthread_cond_broadcast(&fake_cv);
        fake_op_free(op);
    }
    stream_unref_locked(s);               /* the worker's reference */
    pthread_mutex_unlock(&fake_lock);
    return NULL;
}

struct fake_stream *fake_stream_new(struct fake_ctx *ctx, enum fake_stream_kind kind,
                                    unsigned flags, int prio)
{
    struct fake_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->magic = FAKE_STREAM_MAGIC;
    s->kind = kind;
    s->ctx = ctx;
    s->flags = flags;
    s->priority = prio;
    s->refs = 2;                          /* owner + worker */
    pthread_mutex_lock(&fake_lock);
    s->rng = g_seed++;
    s->next = g_streams;
    g_streams = s;
    pthread_mutex_unlock(&fake_lock);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&s->thread, &attr, worker, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_lock(&fake_lock);
        s->refs = 1;
        stream_unref_locked(s);
        pthread_mutex_unlock(&fake_lock);
        return NULL;
    }
    return s;
}

static void stream_destroy_locked(struct fake_stream *s)
{
    s->destroyed = 1;
    pthread_cond_broadcast(&fake_cv);
    stream_unref_locked(s);               /* the owner's reference */
}

/* ---- per-thread default streams ---------------------------------------------- */
#define MAX_PTDS 16
struct ptds_list { int n; struct fake_ctx *ctx[MAX_PTDS]; struct fake_stream *s[MAX_PTDS]; };
static pthread_key_t ptds_key;
static pthread_once_t ptds_once = PTHREAD_ONCE_INIT;
static __thread struct ptds_list *tls_ptds;

/* thread exit: the thread's default streams finish their work and go away */
static void ptds_exit(void *arg)
{
    struct ptds_list *l = arg;
    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < l->n; i++)
        stream_destroy_locked(l->s[i]);
    pthread_mutex_unlock(&fake_lock);
    free(l);
}

static void ptds_key_init(void)
{
    pthread_key_create(&ptds_key, ptds_exit);
}

static struct fake_stream *ptds_stream(struct fake_ctx *c)
{
    if (!tls_ptds) {
        pthread_once(&ptds_once, ptds_key_init);
        tls_ptds = calloc(1, sizeof *tls_ptds);
        if (!tls_ptds)
            return NULL;
        pthread_setspecific(ptds_key, tls_ptds);
    }
    for (int i = 0; i < tls_ptds->n; i++)
        if (tls_ptds->ctx[i] == c)
            return tls_ptds->s[i];
    /* the streams of destroyed contexts make room (a thread may see contexts
     * come and go without end) */
    pthread_mutex_lock(&fake_lock);
    int kept = 0;
    for (int i = 0; i < tls_ptds->n; i++) {
        if (!atomic_load(&tls_ptds->ctx[i]->alive)) {
            stream_destroy_locked(tls_ptds->s[i]);
            continue;
        }
        tls_ptds->ctx[kept] = tls_ptds->ctx[i];
        tls_ptds->s[kept++] = tls_ptds->s[i];
    }
    tls_ptds->n = kept;
    pthread_mutex_unlock(&fake_lock);
    if (tls_ptds->n == MAX_PTDS)
        return NULL;
    struct fake_stream *s = fake_stream_new(c, STREAM_PER_THREAD, 0, 0);
    if (s) {
        tls_ptds->ctx[tls_ptds->n] = c;
        tls_ptds->s[tls_ptds->n++] = s;
    }
    return s;
}

/* ---- handle resolution ---------------------------------------------------- */
static struct fake_stream *find_user_stream_locked(CUstream h)
{
    for (struct fake_stream *s = g_streams; s; s = s->next)
        if ((CUstream)s == h && s->kind == STREAM_USER && !s->destroyed)
            return s;
    return NULL;
}

CUresult fake_stream_get(CUstream h, int per_thread, struct fake_stream **out)
{
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (h == CU_STREAM_LEGACY || (h == NULL && !per_thread)) {
        *out = c->legacy;
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (h == CU_STREAM_PER_THREAD || h == NULL) {
        *out = ptds_stream(c);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&fake_lock);
    struct fake_stream *s = find_user_stream_locked(h);
    pthread_mutex_unlock(&fake_lock);
    if (!s || !atomic_load(&s->ctx->alive))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = s;
    return CUDA_SUCCESS;
}

int fake_stream_capturing(struct fake_stream *s)
{
    pthread_mutex_lock(&fake_lock);
    int c = s->capture != NULL;
    pthread_mutex_unlock(&fake_lock);
    return c;
}

/* Whether work queued now on the legacy stream s waits for stream t: a
 * blocking stream of its context with work still to run.  Under fake_lock. */
static int legacy_waits_for(const struct fake_stream *s, const struct fake_stream *t)
{
    return t != s && t->ctx == s->ctx && !(t->flags & CU_STREAM_NON_BLOCKING) && t->enqueued > t->completed;
}

/* ---- enqueue ---------------------------------------------------------------- */
static int add_dep(struct fake_op *op, struct fake_stream *t, uint64_t seq)
{
    struct fake_dep *d = realloc(op->deps, (op->ndeps + 1) * sizeof *d);
    if (!d)
        return -1;
    op->deps = d;
    d[op->ndeps].s = t;
    d[op->ndeps].seq = seq;
    op->ndeps++;
    t->refs++;
    return 0;
}

static void graph_append_locked(struct fake_graph *g, struct fake_op *op)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        struct fake_op **ops = realloc(g->ops, cap * sizeof *ops);
        if (!ops)
            abort();
        g->ops = ops;
        g->cap = cap;
    }
    g->ops[g->n++] = op;
}

static void graph_free(struct fake_graph *g)
{
    for (size_t i = 0; i < g->n; i++)
        fake_op_free(g->ops[i]);
    free(g->ops);
    free(g);
}

void fake_enqueue(struct fake_stream *s, struct fake_op *op, uint64_t *seq)
{
    pthread_mutex_lock(&fake_lock);
    if (op->kind == OP_COPY)
        s->copies++;
    if (s->capture) {
        if (s->capture_invalid)
            fake_op_free(op);
        else
            graph_append_locked(s->capture, op);
        pthread_mutex_unlock(&fake_lock);
        if (seq)
            *seq = 0;
        return;
    }
    if (s->kind == STREAM_LEGACY) {
        for (struct fake_stream *t = g_streams; t; t = t->next)
            if (legacy_waits_for(s, t))
                add_dep(op, t, t->enqueued);
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        struct fake_stream *l = s->ctx->legacy;
        if (l && l->enqueued > l->completed)
            add_dep(op, l, l->enqueued);
    }
    op->seq = ++s->enqueued;
    if (op->kind == OP_EVENT) {
        struct fake_event *e = op->ev;
        if (e->s)
            stream_unref_locked(e->s);
        e->s = s;
        s->refs++;
        e->seq = op->seq;
        e->has_time = 0;
    }
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    if (seq)
        *seq = op->seq;
    pthread_cond_broadcast(&fake_cv);
    pthread_mutex_unlock(&fake_lock);
}

void fake_stream_wait(struct fake_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&fake_lock);
    while (s->completed < seq)
        pthread_cond_wait(&fake_cv, &fake_lock);
    pthread_mutex_unlock(&fake_lock);
}

void fake_stream_wait_queued(struct fake_stream *s)
{
    pthread_mutex_lock(&fake_lock);
    stream_wait_seq_locked(s, s->enqueued, 0);
    pthread_mutex_unlock(&fake_lock);
}

void fake_stream_stage(struct fake_stream *s, struct fake_op *op, size_t bytes)
{
    pthread_mutex_lock(&fake_lock);
    int large = bytes > FAKE_STAGING_SMALL;
    size_t pages = (bytes + FAKE_STAGING_PAGE - 1) / FAKE_STAGING_PAGE * FAKE_STAGING_PAGE;
    if (bytes > FAKE_STAGING || (large ? s->staged_large >= FAKE_STAGING_LARGE : s->staged + pages > FAKE_STAGING))
        stream_wait_seq_locked(s, s->enqueued, 0);
    if (large) {
        op->staged_large = 1;
        s->staged_large++;
    } else {
        op->staged = pages;
        s->staged += pages;
    }
    pthread_mutex_unlock(&fake_lock);
}

void fake_ctx_sync(struct fake_ctx *c)
{
    pthread_mutex_lock(&fake_lock);
again:
    for (struct fake_stream *s = g_streams; s; s = s->next) {
        if ((c && s->ctx != c) || s->completed >= s->enqueued)
            continue;
        stream_wait_seq_locked(s, s->enqueued, 0);
        goto again;                        /* the list may have changed */
    }
    pthread_mutex_unlock(&fake_lock);
}

/* ---- stream API ------------------------------------------------------------------ */
static CUresult stream_create(CUstream *phStream, unsigned int Flags, int prio)
{
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct fake_stream *s = fake_stream_new(c, STREAM_USER, Flags, prio);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phStream = (CUstream)s;
    return CUDA_SUCCESS;
}

/* Test hook: how many copy ops were queued on (or captured from) a stream,
 * resolved like a copy's stream argument (per_thread: the _ptsz meaning of
 * 0).  Lets a test see on which stream, and in how many pieces, a copy
 * reached the driver.  Returns (unsigned long)-1 for a bad handle. */
FAKE_API unsigned long fakecuda_stream_copies(CUstream h, int per_thread)
{
    struct fake_stream *s;
    if (fake_stream_get(h, per_thread, &s))
        return (unsigned long)-1;
    pthread_mutex_lock(&fake_lock);
    unsigned long n = s->copies;
    pthread_mutex_unlock(&fake_lock);
    return n;
}

FAKE_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    FAKE_ENTER();
    return stream_create(phStream, Flags, 0);
}

FAKE_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    FAKE_ENTER();
    if (priority > 0)
        priority = 0;
    if (priority < -5)
        priority = -5;
    return stream_create(phStream, flags, priority);
}

FAKE_API CUresult cuStreamDestroy_v2(CUstream hStream)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    pthread_mutex_lock(&fake_lock);
    struct fake_stream *s = find_user_stream_locked(hStream);
    if (s)
        stream_destroy_locked(s);
    pthread_mutex_unlock(&fake_lock);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_sync(CUstream h, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if (fake_stream_capturing(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if ((r = fake_capture_prohibit(NULL)))
        return r;
    pthread_mutex_lock(&fake_lock);
    /* the legacy stream's synchronize waits for the blocking streams' work
     * queued before it too, as an op on it would */
    for (struct fake_stream *t = g_streams; s->kind == STREAM_LEGACY && t; t = t->next)
        if (legacy_waits_for(s, t))
            stream_wait_seq_locked(t, t->enqueued, 1);
    stream_wait_seq_locked(s, s->enqueued, 1);
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamSynchronize(CUstream hStream) { FAKE_ENTER(); return stream_sync(hStream, 0); }
FAKE_API CUresult cuStreamSynchronize_ptsz(CUstream hStream) { FAKE_ENTER(); return stream_sync(hStream, 1); }

static CUresult stream_query(CUstream h, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if (fake_stream_capturing(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if ((r = fake_capture_prohibit(NULL)))
        return r;
    pthread_mutex_lock(&fake_lock);
    r = s->completed >= s->enqueued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    /* the legacy stream is not idle while a blocking stream of its context
     * has work, as the driver answers (tests/gpu/probes/probe_legacy_query.c) */
    for (struct fake_stream *t = g_streams; !r && s->kind == STREAM_LEGACY && t; t = t->next)
        if (legacy_waits_for(s, t))
            r = CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&fake_lock);
    return r;
}

FAKE_API CUresult cuStreamQuery(CUstream hStream) { FAKE_ENTER(); return stream_query(hStream, 0); }
FAKE_API CUresult cuStreamQuery_ptsz(CUstream hStream) { FAKE_ENTER(); return stream_query(hStream, 1); }

/* 0 (legacy or per-thread, by flavour), CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD give the current context.  v2 also answers the green
 * context, which no stream of the fake has. */
static CUresult stream_get_ctx(CUstream h, CUcontext *pctx, CUgreenCtx *pgreen, int v2, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if (!pctx || (v2 && !pgreen))
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)s->ctx;
    if (v2)
        *pgreen = NULL;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    FAKE_ENTER();
    return stream_get_ctx(hStream, pctx, NULL, 0, 0);
}

FAKE_API CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    FAKE_ENTER();
    return stream_get_ctx(hStream, pctx, NULL, 0, 1);
}

FAKE_API CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    FAKE_ENTER();
    return stream_get_ctx(hStream, pCtx, pGreenCtx, 1, 0);
}

FAKE_API CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    FAKE_ENTER();
    return stream_get_ctx(hStream, pCtx, pGreenCtx, 1, 1);
}

static struct fake_event *find_event_locked(CUevent h)
{
    for (struct fake_event *e = g_events; e; e = e->next)
        if ((CUevent)e == h)
            return e;
    return NULL;
}

/* The start shared by the calls that queue an op about an event: resolve the
 * stream, check flags against the allowed ones, allocate an op of kind, find
 * the event.  On success it returns with fake_lock held, so the caller can use
 * *e before it is destroyed; on failure nothing is held or allocated. */
static CUresult event_op_begin(CUstream h, int pt, unsigned flags, unsigned allowed,
                               enum fake_op_kind kind, CUevent ev, struct fake_stream **s,
                               struct fake_op **op, struct fake_event **e)
{
    CUresult r = fake_stream_get(h, pt, s);
    if (r)
        return r;
    if (flags & ~allowed)
        return CUDA_ERROR_INVALID_VALUE;
    *op = fake_op_new(kind);
    if (!*op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&fake_lock);
    *e = find_event_locked(ev);
    /* an event is recorded only on a stream of its own context (waiting
     * for one of another context is fine) */
    if (!*e || (kind == OP_EVENT && (*e)->ctx != (*s)->ctx)) {
        pthread_mutex_unlock(&fake_lock);
        fake_op_free(*op);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    return CUDA_SUCCESS;
}

static CUresult stream_wait_event(CUstream h, CUevent ev, unsigned flags, int pt)
{
    struct fake_stream *s;
    struct fake_op *op;
    struct fake_event *e;
    CUresult r = event_op_begin(h, pt, flags, CU_EVENT_WAIT_EXTERNAL, OP_NOOP, ev, &s, &op, &e);
    if (r)
        return r;
    /* an event never recorded is complete: nothing to wait for.  Inside a
     * capture, cross-stream event edges are not modelled (documented). */
    int wait = e->s && e->seq && !s->capture;
    if (wait)
        add_dep(op, e->s, e->seq);
    pthread_mutex_unlock(&fake_lock);
    if (!wait) {
        fake_op_free(op);
        return CUDA_SUCCESS;
    }
    fake_enqueue(s, op, NULL);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FAKE_ENTER();
    return stream_wait_event(hStream, hEvent, Flags, 0);
}

FAKE_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FAKE_ENTER();
    return stream_wait_event(hStream, hEvent, Flags, 1);
}

static CUresult launch_host_func(CUstream h, CUhostFn fn, void *user, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct fake_op *op = fake_op_new(OP_HOSTFN);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->fn = fn;
    op->user = user;
    fake_enqueue(s, op, NULL);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    FAKE_ENTER();
    return launch_host_func(hStream, fn, userData, 0);
}

FAKE_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    FAKE_ENTER();
    return launch_host_func(hStream, fn, userData, 1);
}

/* A stream callback is a host function that passes on the stream and the
 * stream's status, which on the fake is always success. */
struct callback {
    CUstreamCallback fn;
    CUstream stream;
    void *user;
};

static void CUDA_CB run_callback(void *arg)
{
    struct callback *cb = arg;
    cb->fn(cb->stream, CUDA_SUCCESS, cb->user);
    free(cb);
}

FAKE_API CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback fn, void *userData,
                                      unsigned int flags)
{
    FAKE_ENTER();
    if (!fn || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct callback *cb = malloc(sizeof *cb);
    if (!cb)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *cb = (struct callback){fn, hStream, userData};
    CUresult r = launch_host_func(hStream, run_callback, cb, 0);
    if (r)
        free(cb);
    return r;
}

/* ---- events ------------------------------------------------------------------ */
FAKE_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    FAKE_ENTER();
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    struct fake_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = FAKE_EVENT_MAGIC;
    e->ctx = c;
    e->flags = Flags;
    e->refs = 1;
    pthread_mutex_lock(&fake_lock);
    e->next = g_events;
    g_events = e;
    pthread_mutex_unlock(&fake_lock);
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent ev, CUstream h, unsigned flags, int pt)
{
    struct fake_stream *s;
    struct fake_op *op;
    struct fake_event *e;
    CUresult r = event_op_begin(h, pt, flags, CU_EVENT_RECORD_EXTERNAL, OP_EVENT, ev, &s, &op, &e);
    if (r)
        return r;
    int capturing = s->capture != NULL;
    if (!capturing)
        e->refs++;                     /* held by the op */
    pthread_mutex_unlock(&fake_lock);
    if (capturing) {                   /* event nodes in graphs are not modelled */
        fake_op_free(op);
        return CUDA_SUCCESS;
    }
    op->ev = e;
    fake_enqueue(s, op, NULL);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    FAKE_ENTER();
    return event_record(hEvent, hStream, 0, 0);
}

FAKE_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    FAKE_ENTER();
    return event_record(hEvent, hStream, 0, 1);
}

FAKE_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    FAKE_ENTER();
    return event_record(hEvent, hStream, flags, 0);
}

FAKE_API CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    FAKE_ENTER();
    return event_record(hEvent, hStream, flags, 1);
}

/* the start of cuEventQuery and cuEventSynchronize: a valid handle, then the
 * capture rule */
static CUresult event_unsafe_begin(CUevent h)
{
    FAKE_CHECK_INIT();
    pthread_mutex_lock(&fake_lock);
    int known = find_event_locked(h) != NULL;
    pthread_mutex_unlock(&fake_lock);
    return known ? fake_capture_prohibit(NULL) : CUDA_ERROR_INVALID_HANDLE;
}

FAKE_API CUresult cuEventQuery(CUevent hEvent)
{
    FAKE_ENTER();
    CUresult r = event_unsafe_begin(hEvent);
    if (r)
        return r;
    pthread_mutex_lock(&fake_lock);
    struct fake_event *e = find_event_locked(hEvent);
    r = !e ? CUDA_ERROR_INVALID_HANDLE
        : (!e->s || e->s->completed >= e->seq) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&fake_lock);
    return r;
}

FAKE_API CUresult cuEventSynchronize(CUevent hEvent)
{
    FAKE_ENTER();
    CUresult r = event_unsafe_begin(hEvent);
    if (r)
        return r;
    pthread_mutex_lock(&fake_lock);
    struct fake_event *e = find_event_locked(hEvent);
    if (!e) {
        pthread_mutex_unlock(&fake_lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (e->s)
        stream_wait_seq_locked(e->s, e->seq, !(e->flags & CU_EVENT_BLOCKING_SYNC));
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuEventDestroy_v2(CUevent hEvent)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    pthread_mutex_lock(&fake_lock);
    struct fake_event *e = NULL;
    for (struct fake_event **p = &g_events; *p; p = &(*p)->next)
        if ((CUevent)*p == hEvent) {
            e = *p;
            *p = e->next;
            break;
        }
    if (e)
        event_unref_locked(e);
    pthread_mutex_unlock(&fake_lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
    FAKE_CHECK_INIT();
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    struct fake_event *ea = find_event_locked(a), *eb = find_event_locked(b);
    CUresult r = CUDA_SUCCESS;
    if (!ea || !eb || ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) || !ea->s || !eb->s)
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (!ea->has_time || !eb->has_time)
        r = CUDA_ERROR_NOT_READY;
    else
        *ms = (float)((eb->t.tv_sec - ea->t.tv_sec) * 1e3 + (eb->t.tv_nsec - ea->t.tv_nsec) / 1e6);
    pthread_mutex_unlock(&fake_lock);
    return r;
}

FAKE_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    FAKE_ENTER();
    return elapsed(pMilliseconds, hStart, hEnd);
}

FAKE_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    FAKE_ENTER();
    return elapsed(pMilliseconds, hStart, hEnd);
}

/* ---- capture and graphs --------------------------------------------------------- */
/* the calling thread's capture mode; zero, CU_STREAM_CAPTURE_MODE_GLOBAL, by default */
static __thread CUstreamCaptureMode tls_capture_mode;

FAKE_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    FAKE_ENTER();
    FAKE_CHECK_INIT();
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = tls_capture_mode;
    tls_capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* does the capture on s prohibit a potentially unsafe call by this thread?
 * (fake_lock held; see the top of this file) */
static int capture_prohibits_locked(const struct fake_stream *s, const struct fake_ctx *synced)
{
    if (!s->capture || s->destroyed || !atomic_load(&s->ctx->alive))
        return 0;
    if (s->ctx == synced)
        return 1;
    if (tls_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    return s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
           (s->capture_mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
            pthread_equal(s->capture_thread, pthread_self()));
}

CUresult fake_capture_prohibit(struct fake_ctx *synced)
{
    int prohibited = 0;
    pthread_mutex_lock(&fake_lock);
    for (struct fake_stream *s = g_streams; s; s = s->next)
        if (capture_prohibits_locked(s, synced)) {
            s->capture_invalid = 1;
            prohibited = 1;
        }
    pthread_mutex_unlock(&fake_lock);
    return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->kind == STREAM_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct fake_graph *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = FAKE_GRAPH_MAGIC;
    pthread_mutex_lock(&fake_lock);
    if (s->capture) {
        pthread_mutex_unlock(&fake_lock);
        free(g);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    s->capture = g;
    s->capture_id = ++g_capture_id;
    s->capture_mode = mode;
    s->capture_thread = pthread_self();
    s->capture_invalid = 0;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    FAKE_ENTER();
    return begin_capture(hStream, mode, 0);
}

FAKE_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    FAKE_ENTER();
    return begin_capture(hStream, mode, 1);
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    struct fake_graph *g = s->capture;
    int invalid = s->capture_invalid;
    s->capture = NULL;
    s->capture_invalid = 0;
    if (g && !invalid) {
        g->next = g_graphs;
        g_graphs = g;
    }
    pthread_mutex_unlock(&fake_lock);
    if (!g)
        return CUDA_ERROR_ILLEGAL_STATE;
    if (invalid) {                     /* the capture ends without a graph */
        graph_free(g);
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    FAKE_ENTER();
    return end_capture(hStream, phGraph, 0);
}

FAKE_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    FAKE_ENTER();
    return end_capture(hStream, phGraph, 1);
}

static CUresult capture_info(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    *st = !s->capture ? CU_STREAM_CAPTURE_STATUS_NONE
          : s->capture_invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
          : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id)
        *id = s->capture ? s->capture_id : 0;
    if (graph)                         /* an invalidated capture's graph is discarded */
        *graph = s->capture_invalid ? NULL : (CUgraph)s->capture;
    pthread_mutex_unlock(&fake_lock);
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL;
    if (ndeps)
        *ndeps = 0;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FAKE_ENTER();
    return capture_info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL, 0);
}

FAKE_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FAKE_ENTER();
    return capture_info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL, 1);
}

FAKE_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                            cuuint64_t *id_out, CUgraph *graph_out,
                                            const CUgraphNode **dependencies_out,
                                            const CUgraphEdgeData **edgeData_out,
                                            size_t *numDependencies_out)
{
    FAKE_ENTER();
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out, 0);
}

FAKE_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                 cuuint64_t *id_out, CUgraph *graph_out,
                                                 const CUgraphNode **dependencies_out,
                                                 const CUgraphEdgeData **edgeData_out,
                                                 size_t *numDependencies_out)
{
    FAKE_ENTER();
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out, 1);
}

static struct fake_graph *find_graph_locked(void *h, int is_exec)
{
    for (struct fake_graph *g = g_graphs; g; g = g->next)
        if ((void *)g == h && g->is_exec == is_exec)
            return g;
    return NULL;
}

/* captured ops never own memory (no snapshots are taken while capturing), so
 * a clone is a plain struct copy */
static struct fake_op *op_clone(const struct fake_op *src)
{
    struct fake_op *op = fake_op_new(src->kind);
    if (op) {
        *op = *src;
        op->next = NULL;
        op->deps = NULL;
        op->ndeps = 0;
        op->owned = NULL;
    }
    return op;
}

FAKE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              unsigned long long flags)
{
    FAKE_ENTER();
    (void)flags;
    struct fake_ctx *c;
    CUresult r = fake_ctx_require(&c);
    if (r)
        return r;
    if (!phGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    struct fake_graph *x = calloc(1, sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->magic = FAKE_GRAPH_MAGIC;
    x->is_exec = 1;
    pthread_mutex_lock(&fake_lock);
    struct fake_graph *g = find_graph_locked(hGraph, 0);
    if (!g) {
        pthread_mutex_unlock(&fake_lock);
        free(x);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < g->n; i++)
        graph_append_locked(x, op_clone(g->ops[i]));
    x->next = g_graphs;
    g_graphs = x;
    pthread_mutex_unlock(&fake_lock);
    *phGraphExec = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec hx, CUstream h, int pt)
{
    struct fake_stream *s;
    CUresult r = fake_stream_get(h, pt, &s);
    if (r)
        return r;
    pthread_mutex_lock(&fake_lock);
    struct fake_graph *x = find_graph_locked(hx, 1);
    size_t n = x ? x->n : 0;
    struct fake_op **ops = n ? malloc(n * sizeof *ops) : NULL;
    for (size_t i = 0; ops && i < n; i++)
        ops[i] = op_clone(x->ops[i]);
    pthread_mutex_unlock(&fake_lock);
    if (!x)
        return CUDA_ERROR_INVALID_HANDLE;
    if (n && !ops)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++)
        fake_enqueue(s, ops[i], NULL);
    free(ops);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    FAKE_ENTER();
    return graph_launch(hGraphExec, hStream, 0);
}

FAKE_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    FAKE_ENTER();
    return graph_launch(hGraphExec, hStream, 1);
}

static CUresult graph_destroy(void *h, int is_exec)
{
    FAKE_CHECK_INIT();
    pthread_mutex_lock(&fake_lock);
    struct fake_graph *g = NULL;
    for (struct fake_graph **p = &g_graphs; *p; p = &(*p)->next)
        if ((void *)*p == h && (*p)->is_exec == is_exec) {
            g = *p;
            *p = g->next;
            break;
        }
    pthread_mutex_unlock(&fake_lock);
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    graph_free(g);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphDestroy(CUgraph hGraph)
{
    FAKE_ENTER();
    return graph_destroy(hGraph, 0);
}

FAKE_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FAKE_ENTER();
    return graph_destroy(hGraphExec, 1);
}

/* ---- the end of a context ------------------------------------------------------ */
/* Its legacy and created streams end (their queued work has run: the caller
 * synchronized), a capture on them is discarded, and its events are
 * destroyed.  Per-thread default streams go when their thread next needs
 * room, or exits.  c->legacy is left as it is: the stream is never freed,
 * and every lookup refuses the dead context first. */
void fake_stream_ctx_destroyed(struct fake_ctx *c)
{
    pthread_mutex_lock(&fake_lock);
    /* the worker's reference keeps each stream in the list while we hold the lock */
    for (struct fake_stream *s = g_streams; s; s = s->next) {
        if (s->ctx != c || s->kind == STREAM_PER_THREAD || s->destroyed)
            continue;
        if (s->capture) {
            graph_free(s->capture);
            s->capture = NULL;
        }
        stream_destroy_locked(s);
    }
    for (struct fake_event **p = &g_events; *p;) {
        struct fake_event *e = *p;
        if (e->ctx == c) {
            *p = e->next;
            event_unref_locked(e);
        } else {
            p = &e->next;
        }
    }
    pthread_mutex_unlock(&fake_lock);
}
