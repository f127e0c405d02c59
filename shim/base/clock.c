/* The ticks of pf_ticks, and their conversion to ns.  The counter's rate is
 * not asked of the CPU (few say it, virtual machines seldom): it is measured
 * against CLOCK_MONOTONIC from the library's load to the conversion, which
 * the report makes at exit, long after.  Each reading of the two clocks is
 * bracketed and retried when the thread was preempted inside it, so the
 * ratio's error is a bracket's width (tens of ns) over the span.  A forked
 * child keeps the parent's anchor: the counter is the whole system's. */
#include "clock.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

int pf_clock_mode;

#ifdef PF_COUNTER

#define MIN_SPAN_NS 100000   /* a ratio over less is rough: waited for, once at most */
#define REFRESH_NS 4000000.0 /* a ratio is used this long, then measured again */
#define PAIR_TRIES 16        /* readings of both clocks, the narrowest kept */
#define PAIR_GOOD_NS 2000    /* a bracket this narrow was not preempted: kept at once */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t ticks0, ns0; /* the anchor: both clocks at load */
static uint64_t ratio_bits;  /* ns per tick, as a double's bits */
static uint64_t refresh_at;  /* the tick after which the ratio is measured again; 0: not yet */

#if defined(__x86_64__)
/* The kernel checks the TSC across CPUs and under load, and drops it as its
 * clocksource when it finds it unreliable (some virtual machines): pinfast
 * trusts it only where the kernel does. */
static int kernel_trusts_tsc(void) {
    char b[16] = {0};
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1; /* no sysfs (a container may hide it): the CPU's word */
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    return n >= 3 && !strncmp(b, "tsc", 3) && (b[3] == '\n' || b[3] == 0);
}
#endif

static int counter_usable(void) {
#if defined(__x86_64__)
    /* an invariant TSC runs at one rate in every P- and C-state */
    unsigned a, b, c, d;
    return __get_cpuid(0x80000007, &a, &b, &c, &d) && (d >> 8 & 1) && kernel_trusts_tsc();
#else
    return 1; /* aarch64's generic timer has a fixed frequency */
#endif
}

/* A counter reading and the CLOCK_MONOTONIC time in its middle, from the
 * narrowest of a few brackets: a preemption inside one would put the two
 * readings a time slice apart. */
static void pair(uint64_t *t, uint64_t *ns) {
    uint64_t best = UINT64_MAX;
    *t = *ns = 0;
    for (int i = 0; i < PAIR_TRIES && best > PAIR_GOOD_NS; i++) {
        uint64_t a = pf_now_ns();
        uint64_t c = PF_COUNTER();
        uint64_t b = pf_now_ns();
        if (b - a < best) {
            best = b - a;
            *t = c;
            *ns = a + (b - a) / 2;
        }
    }
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
