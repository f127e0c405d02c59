/* The routing decision of a copy, made here and nowhere else: what its two
 * sides are, which way it goes, what the report calls its host memory, and
 * whether the engine stages it or the driver gets it.  The wrappers
 * (entry/) classify nothing themselves; the engine checks nothing itself
 * before staging but asks pf_route_confirm (route.c). */
#ifndef PINFAST_ROUTE_H
#define PINFAST_ROUTE_H

#include "engine.h"
#include "../base/options.h"
#include "../base/types.h"
#include "../memory/classify.h"
#include "../memory/register.h"
#include "../memory/register_guard.h"

#include <stddef.h>
#include <stdint.h>

/* A side the API leaves open (cuMemcpy's, a host side), to be classified. */
#define PF_MEM_OPEN PF_MEM_COUNT

struct pf_route {
    enum pf_mem src, dst; /* the kinds of the two sides */
    enum pf_dir dir;
    enum pf_mem host; /* the host side's kind: the destination's for D2H, else the source's */
    int stage;        /* pageable<->device, staging on, large enough: the engine may take it */
    int bounce;       /* an asynchronous pageable H2D too small to stage: the caller bounces it */
};

/* Direction and host kind of a copy whose sides are known. */
static inline struct pf_route pf_route_of(enum pf_mem src, enum pf_mem dst) {
    struct pf_route r = {.src = src, .dst = dst, .dir = pf_dir_of(src, dst), .stage = 0, .bounce = 0};
    r.host = r.dir == PF_DIR_D2H ? dst : src;
    return r;
}

/* Pageable memory against device memory (or an array), staging on, and n
 * bytes from PINFAST_MIN_SIZE on: worth staging, the cheap checks said. */
static inline int pf_route_stages(struct pf_route r, size_t n) {
    const struct pf_options *o = pf_options();
    return r.host == PF_MEM_PAGEABLE && o->stage && (r.dir == PF_DIR_H2D || r.dir == PF_DIR_D2H) && n >= o->min_size;
}

/* Whether the engine takes a pitched copy of n bytes (its host rows
 * [lo, lo + span), exact: known to the byte): PF_TAKE_STAGE from
 * PINFAST_MIN_SIZE on (pf_route_stages); under it, PF_TAKE_HELD for an
 * asynchronous pageable H2D whose rows a registration of pinfast's may
 * hold, taken only through the registration or bounced (engine.c, the copy
 * held_only): passed to the driver, which takes registered memory for
 * pinned, it would be waited for; else 0, to the driver. */
enum { PF_TAKE_STAGE = 1, PF_TAKE_HELD };
static inline int pf_route_pitched(struct pf_route r, size_t n, int async, int exact, uintptr_t lo, size_t span) {
    if (pf_route_stages(r, n))
        return PF_TAKE_STAGE;
    const struct pf_options *o = pf_options();
    return exact && async && r.host == PF_MEM_PAGEABLE && o->stage && r.dir == PF_DIR_H2D && n &&
                   pf_register_near((const void *)lo, span) && !pf_register_quiet((const void *)lo, span)
               ? PF_TAKE_HELD
               : 0;
}

/* A linear copy of n bytes; dk and sk are the kinds the API fixes, or
 * PF_MEM_OPEN; async: the *Async form.  Inlined into each wrapper, where
 * they are constants: the cheap checks only, so that a small copy pays for
 * nothing more on its way to the driver.  Pageable memory and device
 * memory: from PINFAST_MIN_SIZE on the copy is staged; below it an
 * asynchronous H2D, which the driver makes wait for its stream once its
 * own staging memory (~2 MiB) is in use, is bounced (engine/bounce.c) if
 * it fits the area; the rest passes through. */
static inline __attribute__((always_inline)) struct pf_route
pf_route_linear(uintptr_t dst, uintptr_t src, size_t n, enum pf_mem dk, enum pf_mem sk, int async) {
    if (sk == PF_MEM_OPEN)
        sk = pf_classify(src);
    if (dk == PF_MEM_OPEN)
        dk = pf_classify(dst);
    struct pf_route r = pf_route_of(sk, dk);
    const struct pf_options *o = pf_options();
    r.stage = pf_route_stages(r, n);
    r.bounce =
        r.host == PF_MEM_PAGEABLE && o->stage && async && r.dir == PF_DIR_H2D && n && n < o->min_size && n <= o->bounce;
    /* a decision to stage must not rest on a region-wide cached answer (a
     * bounce's is checked once made: pf_route_host_pageable) */
    if (r.stage && pf_classify_uncached(r.dir == PF_DIR_H2D ? src : dst) != PF_MEM_PAGEABLE)
        r.stage = r.bounce = 0;
    return r;
}

/* The host side of x is pageable memory, asked afresh: the last check
 * before a bounce, which most small copies never reach (the driver has
 * room for them). */
static inline int pf_route_host_pageable(const struct pf_xfer *x) {
    return pf_classify_uncached((uintptr_t)x->host) == PF_MEM_PAGEABLE;
}

/* One side of a 2D/3D copy, from its memory type and pointers. */
static inline enum pf_mem pf_route_side(CUmemorytype type, const void *host, CUdeviceptr dev) {
    switch (type) {
    case CU_MEMORYTYPE_HOST: return pf_classify((uintptr_t)host);
    case CU_MEMORYTYPE_UNIFIED: return pf_classify((uintptr_t)dev);
    default: return PF_MEM_DEVICE; /* device memory or an array */
    }
}

/* One operand of a 3D batch. */
static inline enum pf_mem pf_route_operand(const CUmemcpy3DOperand *o) {
    return o->type == CU_MEMCPY_OPERAND_TYPE_POINTER ? pf_classify(o->op.ptr.ptr) : PF_MEM_DEVICE;
}

/* The last checks of a copy pf_route_linear found a candidate, made as the
 * engine starts it, asking the driver; 1: the engine stages (or bounces) x.
 * mark[0] and mark[1] get the debug timeline's times after the first two. */
int pf_route_confirm(const struct pf_xfer *x, int debug, uint64_t mark[2]);

/* 1 when [dev, dev + span) lies in device memory of one device (the check
 * pf_route_confirm makes of a copy's device side). */
int pf_route_device_range(CUdeviceptr dev, size_t span);

#endif
