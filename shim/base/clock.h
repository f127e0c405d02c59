/* Two clocks: wall time in ns (CLOCK_MONOTONIC), and ticks, a cheaper
 * counter for the durations of intercepted calls (the TSC on x86-64 when it
 * is invariant, cntvct_el0 on aarch64, else CLOCK_MONOTONIC ns). */
#ifndef PINFAST_CLOCK_H
#define PINFAST_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t pf_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* CPU time of the calling thread, ns: a system call on Linux, for figures
 * taken around work that costs far more (a staged copy). */
static inline uint64_t pf_thread_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

enum pf_clock_mode { PF_CLOCK_UNKNOWN, PF_CLOCK_COUNTER, PF_CLOCK_NS };

/* Decided once, at load (or by the first pf_ticks before that). */
extern int pf_clock_mode;
uint64_t pf_ticks_slow(void);

#if defined(__x86_64__)
#define PF_COUNTER() __builtin_ia32_rdtsc()
#elif defined(__aarch64__)
static inline uint64_t pf_counter_(void) {
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}
#define PF_COUNTER() pf_counter_()
#endif

static inline uint64_t pf_ticks(void) {
#ifdef PF_COUNTER
    if (__builtin_expect(__atomic_load_n(&pf_clock_mode, __ATOMIC_RELAXED) == PF_CLOCK_COUNTER, 1))
        return PF_COUNTER();
#endif
    return pf_ticks_slow();
}

/* Ticks since t0; 0 rather than a wrapped difference should a thread move
 * to a CPU whose counter is behind. */
static inline uint64_t pf_ticks_since(uint64_t t0) {
    uint64_t d = pf_ticks() - t0;
    return (int64_t)d < 0 ? 0 : d;
}

/* A duration from ticks to ns and back, by the ratio of the two clocks since
 * load (refreshed every few ms: a few loads on the common path). */
uint64_t pf_ticks_to_ns(uint64_t ticks);
uint64_t pf_ns_to_ticks(uint64_t ns);

#endif
