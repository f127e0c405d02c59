/* The staging slots of each CUDA context: pinned SEGMENT_SLOTS at a time
 * as its staged copies need more, up to PINFAST_STAGING, each with an
 * event, forgotten when the context is destroyed; slots handed out in
 * turn.  The record also holds the context's bounce area (bounce.c). */
#include "staging.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../driver/driver.h"
#include "../memory/hostmap.h"
#include "../base/libc.h"

#include <stdlib.h>
#include <string.h>

static struct pf_context *contexts[MAX_CONTEXTS];
static int ncontexts; /* records made, live or not */
static int live;      /* records of contexts that exist, with slots made */
static int made;      /* contexts given slots, over the run (the report) */
static unsigned long long pinned_bytes;
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static int warned_pinned, warned_contexts;

/* Makes ctx current, if it is not: pinned memory and events are made in
 * the context they belong to.  Returns whether it pushed it (for leave). */
int pf_context_enter(CUcontext ctx) {
    CUcontext cur = NULL;
    return PF_CALL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && cur != ctx &&
           PF_CALL(cuCtxPushCurrent_v2, ctx) == CUDA_SUCCESS;
}

void pf_context_leave(int pushed) {
    CUcontext cur;
    if (pushed)
        PF_CALL(cuCtxPopCurrent_v2, &cur);
}

/* Sets the slot size and cap of record c, on the context's first staged
 * copy (a context that only bounces gets none); no slot is pinned yet.
 * Called with contexts_lock held. */
static void create(struct pf_context *c) {
    const struct pf_options *o = pf_options();
    size_t size = o->chunk < o->staging ? o->chunk : o->staging;
    size_t n = size ? o->staging / size : 0;
    c->slot_size = size;
    c->cap = n > MAX_SLOTS ? MAX_SLOTS : (int)n;
    c->full = !c->cap;
    __atomic_store_n(&c->slotted, 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&live, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&made, 1, __ATOMIC_RELAXED);
}

int pf_slots_grow(struct pf_context *c) {
    if (__atomic_load_n(&c->full, __ATOMIC_ACQUIRE))
        return 0;
    /* a copy with no slot at all waits for the one pinning: it would
     * otherwise pass through */
    if (__atomic_load_n(&c->nslots, __ATOMIC_ACQUIRE) ? pthread_mutex_trylock(&c->growing)
                                                      : pthread_mutex_lock(&c->growing))
        return 0;
    int have = c->nslots, k = 0;
    if (c->full) {
        pthread_mutex_unlock(&c->growing);
        return 0;
    }
    int n = c->cap - have < SEGMENT_SLOTS ? c->cap - have : SEGMENT_SLOTS;
    size_t size = c->slot_size;
    CUevent ev[SEGMENT_SLOTS];
    int pushed = pf_context_enter(c->handle);
    struct pf_pinned seg = {0};
    int asked = n;
    /* halved until the driver agrees */
    while (n && !pf_pinned_make(&seg, (size_t)n * size))
        n /= 2;
    while (seg.mem && k < n && PF_CALL(cuEventCreate, &ev[k], PF_WAIT_EVENT) == CUDA_SUCCESS)
        k++;
    if (seg.mem && !k)
        pf_pinned_free(&seg);
    pf_context_leave(pushed);
    char *mem = seg.mem;
    if (mem) {
        pf_hostmap_add(mem, (size_t)k * size, PF_MEM_PINFAST, CU_MEMHOSTALLOC_PORTABLE);
        __atomic_fetch_add(&pinned_bytes, (size_t)n * size, __ATOMIC_RELAXED);
        pthread_mutex_lock(&c->lock);
        for (int i = 0; i < k; i++)
            c->slots[have + i] = (struct pf_slot){.mem = mem + (size_t)i * size, .ev = ev[i]};
        c->turn = have; /* new slots first: no core holds their lines (pf_slot_take) */
        c->segs[c->nsegs++] = seg;
        __atomic_store_n(&c->nslots, have + k, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&c->lock);
        pf_msg(PF_DEBUG, "context %llu: %d staging slots of %zu KiB pinned, %d in all", c->id, k, size >> 10, have + k);
    } else if (!have) {
        pf_msg_once(warned_pinned, PF_WARNING,
                    "context %llu: could not pin %zu bytes of staging memory; its pageable copies pass through", c->id,
                    size);
    }
    /* a refusal is not asked again; nor, once the cap is reached */
    __atomic_store_n(&c->full, !mem || k < asked || have + k >= c->cap, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->growing);
    return k;
}

static struct pf_context *find(unsigned long long id) {
    int n = __atomic_load_n(&ncontexts, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&contexts[i]->id, __ATOMIC_ACQUIRE) == id)
            return contexts[i];
    return NULL;
}

/* The record of the context a copy on `stream` runs in, made on first use,
 * with its slots when `slots` asks for them: a stream's context, which may
 * not be the current one, owns the copy's slots, bounce area and events. */
struct pf_context *pf_context_of(CUstream stream, int slots) {
    CUcontext ctx = NULL;
    unsigned long long id;
    CUresult r = stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD ? PF_CALL(cuCtxGetCurrent, &ctx)
                                                                              : PF_CALL(cuStreamGetCtx, stream, &ctx);
    if (r != CUDA_SUCCESS || !ctx || !pf_context_id(ctx, &id))
        return NULL;
    struct pf_context *c = find(id);
    if (c && (!slots || __atomic_load_n(&c->slotted, __ATOMIC_ACQUIRE)))
        return c;
    pthread_mutex_lock(&contexts_lock);
    if (!(c = find(id))) {
        for (int i = 0; i < ncontexts && !c; i++) /* a destroyed context's record */
            if (!contexts[i]->id)
                c = contexts[i];
        int fresh = !c && ncontexts < MAX_CONTEXTS && (c = pf_libc_calloc(1, sizeof *c));
        if (!c)
            pf_msg_once(warned_contexts, PF_WARNING,
                        "more than %d CUDA contexts at once; copies in new ones pass through", MAX_CONTEXTS);
        if (c) {
            /* all but the id, which other threads' find() reads meanwhile:
             * it is the first member, and is stored last */
            struct pf_context init = {.handle = ctx};
            memcpy((char *)c + sizeof c->id, (char *)&init + sizeof c->id, sizeof *c - sizeof c->id);
            pthread_mutex_init(&c->lock, NULL);
            pthread_mutex_init(&c->growing, NULL);
            /* its bounce area, zeroed above: none yet, made by bounce.c on
             * the context's first bounce (a reused record's went with its
             * context) */
            pthread_mutex_init(&c->bounce.lock, NULL);
            __atomic_store_n(&c->id, id, __ATOMIC_RELEASE);
        }
        if (fresh) { /* published once made */
            contexts[ncontexts] = c;
            __atomic_store_n(&ncontexts, ncontexts + 1, __ATOMIC_RELEASE);
        }
    }
    if (c && slots && !c->slotted)
        create(c);
    pthread_mutex_unlock(&contexts_lock);
    return c;
}

void pf_engine_context_gone(CUcontext ctx) {
    pthread_mutex_lock(&contexts_lock);
    for (int i = 0; i < ncontexts; i++) {
        struct pf_context *c = contexts[i];
        if (!c->id || c->handle != ctx)
            continue;
        /* the driver freed the slots, the bounce area and their events
         * with the context, or dropped their registrations: their mappings
         * go; the record is made afresh when reused */
        for (int k = 0; k < c->nsegs; k++) {
            pf_hostmap_remove(c->segs[k].mem, &(struct pf_range){0});
            pf_pinned_gone(&c->segs[k]);
        }
        pf_pinned_gone(&c->bounce.area);
        __atomic_store_n(&c->id, 0, __ATOMIC_RELEASE);
        if (c->slotted)
            __atomic_fetch_sub(&live, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&contexts_lock);
}

/* An event of c's for one wait: a spare one, or made (in c, made current). */
CUresult pf_context_event(struct pf_context *c, CUevent *ev) {
    *ev = NULL;
    pthread_mutex_lock(&c->lock);
    if (c->nspare)
        *ev = c->spare[--c->nspare];
    pthread_mutex_unlock(&c->lock);
    if (*ev)
        return CUDA_SUCCESS;
    int pushed = pf_context_enter(c->handle);
    CUresult r = PF_CALL(cuEventCreate, ev, PF_WAIT_EVENT);
    pf_context_leave(pushed);
    return r;
}

/* Keeps ev for the next copy, if there is room and it did not fail. */
void pf_context_event_back(struct pf_context *c, CUevent ev, CUresult r) {
    pthread_mutex_lock(&c->lock);
    if (r == CUDA_SUCCESS && c->nspare < SPARE_EVENTS) {
        c->spare[c->nspare++] = ev;
        ev = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (ev)
        PF_CALL(cuEventDestroy_v2, ev);
}

/* The next free slot, taking them in turn: a slot the workers copied out
 * of keeps its lines in their caches for a while, and a DMA into lines
 * that must first be snooped out of a core's cache runs slower
 * (docs/tuning.md#staging-slots-are-taken-in-turn).  Taken in turn, a slot comes back after
 * all the context's other slots (pinned as copies need them,
 * docs/design.md).  A slot fenced on another stream is
 * taken only once its fence is over: that stream may wait for something
 * this copy's caller is yet to do.  Called with the lock held. */
struct pf_slot *pf_slot_take(struct pf_context *c, uintptr_t who) {
    for (int k = 0; k < c->nslots; k++) {
        int i = (c->turn + k) % c->nslots;
        struct pf_slot *s = &c->slots[i];
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
 * this caller.  A copy holds at most half the slots the context may have
 * (engine.c), so copies in the other direction proceed. */
int pf_slots_acquire(struct pf_context *c, struct pf_chunk *h, int want, uintptr_t who) {
    int n = 0;
    struct pf_slot *s;
    pthread_mutex_lock(&c->lock);
    while (n < want && (s = pf_slot_take(c, who)))
        h[n++] = (struct pf_chunk){.s = s, .phase = IDLE};
    pthread_mutex_unlock(&c->lock);
    return n;
}

void pf_slots_release(struct pf_context *c, struct pf_chunk *h, int n) {
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < n; i++)
        h[i].s->busy = 0;
    pthread_mutex_unlock(&c->lock);
}

/* This thread's chunks in hand, on the heap: as a local array they took
 * 140 KB of stack, more than some threads have at all.  Freed with the
 * thread; NULL, and the copy passes through, if there is no memory. */
static pthread_key_t held_key;
static pthread_once_t held_once = PTHREAD_ONCE_INIT;
static __thread struct pf_chunk *held_mine;
static __thread int held_cap;

static void held_key_create(void) { pthread_key_create(&held_key, pf_libc_free); }

struct pf_chunk *pf_chunks_array(int n) {
    if (held_cap >= n)
        return held_mine;
    pthread_once(&held_once, held_key_create);
    struct pf_chunk *h = pf_libc_aligned_alloc(_Alignof(struct pf_chunk), (size_t)n * sizeof *h);
    if (!h)
        return NULL;
    pf_libc_free(held_mine);
    held_mine = h;
    held_cap = n;
    pthread_setspecific(held_key, h);
    return h;
}

int pf_contexts_live(void) { return __atomic_load_n(&live, __ATOMIC_RELAXED); }

void pf_contexts_counts(unsigned long long *pinned, int *contexts_made) {
    *pinned = __atomic_load_n(&pinned_bytes, __ATOMIC_RELAXED);
    *contexts_made = __atomic_load_n(&made, __ATOMIC_RELAXED);
}

/* In a forked child the parent's contexts are unusable, and their slots
 * and bounce areas are not mapped (pinned.c): forgotten. */
void pf_contexts_forked(void) {
    for (int i = 0; i < ncontexts; i++)
        for (int k = 0; contexts[i]->id && k < contexts[i]->nsegs; k++)
            pf_hostmap_remove(contexts[i]->segs[k].mem, &(struct pf_range){0});
    ncontexts = live = made = 0;
    pinned_bytes = 0;
    pthread_mutex_init(&contexts_lock, NULL);
}
