/* test_resources: copies stay correct whatever pinfast's resources, and the
 * exit report says which path they took.  Each case runs a child (this
 * binary in "copy" mode) that does pageable H2D/D2H copies, sync and async,
 * and checks its data; under .pinfast the child runs with pinfast and the
 * JSON report of the child is read back:
 *   PINFAST_STAGING=0                   -> path "passthrough"
 *   FAKECUDA_FAIL_REGISTER=1, FAKECUDA_FAIL_HOSTALLOC=1
 *                                       -> pinning fails: "passthrough", a warning
 *   FAKECUDA_FAIL_REGISTER=8M, FAKECUDA_FAIL_HOSTALLOC=8M
 *                                       -> a segment of four slots fails, two are
 *                                          pinned: "staged"
 *   FAKECUDA_FAIL_REGISTER=1            -> slots from cuMemHostAlloc: "staged"
 *   FAKECUDA_FAIL_HOSTALLOC=1           -> slots registered: "staged"
 *   PINFAST_THREADS=1                   -> "staged"
 *   PINFAST_STAGING=100K                -> one slot smaller than a chunk: "staged"
 *   PINFAST_STAGE=0                     -> "passthrough"
 *   PFT_NO_THREADS=0 (support/nothreads.c: pinfast's pthread_create fails)
 *                                       -> "staged" by the callers, a warning
 *   PFT_NO_THREADS=2, PINFAST_THREADS=4 -> 2 of 4 workers start: "staged", a warning
 * All with PINFAST_MIN_SIZE=0.  A warning is said once, however many copies.
 * One more test has a child ("rounds") make six 16 MiB copies down, then
 * six up, and reads the staging memory its context pinned and the slots
 * each copy held. */
#define _GNU_SOURCE
#include "t.h"
#include "report.h"
#include "spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static int child_copy(void)
{
    if (t_setup(NULL))
        return 30;
    static const size_t sizes[] = { 1, 4097, MiB + 7, 9 * MiB + 3, 33 * MiB };
    CUstream st;
    if (D.StreamCreate(&st, CU_STREAM_NON_BLOCKING))
        return 31;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int async = 0; async < 2; async++) {
            size_t n = sizes[i];
            unsigned char *h = malloc(n + 1), *o = malloc(n + 1);
            CUdeviceptr d;
            if (!h || !o || D.MemAlloc(&d, n))
                return 32;
            uint64_t salt = t_rand();
            t_fill(h + 1, n, salt);                     /* odd alignment */
            t_poison(o, n + 1);
            CUresult r = async ? D.MemcpyHtoDAsync(d, h + 1, n, st) : D.MemcpyHtoD(d, h + 1, n);
            if (!r)
                r = async ? D.MemcpyDtoHAsync(o + 1, d, n, st) : D.MemcpyDtoH(o + 1, d, n);
            if (!r && async)
                r = D.StreamSynchronize(st);
            size_t bad;
            if (r) {
                fprintf(stderr, "copy of %zu bytes returned %d\n", n, (int)r);
                return 33;
            }
            if (!t_check_fill(o + 1, n, salt, &bad)) {
                fprintf(stderr, "copy of %zu bytes (%s): wrong byte at %zu\n", n, async ? "async" : "sync", bad);
                return 34;
            }
            D.MemFree(d);
            free(h);
            free(o);
        }
    return 0;
}

/* Six copies of 16 MiB down, then six up, from or into a new pageable
 * buffer each time, each checked through pinned memory (never staged). */
static int child_rounds(void)
{
    size_t n = 16 * MiB, bad;
    unsigned char *pin;
    CUdeviceptr d;
    if (t_setup(NULL) || D.MemAllocHost((void **)&pin, n) || D.MemAlloc(&d, n))
        return 30;
    uint64_t salt = t_rand();
    t_fill(pin, n, salt);
    if (D.MemcpyHtoD(d, pin, n))
        return 31;
    for (int k = 0; k < 12; k++) {
        int h2d = k >= 6;
        unsigned char *h = malloc(n);
        if (!h)
            return 32;
        if (h2d)
            memcpy(h, pin, n), memset(pin, 0, n);
        if (h2d ? D.MemcpyHtoD(d, h, n) || D.MemcpyDtoH(pin, d, n) : D.MemcpyDtoH(h, d, n))
            return 33;
        if (!t_check_fill(h2d ? pin : h, n, salt, &bad)) {
            fprintf(stderr, "round %d: wrong byte at %zu\n", k, bad);
            return 34;
        }
        free(h);
    }
    return D.MemFree(d) || D.MemFreeHost(pin) ? 35 : 0;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (; s && (s = strstr(s, what)); s += strlen(what))
        n++;
    return n;
}

/* runs the child with the settings; checks the paths of the pageable rows
 * and that stderr holds exactly want_warnings warnings */
static void run_case(const char *a, const char *b, const char *want_path, int want_warnings)
{
    static int k;
    char file[300], stats[320], errf[300];
    snprintf(file, sizeof file, "%s/r-%d.json", sp_dir, k);
    snprintf(errf, sizeof errf, "%s/e-%d.txt", sp_dir, k++);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", file);
    const char *set[] = { "PINFAST_MIN_SIZE=0", "PINFAST_STATS=json", stats,
                          t_pinfast() ? "PFT_PINFAST=1" : "PFT_PINFAST=0", a, b, NULL };
    char *argv[] = { "test_resources", "copy", NULL };
    int rc = sp_run(argv, t_pinfast(), set, "/dev/null", errf, 120, NULL);
    char *err = sp_slurp(errf, NULL);
    if (rc != 0)
        fail_msg("%s %s: child status %d\n%s", a, b ? b : "", rc, err ? err : "");
    if (!t_pinfast()) {
        free(err);
        return;
    }
    int warned = count(err, "pinfast: warning:");
    if (warned != want_warnings)
        fail_msg("%s %s: %d warnings on stderr, expected %d:\n%s", a, b ? b : "", warned,
                 want_warnings, err ? err : "");
    free(err);
    static struct report r;
    if (report_read(file, &r))
        fail_msg("%s: report: %s", a, r.err);
    int rows = 0;
    for (int i = 0; i < r.nt; i++) {
        if (strcmp(r.t[i].memory, "pageable") || (strcmp(r.t[i].direction, "H2D") && strcmp(r.t[i].direction, "D2H")))
            continue;
        rows++;
        /* 1-byte copies and the like may pass through anyway; big ones say it all */
        if (strcmp(want_path, "passthrough") == 0 && strcmp(r.t[i].path, "passthrough") &&
            strcmp(r.t[i].path, "registered")) /* a registration pins no staging memory */
            fail_msg("%s %s: row %s %s %s has path \"%s\", expected passthrough", a, b ? b : "",
                     r.t[i].api, r.t[i].direction, r.t[i].memory, r.t[i].path);
    }
    if (strcmp(want_path, "staged") == 0) {
        int staged = 0;
        for (int i = 0; i < r.nt; i++)
            staged += strcmp(r.t[i].path, "staged") == 0;
        if (staged < 4)
            fail_msg("%s %s: %d staged rows, expected the 4 pageable entry points", a, b ? b : "", staged);
    }
    if (rows < 4)
        fail_msg("%s: only %d pageable rows in the report", a, rows);
}

static void test_staging_off(void **s) { (void)s; run_case("PINFAST_STAGING=0", NULL, "passthrough", 0); }
static void test_stage_off(void **s) { (void)s; run_case("PINFAST_STAGE=0", NULL, "passthrough", 0); }
static void test_pinning_fails(void **s)
{
    (void)s;
    run_case("FAKECUDA_FAIL_REGISTER=1", "FAKECUDA_FAIL_HOSTALLOC=1", "passthrough", 1);
}
static void test_pinning_halved(void **s)
{
    (void)s;
    run_case("FAKECUDA_FAIL_REGISTER=8388608", "FAKECUDA_FAIL_HOSTALLOC=8388608", "staged", 0);
}
static void test_register_refused(void **s) { (void)s; run_case("FAKECUDA_FAIL_REGISTER=1", NULL, "staged", 0); }
static void test_hostalloc_refused(void **s) { (void)s; run_case("FAKECUDA_FAIL_HOSTALLOC=1", NULL, "staged", 0); }
static void test_one_thread(void **s) { (void)s; run_case("PINFAST_THREADS=1", NULL, "staged", 0); }
static void test_one_slot(void **s) { (void)s; run_case("PINFAST_STAGING=100K", NULL, "staged", 0); }
static void test_no_threads(void **s) { (void)s; run_case("PFT_NO_THREADS=0", NULL, "staged", 1); }
static void test_two_threads(void **s) { (void)s; run_case("PFT_NO_THREADS=2", "PINFAST_THREADS=4", "staged", 1); }
static void test_small_chunks(void **s) { (void)s; run_case("PINFAST_CHUNK=64K", "PINFAST_STAGING=192K", "staged", 0); }

/* The most slots the staged copies of one direction held, from the
 * debug lines ("staged D2H <n> B ...: ..., <slots> slots, ..."). */
static int most_slots(const char *err, const char *dir)
{
    char what[32];
    int most = 0;
    snprintf(what, sizeof what, "staged %s ", dir);
    for (const char *p = err; p && (p = strstr(p, what)); p += strlen(what)) {
        const char *end = strchr(p, '\n'), *q = strstr(p, " slots, ");
        int n;
        if (q && (!end || q < end)) {
            while (q > p && q[-1] != ' ')
                q--;
            if (sscanf(q, "%d", &n) == 1 && n > most)
                most = n;
        }
    }
    return most;
}

/* Staging slots by direction: the D2H copies of 16 MiB have more than one
 * segment of slots pinned over their copies (a D2H holds a slot until the
 * host has its rows), up to FULL_SPEED_SLOTS (16 slots of 2 MiB); the H2D
 * copies after them keep to one segment (4 slots) of those. */
static void test_slots_by_direction(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    char file[300], stats[320], errf[300];
    snprintf(file, sizeof file, "%s/slots.json", sp_dir);
    snprintf(errf, sizeof errf, "%s/slots.txt", sp_dir);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", file);
    const char *set[] = { "PINFAST_STATS=json", stats, "PINFAST_REGISTER=0", "PINFAST_LOG=debug", "PFT_PINFAST=1", NULL };
    char *argv[] = { "test_resources", "rounds", NULL };
    int rc = sp_run(argv, 1, set, "/dev/null", errf, 120, NULL);
    char *err = sp_slurp(errf, NULL);
    if (rc)
        fail_msg("rounds: child status %d\n%s", rc, err ? err : "");
    static struct report r;
    if (report_read(file, &r))
        fail_msg("report: %s", r.err);
    int down = most_slots(err, "D2H"), up = most_slots(err, "H2D");
    free(err);
    printf("[ slots    ] %lld MiB pinned; most slots a copy held: D2H %d, H2D %d\n", r.staging.pinned_bytes >> 20, down,
           up);
    assert_true(r.staging.pinned_bytes > 8 * (long long)MiB && r.staging.pinned_bytes <= 32 * (long long)MiB);
    assert_true(down > 4);
    assert_int_equal(up, 4);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "copy") == 0)
        return child_copy();
    if (argc == 2 && strcmp(argv[1], "rounds") == 0)
        return child_rounds();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_by_direction),
        cmocka_unit_test(test_staging_off),
        cmocka_unit_test(test_stage_off),
        cmocka_unit_test(test_pinning_fails),
        cmocka_unit_test(test_pinning_halved),
        cmocka_unit_test(test_register_refused),
        cmocka_unit_test(test_hostalloc_refused),
        cmocka_unit_test(test_one_thread),
        cmocka_unit_test(test_one_slot),
        cmocka_unit_test(test_small_chunks),
        cmocka_unit_test(test_no_threads),
        cmocka_unit_test(test_two_threads),
    };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
