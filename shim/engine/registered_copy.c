/* A copy through a registration of its host range: one DMA of the driver's
 * straight from or into the program's memory, no CPU copy; a pitched copy's
 * rows in one DMA of the program's own shape, which the DMA engine moves
 * at pinned speed where staging packs rows one by one.  From registered
 * memory the driver's asynchronous copy is truly asynchronous, where the
 * plain pageable copy is not: an H2D returns once its source has been read,
 * a D2H once its data has landed.  So an asynchronous copy is followed by an
 * event, waited for before returning, as the staged copy waits for its last
 * chunk; a synchronous linear one ends in the driver's synchronous call,
 * which waits for its DMA itself. */
#include "engine.h"
#include "staging.h"
#include "../driver/driver.h"
#include "../memory/register.h"
#include "../memory/register_guard.h"
#include "../base/message.h"

#include <stdio.h>
#include <time.h>

/* The wait for a registered copy's DMA sleeps when the DMA should take
 * SLEEP_FROM_NS or more: until WAKE_EARLY_NS before 7/8 of that time, then
 * polls, then waits in the driver (docs/design.md 4a); waking costs a
 * virtual machine's CPU hundreds of microseconds, so shorter DMAs are
 * polled.  Copies under LEARN_FROM are too short to time the link. */
#define SLEEP_FROM_NS 2000000u
#define WAKE_EARLY_NS 500000u
#define LEARN_FROM ((size_t)4 << 20)

/* The largest block an H2D registers at its first sighting, waiting,
 * where its context has no staging slot yet: registering memory the
 * program has written takes about 0.05 ms a MiB, pinning the first slots
 * (cuMemHostAlloc of fresh memory) 0.5 (docs/design.md 4a).  The copy
 * must cover three quarters of the block: the rest may never have been
 * touched, and registering faults it in. */
#define BEFORE_SLOTS_MAX ((size_t)64 << 20)

/* The link's pace, ns per MiB, per direction (H2D, D2H): `per` once two
 * copies in a row agreed on it (0 until then), `seen` the last one. */
static struct pace { uint64_t per, seen; } paces[2];

/* A DMA of one copy took `ns` per MiB: a first is trusted once the next
 * agrees with it within a quarter; then each moves the pace by a quarter,
 * slower by at most a quarter of it (a copy behind other work on its stream
 * looks slow). */
static void learn(struct pace *p, uint64_t ns) {
    uint64_t per = __atomic_load_n(&p->per, __ATOMIC_RELAXED),
             last = __atomic_exchange_n(&p->seen, ns, __ATOMIC_RELAXED);
    if (!per && last && ns < last + last / 4 && last < ns + ns / 4)
        per = (ns + last) / 2;
    else if (per)
        per = (3 * per + (ns < per / 2 ? per / 2 : ns > per + per / 4 ? per + per / 4 : ns)) / 4;
    __atomic_store_n(&p->per, per, __ATOMIC_RELAXED);
}

/* x's DMAs, one per registration holding its bytes, between its host
 * memory and dev, on s; a pitched copy's rows are one DMA, its program's
 * own shape (a registration holds them all: PF_REG_PIECES). */
static CUresult dmas(const struct pf_xfer *x, const struct pf_hold *h, CUdeviceptr dev, CUstream s) {
    if (x->shape)
        return pf_shape_dma_whole(x, x->host, 0);
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < h->n && r == CUDA_SUCCESS; i++) {
        size_t off = h->piece[i].off, len = h->piece[i].len;
        r = x->dir == PF_DIR_H2D ? PF_CALL(cuMemcpyHtoDAsync_v2, dev + off, (const char *)x->host + off, len, s)
                                 : PF_CALL(cuMemcpyDtoHAsync_v2, (char *)x->host + off, dev + off, len, s);
    }
    return r;
}

/* Waits for ev, recorded after x's DMAs, which were issued at t0 behind
 * `before` (NULL: too short to time).  They start when `before` is over,
 * which is polled for POLL_NS (the GPU may not have reached it yet even on
 * an idle stream).  From then: asleep until shortly before 7/8 of the time
 * the pace gives the DMAs, polling until that time is up, half of it more
 * (the first DMAs over a new registration run slower) and POLL_NS, then
 * asleep in the driver; the time taken teaches the pace.  A DMA over
 * before the sleep ended makes the pace a quarter faster (the link got
 * faster).  Behind longer work nothing is known of the DMAs' end: asleep
 * in the driver at once.  A pitched copy's DMAs, whose rows may move
 * slower than a run, teach nothing.  *expect: the time the pace gave (0:
 * none). */
static CUresult await_dma(const struct pf_xfer *x, CUevent ev, CUevent before, uint64_t t0, uint64_t *expect) {
    struct pace *p = &paces[x->dir == PF_DIR_D2H];
    uint64_t start = t0, per = 0;
    *expect = 0;
    if (before) {
        CUresult r = PF_CALL(cuEventQuery, before);
        if (r == CUDA_ERROR_NOT_READY) {
            r = pf_event_poll(before, POLL_NS);
            start = pf_now_ns();
        }
        if (r != CUDA_SUCCESS) /* behind longer work, or its stream failed */
            return pf_event_await(ev, 0);
        per = __atomic_load_n(&p->per, __ATOMIC_RELAXED);
    }
    double mib = (double)x->bytes / (1 << 20);
    uint64_t due = *expect = (uint64_t)(mib * (double)per), wake = start + due - due / 8, now = pf_now_ns();
    if (due >= SLEEP_FROM_NS && wake > now + WAKE_EARLY_NS) {
        uint64_t ns = wake - now - WAKE_EARLY_NS;
        struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
        nanosleep(&ts, NULL);
        CUresult r = PF_CALL(cuEventQuery, ev);
        if (r != CUDA_ERROR_NOT_READY) {
            if (r == CUDA_SUCCESS && !x->shape)
                __atomic_store_n(&p->per, per - per / 4, __ATOMIC_RELAXED);
            return r;
        }
    }
    now = pf_now_ns();
    CUresult r = pf_event_await(ev, (start + due > now ? start + due - now : 0) + due / 2 + POLL_NS);
    if (r == CUDA_SUCCESS && before && !x->shape)
        learn(p, (uint64_t)((double)(pf_now_ns() - start) / mib));
    return r;
}

/* A synchronous copy on an idle stream whose DMAs the pace gives under
 * SLEEP_FROM_NS (pinfast's own wait would poll through them): its DMAs
 * but the last issued on the stream, the last through the driver's
 * synchronous call, which returns once it is over.  Cheaper than an event
 * and pinfast's wait (docs/design.md 4a), but in a context whose waits
 * block (CU_CTX_SCHED_BLOCKING_SYNC) the driver's call sleeps past the
 * DMA's end.  A synchronous copy's stream is the legacy or per-thread one:
 * of the current context, whose flags cuCtxGetFlags answers (they change
 * with cuCtxSetFlags).  The query of the legacy stream sees the blocking
 * streams' work too, which its copy waits for.  The copy's time teaches
 * the pace.  0: not such a copy. */
static int synchronous(const struct pf_xfer *x, const struct pf_hold *h, uint64_t t[3], CUresult *result) {
    struct pace *p = &paces[x->dir == PF_DIR_D2H];
    double mib = (double)x->bytes / (1 << 20);
    uint64_t per = __atomic_load_n(&p->per, __ATOMIC_RELAXED);
    unsigned flags = 0;
    if (x->async || x->shape || !per || mib * (double)per >= SLEEP_FROM_NS ||
        PF_CALL(cuCtxGetFlags, &flags) != CUDA_SUCCESS || (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC ||
        PF_CALL(cuStreamQuery, x->stream) != CUDA_SUCCESS)
        return 0;
    struct pf_hold head = *h;
    head.n = h->n - 1;
    t[0] = pf_now_ns();
    CUresult r = dmas(x, &head, x->dev, x->stream);
    size_t off = h->piece[h->n - 1].off, len = h->piece[h->n - 1].len;
    int ptds = x->stream == CU_STREAM_PER_THREAD;
    t[1] = pf_now_ns();
    if (r == CUDA_SUCCESS && x->dir == PF_DIR_H2D)
        r = ptds ? PF_PASS(PF_S_cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2, x->dev + off, (const char *)x->host + off, len)
                 : PF_CALL(cuMemcpyHtoD_v2, x->dev + off, (const char *)x->host + off, len);
    else if (r == CUDA_SUCCESS)
        r = ptds ? PF_PASS(PF_S_cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2, (char *)x->host + off, x->dev + off, len)
                 : PF_CALL(cuMemcpyDtoH_v2, (char *)x->host + off, x->dev + off, len);
    t[2] = pf_now_ns();
    if (r == CUDA_SUCCESS && x->bytes >= LEARN_FROM)
        learn(p, (uint64_t)((double)(t[2] - t[0]) / mib));
    *result = r;
    return 1;
}

/* The DMAs and the wait for them, with events of the stream's context; a
 * copy of LEARN_FROM or more has one before its DMAs too, to tell when
 * they start; the times of each step into t, the time the pace gave into
 * *expect (debug). */
static CUresult direct(const struct pf_xfer *x, const struct pf_hold *h, struct pf_context *c, int debug, uint64_t t[3],
                       uint64_t *expect) {
    CUevent ev, before = NULL;
    CUresult r = pf_context_event(c, &ev);
    if (r != CUDA_SUCCESS)
        return r;
    if (x->bytes >= LEARN_FROM &&
        (pf_context_event(c, &before) != CUDA_SUCCESS || PF_CALL(cuEventRecord, before, x->stream) != CUDA_SUCCESS)) {
        if (before)
            pf_context_event_back(c, before, CUDA_ERROR_UNKNOWN);
        before = NULL;
    }
    t[0] = pf_now_ns();
    r = dmas(x, h, x->dev, x->stream);
    if (r == CUDA_SUCCESS && (r = PF_CALL(cuEventRecord, ev, x->stream)) == CUDA_SUCCESS) {
        t[1] = pf_stamp(debug);
        r = await_dma(x, ev, before, t[0], expect);
    }
    t[2] = pf_stamp(debug);
    pf_context_event_back(c, ev, r);
    if (before)
        pf_context_event_back(c, before, CUDA_SUCCESS);
    return r;
}

/* The largest block x registers at once, waiting for it, rather than be
 * staged (0: none): an H2D where staging would first pin the context's
 * slots; an asynchronous one only on an idle stream (else staged, as
 * below).  A D2H's destination may be untouched, which registering
 * would fault in. */
static size_t before_slots(const struct pf_xfer *x, const struct pf_context *c) {
    size_t covered = x->bytes + x->bytes / 3;
    return x->dir == PF_DIR_H2D && !__atomic_load_n(&c->nslots, __ATOMIC_ACQUIRE) &&
                   (!x->async || PF_CALL(cuStreamQuery, x->stream) == CUDA_SUCCESS)
               ? (covered < BEFORE_SLOTS_MAX ? covered : BEFORE_SLOTS_MAX)
               : 0;
}

int pf_registered_copy(const struct pf_xfer *x, int wait, CUresult *result) {
    int debug = pf_log_level() >= PF_DEBUG;
    uint64_t t0 = pf_stamp(debug), t[3] = {t0, t0, t0};
    struct pf_context *c = pf_context_of(x->stream, 0);
    /* a pitched copy's registration holds its rows and the gaps between
     * them; it registers no block at its first sighting */
    size_t span = x->shape ? pf_shape_host_span(x) : x->bytes;
    /* an asynchronous H2D of short slices registers no block: the driver
     * takes one behind its stream's work without waiting, where a copy
     * through a registration waits for that work (probe_driver_staging
     * slices); through one already made, it goes */
    if (x->held_only && x->shape && x->async && x->dir == PF_DIR_H2D && pf_register_quiet(x->host, span))
        return 0;
    size_t busy = 0, first = c && !wait && !x->shape ? before_slots(x, c) : 0;
    struct pf_hold h;
    int held = !c ? 0 : wait ? pf_register_await(x->host, span, &h) : pf_register_use(x->host, span, first, &busy, &h);
    if (!held && busy && busy <= first)
        held = pf_register_await(x->host, span, &h);
    if (!held) /* being registered: staged, even a copy too small to stage */
        return busy ? -1 : 0;
    /* an asynchronous pageable H2D the driver buffers returns before earlier
     * work on its stream ends; waiting for the registered copy would wait
     * for that work too: such a copy is staged unless the stream is idle.
     * One that cannot be staged (`wait`) goes direct all the same: passed
     * through, it would undo the registration, which waits for every
     * stream, where this waits for its own, as the driver's would. */
    if (!wait && x->dir == PF_DIR_H2D && x->async && PF_CALL(cuStreamQuery, x->stream) != CUDA_SUCCESS) {
        pf_register_done(&h, 0);
        return -1;
    }
    uint64_t expect = 0;
    int in_driver = synchronous(x, &h, t, result);
    if (!in_driver)
        *result = direct(x, &h, c, debug, t, &expect);
    pf_register_done(&h, *result == CUDA_SUCCESS ? x->bytes : 0);
    if (debug) {
        char how[48] = "in the driver's synchronous call";
        if (!in_driver)
            snprintf(how, sizeof how, "on an event (expected %.1f us)", expect / 1e3);
        pf_msg(PF_DEBUG,
               "registered %s %zu B, %s, %d registration(s); us: lookup %.1f issue %.1f wait %.1f %s; result %d",
               x->dir == PF_DIR_H2D ? "H2D" : "D2H", x->bytes, x->async ? "async" : "sync", h.n, (t[0] - t0) / 1e3,
               (t[1] - t[0]) / 1e3, (t[2] - t[1]) / 1e3, how, (int)*result);
    }
    return 1;
}

CUresult pf_registered_await_stream(CUstream s) {
    struct pf_context *c = pf_context_of(s, 0);
    CUevent ev;
    CUresult r = c ? pf_context_event(c, &ev) : PF_CALL(cuStreamSynchronize, s);
    if (!c || r != CUDA_SUCCESS)
        return r;
    if ((r = PF_CALL(cuEventRecord, ev, s)) == CUDA_SUCCESS)
        r = pf_event_await(ev, POLL_NS);
    pf_context_event_back(c, ev, r);
    return r;
}
