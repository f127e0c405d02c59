/* A block's registration, as the cache (register.c) keeps it and the
 * program's own registrations (register_program.c) read and change it.
 * Private to memory/; every function is called with the heap's lock held
 * (block.h). */
#ifndef PINFAST_REGISTER_STATE_H
#define PINFAST_REGISTER_STATE_H

#include "block.h"
#include "../base/types.h"

#include <stddef.h>
#include <stdint.h>

/* The flags of pinfast's registrations: a program's registration with no
 * other flags can be answered from one. */
#define PF_REG_HOST_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP)

/* Whether a registration in state reg holds the block's pages. */
static inline int pf_reg_holds(int reg) { return reg == PF_REG_MAKING || reg == PF_REG_LIVE || reg == PF_REG_STALE; }

/* The cache's counts, kept as registrations change, and the report's. */
struct pf_reg_counts {
    int watched;    /* blocks DUE, MAKING, LIVE or STALE */
    int closed;     /* at exit: nothing is registered any more, the program's registrations go too */
    size_t held;    /* bytes of MAKING, LIVE and STALE blocks */
    size_t peak;    /* of held */
    uint64_t ticks; /* in the driver's calls */
    struct pf_register_stats stats;
};
extern struct pf_reg_counts pf_reg_;

/* Whether a block in state reg is watched: registered, or to be. */
static inline int pf_reg_counted(int reg) { return reg == PF_REG_DUE || pf_reg_holds(reg); }

/* Every change of a block's registration state: the counts follow. */
void pf_reg_set(struct pf_block *b, int reg);
/* pinfast's registration of the block, made (`reg`) or undone, with the
 * lock dropped meanwhile. */
CUresult pf_reg_driver(struct pf_block *b, int reg);
/* Undoes b's registration once the copies through it ended, if `still`
 * (NULL: always) holds of it then; the program's registrations answered
 * from it are made with the driver instead, so that they stay (the lock is
 * dropped meanwhile). */
void pf_reg_undo(struct pf_block *b, int (*still)(const struct pf_block *));
/* Waits until a registration under way is made or a copy's reference
 * dropped (the lock is dropped meanwhile); pf_reg_released wakes it. */
void pf_reg_wait(void);
void pf_reg_released(void);
/* In a forked child: the counters and the wait start anew. */
void pf_reg_forked(void);
/* The live block holding all of [p, p+n), or NULL. */
struct pf_block *pf_reg_block_of(const void *p, size_t n);
/* Whether b's registration, LIVE, holds [p, p+n) for copies. */
int pf_reg_covers(const struct pf_block *b, const void *p, size_t n);
/* Calls f on every block meeting [lo, hi). */
void pf_reg_each_meeting(uintptr_t lo, uintptr_t hi, void (*f)(struct pf_block *, void *), void *arg);
/* A program's registration was answered from pinfast's (the report). */
void pf_reg_count_handed(void);

/* Whether [lo, hi) lies in one of the program's registrations over b. */
static inline int pf_reg_in_hand(const struct pf_block *b, uintptr_t lo, uintptr_t hi) {
    for (int i = 0; i < b->nhands; i++)
        if (lo >= b->hand[i].lo && hi <= b->hand[i].lo + b->hand[i].len)
            return 1;
    return 0;
}

#endif
