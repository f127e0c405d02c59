/* The bounce area: an asynchronous H2D from pageable memory too small to
 * stage, which the driver would make wait for everything queued on its
 * stream, is copied by the caller itself (no worker woken) into a ring of
 * pinned memory of the stream's context, and its DMA queued from there on
 * the caller's stream, an event after it fencing that part of the ring.
 * The call returns without waiting for the stream; the bytes are in the
 * ring before the DMA is queued, so the program may reuse its memory at
 * once.  Space comes back as the fences complete, asked (cuEventQuery) only
 * when the ring is short of space, never waited for: with no space free the
 * copy passes through, to the driver's own wait.  A pitched copy the engine
 * bounces (one a registration would make wait for its busy stream) has its
 * rows packed end to end in the ring.  See docs/design.md. */
#include "staging.h"
#include "route.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../driver/capture.h"
#include "../driver/driver.h"

enum { FILLING, FENCED, OVER };

#define ALIGN 64 /* callers filling neighbouring copies write no line in common */

static int warned;

/* The calls a capture could refuse (a pinned allocation, an event query, a
 * synchronisation) are made in the relaxed capture mode, so that a capture
 * begun meanwhile on another thread is not invalidated; the rest of a
 * bounce (copies, event records, pointer queries) is allowed beside any
 * capture, and most bounces make none of these calls. */

/* PF_BOUNCE_FENCES_STEP more fences, in ctx (lock held, no fence in
 * flight: the ring's length changes); all or none.  1 when made. */
static int fences_grow(struct pf_bounce *b, CUcontext ctx) {
    CUstreamCaptureMode mode = pf_capture_relax();
    int pushed = pf_context_enter(ctx);
    unsigned k = b->nfences, end = b->nfences + PF_BOUNCE_FENCES_STEP;
    while (k < end && PF_CALL(cuEventCreate, &b->fences[k].ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS)
        k++;
    if (k < end)
        while (k > b->nfences)
            PF_CALL(cuEventDestroy_v2, b->fences[--k].ev);
    pf_context_leave(pushed);
    pf_capture_restore(mode);
    if (k < end)
        return 0;
    b->nfences = end;
    b->first = 0;
    return 1;
}

/* The ring and its first fences, in ctx, on its first bounce (lock held).
 * The size is the option's, halved until the driver agrees. */
static void make(struct pf_bounce *b, CUcontext ctx) {
    size_t size = pf_options()->bounce & ~(size_t)(ALIGN - 1);
    CUstreamCaptureMode mode = pf_capture_relax();
    int pushed = pf_context_enter(ctx);
    while (size >= ALIGN && !pf_pinned_make(&b->area, size))
        size = size / 2 & ~(size_t)(ALIGN - 1);
    pf_context_leave(pushed);
    pf_capture_restore(mode);
    if (b->area.mem && !fences_grow(b, ctx)) {
        pf_pinned_free(&b->area);
        pf_msg_once(warned, PF_WARNING, "could not pin a bounce area; small asynchronous H2D copies pass through");
    }
    b->size = b->area.mem ? size : 0;
    b->tried = 1;
    if (b->area.mem)
        pf_msg(PF_INFO, "bounce area of %zu KiB", size >> 10);
}

/* Driver queries the oldest fences get at most in one reclaim, beside a
 * search of those in order: each is a driver call, made while a copy waits
 * (docs/tuning.md#few-fence-queries-per-bounce-reclaim-reclaim_queries). */
#define RECLAIM_QUERIES 8

static struct pf_bounce_fence *fence(struct pf_bounce *b, unsigned i) {
    return &b->fences[(b->first + i) % b->nfences];
}

/* How many of the oldest fences were recorded in the order they were
 * taken, which is the order they complete in: all on one stream by one
 * thread (two threads sharing a stream may record in the other order)
 * (lock held). */
static unsigned in_order(struct pf_bounce *b) {
    const struct pf_bounce_fence *f0 = fence(b, 0);
    unsigned n = 0;
    for (; n < b->count; n++) {
        const struct pf_bounce_fence *f = fence(b, n);
        if (__atomic_load_n(&f->state, __ATOMIC_ACQUIRE) != FENCED || f->owner != f0->owner || f->by != f0->by)
            break;
    }
    return n;
}

static void give_back(struct pf_bounce *b, unsigned n) {
    b->tail = fence(b, n - 1)->end;
    b->first = (b->first + n) % b->nfences;
    b->count -= n;
}

static int fence_done(struct pf_bounce *b, unsigned i) {
    return PF_CALL(cuEventQuery, fence(b, i)->ev) == CUDA_SUCCESS;
}

/* Gives back the space of the oldest fences that are over (lock held).
 * Of those in order, the oldest is asked first (not over: nothing is),
 * then the newest, then the newest over is searched for between them: a
 * burst of copies on one stream gets most of the ring back at once, in
 * log2 of their number queries, against one each asked in turn. */
static void reclaim(struct pf_bounce *b) {
    if (!b->count)
        return;
    CUstreamCaptureMode mode = pf_capture_relax();
    unsigned n = in_order(b);
    int rest = 1; /* the fences past those in order are asked in turn */
    if (n) {      /* [0, lo] over, [hi, n) not known to be */
        int lo = -1, hi = (int)n;
        if (fence_done(b, 0)) {
            lo = 0;
            if (n > 1 && fence_done(b, n - 1))
                lo = (int)n - 1;
            else
                hi = (int)n - 1;
            while (hi - lo > 1) {
                int mid = lo + (hi - lo) / 2;
                if (fence_done(b, (unsigned)mid))
                    lo = mid;
                else
                    hi = mid;
            }
            give_back(b, (unsigned)lo + 1);
        }
        rest = lo + 1 == (int)n;
    }
    for (int queries = 0; rest && b->count;) {
        struct pf_bounce_fence *f = fence(b, 0);
        int state = __atomic_load_n(&f->state, __ATOMIC_ACQUIRE);
        if (state == FILLING ||
            (state == FENCED && (queries++ == RECLAIM_QUERIES || PF_CALL(cuEventQuery, f->ev) != CUDA_SUCCESS)))
            break;
        give_back(b, 1);
    }
    pf_capture_restore(mode);
}

/* Space for len bytes and a fence after them, at the ring's end or, where
 * they would straddle it, at its start; NULL when there is none (lock
 * held).  Completed fences are asked for only then: a driver call each.
 * A burst that found every fence in flight gets more for the next, made
 * once none is (the ring's length changes), up to PF_BOUNCE_FENCES. */
static struct pf_bounce_fence *take(struct pf_bounce *b, CUcontext ctx, size_t len, uint64_t *at) {
    for (int tries = 0;; tries++) {
        if (!b->count && b->short_of_fences > 0 && b->nfences < PF_BOUNCE_FENCES)
            b->short_of_fences = fences_grow(b, ctx) ? 0 : -1;
        if (!b->count) /* nothing in flight: start from the ring's start */
            b->head = b->tail = 0;
        uint64_t p = b->head;
        size_t off = p % b->size;
        if (off + len > b->size)
            p += b->size - off;
        if (b->count < b->nfences && p + len - b->tail <= b->size) {
            struct pf_bounce_fence *f = &b->fences[(b->first + b->count++) % b->nfences];
            __atomic_store_n(&f->state, FILLING, __ATOMIC_RELAXED);
            f->end = b->head = p + len;
            *at = p;
            return f;
        }
        if (tries) {
            if (!b->short_of_fences && b->count == b->nfences)
                b->short_of_fences = 1;
            return NULL;
        }
        reclaim(b);
    }
}

int pf_bounce_copy(const struct pf_xfer *x, CUresult *result) {
    struct pf_context *c = pf_context_of(x->stream, 0);
    if (!c)
        return 0;
    struct pf_bounce *b = &c->bounce;
    size_t len = (x->bytes + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    uint64_t at = 0;
    struct pf_bounce_fence *f = NULL;
    pthread_mutex_lock(&b->lock);
    if (!b->tried)
        make(b, c->handle);
    if (b->area.mem && len <= b->size)
        f = take(b, c->handle, len, &at);
    char *mem = b->area.mem;
    size_t size = b->size;
    pthread_mutex_unlock(&b->lock);
    if (!f)
        return 0;
    const struct pf_options *o = pf_options();
    char *slot = mem + at % size;
    f->owner = pf_fence_owner(x->stream);
    f->by = (uintptr_t)pthread_self();
    enum pf_host_copy kind = o->copy_h2d == PF_HOST_COPY_AUTO ? PF_HOST_COPY_STREAM : (enum pf_host_copy)o->copy_h2d;
    int state = OVER;
    CUresult r;
    if (x->shape) { /* the rows end to end, and one DMA of the program's shape */
        pf_shape_pack(x, kind, slot);
        r = pf_shape_dma_whole(x, slot, 1);
    } else {
        pf_copy_bytes(kind, slot, x->host, x->bytes);
        r = PF_CALL(cuMemcpyHtoDAsync_v2, x->dev, slot, x->bytes, x->stream);
    }
    if (r == CUDA_SUCCESS) {
        r = PF_CALL(cuEventRecord, f->ev, x->stream);
        if (r == CUDA_SUCCESS) {
            state = FENCED;
        } else { /* no fence: the DMA is over before its space is reused */
            CUstreamCaptureMode mode = pf_capture_relax();
            PF_CALL(cuStreamSynchronize, x->stream);
            pf_capture_restore(mode);
        }
    }
    __atomic_store_n(&f->state, state, __ATOMIC_RELEASE);
    *result = r;
    return 1;
}

int pf_engine_bounce(const struct pf_xfer *x, CUresult *result) {
    uint64_t mark[2];
    if (!pf_route_host_pageable(x) || !pf_route_confirm(x, 0, mark))
        return 0;
    /* as a staged copy, no cancellation point: cancelled holding the
     * lock or a fence FILLING, it would stop the ring for good */
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    int done = pf_bounce_copy(x, result);
    pthread_setcancelstate(cancel, NULL);
    return done;
}
