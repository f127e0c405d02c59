/* The staging engine: pageable<->device copies through pinned slots, cut
 * into chunks whose host copies (worker threads) overlap their DMA. */
#ifndef PINFAST_ENGINE_H
#define PINFAST_ENGINE_H

#include "xfer.h"
#include "../driver/cuda_api.h"
#include "../base/types.h"

/* Copies x through a registration of its host range (registered_copy.c), or
 * stages it, and returns the path it took (PF_PATH_REGISTERED,
 * PF_PATH_STAGED) with the call's result in *result and, for a Chrome
 * trace, its chunks' times in *chunks (this thread's until its next copy;
 * else NULL); or returns 0 having done nothing, when the copy must pass
 * through after all (pf_route_confirm said so: a capture, a pointer the
 * driver would reject; no pinned memory; held_only and no registration). */
int pf_engine_copy(const struct pf_xfer *x, CUresult *result, const struct pf_timeline **chunks);

/* Bounces an asynchronous pageable H2D pf_route_linear (route.h) found
 * worth bouncing: the caller copies the source into the pinned bounce area
 * of the stream's context and queues the DMA from there on the stream,
 * without waiting for it.  Returns 1 with the call's result in *result, or
 * 0 having done nothing, when the copy must pass through
 * (pf_route_confirm said so, no pinned memory, no space free now). */
int pf_engine_bounce(const struct pf_xfer *x, CUresult *result);

/* Whether the driver would take a small asynchronous pageable H2D of n
 * bytes on `stream` without waiting for the stream (passing.c says how it
 * is told): 1, and it passes through; 0 where its own staging may be full
 * (a burst behind longer work), and it is bounced.  Inline for copies up
 * to PF_PASS_SMALL: on a stream that keeps up, no driver call but once
 * every PF_PASS_MARK_EVERY bytes of this thread's copies (shared out
 * among the threads copying to the stream), each counted as at least
 * PF_PASS_CHARGE_MIN (a copy costs the driver's staging more than its
 * bytes; docs/design.md, "The bounce area", says why not more).  A larger
 * copy takes one of the driver's two places for such copies, and is asked
 * about each time. */
#define PF_PASS_MARK_EVERY ((size_t)1 << 20)
#define PF_PASS_CHARGE_MIN ((size_t)256)
#define PF_PASS_SMALL ((size_t)64 << 10)
struct pf_passing {
    CUstream stream;
    size_t since; /* counted since the last mark, or since it was last asked */
    size_t every; /* this thread's share of PF_PASS_MARK_EVERY on the stream */
    int bouncing; /* the mark was not over when last asked */
};
extern __thread struct pf_passing pf_passing_;
int pf_engine_passing_ask(CUstream stream, size_t n);
static inline int pf_engine_driver_has_room(CUstream stream, size_t n) {
    struct pf_passing *m = &pf_passing_;
    size_t charge = n > PF_PASS_CHARGE_MIN ? n : PF_PASS_CHARGE_MIN;
    if (__builtin_expect(n <= PF_PASS_SMALL && m->stream == stream && !m->bouncing && m->since + charge <= m->every,
                         1)) {
        m->since += charge;
        return 1;
    }
    return pf_engine_passing_ask(stream, n);
}

void pf_engine_stats(struct pf_engine_stats *out);

/* The copy through a registration of its host range (memory/register.h),
 * as host-synchronous as the plain pageable copy: 1 when made; 0 when no
 * registration holds the range; -1 when the copy must be staged: one does
 * but it is an asynchronous H2D behind work on its stream, or one is being
 * made (even a copy too small to stage is staged then).  With `wait` (the
 * copy could not be staged), a registration being made is waited for, or
 * made by the caller if the registrar has not begun it: passed through,
 * the copy would have to undo it, and unregistering synchronises the
 * device. */
int pf_registered_copy(const struct pf_xfer *x, int wait, CUresult *result);

/* An asynchronous copy passed to the driver over a registration of
 * pinfast's (which the driver takes for pinned memory) was issued on s:
 * waited for, asleep, as the pageable copy would have been. */
CUresult pf_registered_await_stream(CUstream s);

/* The context was destroyed: its slots went with it. */
void pf_engine_context_gone(CUcontext ctx);

/* In a forked child: no usable CUDA state (its contexts and their slots). */
void pf_engine_forked(void);

#endif
