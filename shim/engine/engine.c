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
#include "../memory/fresh.h"
#include "../memory/register.h"

static unsigned long long staged_copies, staged_bytes;
static uint64_t caller_ns; /* callers' CPU time inside staged copies */

/* Returns once the work queued on s is over, asleep past POLL_NS, where
 * cuStreamSynchronize spins a core; an error of the event's, the driver's
 * own wait answers. */
static CUresult drained(struct pf_context *c, CUstream s) {
    CUevent ev;
    CUresult r = pf_context_event(c, &ev);
    if (r == CUDA_SUCCESS) {
        if ((r = PF_CALL(cuEventRecord, ev, s)) == CUDA_SUCCESS)
            r = pf_event_await(ev, POLL_NS);
        pf_context_event_back(c, ev, r);
    }
    return r == CUDA_SUCCESS ? r : PF_CALL(cuStreamSynchronize, s);
}

/* The staged copy, once pf_route_confirm() and the context's slots allow
 * it; its chunks' times go into tl (when not NULL), the debug lines out
 * when debug. */
static int staged(const struct pf_xfer *x, CUresult *result, int debug, struct pf_timeline *tl,
                  uint64_t t0, uint64_t mark[2]) {
    int stamps = debug || tl;
    uint64_t ts = pf_stamp(stamps);
    struct pf_context *c = pf_context_of(x->stream, 1);
    /* a copy holds at most half the slots (acquire) */
    int most = c && c->nslots > 1 ? c->nslots / 2 : 1;
    struct pf_chunk *h;
    /* a pitched copy's chunks are whole rows: a row wider than a slot
     * passes through */
    if (!c || !c->nslots || (x->shape && x->shape->width > c->slot_size) || !(h = pf_chunks_array(most)))
        return 0;
    uint64_t tc = pf_stamp(stamps);
    int workers = pf_workers_start(pf_contexts_live()), asleep = pf_workers_sleeping();
    const struct pf_options *o = pf_options();
    struct pf_plan p = {.x = x, .chunk = c->slot_size, .debug = stamps, .t0 = t0,
                        .log = tl ? tl->chunk : NULL, .slots = c->slots};
    if (x->shape)
        p.chunk -= p.chunk % x->shape->width;
    p.ramp = p.chunk < MIN_CHUNK ? p.chunk : MIN_CHUNK;
    p.kind = x->dir == PF_DIR_H2D ? o->copy_h2d : o->copy_d2h;
    /* H2D: streaming stores won at 1 MiB (14.5 vs 11.2 GB/s) and 64 MiB (39.0
     * vs 36.2) and lost at 256 MiB (39.9 vs 42.5) and 1 GiB (44.9 vs 49.2):
     * engine sweeps v5 and v8.  D2H: they lost at 16 MiB (26 vs 34, v8) and
     * tied from 64 MiB on one GPU, where on two they keep the reads for
     * ownership off the memory bus: 1 GiB on both H200s at once 85.6 ->
     * 101.4 GB/s (docs/results/2026-11-23-h200x2-multigpu-queue-lock) */
    if (p.kind == PF_HOST_COPY_AUTO && x->dir == PF_DIR_H2D)
        p.kind = x->bytes < AUTO_STREAM_BELOW ? PF_HOST_COPY_STREAM : PF_HOST_COPY_MEMCPY;
    else if (p.kind == PF_HOST_COPY_AUTO)
        p.kind = x->bytes >= AUTO_STREAM_FROM ? PF_HOST_COPY_STREAM : PF_HOST_COPY_MEMCPY;
    p.lean = x->dir == PF_DIR_H2D && p.kind == PF_HOST_COPY_STREAM && x->bytes >= LEAN_FROM;
    struct pf_xfer rest = *x;
    size_t landed_bytes = 0;
    *result = CUDA_SUCCESS;
    if (x->dir == PF_DIR_D2H && x->async && o->async_d2h && !x->shape) {
        landed_bytes = pf_land(x, c, p.kind, result);
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
    uint64_t t1 = pf_stamp(stamps), t2 = t1, t3 = t1;
    int nh = 0;
    if (rest.bytes && *result == CUDA_SUCCESS) {
        nh = pf_slots_acquire(c, h, want, pf_fence_owner(x->stream));
        if (!nh && !landed_bytes) /* no slot free: nothing done yet */
            return 0;
        if (!nh) /* the landings' rest, as the plain driver would copy it */
            *result = PF_CALL(cuMemcpyDtoHAsync_v2, rest.host, rest.dev, rest.bytes, x->stream);
    }
    struct pf_task populate[PF_POPULATE_TASKS];
    int npop = 0, boost = 0;
    if (nh) {
        /* a fresh destination faults in 2 MiB at a time, each fault
         * clearing its page: the copy's chunks are whole huge pages from
         * the first, faulted in by the workers ahead of the copy, in order,
         * while the first DMAs run; a large one's by the chunk's one task,
         * every CPU's thread awake */
        char *lo;
        size_t fresh = x->dir == PF_DIR_D2H && !x->shape ? pf_fresh_advise(rest.host, rest.bytes, &lo) : 0;
        if (fresh) {
            p.huge = rest.bytes >= FRESH_SELF_FROM ? PF_FRESH_SELF : PF_FRESH_AHEAD;
            p.ramp = p.chunk;
            if (p.huge == PF_FRESH_SELF)
                boost = pf_workers_boost(1);
            else
                npop = pf_populate_cut(populate, lo, fresh);
        }
        /* plain pageable H2D copies wait for the stream before reading the
         * source (something queued earlier may still write it) */
        if (x->dir == PF_DIR_H2D && !x->async)
            *result = drained(c, x->stream);
        t2 = pf_stamp(stamps);
        if (*result == CUDA_SUCCESS) {
            /* the workers wake while the caller takes its first chunk; not
             * waited for: with two processes staging, the sleepers' mutex
             * held the caller 15-20 us (docs/results/2026-11-23-h200x2-multigpu-wakeups), and a
             * submit finding every worker asleep wakes one anyway */
            pf_workers_active(1);
            pf_workers_wake(0);
            t3 = pf_stamp(stamps);
            size_t help_max = x->dir == PF_DIR_H2D ? HELP_MAX_H2D : HELP_MAX;
            *result = pf_plan_run(&p, h, nh, workers ? help_max : (size_t)-1);
            pf_workers_active(-1);
        }
        for (int i = 0; i < npop; i++)
            pf_task_wait(&populate[i]);
        if (boost)
            pf_workers_boost(-1);
        pf_slots_release(c, h, nh);
    }
    if (tl)
        tl->n = p.nlog;
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
        pf_timeline_print(&p);
    }
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
    uint64_t cpu = pf_thread_cpu_ns();
    int held = pf_registered_copy(x, 0, result), done = 0;
    if (held > 0)
        done = PF_PATH_REGISTERED;
    else if ((held < 0 || !x->held_only) && staged(x, result, debug, tl, t0, mark))
        done = PF_PATH_STAGED;
    else if (held < 0 && pf_registered_copy(x, 1, result) > 0)
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
