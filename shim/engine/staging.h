/* Inside the engine: the staging slots of each context, the chunks a copy
 * holds, its plan, and the tuning constants they share.  Only the engine's
 * own files include this. */
#ifndef PINFAST_STAGING_H
#define PINFAST_STAGING_H

#include "bounce.h"
#include "engine.h"
#include "workers.h"
#include "../base/clock.h"

#include <pthread.h>
#include <stdint.h>

#define MAX_CONTEXTS 64
#define MAX_SLOTS 256
/* Slots are pinned this many at a time, as copies need them: all of
 * PINFAST_STAGING at once held a context's first copy for tens of
 * milliseconds (docs/options.md, "Staging") */
#define SEGMENT_SLOTS 4
/* A copy of LEAN_FROM or more has this many pinned for it if it finds
 * fewer free: four hold large copies to half speed (docs/options.md) */
#define FULL_SPEED_SLOTS 16
#define MIN_TASK (32u << 10) /* smaller host copies cost more to hand out than to do */
#define SPLIT 8              /* tasks a chunk is cut into, size permitting */
#define MAX_TASK (256u << 10)
#define MIN_CHUNK (256u << 10)         /* the first chunk of a copy */
#define AUTO_STREAM_BELOW (128u << 20) /* H2D */
/* An H2D copy with streaming stores from LEAN_FROM on is paced: it fills at
 * most LEAN_CHUNKS chunks at once, each cut in LEAN_TASKS, and keeps at
 * most LEAN_AHEAD chunks filling or in DMA: the DMA reading the slots slows
 * while other slots take streaming stores
 * (docs/tuning.md#large-h2d-copies-with-streaming-stores-are-paced). */
#define LEAN_FROM (32u << 20)
#define LEAN_CHUNKS 4
#define LEAN_TASKS 3
#define LEAN_AHEAD 5
#define AUTO_STREAM_FROM (64u << 20) /* D2H */
/* How a D2H into a fresh destination takes its page faults: its interior
 * faulted in by the workers ahead of the copy, or, from FRESH_SELF_FROM on,
 * by each chunk's copy, one task per chunk, with a thread per CPU awake
 * (docs/design.md, "Fresh destinations") */
enum pf_fresh_way { PF_FRESH_NONE, PF_FRESH_AHEAD, PF_FRESH_SELF };
#define FRESH_SELF_FROM ((size_t)256 << 20)
/* A fresh destination pinfast gives no huge-page advice, from
 * FRESH_AHEAD_FROM on, is faulted in ahead in pieces of FRESH_PIECE or more
 * (docs/design.md, "Fresh destinations") */
#define FRESH_AHEAD_FROM ((size_t)8 << 20)
#define FRESH_PIECE ((size_t)1 << 20)
/* ... and from FRESH_LANES_FROM to FRESH_AHEAD_FROM, faulted in by the
 * copy's tasks, each chunk a piece of each of its 2 MiB regions and its
 * tasks taken round them (pf_plan_lanes) */
#define FRESH_LANES_FROM ((size_t)3 << 20)
#define HELP_MAX MAX_TASK /* a D2H caller copies no more than this at a time */
/* An H2D caller busy with a large task issues a chunk that is ready late,
 * so it helps with small ones; a D2H caller helps more, as a destination
 * never touched faults in faster with the caller among the copiers
 * (docs/tuning.md#how-much-a-waiting-caller-copies-help_max-help_max_h2d). */
#define HELP_MAX_H2D MIN_TASK
/* Pauses between a waiting caller's driver queries: fewer slowed D2H copies
 * (docs/tuning.md#pauses-between-polls-poll_pauses) */
#define POLL_PAUSES 32
#define TAIL_SPLIT (1u << 20) /* a D2H copy's last chunks are halved from this size */
/* A caller with nothing to do but wait for a DMA polls this long past the
 * time the DMA should take, then sleeps in the driver: a copy queued behind
 * a long kernel must not cost a core. */
#define POLL_NS 200000u
/* DMAs pinfast issues run at least this fast (8 GB/s): a fence not reached
 * within its DMAs' time at this pace, and POLL_NS, waits for other work on
 * its stream, and is waited for asleep */
#define SLOW_NS_PER_MIB 131072u
/* Events pinfast waits on: made blocking, or the driver's wait spins a core
 * (a context's default scheduling) */
#define PF_WAIT_EVENT (CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC)
/* Events a context keeps for waits: two per thread copying through a registration at once. */
#define SPARE_EVENTS 16

struct pf_slot {
    char *mem;
    CUevent ev;
    int fenced;      /* ev recorded after a DMA that may still use mem */
    uintptr_t owner; /* the stream the fence is on (see pf_fence_owner()) */
    int busy;        /* held by a copy */
};

/* Pinned slots and events belong to one context.  Records are reused once
 * their context is destroyed (id 0), never freed: a lookup reads them
 * without the lock. */
struct pf_context {
    unsigned long long id;
    CUcontext handle;
    pthread_mutex_t lock;
    int nslots;  /* made so far: raised under the lock, read atomically */
    int turn;    /* where the search for a free slot starts */
    int landing; /* slots held by asynchronous D2H chunks */
    size_t slot_size;
    int cap;                 /* slots PINFAST_STAGING allows (0: no staging) */
    int slotted;             /* slot_size and cap are set */
    int full;                /* no more to make: cap reached, or the driver refused */
    pthread_mutex_t growing; /* held by the copy pinning more */
    int nsegs;               /* pinned blocks, SEGMENT_SLOTS slots each (the last may have fewer) */
    struct pf_pinned segs[MAX_SLOTS / SEGMENT_SLOTS];
    struct pf_slot slots[MAX_SLOTS];
    struct pf_bounce bounce;
    CUevent spare[SPARE_EVENTS]; /* events of waits, kept for the next (lock held) */
    int nspare;
};

enum { IDLE, COPYING, DMA };

#define PF_MAX_LANES 8 /* the regions a copy under FRESH_AHEAD_FROM spans, and more */

/* A slot a copy holds, and the chunk it carries. */
struct pf_chunk {
    struct pf_slot *s;
    size_t off, len; /* the chunk, within the copy (with pieces: the first's offset, their sum) */
    /* a chunk of a copy with lanes: a piece of each lane with bytes left,
     * one after the other in the slot; 0: one piece, off and len */
    int npieces;
    struct pf_lane_piece {
        size_t off, len;
    } piece[PF_MAX_LANES];
    int phase; /* what the chunk waits for */
    int ntasks;
    /* debug log: an H2D chunk's DMA is seen done after the chunk retired,
     * so that time goes straight into its line, log[logged - 1] (0: none) */
    int logged;
    uint64_t taken_ns, dma_ns, dma_end_ns, landed_ns;
    struct pf_task tasks[PF_MAX_SPLIT];
};

/* Who a fence belongs to: the stream handle, or for the per-thread default
 * stream, which is one handle for many streams, the thread. */
static inline uintptr_t pf_fence_owner(CUstream stream) {
    return stream == CU_STREAM_PER_THREAD ? (uintptr_t)pthread_self() ^ 2 : (uintptr_t)stream;
}

struct pf_plan {
    const struct pf_xfer *x;
    size_t chunk; /* the largest chunk: a slot */
    size_t ramp;  /* the next chunk's size, doubling up to chunk */
    size_t next;  /* offset of the next chunk (with lanes: bytes taken) */
    enum pf_host_copy kind;
    int lean;               /* H2D paced: see LEAN_FROM */
    enum pf_fresh_way huge; /* D2H into a fresh destination (not NONE): chunks end on its huge pages */
    /* a fresh destination faulting 4 KiB pages: each chunk a piece of each
     * of its lanes, its 2 MiB regions (see pf_plan_lanes) */
    int lanes;
    size_t lane_at[PF_MAX_LANES + 1]; /* where each lane starts; the last entry: the copy's end */
    size_t lane_next[PF_MAX_LANES];   /* each lane's next chunk */
    /* for the debug log and the Chrome trace: times are taken */
    int debug, nchunks, ntasks, helped, nlog;
    uint64_t t0, first_dma_ns, first_task_ns;
    struct pf_chunk_log *log;    /* PF_TIMELINE of them; NULL: none kept */
    const struct pf_slot *slots; /* the context's, to number them */
};

/* A time for the debug line; no clock read when nobody prints it. */
static inline uint64_t pf_stamp(int debug) { return debug ? pf_now_ns() : 0; }

/* contexts.c: the record of the context a copy on `stream` runs in, made
 * on first use, its slot size and cap set when `slots` asks; NULL when
 * there is none to be had. */
struct pf_context *pf_context_of(CUstream stream, int slots);
/* Pins SEGMENT_SLOTS more slots for c, unless it has all it may or another
 * copy is pinning some (then waits for it only while c has none): whether
 * any were added. */
int pf_slots_grow(struct pf_context *c);
/* Makes ctx current if it is not (returns whether it was pushed), and back. */
int pf_context_enter(CUcontext ctx);
void pf_context_leave(int pushed);
/* An event of c's (PF_WAIT_EVENT) for one wait, and back when done (kept
 * for the next when r is CUDA_SUCCESS and there is room). */
CUresult pf_context_event(struct pf_context *c, CUevent *ev);
void pf_context_event_back(struct pf_context *c, CUevent ev, CUresult r);
/* Records of contexts that exist now. */
int pf_contexts_live(void);
/* The next free slot of c, taken in turn (lock held); NULL when none is. */
struct pf_slot *pf_slot_take(struct pf_context *c, uintptr_t who);
/* Takes up to `want` slots into h; gives them back. */
int pf_slots_acquire(struct pf_context *c, struct pf_chunk *h, int want, uintptr_t who);
void pf_slots_release(struct pf_context *c, struct pf_chunk *h, int n);
/* This thread's array of n chunks in hand (heap, freed with the thread). */
struct pf_chunk *pf_chunks_array(int n);
/* What the report says of the staging memory. */
void pf_contexts_counts(unsigned long long *pinned_bytes, int *contexts);
void pf_contexts_forked(void);

/* plan.c: the tasks of a host copy of len bytes, and cutting it into them
 * (queued; returns how many). */
size_t pf_task_size(size_t len);
int pf_host_tasks_cut(struct pf_task *tasks, char *dst, const char *src, size_t len, enum pf_host_copy kind,
                      size_t task, const struct pf_shape *shape, int h2d);
/* Queues tasks faulting in [lo, lo+len) ahead of a D2H into it, each a
 * whole number of `unit` bytes but the last; returns how many (at most
 * PF_POPULATE_TASKS). */
#define PF_POPULATE_TASKS 64
int pf_populate_cut(struct pf_task *tasks, char *lo, size_t len, size_t unit);
/* Has p make each chunk of a piece of each lane, the 2 MiB regions its
 * host side spans (the first and last partial), and each chunk's tasks
 * taken round its pieces: a page fault holds the lock of its region's
 * page table, so threads faulting one region at once wait for each other,
 * and a copy into memory never touched runs about as fast as the regions
 * its threads are in (docs/design.md, "Fresh destinations").  Nothing
 * when it spans one region or more than PF_MAX_LANES (FRESH_AHEAD_FROM
 * takes those). */
void pf_plan_lanes(struct pf_plan *p);
/* Drives the copy's chunks through nh held slots until every byte moved. */
CUresult pf_plan_run(struct pf_plan *p, struct pf_chunk *h, int nh, size_t help_max);
/* Seconds callers polled for DMAs before the blocking wait (reset: to 0,
 * in a forked child). */
double pf_plan_polled_seconds(int reset);
/* Polls ev for poll_ns at most: its result, CUDA_ERROR_NOT_READY if it is
 * not over by then.  The polling is counted. */
CUresult pf_event_poll(CUevent ev, uint64_t poll_ns);
/* Returns once ev is over (or its stream met an error): polls poll_ns,
 * then waits in the driver, as a staged copy waits for its last DMA. */
CUresult pf_event_await(CUevent ev, uint64_t poll_ns);

/* bounce.c: x, an asynchronous H2D pf_route_confirm() allowed, linear or
 * pitched, copied by the caller into the bounce area of its stream's
 * context and its DMA queued from there: 1 with the call's result in
 * *result, 0 when there is no area or no space. */
int pf_bounce_copy(const struct pf_xfer *x, CUresult *result);

/* shape.c: the DMA of a pitched copy's chunk of len bytes at off (whole
 * rows), between the slot and the device side. */
CUresult pf_shape_dma(const struct pf_xfer *x, void *slot, size_t off, size_t len);
/* The bytes of the program's memory a pitched copy's host rows span, from
 * x->host; the whole copy as one DMA on x->stream between the device side
 * and `host`: the program's rows, which a registration holds, or (packed)
 * its rows end to end in pinned memory; and its host rows packed end to
 * end into dst (x->bytes). */
size_t pf_shape_host_span(const struct pf_xfer *x);
CUresult pf_shape_dma_whole(const struct pf_xfer *x, void *host, int packed);
void pf_shape_pack(const struct pf_xfer *x, enum pf_host_copy kind, char *dst);

/* async_d2h.c: issues asynchronous D2H landings for a prefix of the copy;
 * returns its length (the rest is staged synchronously). */
size_t pf_async_d2h_land(const struct pf_xfer *x, struct pf_context *c, enum pf_host_copy kind, CUresult *err);

/* timeline.c (PINFAST_LOG=debug, PINFAST_TRACE_FORMAT=chrome): this
 * thread's timeline (heap, freed with the thread; NULL if no memory); a
 * retired chunk's times, and the copy's debug lines. */
struct pf_timeline *pf_timeline_mine(void);
void pf_timeline_account(struct pf_plan *p, struct pf_chunk *h);
void pf_timeline_print(const struct pf_plan *p);

#endif
