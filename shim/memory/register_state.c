/* A block's registration and its changes (register_state.h): the counts
 * that follow every change and the report made of them, the driver's calls
 * made with the heap's lock dropped, and undoing one, the program's
 * registrations answered from it made with the driver instead. */
#include "register_state.h"
#include "register.h"
#include "../base/clock.h"
#include "../base/message.h"
#include "../driver/capture.h"
#include "../driver/driver.h"

#include <pthread.h>

int pf_register_watch_;
struct pf_reg_counts pf_reg_;
static pthread_cond_t released = PTHREAD_COND_INITIALIZER; /* a reference dropped, a registration made or undone */

void pf_reg_set(struct pf_block *b, int reg) {
    pf_reg_.watched += pf_reg_counted(reg) - pf_reg_counted(b->reg);
    if (pf_reg_holds(reg) && !pf_reg_holds(b->reg))
        pf_reg_.held += b->reg_len;
    else if (!pf_reg_holds(reg) && pf_reg_holds(b->reg))
        pf_reg_.held -= b->reg_len;
    pf_reg_.peak = pf_reg_.held > pf_reg_.peak ? pf_reg_.held : pf_reg_.peak;
    b->reg = (uint8_t)reg;
    __atomic_store_n(&pf_register_watch_, pf_reg_.watched != 0, __ATOMIC_RELAXED);
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
    pf_reg_.ticks += pf_ticks_since(t0);
    return r;
}

CUresult pf_reg_driver(struct pf_block *b, int reg) {
    return driver_call(b, reg, b->base, b->reg_len, PF_REG_HOST_FLAGS);
}

/* b's registration was undone: the program's registrations answered from
 * it are made with the driver, the block the program's from now on (lock
 * held; dropped meanwhile): 0 when the block was given back meanwhile.
 * At exit they go with the rest. */
static int hands_to_driver(struct pf_block *b) {
    uint32_t gen = b->gen;
    for (int i = 0; i < b->nhands && !pf_reg_.closed;) {
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
    if (pf_reg_.closed)
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
    CUresult r = pf_reg_driver(b, 0);
    if (b->gen != gen) { /* given back meanwhile (its context destroyed) */
        pf_reg_released();
        return;
    }
    if (r != CUDA_SUCCESS)
        pf_msg(PF_INFO, "cuMemHostUnregister of %zu bytes at %p: error %d", b->reg_len, (void *)b->base, (int)r);
    pf_reg_.stats.undone++;
    if (!b->nhands)
        pf_reg_set(b, PF_REG_NONE);
    else if (!hands_to_driver(b))
        gen = ~b->gen; /* (another block's record now) */
    if (b->gen == gen)
        b->undoing = 0;
    pf_reg_released();
}

void pf_reg_wait(void) { pf_heap_wait(&released); }
void pf_reg_released(void) { pthread_cond_broadcast(&released); }
void pf_reg_forked(void) {
    pthread_cond_init(&released, NULL);
    pf_reg_.stats = (struct pf_register_stats){0};
    pf_reg_.ticks = 0;
}
void pf_reg_count_handed(void) { pf_reg_.stats.handed++; }

struct pf_block *pf_reg_block_of(const void *p, size_t n) {
    struct pf_block *b = pf_heap_find((uintptr_t)p);
    return b && b->state == PF_BLOCK_LIVE && (uintptr_t)p + n <= b->base + b->size ? b : NULL;
}

/* (a registration holds its block whole: reg_len is the block's size) */
int pf_reg_covers(const struct pf_block *b, const void *p, size_t n) {
    return b->reg == PF_REG_LIVE && !b->undoing && (uintptr_t)p + n <= b->base + b->reg_len;
}

void pf_reg_each_meeting(uintptr_t lo, uintptr_t hi, void (*f)(struct pf_block *, void *), void *arg) {
    size_t n;
    struct pf_block *all = pf_heap_blocks(&n);
    for (size_t i = 0; i < n; i++)
        if (all[i].state != PF_BLOCK_UNUSED && all[i].base < hi && lo < all[i].base + all[i].size)
            f(&all[i], arg);
}

/* The report's registrations object (register.h). */
void pf_register_stats(struct pf_register_stats *out) {
    struct pf_heap_stats h;
    pf_heap_stats(&h);
    pf_heap_lock();
    *out = pf_reg_.stats;
    out->live_bytes = pf_reg_.held;
    out->peak_bytes = pf_reg_.peak;
    uint64_t ticks = pf_reg_.ticks; /* written under the lock (pf_reg_driver) */
    size_t n = 0;
    out->live = 0;
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
