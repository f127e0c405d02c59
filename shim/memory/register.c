/* The registration cache (register.h).  A registration is a whole block of
 * pinfast's heap, its state in the block's record (block.h), under the
 * heap's lock.  The lock is never held across a driver call: registering
 * drops it, and a block being registered (MAKING) is staged meanwhile.  A
 * copy through a registration holds a reference; undoing one waits for
 * them.  Undoing happens in three places only, where the program already
 * waits for the device: its cuCtxSynchronize (settle), exit, and its own
 * cuMemHostRegister over a block whose registration would change the
 * driver's answer. */
#include "register.h"
#include "register_state.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../base/signals.h"
#include "../driver/capture.h"
#include "../driver/driver.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

int pf_register_watch_;
static int watched;                 /* blocks DUE, MAKING, LIVE or STALE */
static size_t held_bytes, peak_bytes, cap_bytes; /* of MAKING, LIVE and STALE blocks */
static pthread_cond_t released = PTHREAD_COND_INITIALIZER; /* a reference dropped, a registration made */
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;     /* the registrar's */
static enum { NONE, STARTING, RUNNING, STOPPED } registrar_state;
static pthread_t registrar_thread;
static int atexit_done, warned;
static struct pf_register_stats stats;
static uint64_t register_ticks;

/* PINFAST_REGISTER_MAX, or: the locked-memory limit when it is finite, and
 * a quarter of the machine's memory. */
static size_t cap(void) {
    if (cap_bytes)
        return cap_bytes;
    size_t c = pf_options()->reg_max;
    if (!c) {
        c = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE) / 4;
        struct rlimit l;
        if (!getrlimit(RLIMIT_MEMLOCK, &l) && l.rlim_cur != RLIM_INFINITY && l.rlim_cur < c)
            c = l.rlim_cur;
    }
    return cap_bytes = c;
}

static int counted(int reg) { return reg == PF_REG_DUE || reg == PF_REG_MAKING || reg == PF_REG_LIVE || reg == PF_REG_STALE; }

/* Every change of a block's registration goes through here: the counts
 * and the hooks' flag follow (lock held). */
void pf_reg_set(struct pf_block *b, int reg) {
    watched += counted(reg) - counted(b->reg);
    if (pf_reg_holds(reg) && !pf_reg_holds(b->reg))
        held_bytes += b->reg_len;
    else if (!pf_reg_holds(reg) && pf_reg_holds(b->reg))
        held_bytes -= b->reg_len;
    peak_bytes = held_bytes > peak_bytes ? held_bytes : peak_bytes;
    b->reg = (uint8_t)reg;
    __atomic_store_n(&pf_register_watch_, watched != 0, __ATOMIC_RELAXED);
}

/* Registers [p, p+n) with `flags` (`reg`) or unregisters p, in b's
 * context, relaxed: a capture on another thread must not be invalidated by
 * it (lock held; dropped meanwhile). */
static CUresult driver_call(struct pf_block *b, int reg, uintptr_t p, size_t n, unsigned flags) {
    CUcontext ctx = b->ctx;
    pf_heap_unlock();
    uint64_t t0 = pf_ticks();
    CUstreamCaptureMode mode = pf_capture_relax();
    CUcontext cur = NULL;
    int pushed = PF_CALL(cuCtxGetCurrent, &cur) == CUDA_SUCCESS && cur != ctx &&
                 PF_CALL(cuCtxPushCurrent_v2, ctx) == CUDA_SUCCESS;
    CUresult r = reg ? PF_CALL(cuMemHostRegister_v2, (void *)p, n, flags) : PF_CALL(cuMemHostUnregister, (void *)p);
    if (pushed)
        PF_CALL(cuCtxPopCurrent_v2, &cur);
    pf_capture_restore(mode);
    pf_heap_lock();
    register_ticks += pf_ticks_since(t0);
    return r;
}

/* pinfast's registration of b, made or undone. */
static CUresult driver(struct pf_block *b, int reg) {
    return driver_call(b, reg, b->base, b->reg_len, PF_REG_HOST_FLAGS);
}

/* b's registration was undone: the program's registrations answered from
 * it are made with the driver, the block the program's from now on (lock
 * held; dropped meanwhile): 0 when the block was given back meanwhile.
 * At exit they go with the rest. */
static int hands_to_driver(struct pf_block *b) {
    uint32_t gen = b->gen;
    for (int i = 0; i < b->nhands && registrar_state != STOPPED;) {
        struct pf_hand h = b->hand[i];
        CUresult r = driver_call(b, 1, h.lo, h.len, h.flags);
        if (b->gen != gen)
            return 0;
        if (r == CUDA_SUCCESS) {
            i++;
            continue;
        }
        pf_msg(PF_INFO, "the program's registration of %zu bytes at %p, made again: error %d", h.len, (void *)h.lo,
               (int)r);
        b->hand[i] = b->hand[--b->nhands];
    }
    if (registrar_state == STOPPED)
        b->nhands = 0;
    pf_reg_set(b, b->nhands ? PF_REG_PROGRAM : PF_REG_NONE);
    return 1;
}

/* (register_state.h) Meanwhile the block may be given out again,
 * registered again, handed to the program, or given back and its record
 * reused: its generation tells. */
void pf_reg_undo(struct pf_block *b, int (*still)(const struct pf_block *)) {
    uint32_t gen = b->gen;
    while (b->gen == gen && (b->reg == PF_REG_MAKING || b->refs || b->undoing))
        pf_heap_wait(&released);
    if (b->gen != gen || !pf_reg_holds(b->reg) || (still && !still(b)))
        return;
    b->undoing = 1;
    CUresult r = driver(b, 0);
    if (b->gen != gen) { /* given back meanwhile (its context destroyed) */
        pthread_cond_broadcast(&released);
        return;
    }
    if (r != CUDA_SUCCESS)
        pf_msg(PF_INFO, "cuMemHostUnregister of %zu bytes at %p: error %d", b->reg_len, (void *)b->base, (int)r);
    stats.undone++;
    if (!b->nhands)
        pf_reg_set(b, PF_REG_NONE);
    else if (!hands_to_driver(b))
        gen = ~b->gen; /* (another block's record now) */
    if (b->gen == gen)
        b->undoing = 0;
    pthread_cond_broadcast(&released);
}

void pf_reg_wait(void) { pf_heap_wait(&released); }
void pf_reg_count_handed(void) { stats.handed++; }

/* Registers b (DUE) unless that would pass the cap: then it is staged from
 * now on (nothing registered is undone to make room: that waits for the
 * device).  b is MAKING and held meanwhile, so that copies over it are
 * staged and an undo waits for it (lock held; dropped meanwhile). */
static void registering(struct pf_block *b) {
    if (held_bytes + b->size > cap()) {
        stats.over_cap++;
        pf_reg_set(b, PF_REG_REFUSED);
        return;
    }
    b->reg_len = b->size;
    pf_reg_set(b, PF_REG_MAKING);
    b->orphan = 0;
    b->refs++;
    CUresult r = driver(b, 1);
    b->refs--;
    if (r == CUDA_SUCCESS && b->orphan) { /* made in a context destroyed meanwhile: gone with it */
        pf_reg_set(b, PF_REG_NONE);
    } else if (r == CUDA_SUCCESS) {
        stats.registered++;
        if (b->reg == PF_REG_MAKING) /* else retired meanwhile: STALE */
            pf_reg_set(b, PF_REG_LIVE);
        pf_msg(PF_DEBUG, "registered %zu bytes at %p", b->reg_len, (void *)b->base);
    } else {
        /* the locked-memory limit, the program's own registration made
         * meanwhile by a raw call: this block is staged from now on */
        stats.refused++;
        pf_reg_set(b, PF_REG_REFUSED);
        pf_msg_once(warned, PF_INFO, "cuMemHostRegister of %zu bytes at %p: error %d; such blocks are staged",
                    b->reg_len, (void *)b->base, (int)r);
    }
    pthread_cond_broadcast(&released);
}

static struct pf_block *next_due(void) {
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i].reg == PF_REG_DUE)
            return &all[i];
    return NULL;
}

/* The registrar: registers what is due; asleep when nothing is. */
static void *registrar(void *arg) {
    (void)arg;
    pf_heap_lock();
    for (struct pf_block *b;;) {
        if (registrar_state != STOPPED && (b = next_due()))
            registering(b);
        else if (registrar_state == STOPPED)
            break;
        else
            pf_heap_wait(&work);
    }
    pf_heap_unlock();
    return NULL;
}

static void unregister_all_at_exit(void);

/* The registrar, on first need (lock not held: creating a thread
 * allocates). */
static void start_registrar(void) {
    sigset_t old;
    pf_signals_block(&old);
    int failed = pthread_create(&registrar_thread, NULL, registrar, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed)
        pf_msg(PF_INFO, "no registrar thread (error %d): nothing is registered", failed);
    else
        pthread_setname_np(registrar_thread, "pinfast-reg");
    pf_heap_lock();
    if (!atexit_done++)
        atexit(unregister_all_at_exit);
    registrar_state = failed ? STOPPED : RUNNING;
    pf_heap_unlock();
}

struct pf_block *pf_reg_block_of(const void *p, size_t n) {
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    return b && b->state == PF_BLOCK_LIVE && (uintptr_t)p + n <= b->base + b->size ? b : NULL;
}

/* (a block grown in place since its registration holds more than it) */
int pf_reg_covers(const struct pf_block *b, const void *p, size_t n) {
    return b->reg == PF_REG_LIVE && !b->undoing && (uintptr_t)p + n <= b->base + b->reg_len;
}

static int hold(struct pf_block *b, const void *host, size_t n, struct pf_hold *h) {
    (void)host;
    b->refs++;
    h->n = 1;
    h->piece[0] = (struct pf_piece){b, 0, n};
    return 1;
}

int pf_register_use(const void *host, size_t n, int *busy, struct pf_hold *h) {
    const struct pf_options *o = pf_options();
    int sight = o->reg && n >= o->reg_min;
    *busy = 0;
    h->n = 0;
    if (!n || !pf_heap_owns(host) || (!sight && !pf_register_watching()))
        return 0;
    CUcontext ctx = NULL; /* asked before the lock: no driver call under it */
    if (sight && PF_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS)
        ctx = NULL;
    int start = 0, k = 0;
    pf_heap_lock();
    struct pf_block *b = pf_reg_block_of(host, n);
    if (b && pf_reg_covers(b, host, n)) {
        k = hold(b, host, n, h);
    } else if (b && (b->reg == PF_REG_DUE || b->reg == PF_REG_MAKING)) {
        *busy = 1;
    } else if (b && b->reg == PF_REG_NONE && sight && ++b->sightings >= (unsigned)o->reg_after && ctx) {
        b->ctx = ctx;
        pf_reg_set(b, PF_REG_DUE); /* this copy is staged; the registrar registers it */
        *busy = 1;
        start = registrar_state == NONE;
        registrar_state = start ? STARTING : registrar_state;
        pthread_cond_signal(&work);
    }
    pf_heap_unlock();
    if (start)
        start_registrar();
    return k;
}

int pf_register_await(const void *host, size_t n, struct pf_hold *h) {
    h->n = 0;
    if (!pf_heap_owns(host))
        return 0;
    int k = 0;
    pf_heap_lock();
    for (struct pf_block *b; (b = pf_reg_block_of(host, n)) && !k;) {
        if (pf_reg_covers(b, host, n))
            k = hold(b, host, n, h);
        else if (b->reg == PF_REG_DUE)
            registering(b); /* as the registrar would */
        else if (b->reg == PF_REG_MAKING)
            pf_heap_wait(&released);
        else
            break;
    }
    pf_heap_unlock();
    return k;
}

void pf_register_done(struct pf_hold *h, size_t bytes) {
    pf_heap_lock();
    if (bytes) {
        stats.copies++;
        stats.bytes += bytes;
    }
    for (int i = 0; i < h->n; i++)
        if (!--h->piece[i].g->refs)
            pthread_cond_broadcast(&released);
    pf_heap_unlock();
}

void pf_reg_each_meeting(uintptr_t lo, uintptr_t hi, void (*f)(struct pf_block *, void *), void *arg) {
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i].state != PF_BLOCK_UNUSED && all[i].base < hi && lo < all[i].base + all[i].size)
            f(&all[i], arg);
}

static void guard_one(struct pf_block *b, void *arg) {
    if (b->reg == PF_REG_DUE)
        pf_reg_set(b, PF_REG_NONE);
    *(int *)arg |= b->reg == PF_REG_LIVE || b->reg == PF_REG_MAKING;
}

static int stale(const struct pf_block *b) { return b->reg == PF_REG_STALE; }

/* A retired registration over the range: the driver would move its old
 * pages, where without pinfast it would stage the new ones (within one of
 * the program's own registrations it would move the old ones too) (lock
 * held). */
static struct pf_block *stale_meeting(uintptr_t lo, uintptr_t hi) {
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i].reg == PF_REG_STALE && all[i].base < hi && lo < all[i].base + all[i].reg_len &&
            !pf_reg_in_hand(&all[i], lo, hi))
            return &all[i];
    return NULL;
}

int pf_register_guard(const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p, hi = n > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + n;
    if (!n || !pf_register_watching() || !pf_heap_meets(lo, hi))
        return 0;
    int touched = 0;
    pf_heap_lock();
    pf_reg_each_meeting(lo, hi, guard_one, &touched);
    stats.guarded += touched;
    /* the one device wait pinfast adds of its own: a copy the driver makes
     * over memory the program changed under a registration (rare: a small
     * or unstaged copy right after munmap, madvise or mprotect of a block) */
    for (struct pf_block *b; (b = stale_meeting(lo, hi));)
        pf_reg_undo(b, stale);
    pf_heap_unlock();
    return touched;
}

static void retire(struct pf_block *b, void *arg) {
    (void)arg;
    b->sightings = 0;
    if (b->reg == PF_REG_DUE) {
        pf_reg_set(b, PF_REG_NONE);
    } else if (b->reg == PF_REG_LIVE || b->reg == PF_REG_MAKING) {
        stats.retired++;
        pf_reg_set(b, PF_REG_STALE);
    }
}

void pf_register_changed(uintptr_t lo, uintptr_t hi) {
    if (!pf_heap_meets(lo, hi))
        return;
    pf_heap_lock();
    pf_reg_each_meeting(lo, hi, retire, NULL);
    pf_heap_unlock();
}

/* Whether a settle undoes b's registration: retired, freed while the
 * program's registrations held it, or kept unused since the previous
 * settle; never while the program has a registration over it (its own
 * cuMemHostUnregister is yet to come). */
static int to_settle(const struct pf_block *b) {
    return !b->nhands && (b->reg == PF_REG_STALE || (b->state == PF_BLOCK_HELD && b->reg == PF_REG_LIVE) ||
                          (b->state == PF_BLOCK_KEPT && b->reg == PF_REG_LIVE && b->settles >= 2));
}

/* Whether a settle gives b back: kept or held, not registered (a held one
 * undone by a guard, refused or orphaned meanwhile). */
static int to_release(const struct pf_block *b) {
    return (b->state == PF_BLOCK_KEPT || b->state == PF_BLOCK_HELD) && !b->undoing &&
           (b->reg == PF_REG_NONE || b->reg == PF_REG_REFUSED) && (b->state == PF_BLOCK_HELD || b->settles >= 2);
}

/* A block to undo or give back at a settle (lock held). */
static struct pf_block *settling(void) {
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++)
        if (to_settle(&all[i]) || (all[i].state == PF_BLOCK_HELD && to_release(&all[i])))
            return &all[i];
    return NULL;
}

void pf_register_settle(void) {
    if (!pf_register_watching())
        return;
    pf_heap_lock();
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++)
        all[i].settles += all[i].state == PF_BLOCK_KEPT && all[i].reg == PF_REG_LIVE;
    for (struct pf_block *b; (b = settling());) {
        uint32_t gen = b->gen;
        if (to_settle(b))
            pf_reg_undo(b, to_settle); /* not if it was given out again meanwhile */
        if (b->gen == gen && to_release(b))
            pf_heap_release(b);
        else if (b->gen == gen && to_settle(b))
            break; /* (not undone: its driver call failed; the next settle tries again) */
    }
    pf_heap_unlock();
}

/* The driver released them with the context: forgotten, not unregistered. */
void pf_register_context_gone(CUcontext ctx) {
    if (!pf_register_watching())
        return;
    pf_heap_lock();
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++) {
        struct pf_block *b = &all[i];
        if (b->ctx != ctx || !counted(b->reg))
            continue;
        if (b->reg == PF_REG_MAKING) {
            b->orphan = 1; /* the registrar forgets it when it hears back */
            continue;
        }
        b->nhands = 0;
        pf_reg_set(b, PF_REG_NONE);
        if (b->state == PF_BLOCK_HELD)
            pf_heap_release(b);
    }
    pf_heap_unlock();
}

/* Registrations are the process's: undone before the driver's own
 * teardown (atexit handlers run before the libraries' destructors), the
 * registrar stopped; nothing is registered past this point. */
static void unregister_all_at_exit(void) {
    pf_heap_lock();
    cap_bytes = 1; /* nothing fits any more */
    int running = registrar_state == RUNNING;
    registrar_state = STOPPED;
    pthread_cond_signal(&work);
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++) {
        if (all[i].reg == PF_REG_DUE)
            pf_reg_set(&all[i], PF_REG_NONE);
        if (all[i].reg == PF_REG_MAKING || pf_reg_holds(all[i].reg))
            pf_reg_undo(&all[i], NULL);
    }
    pf_heap_unlock();
    if (running)
        pthread_join(registrar_thread, NULL);
}

/* fork(): timed in the parent, with the bytes registered then (the kernel
 * copies registered pages for the child where it shares the others). */
static uint64_t fork_t0;
static size_t fork_bytes;
void pf_register_fork_prepare(void) {
    fork_t0 = pf_ticks();
    fork_bytes = held_bytes;
}
void pf_register_fork_done(void) {
    stats.forks++;
    stats.fork_registered_bytes += fork_bytes;
    stats.fork_seconds += (double)pf_ticks_to_ns(pf_ticks_since(fork_t0)) * 1e-9;
}

/* The registrar is the parent's (a new one starts on need); the blocks are
 * the child's copies, registered nowhere. */
void pf_register_forked(void) {
    pthread_cond_init(&released, NULL);
    pthread_cond_init(&work, NULL);
    registrar_state = NONE;
    stats = (struct pf_register_stats){0};
    register_ticks = 0;
    pf_heap_lock();
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++) {
        all[i].refs = 0;
        all[i].nhands = 0;
        all[i].hands_lost = 0;
        all[i].undoing = 0;
        pf_reg_set(&all[i], PF_REG_NONE);
        if (all[i].state == PF_BLOCK_HELD)
            pf_heap_release(&all[i]);
    }
    peak_bytes = 0;
    pf_heap_unlock();
}

void pf_register_stats(struct pf_register_stats *out) {
    struct pf_heap_stats h;
    pf_heap_stats(&h);
    pf_heap_lock();
    *out = stats;
    out->live_bytes = held_bytes;
    out->peak_bytes = peak_bytes;
    uint64_t ticks = register_ticks; /* written under the lock (driver()) */
    pf_heap_unlock();
    size_t n = 0;
    out->live = 0;
    pf_heap_lock();
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++)
        out->live += all[i].reg == PF_REG_LIVE;
    pf_heap_unlock();
    out->heap_blocks = h.served;
    out->heap_reused = h.reused;
    out->heap_released = h.released;
    out->kept_bytes = h.kept_bytes;
    out->peak_kept_bytes = h.peak_kept_bytes;
    out->register_seconds = (double)pf_ticks_to_ns(ticks) * 1e-9;
}
