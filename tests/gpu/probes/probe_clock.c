/* probe_clock: what reading the time costs on this machine, for the
 * statistics' clock (shim/clock.h): clock_gettime(CLOCK_MONOTONIC) through
 * the vDSO or a system call, and rdtsc.  Prints the clock source the kernel
 * uses, whether the TSC is invariant, and ns per read (median of 9 rounds
 * of 1M reads).  cc -O2 -o probe_clock probe_clock.c */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#define READS 1000000
#define ROUNDS 9

#include "../probe.h"


/* ns per call of f, median of ROUNDS; sink keeps the reads */
static double per_read(uint64_t (*f)(void), uint64_t *sink) {
    double r[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        double t0 = probe_now();
        for (int i = 0; i < READS; i++)
            *sink += f();
        r[k] = (probe_now() - t0) / READS * 1e9;
    }
    return probe_median(r, ROUNDS);
}

static uint64_t mono(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#if defined(__x86_64__)
static uint64_t tsc(void) { return __rdtsc(); }
#endif

int main(void) {
    char src[64];
    uint64_t sink = 0;
    printf("clocksource: %s\n",
           probe_first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", src, sizeof src));
    printf("clock_gettime(CLOCK_MONOTONIC): %.1f ns per read\n", per_read(mono, &sink));
#if defined(__x86_64__)
    unsigned a, b, c, d;
    int invariant = __get_cpuid(0x80000007, &a, &b, &c, &d) && (d >> 8 & 1);
    printf("TSC invariant (CPUID 0x80000007 EDX bit 8): %s\n", invariant ? "yes" : "no");
    printf("rdtsc: %.1f ns per read\n", per_read(tsc, &sink));
    double t0 = probe_now();
    uint64_t c0 = __rdtsc();
    struct timespec nap = {0, 50000000};
    nanosleep(&nap, NULL);
    printf("TSC rate: %.1f MHz (over a 50 ms sleep)\n", (double)(__rdtsc() - c0) / (probe_now() - t0) * 1e-6);
#endif
    return sink == 42; /* never: keeps the reads */
}
