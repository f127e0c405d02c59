/* The one hook a copy's observers are fed through, and the allocations'. */
#include "observe.h"
#include "callsite.h"
#include "counters.h"
#include "pin_after_copy.h"
#include "names.h"
#include "report.h"
#include "trace.h"

__thread struct pf_time_sampler pf_time_sampler;

/* A thread's first small copies, and every copy when each is to be timed. */
unsigned pf_time_weight_slow(void) {
    struct pf_time_sampler *t = &pf_time_sampler;
    if (t->small < PF_TIME_EXACT && ++t->small == PF_TIME_EXACT)
        t->rng = (uint32_t)(uintptr_t)t * 2654435761u | 1; /* a stream per thread */
    return 1;
}

/* A call that ended just now and took ticks; out of line, so that the
 * common path saves no registers for it. */
__attribute__((cold)) static void trace(const char *api, const char *dir, const char *mem, const char *path,
                                        size_t bytes, uint64_t ticks, int result, const struct pf_timeline *chunks) {
    uint64_t ns = pf_ticks_to_ns(ticks);
    pf_trace(api, dir, mem, path, bytes, pf_now_ns() - ns, ns, result, chunks);
}

/* What only a large copy, or a traced one, is shown to: out of line, so
 * that the common path saves no registers for it. */
_Static_assert(PF_ROUNDTRIP_MIN_BYTES >= PF_PIN_AFTER_COPY_MIN_BYTES, "round trips start above late pinning");
__attribute__((noinline)) static void observe_more(const struct pf_copy_seen *c, uint64_t ticks) {
    size_t bytes = c->bytes;
    int ok = !c->result;
    /* late pinning: the sizes copied from and to pageable memory */
    if (ok && c->host == PF_MEM_PAGEABLE && (c->dir == PF_DIR_H2D || c->dir == PF_DIR_D2H))
        pf_pin_after_copy_copy(bytes);
    if (__builtin_expect(pf_options()->trace != NULL, 0))
        trace(pf_copy_api_names[c->api], pf_dir_names[c->dir], pf_mem_names[c->host], pf_path_names[c->path], bytes,
              ticks, c->result, c->chunks);
    /* round trips: an H2D judged before the call, and a D2H into memory the
     * program can read once the call returns (even an async one's, unless
     * pinfast lets a pageable one land later) */
    if (ok && c->round_trip) {
        struct pf_thread_counters *b = pf_counters();
        pf_counter_add(b, &b->trips, bytes, 0, 0);
    }
    if (ok && c->d2h_dst && (!c->async || (c->host == PF_MEM_PAGEABLE && !pf_options()->async_d2h)))
        pf_round_trip_d2h(c->d2h_dst, bytes);
}

/* The row's wall time under way, for its rate: rows without one (an
 * asynchronous pass-through copy's) skip the shared line. */
__attribute__((noinline)) static void busy(const struct pf_copy_seen *c, uint64_t took) {
    if (pf_has_rate(c->api, c->dir, c->path))
        pf_busy_add(&pf_busy[c->api][c->dir][c->host][c->path], c->t0, took, c->weight);
}

void pf_observe_copy(const struct pf_copy_seen *c) {
    uint64_t took = c->weight ? pf_ticks_since(c->t0) : 0, ticks = took * c->weight;
    size_t bytes = c->bytes;
    /* the counters: by row, and by size */
    struct pf_thread_counters *b = pf_counters();
    pf_counter_add(b, &b->copies[c->api][c->dir][c->host][c->path], bytes, ticks, c->result);
    pf_counter_add(b, &b->sizes[c->dir][pf_size_bucket(bytes)], bytes, ticks, c->result);
    if (c->weight)
        busy(c, took);
    if (__builtin_expect(bytes >= PF_PIN_AFTER_COPY_MIN_BYTES || pf_options()->trace != NULL, 0))
        observe_more(c, ticks);
    /* last, a tail call: its stack walks are no part of the traced call */
    pf_callsite_copy(c->result ? 0 : bytes, ticks);
}

void pf_observe_alloc(enum pf_alloc_api api, size_t bytes, uint64_t ticks, int result) {
    pf_counter_add_atomic(&pf_alloc_counters[api], bytes, ticks, result);
    if (pf_options()->trace)
        trace(pf_alloc_api_names[api], "-", "-", "-", bytes, ticks, result, NULL);
}
