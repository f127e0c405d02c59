/* The registration cache: pageable ranges copied again and again are
 * registered with the driver (cuMemHostRegister, portable) once they have
 * shown reuse, and copied directly from then on; every registration is
 * dropped before its memory can change owner (entry/vm_entries.c calls
 * pf_register_drop from the program's munmap, madvise, ..., and
 * pf_register_free from its free).  Registering, and unregistering a freed
 * block, are a background thread's.  See docs/design.md, "The registration
 * cache". */
#ifndef PINFAST_REGISTER_H
#define PINFAST_REGISTER_H

#include "../base/types.h"
#include "../driver/cuda_api.h"

#include <stddef.h>
#include <stdint.h>

struct pf_reg;

/* The registrations a copy goes through, in address order: each piece's
 * bytes, from `off` within the copy, lie in one registration. */
#define PF_REG_PIECES 8
struct pf_hold {
    int n;
    struct pf_piece { struct pf_reg *g; size_t off, len; } piece[PF_REG_PIECES];
};

/* A copy of n bytes at host (pageable; no capture under way, the caller in
 * the relaxed capture mode): the number of registrations that hold all of
 * it, into h, held until pf_register_done, or 0; *busy then set when a
 * registration over any of it is due or under way (the copy must be
 * staged: the driver may take the range for pinned any moment).  From
 * PINFAST_REGISTER_MIN on, counts the sighting and, when this one is its
 * PINFAST_REGISTER_AFTER-th, hands the range to the registrar, which
 * registers its pages not yet registered, in the current context; it is
 * staged until then. */
int pf_register_use(const void *host, size_t n, int *busy, struct pf_hold *h);
/* As pf_register_use, for a copy that can be neither staged nor passed
 * through while a registration over it is due or being made: waits for
 * that registration, making it itself if the registrar has not begun it;
 * counts no sighting. */
int pf_register_await(const void *host, size_t n, struct pf_hold *h);
/* The copy through h ended, having moved `bytes` (0: not made). */
void pf_register_done(struct pf_hold *h, size_t bytes);

/* Something watched (a registration or a sighting): the hooks' fast path. */
extern int pf_register_watch_;
static inline int pf_register_watching(void) {
    return __atomic_load_n(&pf_register_watch_, __ATOMIC_RELAXED) != 0;
}

/* 1 while the cache asks whether free(NULL) reaches pinfast's free, which
 * then sets it to 2 (entry/vm_entries.c). */
extern int pf_register_probe_;

/* Whether [p, p+n) may meet a registration: the fast test before a lookup. */
extern uintptr_t pf_register_lo_, pf_register_hi_;
static inline int pf_register_near(const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p;
    return pf_register_watching() && lo < __atomic_load_n(&pf_register_hi_, __ATOMIC_RELAXED) &&
           lo + n > __atomic_load_n(&pf_register_lo_, __ATOMIC_RELAXED);
}

/* [lo, hi) is about to change owner: every registration over it is
 * unregistered (after the copies through it end) and every sighting
 * forgotten before this returns.  how: PF_REGISTER_FREED, [lo, hi) is a
 * heap block being freed, which may share its first and last page with live
 * blocks: only registrations holding bytes copies used inside it go;
 * PF_REGISTER_GUARD, a copy passes to the driver (counted apart). */
enum { PF_REGISTER_UNMAPPED, PF_REGISTER_FREED, PF_REGISTER_GUARD };
void pf_register_drop(uintptr_t lo, uintptr_t hi, int how);

/* The program frees the heap block [p, hi): 1 when it holds registrations
 * (or one being made) and the registrar takes it, to release it with
 * release(p) once they are undone; 0 when the caller releases it now (as
 * after PF_REGISTER_FREED). */
int pf_register_free(void *p, uintptr_t hi, void (*release)(void *));

/* A copy of [p, p+n) goes to the driver as it is: registrations over any of
 * it are undone first, so that the driver sees the pageable memory the
 * program has (a copy into registered memory would return before its data
 * landed). */
static inline void pf_register_guard(const void *p, size_t n) {
    if (n && pf_register_near(p, n))
        pf_register_drop((uintptr_t)p, (uintptr_t)p + n, PF_REGISTER_GUARD);
}

/* 1 when p lies in a registration of pinfast's, or one being made: still
 * pageable memory to the program (classify.c). */
int pf_register_owns(uintptr_t p);

/* The context was destroyed: its registrations went with it. */
void pf_register_context_gone(CUcontext ctx);
/* In a forked child: nothing is registered (the parent's calls are not the
 * child's to undo). */
void pf_register_forked(void);

void pf_register_stats(struct pf_register_stats *out);

#endif
