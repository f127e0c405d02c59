/* A block of pinfast's heap, as heap.c (its memory) and register.c (its
 * registration) share it: the record, its states, and the few functions
 * heap.c gives register.c.  Private to memory/. */
#ifndef PINFAST_BLOCK_H
#define PINFAST_BLOCK_H

#include "../driver/cuda_api.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* LIVE: the program's.  KEPT: freed, kept for reuse.  HELD: freed while a
 * registration still holds its pages (STALE, PROGRAM, or one the program
 * registered some of): given back only once that is undone. */
enum pf_block_state { PF_BLOCK_UNUSED, PF_BLOCK_LIVE, PF_BLOCK_KEPT, PF_BLOCK_HELD };

/* NONE: not registered.  DUE: the registrar registers it next.  MAKING:
 * being registered.  LIVE: registered, copies go through it.  STALE:
 * registered, but the program changed the memory under it (madvise,
 * munmap, mprotect...): no copy uses it; undone where the program waits
 * for its context, or at exit.  REFUSED: the driver would not, or the cap
 * (until its next owner).  PROGRAM: the program registered some of it
 * itself, through the driver: pinfast keeps off. */
enum pf_block_reg { PF_REG_NONE, PF_REG_DUE, PF_REG_MAKING, PF_REG_LIVE, PF_REG_STALE, PF_REG_REFUSED, PF_REG_PROGRAM };

#define PF_HANDS 8

struct pf_block {
    uintptr_t base;      /* the mapping's start, 2 MiB aligned */
    size_t size;         /* its bytes, whole pages */
    size_t asked;        /* LIVE: the bytes the program asked for (its last realloc's) */
    size_t reg_len;      /* the bytes from base its registration holds (a block grown in place holds more) */
    uint32_t units;      /* 2 MiB units of the range it takes */
    uint32_t user_off;   /* the program's pointer is base + user_off */
    uint8_t state;       /* enum pf_block_state */
    uint8_t reg;         /* enum pf_block_reg: register.c's, under the heap's lock */
    uint8_t thp;         /* the program advised huge pages on it, or against */
    uint8_t altered;     /* the program unmapped, remapped or protected some of it: given back when freed */
    uint8_t cold;        /* LIVE: calloc's; KEPT: calloc's, its first page never touched (zeros left as they came) */
    uint8_t nhands;      /* the program's registrations over it, hand[0, nhands) */
    uint16_t hands_lost; /* PROGRAM: registrations of the program's past hand[]'s room */
    uint8_t orphan;      /* MAKING: its context was destroyed meanwhile */
    uint8_t untouched;   /* times found not touched whole: it waits longer each time */
    uint8_t undoing;     /* its registration is being undone: no copy takes it, no other undo */
    uint8_t align_log2;  /* LIVE: the alignment the program asked for */
    uint32_t gen;        /* bumped as the record is given back: one who waited knows it is another block's now */
    int refs;            /* copies through its registration under way, and its registering */
    unsigned sightings;  /* copies of PINFAST_REGISTER_MIN or more seen, by any owner: a loop's
                          * buffer freed and allocated again each step is copied again and again */
    unsigned settles;    /* KEPT and registered: settles seen since */
    /* The program's own registrations over the block: answered from
     * pinfast's registration while it is LIVE or STALE (no driver call),
     * the driver's own while PROGRAM.  A registration may reach past the
     * block (PROGRAM only). */
    struct pf_hand {
        uintptr_t lo;
        size_t len;
        unsigned flags;
    } hand[PF_HANDS];
    uint64_t kept_at;      /* when kept (the oldest goes first) */
    uint32_t prev, next;   /* the kept list, oldest first, by index + 1 */
    uint32_t cprev, cnext; /* the kept blocks of its size class */
    CUcontext ctx;         /* the context its registration was made in */
};

/* The lock over every block and registration; no driver call is made
 * while it is held. */
void pf_heap_lock(void);
void pf_heap_unlock(void);
/* The block whose range holds p, or NULL (lock held). */
struct pf_block *pf_heap_find(uintptr_t p);
/* The records, [0, *n) (lock held; some UNUSED). */
struct pf_block *pf_heap_blocks(size_t *n);
/* b, KEPT or HELD and no longer registered, goes back to the system (lock
 * held). */
void pf_heap_release(struct pf_block *b);
/* [at, at+n) of the reserved range inaccessible, its pages gone, still
 * reserved: -1 when the system refused. */
int pf_heap_reserve_again(uintptr_t at, size_t n);
/* Waits on c with the lock (held). */
void pf_heap_wait(pthread_cond_t *c);

#endif
