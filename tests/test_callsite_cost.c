/* test_callsite_cost: what the report's stack walks may cost the copies
 * they describe (shim/observe/callsite.c linked in, glibc's backtrace
 * replaced by one that takes as long as a case asks).  A thread whose walks
 * are dear walks its large copies at a rate that keeps the walks to about
 * 1% of the copies' time, and its estimate of their calls stays within its
 * error, also where walks cost unevenly; with cheap walks every large copy is walked, as before;
 * PINFAST_CALLSITES=1 walks every copy whatever it costs; with the report
 * off (PINFAST_STATS=off) nothing is walked.  Each case on a thread of its
 * own: what a walk costs is learnt per thread. */
#include "t.h"
#include "base/clock.h"
#include "base/options.h"
#include "observe/callsite.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

struct pf_options pf_options_parsed = {.callsites = 256, .stats = PF_STATS_TEXT};
int pf_options_ready = 1;
const struct pf_options *pf_options_load(void) { return &pf_options_parsed; }

#define COPY_NS 640000 /* a 32 MB copy on an H200 */
#define COPY_BYTES (32u << 20)

static atomic_int walks;
static atomic_llong walked_ns; /* what the walks cost, as asked (a preempted spin takes longer) */
static int walk_us, cheap_us;  /* cheap_us: every fourth walk's cost, when not 0 */
static void *outside[2]; /* return addresses in libc: the "program's" frames */

/* glibc's backtrace as callsite.c calls it: a frame of this binary (to
 * callsite.c, pinfast's own), then two outside it. */
int backtrace(void **b, int n) {
    int nth = atomic_fetch_add(&walks, 1), us = cheap_us && nth % 4 == 0 ? cheap_us : walk_us;
    double t0 = t_now();
    while ((t_now() - t0) * 1e6 < us)
        ;
    atomic_fetch_add(&walked_ns, (long long)us * 1000);
    void *f[3] = {(void *)&backtrace, outside[0], outside[1]};
    int k = n < 3 ? n : 3;
    memcpy(b, f, (size_t)k * sizeof *b);
    return k;
}

struct run {
    int copies;
    size_t bytes;
    uint64_t ns;
};

static double slowest_s; /* the longest pf_callsite_copy of the last run, walk included */

static void *copier(void *arg) {
    const struct run *r = arg;
    for (int i = 0; i < r->copies; i++) {
        double t0 = t_now();
        pf_callsite_copy(r->bytes, pf_ns_to_ticks(r->ns));
        double took = t_now() - t0;
        slowest_s = took > slowest_s ? took : slowest_s;
    }
    return NULL;
}

/* r on a thread of its own; returns the walks made, the calls the sites
 * add up to into *calls. */
static int run_on_thread(struct run r, double *calls) {
    pf_callsite_reset();
    slowest_s = 0;
    atomic_store(&walks, 0);
    atomic_store(&walked_ns, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, copier, &r), 0);
    pthread_join(t, NULL);
    struct pf_site sites[PF_CALLSITE_MAX], other;
    int n = pf_callsite_collect(sites, PF_CALLSITE_MAX, &other);
    *calls = (double)other.calls;
    for (int i = 0; i < n; i++)
        *calls += (double)sites[i].calls;
    return atomic_load(&walks);
}

static int setup(void **state) {
    (void)state;
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    outside[0] = libc ? dlsym(libc, "fputs") : NULL;
    outside[1] = libc ? dlsym(libc, "fflush") : NULL;
    /* callsite.c's one-time backtrace (loading libgcc_s), counted by none */
    pf_options_parsed.callsites = 1;
    pf_callsite_copy(1, 1);
    pf_options_parsed.callsites = 256;
    return !outside[0] || !outside[1];
}

/* Walks of 50 us on 640 us copies (8%): about one copy in eight walked,
 * after the two that learn the cost; the calls estimated within four
 * standard deviations. */
static void test_dear_walks(void **state) {
    (void)state;
    walk_us = 50;
    struct run r = {400, COPY_BYTES, COPY_NS};
    double calls;
    int w = run_on_thread(r, &calls);
    print_message("%d of %d copies walked, %.0f calls estimated\n", w, r.copies, calls);
    if (w > r.copies / 2)
        fail_msg("%d of %d copies walked at 50 us a walk: more than 1%% of their time", w, r.copies);
    /* the rate the walks' measured cost gave: a loaded machine slows the
     * spin, so fewer are walked and each weighs more */
    double p = w > 2 ? (double)(w - 2) / (r.copies - 2) : (double)COPY_NS / (100 * 50e3);
    double sd = sqrt(r.copies * (1 - p) / p);
    if (fabs(calls - r.copies) > 4 * sd + 2)
        fail_msg("%.0f calls estimated for %d", calls, r.copies);
}

/* Walks of 4 us and 60 us in turn (one cheap among four, as a walk that
 * finds the unwinder's tables still cached among cold ones): the walks
 * still take about 1% of the copies' time, not what every copy walked at
 * the cheap walk's rate would (7%). */
static void test_uneven_walks(void **state) {
    (void)state;
    walk_us = 60;
    cheap_us = 4;
    struct run r = {400, COPY_BYTES, COPY_NS};
    double calls;
    int w = run_on_thread(r, &calls);
    cheap_us = 0;
    double share = (double)atomic_load(&walked_ns) / ((double)r.copies * COPY_NS);
    print_message("%d of %d copies walked, %.2f%% of their time\n", w, r.copies, 100 * share);
    if (share > 0.02)
        fail_msg("walks took %.1f%% of the copies' time (%d of %d walked)", 100 * share, w, r.copies);
}

/* Walks that cost nothing: every large copy walked, the calls exact.
 * Unless the machine took the CPU from a walk long enough to make it dear
 * (over 1% of a copy): the rate then backs off as it should, and the
 * estimate is held to its error as for dear walks. */
static void test_cheap_walks(void **state) {
    (void)state;
    walk_us = 0;
    struct run r = {400, COPY_BYTES, COPY_NS};
    double calls;
    int w = run_on_thread(r, &calls);
    if (slowest_s * 1e9 <= COPY_NS / 100) {
        assert_int_equal(w, r.copies);
        assert_true(fabs(calls - r.copies) < 1);
        return;
    }
    print_message("a walk took %.0f us: %d of %d copies walked, %.0f calls estimated\n", slowest_s * 1e6, w, r.copies,
                  calls);
    double p = (double)(w > 2 ? w - 2 : 1) / r.copies;
    if (fabs(calls - r.copies) > 4 * sqrt(r.copies * (1 - p) / p) + 2)
        fail_msg("%.0f calls estimated for %d", calls, r.copies);
}

/* PINFAST_CALLSITES=1: every copy walked, however dear. */
static void test_every_copy(void **state) {
    (void)state;
    walk_us = 50;
    pf_options_parsed.callsites = 1;
    struct run r = {100, 4096, 5000};
    double calls;
    int w = run_on_thread(r, &calls);
    pf_options_parsed.callsites = 256;
    assert_int_equal(w, r.copies);
    assert_true(fabs(calls - r.copies) < 1);
}

/* PINFAST_STATS=off: no report reads the sites, nothing is walked. */
static void test_no_report(void **state) {
    (void)state;
    walk_us = 0;
    pf_options_parsed.stats = PF_STATS_OFF;
    struct run r = {100, COPY_BYTES, COPY_NS};
    double calls;
    int w = run_on_thread(r, &calls);
    pf_options_parsed.stats = PF_STATS_TEXT;
    assert_int_equal(w, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dear_walks),
        cmocka_unit_test(test_uneven_walks),
        cmocka_unit_test(test_cheap_walks),
        cmocka_unit_test(test_every_copy),
        cmocka_unit_test(test_no_report),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
