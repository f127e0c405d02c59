/* test_peers: processes staging at the same time share the machine's CPUs.
 * Two children (this binary in "stage" mode) stage copies for a second and
 * a half at once, with PINFAST_THREADS=6 and the debug log on; each staged
 * copy's debug line says how many workers may wake and among how many
 * processes staging the pool was shared.  Each child must have seen the
 * other (2 or more processes: other tests may stage beside them), and the
 * budget must be the pool divided among them: 6, 3, then 2 at least. */
#define _GNU_SOURCE
#include "t.h"
#include "spawn.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define THREADS 6

/* Both children set up (a sanitizer's start can take seconds), then stage
 * for the same second and a half: each marks itself ready in PFT_RENDEZVOUS
 * and waits for two marks. */
static int rendezvous(void)
{
    const char *dir = getenv("PFT_RENDEZVOUS");
    char mark[400];
    snprintf(mark, sizeof mark, "%s/ready-%d", dir ? dir : ".", (int)getpid());
    FILE *f = fopen(mark, "w");
    if (!dir || !f)
        return -1;
    fclose(f);
    for (double end = t_now() + 60; t_now() < end; usleep(1000)) {
        int ready = 0;
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));)
            ready += strncmp(e->d_name, "ready-", 6) == 0;
        if (d)
            closedir(d);
        if (ready >= 2)
            return 0;
    }
    return -1;
}

static int child_stage(void)
{
    if (t_setup(NULL))
        return 30;
    size_t n = 2 * MiB + 5;
    unsigned char *h = malloc(n), *o = malloc(n);
    CUdeviceptr d;
    if (!h || !o || D.MemAlloc(&d, n))
        return 31;
    if (rendezvous())
        return 34;
    for (double end = t_now() + 1.5; t_now() < end;) {
        int rc = t_round_trip(h, o, d, n);
        if (rc)
            return rc;
    }
    return 0;
}

struct run {
    char err[300];
    int rc;
};

static char rendezvous_env[320];

static void *run_child(void *arg)
{
    struct run *r = arg;
    const char *set[] = { "PINFAST_MIN_SIZE=0", "PINFAST_STATS=off", "PINFAST_LOG=debug",
                          "PINFAST_THREADS=6", rendezvous_env, NULL };
    char *argv[] = { "test_peers", "stage", NULL };
    r->rc = sp_run(argv, t_pinfast(), set, "/dev/null", r->err, 120, NULL);
    return NULL;
}

static void test_two_processes(void **s)
{
    (void)s;
    struct run r[2];
    pthread_t th[2];
    snprintf(rendezvous_env, sizeof rendezvous_env, "PFT_RENDEZVOUS=%s", sp_dir);
    for (int i = 0; i < 2; i++) {
        snprintf(r[i].err, sizeof r[i].err, "%s/child-%d.err", sp_dir, i);
        assert_int_equal(pthread_create(&th[i], NULL, run_child, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        char *err = sp_slurp(r[i].err, NULL);
        if (r[i].rc != 0)
            fail_msg("child %d: status %d\n%s", i, r[i].rc, err ? err : "");
        if (!t_pinfast()) {
            free(err);
            continue;
        }
        int lines = 0, most = 0;
        for (const char *p = err; p && (p = strstr(p, " may wake (")); p++) {
            const char *q = p;
            while (q > err && q[-1] != ',')
                q--;
            int budget, procs;
            if (sscanf(q, " %d may wake (%d processes staging)", &budget, &procs) != 2)
                fail_msg("child %d: unreadable debug line near \"%.60s\"", i, q);
            int want = (THREADS + procs - 1) / procs;
            if (budget != (want < 2 ? 2 : want))
                fail_msg("child %d: %d workers may wake among %d processes, expected %d", i, budget,
                         procs, want < 2 ? 2 : want);
            most = procs > most ? procs : most;
            lines++;
        }
        print_message("child %d: %d staged copies, at most %d processes staging at once\n", i, lines,
                      most);
        if (lines == 0 || most < 2)
            fail_msg("child %d: %d staged copies, never saw the other child staging", i, lines);
        free(err);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "stage") == 0)
        return child_stage();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_processes),
    };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
