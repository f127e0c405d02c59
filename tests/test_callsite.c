/* test_callsite: the report's "where from".  The binary re-executes itself
 * as a child under pinfast; the child copies from functions of its own
 * (exported with -rdynamic, or static and named only by .symtab) and through
 * functions named like the CUDA runtime, which must be looked through; the
 * parent checks that the JSON report names the right functions with the
 * right counts: exact when every copy is walked, within the stated error
 * when small copies are sampled, and that sites beyond the table count as
 * "other".  Under the plain variant the children only run. */
#define _GNU_SOURCE
#include "spawn.h"
#include "t.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1u << 20)
#define BIG (64 * MiB) /* walked, sampled or not: each takes far more than 100 walks */
#define NBIG 3
#define SMALL 256
#define NSMALL 20000
#define MANY 300 /* distinct sites: more than the table's 256 */
#define MANY_CALLS 2

static struct drv d;
static CUdeviceptr dev;
static unsigned char *host;
static _Thread_local volatile int sink; /* a store after each call: no tail call hides a frame */

/* noipa: not inlined, not cloned, not merged with an identical function */
#define SITE __attribute__((noipa))

SITE int copy_from_a(void) {
    int r = 0;
    for (int i = 0; i < NBIG && !r; i++)
        r = d.MemcpyHtoD(dev, host, BIG);
    sink = r;
    return r;
}

SITE int copy_from_b(void) {
    int r = 0;
    for (int i = 0; i < NSMALL && !r; i++)
        r = d.MemcpyHtoD(dev, host, SMALL);
    sink = r;
    return r;
}

/* Named like the CUDA runtime: the site is its caller.  The static one is
 * in .symtab only, as static cudart is in an nvcc-built program. */
SITE int cudaFakeMemcpy(size_t n) {
    int r = d.MemcpyDtoH(host, dev, n);
    sink = r;
    return r;
}
SITE static int libcudart_static_fake(size_t n) {
    int r = cudaFakeMemcpy(n);
    sink = r;
    return r;
}
SITE int copy_through_runtime(void) {
    int r = libcudart_static_fake(5000);
    sink = r;
    return r;
}

/* not exported: named from .symtab */
SITE static int copy_hidden(void) {
    int r = d.MemcpyDtoH(host, dev, 7000);
    sink = r;
    return r;
}

#define ONE(i)                                                                 \
    SITE static int many_##i(void) {                                           \
        int r = d.MemcpyHtoD(dev, host, (i) + 1);                              \
        sink = r;                                                              \
        return r;                                                              \
    }
#define TEN(t) ONE(t##0) ONE(t##1) ONE(t##2) ONE(t##3) ONE(t##4) ONE(t##5) ONE(t##6) ONE(t##7) ONE(t##8) ONE(t##9)
#define HUNDRED(h) TEN(h##0) TEN(h##1) TEN(h##2) TEN(h##3) TEN(h##4) TEN(h##5) TEN(h##6) TEN(h##7) TEN(h##8) TEN(h##9)
HUNDRED(1) HUNDRED(2) HUNDRED(3)
#undef ONE
#define ONE(i) many_##i,
static int (*const many[MANY])(void) = {HUNDRED(1) HUNDRED(2) HUNDRED(3)};

#define THREADS 4
#define THREAD_COPIES 500

SITE int copy_in_thread(void) {
    int r = 0;
    for (int i = 0; i < THREAD_COPIES && !r; i++)
        r = d.MemcpyHtoD(dev, host, 128);
    sink = r;
    return r;
}

/* Threads that claim the same new sites at once, and share one. */
static void *thread_main(void *ctx) {
    if (d.CtxSetCurrent(ctx))
        return ctx;
    for (int i = 0; i < 100; i++)
        if (many[i]())
            return ctx;
    return copy_in_thread() ? ctx : NULL;
}

static int threads(CUcontext ctx) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, thread_main, ctx))
            return 1;
    int bad = 0;
    for (int i = 0; i < THREADS; i++) {
        void *res;
        bad |= pthread_join(t[i], &res) || res;
    }
    return bad;
}

static int child(const char *mode) {
    CUcontext ctx;
    if (drv_load(&d, DRV_GPA, 0) || drv_context0(&d, &ctx) || d.MemAlloc(&dev, BIG))
        return 11;
    host = malloc(BIG);
    if (!host)
        return 12;
    t_fill(host, BIG, 1);
    if (!strcmp(mode, "many")) {
        /* a trip count the compiler cannot see: one call instruction per
         * site, as an unrolled loop would make two distinct call stacks */
        volatile int rounds = MANY_CALLS;
        for (int k = 0; k < rounds; k++)
            for (int i = 0; i < MANY; i++)
                if (many[i]())
                    return 13;
    } else if (!strcmp(mode, "threads")) {
        if (threads(ctx))
            return 15;
    } else if (copy_from_a() || copy_from_b() || copy_through_runtime() || copy_hidden()) {
        return 14;
    }
    free(host);
    return 0;
}

struct site {
    char library[64], symbol[160];
    unsigned long long offset, calls, bytes, samples;
    double seconds;
    char estimated[8];
};

/* The site row of symbol sym, or 0 when the report has none. */
static int site_of(const char *r, const char *sym, struct site *s) {
    char want[200];
    snprintf(want, sizeof want, "\"symbol\":\"%s\",", sym);
    const char *p = strstr(r, want);
    if (!p)
        return 0;
    while (p > r && *p != '{')
        p--;
    assert_int_equal(sscanf(p,
                            "{\"library\":\"%63[^\"]\",\"symbol\":\"%159[^\"]\",\"offset\":%llu,"
                            "\"address\":\"0x%*x\",\"calls\":%llu,\"bytes\":%llu,\"seconds\":%lf,"
                            "\"samples\":%llu,\"estimated\":%7[a-z]}",
                            s->library, s->symbol, &s->offset, &s->calls, &s->bytes, &s->seconds,
                            &s->samples, s->estimated),
                     8);
    return 1;
}

static int count_of(const char *r, const char *s) {
    int n = 0;
    for (const char *p = r; (p = strstr(p, s)); p++)
        n++;
    return n;
}

/* Runs the child in mode with the settings; returns its report, or NULL
 * under the plain variant. */
static char *run(const char *mode, const char *sampling, const char *format) {
    const char *dir = sp_tmpdir("callsite");
    assert_non_null(dir);
    char file[512], set0[600], set1[64], set2[64];
    snprintf(file, sizeof file, "%s/r", dir);
    snprintf(set0, sizeof set0, "PINFAST_STATS_FILE=%s", file);
    snprintf(set1, sizeof set1, "PINFAST_CALLSITES=%s", sampling);
    snprintf(set2, sizeof set2, "PINFAST_STATS=%s", format);
    const char *set[] = {set0, set1, set2, NULL};
    char *argv[] = {"test_callsite", "child", (char *)mode, NULL};
    assert_int_equal(sp_run(argv, t_pinfast(), set, NULL, NULL, 300, NULL), 0);
    char *r = t_pinfast() ? sp_slurp(file, NULL) : NULL;
    if (t_pinfast())
        assert_non_null(r);
    sp_rmdir(dir);
    return r;
}

static void check_exact(const char *r, const char *sym, unsigned long long calls,
                        unsigned long long bytes) {
    struct site s;
    if (!site_of(r, sym, &s))
        fail_msg("no site %s in:\n%s", sym, strstr(r, "\"callsites\""));
    assert_string_equal(s.library, "test_callsite");
    assert_true(s.offset > 0 && s.offset < 4096);
    assert_int_equal(s.calls, calls);
    assert_int_equal(s.bytes, bytes);
    assert_int_equal(s.samples, calls);
    assert_string_equal(s.estimated, "false");
    assert_true(s.seconds > 0);
}

/* Every copy walked: each function of the program with its exact counts,
 * the runtime-named frames looked through, nothing else. */
static void test_exact(void **state) {
    (void)state;
    char *r = run("two", "1", "json");
    if (!r)
        return;
    assert_non_null(strstr(r, "{\"schema\":\"pinfast-report/1.5\","));
    assert_non_null(strstr(r, ",\n\"callsites\":{\"sampling\":1,\"sites\":["));
    check_exact(r, "copy_from_a", NBIG, (unsigned long long)NBIG * BIG);
    check_exact(r, "copy_from_b", NSMALL, (unsigned long long)NSMALL * SMALL);
    check_exact(r, "copy_through_runtime", 1, 5000);
    check_exact(r, "copy_hidden", 1, 7000);
    assert_int_equal(count_of(r, "{\"library\":"), 4);
    assert_null(strstr(r, "\"symbol\":\"cudaFakeMemcpy\""));
    assert_null(strstr(r, "\"symbol\":\"libcudart_static_fake\""));
    assert_non_null(strstr(r, "\"other\":{\"calls\":0,\"bytes\":0,\"seconds\":0.000000000,\"samples\":0,"));
    /* sites are listed by bytes */
    assert_true(strstr(r, "copy_from_a") < strstr(r, "copy_from_b"));
    free(r);
}

/* 1 in 16 small copies walked: the large ones, whose walks cost them far
 * under 1% of their time, stay exact, the small ones are scaled; the
 * estimate's standard deviation is at most sqrt(calls * (16 - 1)), and
 * four of them is the tolerance. */
static void test_sampled(void **state) {
    (void)state;
    char *r = run("two", "16", "json");
    if (!r)
        return;
    assert_non_null(strstr(r, "\"callsites\":{\"sampling\":16,"));
    struct site a, b;
    assert_true(site_of(r, "copy_from_a", &a) && site_of(r, "copy_from_b", &b));
    assert_int_equal(a.calls, NBIG);
    assert_int_equal(a.bytes, (unsigned long long)NBIG * BIG);
    assert_string_equal(a.estimated, "false");
    double tol = 4 * sqrt((double)NSMALL * 15);
    if ((double)b.calls < NSMALL - tol || (double)b.calls > NSMALL + tol)
        fail_msg("copy_from_b: %llu calls estimated from %llu samples, %d made", b.calls,
                 b.samples, NSMALL);
    /* every small copy is SMALL bytes: bytes scale with the calls */
    assert_true(b.bytes >= (b.calls - 1) * SMALL && b.bytes <= (b.calls + 1) * SMALL);
    assert_true(b.samples < NSMALL);
    assert_string_equal(b.estimated, "true");
    free(r);
}

/* 300 sites, each called twice, for a table of 256: the first 256 are kept,
 * the calls of the other 44 are "other", and nothing is lost. */
static void test_beyond_the_table(void **state) {
    (void)state;
    char *r = run("many", "1", "json");
    if (!r)
        return;
    assert_int_equal(count_of(r, "{\"library\":"), 256);
    unsigned long long calls = 0, bytes = 0, kept_bytes = 0;
    for (int i = 0; i < MANY; i++) {
        char sym[32];
        struct site s;
        snprintf(sym, sizeof sym, "many_%d", 100 + i);
        if (!site_of(r, sym, &s))
            continue;
        assert_int_equal(s.calls, MANY_CALLS);
        assert_int_equal(s.bytes, (unsigned long long)MANY_CALLS * (101 + i));
        calls += s.calls, kept_bytes += s.bytes;
    }
    for (int i = 0; i < MANY; i++)
        bytes += (unsigned long long)MANY_CALLS * (101 + i);
    unsigned long long oc, ob;
    const char *o = strstr(r, "\"other\":{");
    assert_non_null(o);
    assert_int_equal(sscanf(o, "\"other\":{\"calls\":%llu,\"bytes\":%llu,", &oc, &ob), 2);
    assert_int_equal(calls, 256 * MANY_CALLS);
    assert_int_equal(oc, (MANY - 256) * MANY_CALLS);
    assert_int_equal(kept_bytes + ob, bytes);
    free(r);
}

/* Four threads: the sites they share counted exactly, none lost. */
static void test_threads(void **state) {
    (void)state;
    char *r = run("threads", "1", "json");
    if (!r)
        return;
    struct site s;
    assert_true(site_of(r, "copy_in_thread", &s));
    assert_int_equal(s.calls, THREADS * THREAD_COPIES);
    assert_int_equal(s.bytes, THREADS * THREAD_COPIES * 128);
    for (int i = 0; i < 100; i++) {
        char sym[32];
        snprintf(sym, sizeof sym, "many_%d", 100 + i);
        assert_true(site_of(r, sym, &s));
        assert_int_equal(s.calls, THREADS);
    }
    assert_int_equal(count_of(r, "{\"library\":"), 101);
    free(r);
}

/* The text report: top sites by bytes and by time. */
static void test_text(void **state) {
    (void)state;
    char *r = run("two", "1", "text");
    if (!r)
        return;
    const char *by_bytes = strstr(r, "pinfast: where from, by bytes");
    const char *by_time = strstr(r, "pinfast: where from, by time");
    assert_non_null(by_bytes);
    assert_non_null(by_time);
    assert_true(by_bytes < by_time);
    char line[128];
    snprintf(line, sizeof line, " %14llu ", (unsigned long long)NBIG * BIG);
    const char *a = strstr(by_bytes, line);
    assert_non_null(a);
    assert_non_null(strstr(a, "test_callsite copy_from_a+0x"));
    assert_true(a < by_time);
    assert_int_equal(count_of(r, "test_callsite copy_from_b+0x"), 2);
    assert_null(strstr(r, "sites beyond"));
    free(r);
}

/* PINFAST_CALLSITES=0: no walk, no section. */
static void test_off(void **state) {
    (void)state;
    char *r = run("two", "0", "json");
    if (!r)
        return;
    assert_non_null(strstr(r, "\"advice\":["));
    assert_null(strstr(r, "\"callsites\""));
    free(r);
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "child"))
        return child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact), cmocka_unit_test(test_sampled),
        cmocka_unit_test(test_beyond_the_table), cmocka_unit_test(test_threads),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_off)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
