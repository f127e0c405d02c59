/* Inside the engine: a context's bounce area, the pinned ring that small
 * asynchronous pageable H2D copies go through (bounce.c).  It lives in the
 * context's record (staging.h); entry/ reaches it through pf_engine_bounce
 * (engine.h). */
#ifndef PINFAST_BOUNCE_H
#define PINFAST_BOUNCE_H

#include "pinned.h"
#include "../driver/cuda_api.h"

#include <pthread.h>
#include <stdint.h>

/* Copies a context may have in flight through its area: fences made
 * PF_BOUNCE_FENCES_STEP at a time, the first with the area, more where a
 * burst ran out of them (bounce.c). */
#define PF_BOUNCE_FENCES 1024
#define PF_BOUNCE_FENCES_STEP 256

struct pf_bounce_fence {
    CUevent ev;
    int state;       /* FILLING, FENCED (ev after the DMA) or OVER (nothing to wait for) */
    uint64_t end;    /* the ring position past the copy */
    uintptr_t owner; /* the stream ev is recorded on (pf_fence_owner) */
    uintptr_t by;    /* the thread that recorded it */
};

/* A new context record's area is all zeroes but its lock (contexts.c):
 * nothing yet, made on the context's first bounce.  Ring positions only
 * grow: [tail, head) is in use, at offsets modulo size.  The fences are in
 * the order their space was taken, and space comes back in that order, as
 * their events complete. */
struct pf_bounce {
    pthread_mutex_t lock;
    int tried;             /* the area was made, or could not be */
    struct pf_pinned area; /* mem NULL: none; the copies pass through */
    size_t size;           /* the ring's, within the area */
    uint64_t head, tail;
    unsigned first, count;
    unsigned nfences;    /* made: the ring of fences is the first nfences */
    int short_of_fences; /* a copy found them all in flight; -1: the driver made no more */
    struct pf_bounce_fence fences[PF_BOUNCE_FENCES];
};

#endif
