/* test_shapes: every copy shape pinfast stages gives what the driver alone
 * gives.  A child runs the random cases of shapes_cases.h (2D copies
 * between pageable memory and device memory, unified pointers or arrays of
 * random formats, with random widths, heights, pitches and offsets; 3D
 * copies of random depths, heights and slice offsets; host <-> 1D array
 * copies; copies across VMM mappings laid end to end; bad input of each
 * kind) and logs, per case, the return code and a hash of every byte of
 * both sides after it (host and device sides filled with random data, the
 * destination's bytes outside the copy checked as well).  The test runs the child on the
 * fake alone and under pinfast with the same seed, and the logs must be
 * equal; pinfast's report must show each shape staged (so the test fails
 * when pinfast passes a shape through).  tests/gpu/checks/shapes.cu runs
 * the same cases on the GPU.
 *
 * Slots of 64 KiB and PINFAST_MIN_SIZE=0: rows wider than a slot (passed
 * through), copies of many chunks, and every size staged.  Device memory and
 * arrays are filled and read back through pinned memory, which pinfast
 * never stages: its report's staged rows are the cases' copies alone.
 * Internal: test_shapes run <log file>. */
#define _GNU_SOURCE
#include "t.h"
#include "report.h"
#include "spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CASES 360

static FILE *LOG;
#define SC(f) D.f
#define SC_LOG(...) fprintf(LOG, __VA_ARGS__)
#include "shapes_cases.h"

static int child_run(const char *logf)
{
    if (t_setup(NULL) || !(LOG = fopen(logf, "w")))
        return 30;
    rs = t_seed();
    int rc = shape_cases(CASES);
    fclose(LOG);
    return rc;
}

/* ---- the test: plain and pinfast, same seed --------------------------------- */
static long staged_calls(const struct report *r, const char *api)
{
    long n = 0;
    for (int i = 0; i < r->nt; i++)
        if (!strcmp(r->t[i].api, api) && !strcmp(r->t[i].path, "staged"))
            n += r->t[i].calls;
    return n;
}

static void equivalence(void **state)
{
    (void)state;
    char seed[64], logs[2][256], json[256], stats[300];
    snprintf(seed, sizeof seed, "PFT_SEED=%llu", (unsigned long long)t_seed());
    snprintf(json, sizeof json, "%s/report.json", sp_dir);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", json);
    for (int v = 0; v < 2; v++) {
        snprintf(logs[v], sizeof logs[v], "%s/%s.log", sp_dir, v ? "pinfast" : "plain");
        char *argv[] = { "test_shapes", "run", logs[v], NULL };
        /* every shape staged: no block of pinfast's heap registered */
        const char *set[] = { seed, "PINFAST_MIN_SIZE=0", "PINFAST_CHUNK=64K", "PINFAST_STAGING=1M", "PINFAST_REGISTER=0",
                              "PINFAST_STATS=json", stats, NULL };
        int rc = sp_run(argv, v, set, NULL, NULL, 600, NULL);
        if (rc)
            fail_msg("the %s child exited %d", v ? "pinfast" : "plain", rc);
    }
    char *a = sp_slurp(logs[0], NULL), *b = sp_slurp(logs[1], NULL);
    assert_non_null(a);
    assert_non_null(b);
    for (char *p = a, *q = b; *p || *q;) {
        char *pe = strchrnul(p, '\n'), *qe = strchrnul(q, '\n');
        if (pe - p != qe - q || memcmp(p, q, (size_t)(pe - p)))
            fail_msg("plain and pinfast differ:\n  plain:   %.*s\n  pinfast: %.*s", (int)(pe - p), p,
                     (int)(qe - q), q);
        p = *pe ? pe + 1 : pe;
        q = *qe ? qe + 1 : qe;
    }
    free(a);
    free(b);
    struct report r;
    if (report_read(json, &r))
        fail_msg("report: %s", r.err);
    static const char *const shapes[] = { "cuMemcpy2D", "cuMemcpy2DUnaligned", "cuMemcpy2DAsync",
                                          "cuMemcpy3D", "cuMemcpy3DAsync",
                                          "cuMemcpyHtoA", "cuMemcpyAtoH", "cuMemcpyHtoAAsync",
                                          "cuMemcpyAtoHAsync", "cuMemcpyHtoD", "cuMemcpyDtoH" };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        long n = staged_calls(&r, shapes[i]);
        printf("[ staged   ] %s: %ld\n", shapes[i], n);
        if (!n)
            fail_msg("no %s copy was staged", shapes[i]);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "run") == 0)
        return child_run(argv[2]);
    const struct CMUnitTest tests[] = { cmocka_unit_test(equivalence) };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
