/* Whether the driver would take a small asynchronous pageable H2D without
 * waiting for its stream (pf_engine_driver_has_room, engine.h): where not,
 * the copy is bounced (bounce.c).
 *
 * The driver stages a pageable H2D up to 64 KiB itself and returns at once
 * while the stream's own staging (about 3 MiB, a copy taking whole 4 KiB
 * pages) has room; a larger one takes one of two places, and the third
 * waits for the stream (tests/gpu/probes/probe_driver_staging.c,
 * docs/design.md).  On a stream that keeps up, a bounce only costs more
 * than that (a copy, a DMA and an event).  So a thread's small copies on
 * one stream pass through while at most 2 * PF_PASS_MARK_EVERY of them
 * may still be queued (engine.h counts them): a mark (an event) is
 * recorded after every PF_PASS_MARK_EVERY of them, and the next ones are
 * bounced only while the mark before is not over, asked again at each (a
 * question costs far less than a bounce, and a burst behind longer work
 * must not leave the copies after it bounced).  A larger copy passes when
 * its stream is idle, or when the mark recorded at the one before it is
 * over: then only that one may hold a place (a kernel queued since is
 * unseen by any count: only the stream's own answer will do). */
#include "engine.h"
#include "staging.h"
#include "../driver/capture.h"
#include "../driver/driver.h"

#include <pthread.h>
#include <stdint.h>

__thread struct pf_passing pf_passing_;

/* A stream's mark: an event of the stream's context. */
struct mark {
    struct pf_context *c; /* the event's context, and its id when taken */
    unsigned long long id;
    CUevent ev; /* NULL: none taken */
    int marked; /* ev recorded on the stream after the copies before its count */
};

/* The mark of pf_passing_'s stream, and the counts and marks of the last
 * streams before it: the driver stages each stream's copies apart
 * (probe_driver_staging's `streams`), so a thread's copies that alternate
 * between busy streams are counted stream by stream, not afresh at each
 * switch. */
#define KEPT_STREAMS 3
static __thread struct {
    struct mark now;
    struct {
        struct pf_passing count;
        struct mark mark;
    } kept[KEPT_STREAMS];
    unsigned next; /* the kept stream to give its place up next */
} mine;

static pthread_key_t mark_key;
static pthread_once_t mark_once = PTHREAD_ONCE_INIT;

/* A mark's event, destroyed if its context still is (a context takes its
 * events with it): never kept for a wait, as a destroyed one could be. */
static void mark_drop(struct mark *k) {
    if (k->ev && __atomic_load_n(&k->c->id, __ATOMIC_ACQUIRE) == k->id)
        PF_CALL(cuEventDestroy_v2, k->ev);
    k->ev = NULL;
    k->marked = 0;
}

/* As the thread ends: every mark's event. */
static void marks_drop(void *unused) {
    (void)unused;
    mark_drop(&mine.now);
    for (int i = 0; i < KEPT_STREAMS; i++)
        mark_drop(&mine.kept[i].mark);
}

static void mark_key_create(void) { pthread_key_create(&mark_key, marks_drop); }

/* The mark is only asked, never waited for: an event without
 * CU_EVENT_BLOCKING_SYNC, which the staging's waits use and whose record
 * and query cost more (probe_large_ask, docs/design.md). */
static CUresult mark_create(struct mark *k, struct pf_context *c) {
    int pushed = pf_context_enter(c->handle);
    CUresult r = PF_CALL(cuEventCreate, &k->ev, CU_EVENT_DISABLE_TIMING);
    pf_context_leave(pushed);
    if (r != CUDA_SUCCESS) {
        k->ev = NULL;
        return r;
    }
    k->c = c;
    k->id = c->id;
    pthread_once(&mark_once, mark_key_create);
    pthread_setspecific(mark_key, &mine);
    return r;
}

/* Past the count, or a copy over PF_PASS_SMALL (`large`): 1 when the mark
 * is over, or there is none, and a new one is recorded, or when a large
 * copy finds its stream idle (nothing queued: no mark needed); 0 when not.
 * A mark not over answers alone: the stream is not idle either.  Nothing
 * is asked during a capture, nor on a stream that captures (a capture
 * pinfast did not see begin, by an entry point it does not know, would be
 * broken by the queries). */
static int ask(CUstream stream, int large) {
    struct mark *k = &mine.now;
    CUstreamCaptureStatus cs;
    if (pf_capturing() || PF_CALL(cuStreamIsCapturing, stream, &cs) != CUDA_SUCCESS ||
        cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return 1;
    CUstreamCaptureMode mode = pf_capture_relax();
    int marked = k->marked && __atomic_load_n(&k->c->id, __ATOMIC_ACQUIRE) == k->id;
    CUresult q = marked ? PF_CALL(cuEventQuery, k->ev) : CUDA_SUCCESS;
    if (q == CUDA_ERROR_NOT_READY) {
        pf_capture_restore(mode);
        return 0;
    }
    CUresult idle = large ? PF_CALL(cuStreamQuery, stream) : CUDA_ERROR_NOT_READY;
    struct pf_context *c = idle != CUDA_ERROR_NOT_READY ? NULL : marked ? k->c : pf_context_of(stream, 0);
    if (!c) { /* idle, an error the driver's call answers, or no context */
        k->marked = 0;
        pf_capture_restore(mode);
        return 1;
    }
    if (k->ev && (k->c != c || k->id != c->id))
        mark_drop(k);
    k->marked = (k->ev || mark_create(k, c) == CUDA_SUCCESS) && PF_CALL(cuEventRecord, k->ev, stream) == CUDA_SUCCESS;
    pf_capture_restore(mode);
    return 1; /* an error of the mark's: the driver's call answers it */
}

/* The threads that asked about a stream lately, in a slot of a table
 * hashed by stream: each of them counts its share of the marks' bytes, so
 * that several bursting onto one busy stream pass no more between them
 * than one alone (the driver's staging is the stream's).  A hint, read
 * and written without a lock: a stream that takes another's slot, or a
 * thread counted once too few, only moves a mark. */
#define SHARE_SLOTS 64
#define SHARERS 4
#define SHARE_RECENT_NS 100000000ull /* a thread bursting asks every few ms */
static struct {
    CUstream stream;
    struct {
        const void *who; /* the thread's pf_passing_ */
        uint64_t at;     /* when it last asked, pf_now_ns */
    } seen[SHARERS];
} __attribute__((aligned(64))) shares[SHARE_SLOTS];

/* This thread's share of PF_PASS_MARK_EVERY on `stream`, the thread
 * noted in the stream's slot as asking now. */
static size_t share_of(CUstream stream) {
    uintptr_t h = (uintptr_t)stream;
    h ^= h >> 17, h *= 0x9e3779b97f4a7c15ull;
    __typeof__(&shares[0]) s = &shares[(h >> 32) % SHARE_SLOTS];
    const void *me = &pf_passing_;
    uint64_t now = pf_now_ns();
    if (__atomic_load_n(&s->stream, __ATOMIC_RELAXED) != stream) {
        __atomic_store_n(&s->stream, stream, __ATOMIC_RELAXED);
        for (int i = 0; i < SHARERS; i++)
            __atomic_store_n(&s->seen[i].who, NULL, __ATOMIC_RELAXED);
    }
    int own = -1, oldest = 0;
    unsigned threads = 1;
    uint64_t oldest_at = UINT64_MAX;
    for (int i = 0; i < SHARERS; i++) {
        const void *who = __atomic_load_n(&s->seen[i].who, __ATOMIC_RELAXED);
        uint64_t at = who ? __atomic_load_n(&s->seen[i].at, __ATOMIC_RELAXED) : 0;
        if (who == me)
            own = i;
        else if (who && now - at < SHARE_RECENT_NS)
            threads++;
        if (at < oldest_at)
            oldest = i, oldest_at = at;
    }
    int i = own >= 0 ? own : oldest;
    __atomic_store_n(&s->seen[i].at, now, __ATOMIC_RELAXED);
    __atomic_store_n(&s->seen[i].who, me, __ATOMIC_RELAXED);
    return PF_PASS_MARK_EVERY / threads;
}

/* m's stream becomes `stream`: its count and mark come back if kept, else
 * start afresh with the event of the stream kept longest ago (its count is
 * given up); m's go to the kept. */
static void switch_stream(struct pf_passing *m, CUstream stream) {
    int i = 0;
    while (i < KEPT_STREAMS && mine.kept[i].count.stream != stream)
        i++;
    if (i == KEPT_STREAMS) {
        i = (int)(mine.next++ % KEPT_STREAMS);
        mine.kept[i].count = (struct pf_passing){.stream = stream, .every = share_of(stream)};
        mine.kept[i].mark.marked = 0;
    }
    struct pf_passing count = *m;
    struct mark mark = mine.now;
    *m = mine.kept[i].count;
    mine.now = mine.kept[i].mark;
    mine.kept[i].count = count;
    mine.kept[i].mark = mark;
}

int pf_engine_passing_ask(CUstream stream, size_t n) {
    struct pf_passing *m = &pf_passing_;
    if (m->stream != stream)
        switch_stream(m, stream);
    int large = n > PF_PASS_SMALL;
    size_t charge = large ? 0 : n > PF_PASS_CHARGE_MIN ? n : PF_PASS_CHARGE_MIN;
    if (!large && !m->bouncing && m->since + charge <= m->every) {
        m->since += charge;
        return 1;
    }
    int room = ask(stream, large);
    m->bouncing = !room;
    m->since = charge;
    m->every = share_of(stream);
    return room;
}
