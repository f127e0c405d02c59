/* What passes the registration cache by: a copy the driver is handed as
 * it is over memory a registration may hold (quiet, guard),
 * and the program changing memory under one (pf_register_changed). */
#include "register_guard.h"
#include "register_state.h"

#include <stdint.h>

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

static void loud_one(struct pf_block *b, void *arg) {
    *(int *)arg |= b->reg != PF_REG_NONE && b->reg != PF_REG_REFUSED;
}

int pf_register_quiet(const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p, hi = n > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + n;
    if (!n || !pf_register_watching() || !pf_heap_meets(lo, hi))
        return 1;
    int loud = 0;
    pf_heap_lock();
    struct pf_block *b = pf_heap_find(lo); /* most ranges lie in one block: no walk over all */
    if (b && b->state != PF_BLOCK_UNUSED && hi <= b->base + b->size)
        loud_one(b, &loud);
    else
        pf_reg_each_meeting(lo, hi, loud_one, &loud);
    pf_heap_unlock();
    return !loud;
}

int pf_register_guard_meeting(const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p, hi = n > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + n;
    if (!pf_heap_meets(lo, hi))
        return 0;
    int touched = 0;
    pf_heap_lock();
    pf_reg_each_meeting(lo, hi, guard_one, &touched);
    pf_reg_.stats.guarded += touched;
    /* the one device wait pinfast adds of its own: a copy the driver makes
     * over memory the program changed under a registration that pinfast
     * could not stage (a 2D/3D or batch copy, one during a capture, right
     * after munmap, madvise or mprotect of a block) */
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
        pf_reg_.stats.retired++;
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
