/* The ticks of pf_ticks, and their conversion to ns.  The counter's rate is
 * not asked of the CPU (few say it, virtual machines seldom): it is measured
 * against CLOCK_MONOTONIC from the library's load to the conversion, which
 * the report makes at exit, long after; over 100 us or more the ratio is
 * right to well under 1%.  A forked child keeps the parent's anchor: the
 * counter is the whole system's. */
#include "clock.h"

#include <pthread.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

int pf_clock_mode;

#ifdef PF_COUNTER

#define MIN_SPAN_NS 100000   /* a ratio over less is rough: waited for, once at most */
#define REFRESH_NS 4000000.0 /* a ratio is used this long, then measured again */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t ticks0, ns0; /* the anchor: both clocks at load */
static uint64_t ratio_bits;  /* ns per tick, as a double's bits */
static uint64_t refresh_at;  /* the tick after which the ratio is measured again; 0: not yet */

static int counter_usable(void) {
#if defined(__x86_64__)
    /* an invariant TSC runs at one rate in every P- and C-state */
    unsigned a, b, c, d;
    return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d >> 8 & 1);
#else
    return 1; /* aarch64's generic timer has a fixed frequency */
#endif
}

/* A counter reading and the CLOCK_MONOTONIC time taken in its middle. */
static void pair(uint64_t *t, uint64_t *ns) {
    uint64_t a = PF_COUNTER();
    *ns = pf_now_ns();
    uint64_t b = PF_COUNTER();
    *t = a + (b - a) / 2;
}

static void init(void) {
    int mode = PF_CLOCK_NS;
    if (counter_usable()) {
        pair(&ticks0, &ns0);
        mode = PF_CLOCK_COUNTER;
    }
    __atomic_store_n(&pf_clock_mode, mode, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void clock_start(void) { pthread_once(&once, init); }

/* The mode, settled as well by a copy made before the constructor ran (from
 * another library's constructor). */
static int mode(void) {
    int m = __atomic_load_n(&pf_clock_mode, __ATOMIC_ACQUIRE);
    if (m != PF_CLOCK_UNKNOWN)
        return m;
    pthread_once(&once, init);
    return __atomic_load_n(&pf_clock_mode, __ATOMIC_ACQUIRE);
}

uint64_t pf_ticks_slow(void) { return mode() == PF_CLOCK_COUNTER ? PF_COUNTER() : pf_now_ns(); }

/* ns per tick.  Threads that measure at once store ratios that are all
 * right; refresh_at is stored after its ratio, so whoever sees it set sees
 * a ratio. */
static double ratio(void) {
    double r;
    if (PF_COUNTER() < __atomic_load_n(&refresh_at, __ATOMIC_ACQUIRE)) {
        uint64_t bits = __atomic_load_n(&ratio_bits, __ATOMIC_RELAXED);
        memcpy(&r, &bits, sizeof r);
        return r;
    }
    uint64_t t, ns, bits;
    do
        pair(&t, &ns);
    while (ns - ns0 < MIN_SPAN_NS);
    r = t > ticks0 ? (double)(ns - ns0) / (double)(t - ticks0) : 1.0;
    memcpy(&bits, &r, sizeof bits);
    __atomic_store_n(&ratio_bits, bits, __ATOMIC_RELAXED);
    __atomic_store_n(&refresh_at, t + (uint64_t)(REFRESH_NS / r), __ATOMIC_RELEASE);
    return r;
}

uint64_t pf_ticks_to_ns(uint64_t ticks) {
    return mode() == PF_CLOCK_COUNTER ? (uint64_t)((double)ticks * ratio() + 0.5) : ticks;
}

uint64_t pf_ns_to_ticks(uint64_t ns) {
    return mode() == PF_CLOCK_COUNTER ? (uint64_t)((double)ns / ratio() + 0.5) : ns;
}

#else /* no counter: ticks are ns */

uint64_t pf_ticks_slow(void) { return pf_now_ns(); }
uint64_t pf_ticks_to_ns(uint64_t ticks) { return ticks; }
uint64_t pf_ns_to_ticks(uint64_t ns) { return ns; }

#endif
