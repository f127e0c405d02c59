/* Advice: what the program should change, each with the numbers that
 * show it. */
#include "report.h"
#include "pin_after_copy.h"

#include <stdarg.h>
#include <stdio.h>

#define TINY_BUCKETS 12 /* copies under 4 KiB */

__attribute__((format(printf, 3, 4))) static void put_advice(struct pf_advice *a, const char *kind, const char *fmt,
                                                             ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->text, sizeof a->text, fmt, ap);
    va_end(ap);
    a->kind = kind;
}

/* What the program should change, each with the numbers that show it; the
 * thresholds keep quiet about what costs a program little. */
int pf_advise(struct pf_advice *adv, double wall, const struct pf_engine_stats *e, const struct pf_pool_stats *pl) {
    int n = 0;
    struct pf_cell tiny = {0};
    for (int d = 0; d < PF_DIR_COUNT; d++)
        for (int k = 0; k < TINY_BUCKETS; k++) {
            const struct pf_cell c = pf_sum.sizes[d][k];
            tiny.calls += c.calls, tiny.bytes += c.bytes, tiny.ns += c.ns;
        }
    double tiny_s = (double)tiny.ns * 1e-9;
    if (tiny.calls >= 1000 && tiny_s >= 0.01 * wall)
        put_advice(&adv[n++], "tiny-copies",
                   "%llu copies under 4 KiB spent %.3f s in the copy calls (%.1f%% of the run) for "
                   "%llu bytes: batch them into fewer, larger copies",
                   (unsigned long long)tiny.calls, tiny_s, 100 * tiny_s / wall, (unsigned long long)tiny.bytes);
    struct pf_cell sync = pf_total(pf_sync_copy, 0);
    double sync_s = (double)sync.ns * 1e-9;
    if (sync.calls >= 100 && sync_s >= 0.1 * wall)
        put_advice(&adv[n++], "synchronous-copies",
                   "%llu synchronous copies kept the CPU waiting %.3f s (%.1f%% of the run): "
                   "cudaMemcpyAsync on streams lets copies overlap kernels and CPU work",
                   (unsigned long long)sync.calls, sync_s, 100 * sync_s / wall);
    struct pf_cell drv = pf_total(pf_driver_pageable, 0);
    char at[40];
    if (drv.bytes >= (64u << 20))
        put_advice(&adv[n++], "pageable-memory",
                   "%.1f MiB of pageable memory went through the driver's own path%s "
                   "(copies under PINFAST_MIN_SIZE, or ones pinfast could not stage): pinned "
                   "buffers move at the link's speed",
                   drv.bytes / 1048576.0, pf_at_rate(at, sizeof at, pf_total(pf_driver_pageable, 1)));
    struct pf_cell stg = pf_total(pf_staged_rows, 0);
    if (stg.bytes >= (64u << 20))
        put_advice(&adv[n++], "pin-buffers",
                   "pinfast staged %.1f MiB of pageable copies%s, for %.3f s of CPU "
                   "time: buffers allocated pinned (cudaMallocHost, pin_memory=True) would need "
                   "neither",
                   stg.bytes / 1048576.0, pf_at_rate(at, sizeof at, pf_total(pf_staged_rows, 1)), e->worker_seconds);
    struct pf_cell rt = pf_sum.trips;
    if (rt.calls >= 10)
        put_advice(&adv[n++], "round-trips",
                   "%llu buffers (%.1f MiB) were copied to the host and straight back with 64 "
                   "sampled words unchanged: keep such data on the GPU",
                   (unsigned long long)rt.calls, rt.bytes / 1048576.0);
    struct pf_cell reg = pf_cell_of(&pf_alloc_counters[PF_API_cuMemHostRegister]);
    if (reg.calls >= 20)
        put_advice(&adv[n++], "register-churn",
                   "%llu cuMemHostRegister calls took %.3f s: register a buffer once and reuse it",
                   (unsigned long long)reg.calls, (double)reg.ns * 1e-9);
    if (pl->hits + pl->misses >= 20)
        put_advice(&adv[n++], "pinned-churn",
                   "%llu pinned allocations (%llu served by pinfast's pool, saving %.3f s): "
                   "allocate pinned buffers once and reuse them",
                   pl->hits + pl->misses, pl->hits, pl->saved_seconds);
    struct pf_pin_after_copy_stats lp;
    pf_pin_after_copy_stats(&lp);
    if (lp.bytes >= (64u << 20))
        put_advice(&adv[n++], "late-pinning",
                   "%llu pinned allocations (%.1f MiB) had sizes already copied from pageable "
                   "memory, holding up to %.1f MiB pinned beside the pageable buffers: pinning an "
                   "existing buffer (tensor.pin_memory()) allocates and copies it; allocate it "
                   "pinned from the start (pin_memory=True, cudaMallocHost)",
                   (unsigned long long)lp.count, lp.bytes / 1048576.0, lp.peak_bytes / 1048576.0);
    return n;
}

/* JSON string contents: the advice texts hold no quote or backslash. */
