/* The registration cache (register.h): the registrar, the copies through
 * registrations, settles, exit and fork.  A registration is a whole block
 * of pinfast's heap, its state in the block's record (block.h), under the
 * heap's lock, changed through register_state.h.  The lock is never held
 * across a driver call: registering drops it, and a block being registered
 * (MAKING) is staged meanwhile.  A copy through a registration holds a
 * reference; undoing one waits for them.  Undoing happens in three places only, where the program already
 * waits for the device: its cuCtxSynchronize (settle), exit, and its own
 * cuMemHostRegister over a block whose registration would change the
 * driver's answer. */
#include "register.h"
#include "register_state.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../base/options.h"
#include "../base/signals.h"
#include "../driver/driver.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

/* A block found not touched whole waits for PINFAST_REGISTER_AFTER
 * copies times 2^untouched before it is measured again, at most this. */
#define UNTOUCHED_MAX 6

static size_t cap_bytes;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER; /* the registrar's */
static enum { NONE, STARTING, RUNNING, STOPPED } registrar_state;
static pthread_t registrar_thread;
static int atexit_done, warned;

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

/* Whether the program has touched every page of b: all resident
 * (mincore).  Lock dropped meanwhile (b MAKING and held). */
static int touched_whole(const struct pf_block *b) {
    uintptr_t base = b->base;
    size_t size = b->size, at = 0, page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char v[4096]; /* 16 MiB of 4 KiB pages a call */
    pf_heap_unlock();
    while (at < size) {
        size_t n = size - at < sizeof v * page ? size - at : sizeof v * page, pages = (n + page - 1) / page, k = 0;
        if (mincore((void *)(base + at), n, v))
            break;
        while (k < pages && (v[k] & 1))
            k++;
        at += k * page;
        if (k < pages)
            break;
    }
    pf_heap_lock();
    return at >= size;
}

/* b (DUE) is MAKING while what of it the program touched is measured:
 * copies over it are staged, an undo waits.  A block is registered whole
 * or not at all: registering pins every page, and one never touched would
 * become resident (the program would see its memory grow); and the driver
 * refuses a copy that runs from a registration into memory past its end
 * (tests/gpu/probes/probe_reg_pieces.c), so a registration of part of a
 * block would make a copy across that end fail where it worked without
 * pinfast.  0: nothing to register (retired or orphaned meanwhile, or not
 * touched whole: then tried again after twice as many copies as the last
 * time). */
static size_t measure(struct pf_block *b) {
    b->reg_len = 0;
    pf_reg_set(b, PF_REG_MAKING);
    b->orphan = 0;
    b->refs++;
    int whole = touched_whole(b);
    b->refs--;
    int still = b->reg == PF_REG_MAKING && !b->orphan;
    pf_reg_set(b, PF_REG_NONE);
    if (b->state == PF_BLOCK_HELD && !b->nhands) /* retired and freed meanwhile: nothing holds it */
        pf_heap_release(b);
    if (still && !whole) {
        pf_reg_.stats.untouched++;
        b->sightings = 0;
        b->untouched += b->untouched < UNTOUCHED_MAX;
    }
    return still && whole ? b->size : 0;
}

/* Registers b (DUE), touched whole, unless that would pass the cap:
 * then it is staged from now on (nothing registered is undone to make
 * room: that waits for the device).  b is MAKING and held meanwhile, so
 * that copies over it are staged and an undo waits for it (lock held;
 * dropped meanwhile). */
static void registering(struct pf_block *b) {
    size_t len = measure(b);
    if (!len) {
        pf_reg_released();
        return;
    }
    if (pf_reg_.held + len > cap()) {
        pf_reg_.stats.over_cap++;
        pf_reg_set(b, PF_REG_REFUSED);
        pf_reg_released();
        return;
    }
    b->reg_len = len;
    pf_reg_set(b, PF_REG_MAKING);
    b->orphan = 0;
    b->refs++;
    CUresult r = pf_reg_driver(b, 1);
    b->refs--;
    if (r == CUDA_SUCCESS && b->orphan) { /* made in a context destroyed meanwhile: gone with it */
        pf_reg_set(b, PF_REG_NONE);
    } else if (r == CUDA_SUCCESS) {
        pf_reg_.stats.registered++;
        if (b->reg == PF_REG_MAKING) /* else retired meanwhile: STALE */
            pf_reg_set(b, PF_REG_LIVE);
        pf_msg(PF_DEBUG, "registered %zu of %zu bytes at %p", b->reg_len, b->size, (void *)b->base);
    } else {
        /* the locked-memory limit, the program's own registration made
         * meanwhile by a raw call: this block is staged from now on */
        pf_reg_.stats.refused++;
        pf_reg_set(b, PF_REG_REFUSED);
        pf_msg_once(warned, PF_INFO, "cuMemHostRegister of %zu bytes at %p: error %d; such blocks are staged",
                    b->reg_len, (void *)b->base, (int)r);
    }
    pf_reg_released();
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

static int hold(struct pf_block *b, size_t n, struct pf_hold *h) {
    b->refs++;
    h->n = 1;
    h->piece[0] = (struct pf_piece){b, 0, n};
    return 1;
}

int pf_register_use(const void *host, size_t n, size_t first, size_t *busy, struct pf_hold *h) {
    const struct pf_options *o = pf_options();
    int sight = o->reg && n >= o->reg_min;
    *busy = 0;
    h->n = 0;
    if (!n || !pf_heap_owns(host) || (!sight && !pf_register_watching()))
        return 0;
    /* the context a sighting registers in: asked outside the lock (no driver
     * call under it), of a block not registered only */
    CUcontext ctx = NULL;
    int start = 0, k = 0;
    pf_heap_lock();
    struct pf_block *b = pf_reg_block_of(host, n);
    if (sight && b && b->reg == PF_REG_NONE) {
        pf_heap_unlock();
        ctx = PF_CALL(cuCtxGetCurrent, &ctx) == CUDA_SUCCESS ? ctx : NULL;
        pf_heap_lock();
        b = pf_reg_block_of(host, n);
    }
    if (b && pf_reg_covers(b, host, n)) {
        k = hold(b, n, h);
    } else if (b && (b->reg == PF_REG_DUE || b->reg == PF_REG_MAKING ||
                     (b->reg == PF_REG_STALE && !pf_reg_in_hand(b, (uintptr_t)host, (uintptr_t)host + n)))) {
        *busy = b->size; /* (register.h) */
    } else if (b && b->reg == PF_REG_NONE && sight &&
               ++b->sightings >= (b->size <= first ? 1u : (unsigned)o->reg_after) << b->untouched && ctx) {
        b->ctx = ctx;
        pf_reg_set(b, PF_REG_DUE); /* this copy is staged; the registrar registers it */
        *busy = b->size;
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
            k = hold(b, n, h);
        else if (b->reg == PF_REG_DUE)
            registering(b); /* as the registrar would */
        else if (b->reg == PF_REG_MAKING)
            pf_reg_wait();
        else
            break;
    }
    pf_heap_unlock();
    return k;
}

void pf_register_done(struct pf_hold *h, size_t bytes) {
    pf_heap_lock();
    if (bytes) {
        pf_reg_.stats.copies++;
        pf_reg_.stats.bytes += bytes;
    }
    for (int i = 0; i < h->n; i++)
        if (!--h->piece[i].g->refs)
            pf_reg_released();
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
    for (size_t i = 0; i < n; i++) {
        struct pf_block *b = &all[i];
        if (b->state != PF_BLOCK_KEPT)
            continue;
        /* one being made counts too: once made, it is undone at the
         * program's second wait since its free, as a made one is */
        b->settles += b->reg == PF_REG_LIVE || b->reg == PF_REG_MAKING;
        /* a freed block's registration not yet begun never is: made now,
         * it would outlast the program's waits that undo the others */
        if (b->reg == PF_REG_DUE)
            pf_reg_set(b, PF_REG_NONE);
    }
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
        if (b->ctx != ctx || !pf_reg_counted(b->reg))
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
    pf_reg_.closed = 1;
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
    fork_bytes = pf_reg_.held;
}
void pf_register_fork_done(void) {
    pf_reg_.stats.forks++;
    pf_reg_.stats.fork_registered_bytes += fork_bytes;
    pf_reg_.stats.fork_seconds += (double)pf_ticks_to_ns(pf_ticks_since(fork_t0)) * 1e-9;
}

/* The registrar is the parent's (a new one starts on need); the blocks are
 * the child's copies, registered nowhere. */
void pf_register_forked(void) {
    pf_reg_forked();
    pthread_cond_init(&work, NULL);
    registrar_state = NONE;
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
    pf_reg_.peak = 0;
    pf_heap_unlock();
}
