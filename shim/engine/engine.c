/* One caller thread drives each staged copy: it cuts the copy into chunks,
 * one pinned slot each, hands the host side of every chunk to the workers as
 * a few tasks, and issues each chunk's DMA on the caller's own stream.
 * Issuing from the caller's thread keeps the copy ordered in its stream
 * exactly as the plain call (the per-thread default stream included), and
 * keeps the workers free of any CUDA state.  A slot whose DMA may still run is
 * "fenced" by an event recorded after it; it is reused only once the event
 * has completed.  See docs/design.md. */
#include "staging.h"
#include "route.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../driver/capture.h"
#include "../driver/driver.h"
#include "../memory/first_touch.h"
#include "../memory/register.h"

/* The largest asynchronous pitched H2D bounced: about what the driver's own
 * staging takes behind busy work without waiting
 * (docs/tuning.md#pitched-uploads-bounced-up-to-2-mib-bounce_pitched_max). */
#define BOUNCE_PITCHED_MAX ((size_t)2 << 20)

static unsigned long long staged_copies, staged_bytes;
static uint64_t caller_ns; /* callers' CPU time inside staged copies */

/* Returns once the work queued on s is over, asleep past POLL_NS, where
 * cuStreamSynchronize spins a core; an error of the event's, the driver's
 * own wait answers. */
static CUresult wait_stream_asleep(struct pf_context *c, CUstream s) {
    CUevent ev;
    CUresult r = pf_context_event(c, &ev);
    if (r == CUDA_SUCCESS) {
        if ((r = PF_CALL(cuEventRecord, ev, s)) == CUDA_SUCCESS)
            r = pf_event_await(ev, POLL_NS);
        pf_context_event_back(c, ev, r);
    }
    return r == CUDA_SUCCESS ? r : PF_CALL(cuStreamSynchronize, s);
}

/* One staged copy under way: its slots held, the workers there were and
 * asleep, the pieces of its fresh destination faulted in ahead, and the
 * times of its steps for the debug line (0 when nobody reads them). */
struct staging_run {
    struct pf_plan plan;
    struct pf_xfer rest; /* what is staged: the copy less a prefix landing later */
    size_t landed;       /* that prefix's length */
    int held, workers, asleep, ahead;
    uint64_t t0, classified, confirmed; /* pf_engine_copy's start, pf_route_confirm's marks */
    uint64_t context, chunks, planned, synced, woken;
};

/* How the host side is copied: the option's way, or for auto, by direction
 * and size: streaming stores for an H2D below AUTO_STREAM_BELOW and a D2H
 * from AUTO_STREAM_FROM, where they keep the reads for ownership off the
 * memory bus (docs/tuning.md#streaming-stores-or-memcpy-auto_stream_below-auto_stream_from) */
static enum pf_host_copy host_copy_way(const struct pf_xfer *x) {
    const struct pf_options *o = pf_options();
    enum pf_host_copy kind = x->dir == PF_DIR_H2D ? o->copy_h2d : o->copy_d2h;
    if (kind != PF_HOST_COPY_AUTO)
        return kind;
    if (x->dir == PF_DIR_H2D)
        return x->bytes < AUTO_STREAM_BELOW ? PF_HOST_COPY_STREAM : PF_HOST_COPY_MEMCPY;
    return x->bytes >= AUTO_STREAM_FROM ? PF_HOST_COPY_STREAM : PF_HOST_COPY_MEMCPY;
}

/* The chunk plan of x in c's slots, as a copy with no fresh destination
 * and no landing has it. */
static void plan_chunks(struct pf_plan *p, const struct pf_xfer *x, const struct pf_context *c, int stamps, uint64_t t0,
                        struct pf_timeline *tl) {
    *p = (struct pf_plan){
        .x = x, .chunk = c->slot_size, .debug = stamps, .t0 = t0, .log = tl ? tl->chunk : NULL, .slots = c->slots};
    /* a pitched copy's chunks are whole rows */
    if (x->shape)
        p->chunk -= p->chunk % x->shape->width;
    p->ramp = p->chunk < MIN_CHUNK ? p->chunk : MIN_CHUNK;
    p->kind = host_copy_way(x);
    p->lean = x->dir == PF_DIR_H2D && p->kind == PF_HOST_COPY_STREAM && x->bytes >= LEAN_FROM;
}

/* An asynchronous D2H (PINFAST_ASYNC_D2H=1) lands a prefix of itself in
 * stream callbacks (async_d2h.c); r->rest is what is left to stage, and the
 * plan stages that. */
static void land_prefix(struct staging_run *r, const struct pf_xfer *x, struct pf_context *c, CUresult *result) {
    r->rest = *x;
    if (x->dir != PF_DIR_D2H || !x->async || !pf_options()->async_d2h || x->shape)
        return;
    r->landed = pf_async_d2h_land(x, c, r->plan.kind, result);
    r->rest.dev += r->landed;
    r->rest.host = (char *)r->rest.host + r->landed;
    r->rest.bytes -= r->landed;
    r->plan.x = &r->rest;
}

/* The slots the plan's chunks of `bytes` fill, `most` at most. */
static int slots_wanted(const struct pf_plan *p, size_t bytes, int most) {
    int want = 0;
    for (size_t off = 0, r = p->ramp; off < bytes && want < most; want++) {
        off += r;
        r = r * 2 < p->chunk ? r * 2 : p->chunk;
    }
    return want;
}

/* A fresh destination advised huge pages faults in 2 MiB at a time, each
 * fault clearing its page: the copy's chunks are whole huge pages from the
 * first, faulted in by the workers ahead of the copy, in order, while the
 * first DMAs run; a large one's by the chunk's one task, every CPU's thread
 * awake.  One not advised is faulted in ahead by the workers too, a piece
 * of 4 KiB pages each, where the copy's tasks would take a fault a page;
 * under FRESH_AHEAD_FROM, where that was slower, its tasks fault it, spread
 * over its page tables (pf_plan_lanes). */
struct fresh_help {
    struct pf_task populate[PF_POPULATE_TASKS];
    int npopulate, boosted;
};

static void fresh_begin(struct pf_plan *p, struct fresh_help *f) {
    const struct pf_xfer *x = p->x;
    char *lo;
    size_t fresh = x->dir == PF_DIR_D2H && !x->shape ? pf_first_touch_advise(x->host, x->bytes, &lo) : 0;
    f->npopulate = f->boosted = 0;
    if (!fresh) { /* not advised: its 4 KiB pages, ahead in pieces or spread over page tables */
        fresh = x->dir == PF_DIR_D2H && !x->shape && x->bytes >= FRESH_LANES_FROM
                    ? pf_first_touch_fresh(x->host, x->bytes, &lo)
                    : 0;
        if (fresh && x->bytes >= FRESH_AHEAD_FROM)
            f->npopulate = pf_populate_cut(f->populate, lo, fresh, FRESH_PIECE);
        else if (fresh)
            pf_plan_lanes(p);
        return;
    }
    p->huge = x->bytes >= FRESH_SELF_FROM ? PF_FRESH_SELF : PF_FRESH_AHEAD;
    p->ramp = p->chunk;
    if (p->huge == PF_FRESH_SELF)
        f->boosted = pf_workers_boost(1);
    else
        f->npopulate = pf_populate_cut(f->populate, lo, fresh, PF_HUGE_PAGE);
}

static void fresh_end(struct fresh_help *f) {
    for (int i = 0; i < f->npopulate; i++)
        pf_task_wait(&f->populate[i]);
    if (f->boosted)
        pf_workers_boost(-1);
}

/* Runs the plan's chunks through the r->held slots of h. */
static CUresult run_chunks(struct staging_run *r, struct pf_context *c, struct pf_chunk *h) {
    const struct pf_xfer *x = r->plan.x;
    CUresult res = CUDA_SUCCESS;
    /* plain pageable H2D copies wait for the stream before reading the
     * source (something queued earlier may still write it) */
    if (x->dir == PF_DIR_H2D && !x->async)
        res = wait_stream_asleep(c, x->stream);
    r->synced = pf_stamp(r->plan.debug);
    if (res != CUDA_SUCCESS)
        return res;
    /* the workers wake while the caller takes its first chunk; not waited
     * for: the sleepers' mutex can hold the caller, and a submit finding every
     * worker asleep wakes one anyway (docs/tuning.md#nobody-with-work-waits-for-the-sleepers-mutex) */
    pf_workers_active(1);
    pf_workers_wake(0);
    r->woken = pf_stamp(r->plan.debug);
    size_t help_max = x->dir == PF_DIR_H2D ? HELP_MAX_H2D : HELP_MAX;
    res = pf_plan_run(&r->plan, h, r->held, r->workers ? help_max : (size_t)-1);
    pf_workers_active(-1);
    return res;
}

/* PINFAST_LOG=debug: the copy's line, its times in microseconds, then its
 * chunks' (timeline.c). */
static void debug_line(const struct staging_run *r, const struct pf_xfer *x, CUresult result) {
    const struct pf_plan *p = &r->plan;
    uint64_t t0 = r->t0, end = pf_now_ns();
    int processes, budget = pf_workers_budget(&processes);
    pf_msg(
        PF_DEBUG,
        "staged %s %zu B (%zu landing later): %d chunks, %d tasks (%d by the caller), %d slots, %s, %d pieces faulted "
        "in ahead, %d lanes; "
        "%d of %d workers asleep, %d may wake (%d processes staging); us: classify %.1f capture %.1f range %.1f context %.1f "
        "plan %.1f slots+sync %.1f wake %.1f first-task %.1f first-dma %.1f end %.1f; result %d",
        x->dir == PF_DIR_H2D ? "H2D" : "D2H", x->bytes, r->landed, p->nchunks, p->ntasks, p->helped, r->held,
        p->kind == PF_HOST_COPY_STREAM ? "streaming stores" : "memcpy", r->ahead, p->lanes, r->asleep, r->workers,
        budget, processes, (r->classified - t0) / 1e3, (r->confirmed - r->classified) / 1e3,
        (r->context - r->confirmed) / 1e3, (r->chunks - r->context) / 1e3, (r->planned - r->chunks) / 1e3,
        (r->synced - r->planned) / 1e3, (r->woken - r->synced) / 1e3,
        p->first_task_ns ? (p->first_task_ns - t0) / 1e3 : -1.0, p->first_dma_ns ? (p->first_dma_ns - t0) / 1e3 : -1.0,
        (end - t0) / 1e3, result);
    pf_timeline_print(p);
}

/* The staged copy, once pf_route_confirm() and the context's slots allow
 * it; its chunks' times go into tl (when not NULL), the debug lines out
 * when debug.  0: nothing done, the copy passes through. */
static int stage_copy(const struct pf_xfer *x, CUresult *result, int debug, struct pf_timeline *tl, uint64_t t0,
                      const uint64_t mark[2]) {
    int stamps = debug || tl;
    struct staging_run r = {.t0 = t0, .classified = mark[0], .confirmed = mark[1], .context = pf_stamp(stamps)};
    struct pf_context *c = pf_context_of(x->stream, 1);
    /* a copy holds at most half the slots the context may have (acquire) */
    int most = c && c->cap > 1 ? c->cap / 2 : 1;
    struct pf_chunk *h;
    /* a row wider than a slot passes through */
    if (!c || !c->cap || (x->shape && x->shape->width > c->slot_size) || !(h = pf_chunks_array(most)))
        return 0;
    r.chunks = pf_stamp(stamps);
    r.workers = pf_workers_start(pf_contexts_live());
    r.asleep = pf_workers_sleeping();
    plan_chunks(&r.plan, x, c, stamps, t0, tl);
    *result = CUDA_SUCCESS;
    land_prefix(&r, x, c, result);
    int want = slots_wanted(&r.plan, r.rest.bytes, most);
    /* an H2D under LEAN_FROM keeps to one segment of slots, however many
     * the context has: more of them filling at once slowed it
     * (docs/tuning.md#slots-pinned-as-copies-need-them-segment_slots-full_speed_slots) */
    if (x->dir == PF_DIR_H2D && r.rest.bytes < LEAN_FROM && want > SEGMENT_SLOTS)
        want = SEGMENT_SLOTS;
    r.planned = r.synced = r.woken = pf_stamp(stamps);
    if (r.rest.bytes && *result == CUDA_SUCCESS) {
        uintptr_t who = pf_fence_owner(x->stream);
        /* a copy that finds fewer slots free than keep it at full speed
         * (or than it wants) has more pinned, so each copy at once gets its
         * own: SEGMENT_SLOTS under LEAN_FROM, FULL_SPEED_SLOTS from there.
         * A D2H holds each slot until the host has its rows: under LEAN_FROM
         * it may have one segment more than the context has, which so grows
         * to FULL_SPEED_SLOTS over its copies, its first pinning no more
         * (docs/tuning.md#slots-pinned-as-copies-need-them-segment_slots-full_speed_slots) */
        int enough = r.rest.bytes < LEAN_FROM ? SEGMENT_SLOTS : FULL_SPEED_SLOTS;
        if (x->dir == PF_DIR_D2H && enough < FULL_SPEED_SLOTS) {
            int more = __atomic_load_n(&c->nslots, __ATOMIC_ACQUIRE) + SEGMENT_SLOTS;
            enough = more < FULL_SPEED_SLOTS ? more : FULL_SPEED_SLOTS;
        }
        enough = want < enough ? want : enough;
        r.held = pf_slots_acquire(c, h, want, who);
        while (r.held < enough && pf_slots_grow(c))
            r.held += pf_slots_acquire(c, h + r.held, want - r.held, who);
        if (!r.held && !r.landed) /* no slot free: nothing done yet */
            return 0;
        if (!r.held) /* the landings' rest, as the plain driver would copy it */
            *result = PF_CALL(cuMemcpyDtoHAsync_v2, r.rest.host, r.rest.dev, r.rest.bytes, x->stream);
    }
    if (r.held) {
        struct fresh_help fresh;
        fresh_begin(&r.plan, &fresh);
        r.ahead = fresh.npopulate;
        *result = run_chunks(&r, c, h);
        fresh_end(&fresh);
        pf_slots_release(c, h, r.held);
    }
    if (tl)
        tl->n = r.plan.nlog;
    __atomic_fetch_add(&staged_copies, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&staged_bytes, x->bytes, __ATOMIC_RELAXED);
    if (debug)
        debug_line(&r, x, *result);
    return 1;
}

int pf_engine_copy(const struct pf_xfer *x, CUresult *result, const struct pf_timeline **chunks) {
    const struct pf_options *o = pf_options();
    int debug = pf_log_level() >= PF_DEBUG;
    int chrome = o->trace && o->trace_format == PF_TRACE_CHROME;
    struct pf_timeline *tl = debug || chrome ? pf_timeline_mine() : NULL;
    uint64_t t0 = pf_stamp(debug || tl), mark[2];
    *chunks = NULL;
    if (!o->staging || !pf_route_confirm(x, debug || tl, mark))
        return 0;
    /* a staged copy is no cancellation point, as the driver's own is not:
     * cancelled in a wait, its thread would leave slots and locks held */
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    CUstreamCaptureMode mode = pf_capture_relax();
    int held = pf_registered_copy(x, 0, result), done = 0;
    /* the caller's CPU time counts for staged copies only (a system call:
     * not made for the others) */
    uint64_t cpu = held > 0 ? 0 : pf_thread_cpu_ns();
    /* a copy too small to stage is staged while a registration over it is
     * due, being made or retired (passed through, it would need it undone);
     * a pitched one of short slices, slow to stage, waits for one being
     * made first, unless it is an asynchronous H2D the driver would take
     * without waiting: that one is bounced */
    int wait_first = held < 0 && x->held_only && x->shape;
    if (wait_first && x->async && x->dir == PF_DIR_H2D && x->bytes <= BOUNCE_PITCHED_MAX && pf_bounce_copy(x, result))
        done = PF_PATH_BOUNCED;
    else if (held > 0 || (wait_first && pf_registered_copy(x, 1, result) > 0))
        done = PF_PATH_REGISTERED;
    else if ((held < 0 || !x->held_only) && stage_copy(x, result, debug, tl, t0, mark))
        done = PF_PATH_STAGED;
    else if (held < 0 && !wait_first && pf_registered_copy(x, 1, result) > 0)
        done = PF_PATH_REGISTERED;
    if (done == PF_PATH_STAGED)
        __atomic_fetch_add(&caller_ns, pf_thread_cpu_ns() - cpu, __ATOMIC_RELAXED);
    if (done == PF_PATH_STAGED && chrome)
        *chunks = tl;
    pf_capture_restore(mode);
    pthread_setcancelstate(cancel, NULL);
    return done;
}

void pf_engine_stats(struct pf_engine_stats *out) {
    out->copies = __atomic_load_n(&staged_copies, __ATOMIC_RELAXED);
    out->bytes = __atomic_load_n(&staged_bytes, __ATOMIC_RELAXED);
    pf_contexts_counts(&out->pinned_bytes, &out->contexts);
    out->threads = pf_workers_count();
    out->worker_seconds = pf_workers_cpu_seconds();
    out->caller_seconds = (double)__atomic_load_n(&caller_ns, __ATOMIC_RELAXED) * 1e-9;
    /* the tasks callers ran are in their own CPU time already */
    out->cpu_seconds = out->worker_seconds - pf_workers_helped_seconds() + out->caller_seconds;
    out->wait_seconds = pf_plan_polled_seconds(0);
    pf_register_stats(&out->reg);
}

void pf_engine_forked(void) {
    pf_contexts_forked();
    staged_copies = staged_bytes = caller_ns = 0;
    pf_plan_polled_seconds(1);
}
