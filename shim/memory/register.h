/* The registration cache: blocks of pinfast's heap (memory/heap.h) copied
 * again and again are registered with the driver by a background thread
 * (the registrar) and copied directly from then on.  Nothing else is ever
 * registered: pinfast sees the whole lifetime of those blocks, and of no
 * other memory.  A registration is undone only where the program waits
 * for its whole context (pf_register_settle) and at exit, never in a free,
 * an munmap, a copy or a query: unregistering waits for the device.
 * Memory the program changes under a registration is retired from use at
 * once (pf_register_changed) and undone at the next of those moments.
 * See docs/design.md, "The registration cache". */
#ifndef PINFAST_REGISTER_H
#define PINFAST_REGISTER_H

#include "../base/types.h"
#include "../driver/cuda_api.h"
#include "heap.h"

#include <stddef.h>
#include <stdint.h>

struct pf_block;

/* The registration a copy goes through: its bytes, from `off` within the
 * copy, in one registered block. */
#define PF_REG_PIECES 1
struct pf_hold {
    int n;
    struct pf_piece {
        struct pf_block *g;
        size_t off, len;
    } piece[PF_REG_PIECES];
};

/* A copy of n bytes at host (pageable; no capture under way): 1 when a
 * registration holds all of it, into h, held until pf_register_done; else
 * 0, with *busy set (to the block's size) when the copy must be staged,
 * even a small one: a registration over it is due or being made (the
 * driver may take the block for pinned any moment), or retired (passed to
 * the driver, the copy would need it undone first, a wait for the whole
 * device).  From PINFAST_REGISTER_MIN on, counts the sighting of the
 * block, and at its PINFAST_REGISTER_AFTER-th hands it to the registrar;
 * at its first, a block of up to `first` bytes (the copy would otherwise
 * pin memory of its own). */
int pf_register_use(const void *host, size_t n, size_t first, size_t *busy, struct pf_hold *h);
/* As pf_register_use, for a copy that can be neither staged nor passed
 * through while a registration over it is due or being made: waits for
 * it, making it itself if the registrar has not begun; counts nothing. */
int pf_register_await(const void *host, size_t n, struct pf_hold *h);
/* The copy through h ended, having moved `bytes` (0: not made). */
void pf_register_done(struct pf_hold *h, size_t bytes);

/* Registrations live, being made or due: the hooks' fast path. */
extern int pf_register_watch_;
static inline int pf_register_watching(void) { return __atomic_load_n(&pf_register_watch_, __ATOMIC_RELAXED) != 0; }
/* Whether [p, p+n) may meet a registration: the fast test before a lookup. */
static inline int pf_register_near(const void *p, size_t n) {
    (void)n;
    return pf_register_watching() && pf_heap_owns(p);
}

/* The program's own registrations (register_program.c): answered as the
 * driver would answer them without pinfast. */
/* 1 when p lies in a registration of pinfast's the program did not ask
 * for: still pageable memory to the program (classify.c, the queries). */
int pf_register_owns(uintptr_t p);
/* The flags of the program's own registration answered from pinfast's, at
 * p (0: none there). */
int pf_register_handed_flags(uintptr_t p, unsigned *flags);
/* 1 when a copy of n bytes at p starts in a registration of the program's
 * answered from pinfast's and runs past its end: the driver refuses that
 * (CUDA_ERROR_INVALID_VALUE), where pinfast's registration, the whole
 * block, would take it. */
int pf_register_hand_overrun(const void *p, size_t n);
/* The program's cuMemHostRegister(p, n, flags): 1 when answered here
 * (*r), from a registration of pinfast's that holds the range, with no
 * driver call; 0 when the driver must answer, pinfast's registrations over
 * the range undone first; then pf_register_program_result(p, n, flags, r)
 * follows. */
int pf_register_program(void *p, size_t n, unsigned flags, CUresult *r);
void pf_register_program_result(void *p, size_t n, unsigned flags, CUresult r);
/* The program's cuMemHostUnregister(p): 1 when answered here (*r); else
 * the driver's answer r follows to pf_register_program_undone. */
int pf_register_program_undo(void *p, CUresult *r);
void pf_register_program_undone(void *p, CUresult r);

/* The program waited for its whole context (cuCtxSynchronize): the
 * registrations retired, and those of blocks kept unused since the
 * previous settle, are undone now, their blocks given back. */
void pf_register_settle(void);

/* The context was destroyed: its registrations went with it. */
void pf_register_context_gone(CUcontext ctx);
/* In a forked child: nothing is registered (the pages are the child's
 * copies; the parent's registrations are not the child's to undo). */
void pf_register_forked(void);
/* Around fork, in the parent: its time and the bytes registered. */
void pf_register_fork_prepare(void);
void pf_register_fork_done(void);

void pf_register_stats(struct pf_register_stats *out);

#endif
