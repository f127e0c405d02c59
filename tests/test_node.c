/* test_node: the staging threads of a rank are its share of the node's CPUs.
 * A launcher that starts several ranks on a node says how many
 * (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
 * MV2_COMM_WORLD_LOCAL_SIZE, SLURM_STEP_TASKS_PER_NODE); each rank's default
 * pool is then the usual rule (3 of 4 CPUs leaving 2 at least, at most 16 a context) over
 * CPUs / ranks, not over every CPU.  Each case runs a child (this binary in
 * "copy" mode: one staged round trip; "fresh": then a D2H into 256 MiB never
 * touched, for which the pool grows to a thread per CPU of the share) with
 * pinfast, the machine made of PFT_CPUS CPUs (support/cpus.c: pinfast's
 * sched_getaffinity), the debug log on and a JSON report, and checks the
 * report's thread count, the debug line that says why, and the warnings: a
 * launcher's count that is no number gets one and is ignored.  Under .plain
 * the children run without pinfast and only their copies are checked. */
#define _GNU_SOURCE
#include "t.h"
#include "spawn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MiB ((size_t)1 << 20)
#define FRESH_BEFORE 12 /* test_fresh_share's pool before the fresh D2H */

static const char *const launcher_vars[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                            "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE",
                                            "SLURM_STEP_TASKS_PER_NODE"};

static int child(const char *mode)
{
    if (t_setup(NULL))
        return 30;
    size_t n = 2 * MiB + 5;
    unsigned char *h = malloc(n), *o = malloc(n);
    CUdeviceptr d;
    if (!h || !o || D.MemAlloc(&d, n))
        return 31;
    int rc = t_round_trip(h, o, d, n);
    if (rc || strcmp(mode, "fresh"))
        return rc;
    /* a fresh destination of 256 MiB and more: the pool grows (test_data) */
    size_t big = 256 * MiB + 4096;
    unsigned char *src = malloc(big);
    unsigned char *out = malloc(big); /* never touched: its pages come with the copy */
    CUdeviceptr db;
    if (!src || !out || D.MemAlloc(&db, big))
        return 35;
    uint64_t salt = t_rand();
    t_fill(src, big, salt);
    size_t bad;
    if (D.MemcpyHtoD(db, src, big) || D.MemcpyDtoH(out, db, big))
        return 36;
    if (!t_check_fill(out, big, salt, &bad)) {
        fprintf(stderr, "fresh D2H: wrong byte at %zu\n", bad);
        return 37;
    }
    return 0;
}

/* The report's staging threads ("staging":{... "threads":N ...}), -1 when
 * there are none: read on its own, not by the strict reader of
 * support/report.c, so that the report's other sections may change. */
static long long report_threads(const char *file)
{
    char *json = sp_slurp(file, NULL);
    const char *staging = json ? strstr(json, "\"staging\":{") : NULL;
    const char *t = staging ? strstr(staging, "\"threads\":") : NULL;
    const char *end = staging ? strchr(staging, '}') : NULL;
    long long n = t && t < end ? atoll(t + strlen("\"threads\":")) : -1;
    free(json);
    return n;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (; s && (s = strstr(s, what)); s += strlen(what))
        n++;
    return n;
}

/* Runs the child with PFT_CPUS=cpus and the settings in set (NULL-ended);
 * under pinfast checks the report's threads, that the debug log holds
 * `line`, and that stderr has `warnings` warnings. */
static void run_case(const char *mode, int cpus, const char *const *set, int threads,
                     const char *line, int warnings)
{
    static int k;
    char file[300], stats[320], errf[300], ncpus[32], cgroups[340];
    snprintf(file, sizeof file, "%s/r-%d.json", sp_dir, k);
    snprintf(errf, sizeof errf, "%s/r-%d.err", sp_dir, k++);
    snprintf(stats, sizeof stats, "PINFAST_STATS_FILE=%s", file);
    snprintf(ncpus, sizeof ncpus, "PFT_CPUS=%d", cpus);
    /* no CPU quota, whatever the runner's, unless the case sets one */
    snprintf(cgroups, sizeof cgroups, "PFT_CGROUP_ROOT=%s/no-quota", sp_dir);
    const char *env[16] = {"PINFAST_STATS=json", stats, "PINFAST_LOG=debug", "PINFAST_MIN_SIZE=0",
                           ncpus, cgroups};
    int n = 6;
    for (int i = 0; set && set[i] && n < 15; i++)
        if (!strncmp(set[i], "PFT_CGROUP_ROOT=", 16))
            env[5] = set[i];
        else
            env[n++] = set[i];
    env[n] = NULL;
    char *argv[] = {"test_node", (char *)mode, NULL};
    int rc = sp_run(argv, t_pinfast(), env, "/dev/null", errf, 120, NULL);
    char *err = sp_slurp(errf, NULL);
    if (rc != 0)
        fail_msg("%s: child status %d\n%s", set && set[0] ? set[0] : "no launcher", rc,
                 err ? err : "");
    if (!t_pinfast()) {
        free(err);
        return;
    }
    long long threads_seen = report_threads(file);
    if (!strcmp(mode, "fresh") && threads_seen == FRESH_BEFORE) {
        /* the pool never grew: pinfast did not take the destination for
         * fresh memory (a sanitizer's allocator), nothing to check */
        print_message("the pool did not grow past %d with the fresh D2H: skipped\n", FRESH_BEFORE);
        free(err);
        skip();
    }
    const char *said = err ? strstr(err, "staging threads: ") : NULL;
    print_message("%s, %d CPUs: %lld threads; %.*s\n", set && set[0] ? set[0] : "no launcher", cpus,
                  threads_seen, said ? (int)strcspn(said, "\n") : 0, said ? said : "");
    if (threads_seen != threads)
        fail_msg("%lld staging threads in the report, expected %d\n%s", threads_seen, threads,
                 err ? err : "");
    if (line && (!err || !strstr(err, line)))
        fail_msg("the debug log does not say \"%s\"\n%s", line, err ? err : "");
    int w = count(err, "pinfast: warning: ");
    if (w != warnings)
        fail_msg("%d warnings, expected %d\n%s", w, warnings, err ? err : "");
    free(err);
}

/* 64 CPUs, no launcher: 3 of 4 of them, at most 16 a context */
static void test_alone(void **s)
{
    (void)s;
    run_case("copy", 64, NULL, 16, "staging threads: 16 for 1 context(s), 3 of 4 of the 64 CPUs", 0);
}

/* 4 CPUs (a container's, or `taskset -c 4-7`): 2 threads, the caller's
 * CPU and one more left to the rest of the process; 2 CPUs: 1 */
static void test_few_cpus(void **s)
{
    (void)s;
    run_case("copy", 4, NULL, 2, "staging threads: 2 for 1 context(s), 3 of 4 of the 4 CPUs", 0);
    run_case("copy", 2, NULL, 1, "staging threads: 1 for 1 context(s), 3 of 4 of the 2 CPUs", 0);
    run_case("copy", 8, NULL, 6, "staging threads: 6 for 1 context(s), 3 of 4 of the 8 CPUs", 0);
}

/* Writes `text` into root/rel, making its folders. */
static void put(const char *root, const char *rel, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *slash = strchr(path + strlen(sp_dir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = 0;
        mkdir(path, 0700);
        *slash = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A container's CPU quota, which the CPUs it may run on (64) do not show:
 * the pool is the quota's share.  Each case's files go under sp_dir/name,
 * relative path then text. */
struct quota_case {
    const char *name, *files[8], *launcher;
    int threads;
    const char *line;
};

static const struct quota_case quota_cases[] = {
    /* cgroup v2, the pod's 4 CPUs above the container's "max" */
    {"v2",
     {"proc/self/cgroup", "0::/pod/ctr\n", "sys/fs/cgroup/pod/ctr/cpu.max", "max 100000\n", "sys/fs/cgroup/pod/cpu.max",
      "400000 100000\n", "sys/fs/cgroup/cpu.max", "max 100000\n"},
     NULL, 2, "staging threads: 2 for 1 context(s), 3 of 4 of the 4 CPUs this process may run on (its CPU quota)"},
    /* v1 as docker without a cgroup namespace shows it: the host's path,
     * the files at the mount's root; 2.5 CPUs count 3 */
    {"v1",
     {"proc/self/cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
      "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n", "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us",
      "100000\n"},
     NULL, 1, "3 of 4 of the 3 CPUs this process may run on (its CPU quota)"},
    /* torchrun's 2 ranks under a quota of 8 CPUs: 4 each */
    {"ranks",
     {"proc/self/cgroup", "0::/\n", "sys/fs/cgroup/cpu.max", "800000 100000\n"},
     "LOCAL_WORLD_SIZE=2",
     2,
     "LOCAL_WORLD_SIZE=2 ranks on this node share 8 CPUs, 4 each (this one may run on 8, its CPU quota)"},
    /* "max": no quota */
    {"max",
     {"proc/self/cgroup", "0::/pod\n", "sys/fs/cgroup/pod/cpu.max", "max 100000\n"},
     NULL,
     16,
     "3 of 4 of the 64 CPUs this process may run on leaving"},
};

static void test_cpu_quota(void **s)
{
    (void)s;
    for (size_t i = 0; i < sizeof quota_cases / sizeof quota_cases[0]; i++) {
        const struct quota_case *c = &quota_cases[i];
        char root[400], env[460];
        snprintf(root, sizeof root, "%s/%s", sp_dir, c->name);
        snprintf(env, sizeof env, "PFT_CGROUP_ROOT=%s", root);
        for (int f = 0; f < 8 && c->files[f]; f += 2)
            put(root, c->files[f], c->files[f + 1]);
        const char *set[] = {env, "PFT_PARENT_CPUS=64", c->launcher, NULL};
        run_case("copy", 64, set, c->threads, c->line, 0);
    }
}

/* torchrun's 4 ranks on 64 CPUs: 16 each, 12 threads */
static void test_torchrun(void **s)
{
    (void)s;
    const char *set[] = {"LOCAL_WORLD_SIZE=4", "RANK=1", NULL};
    run_case("copy", 64, set, 12,
             "staging threads: 12 for 1 context(s), 3 of 4 of this process's share of the node's "
             "CPUs leaving 2 at least, at most 16 a context: LOCAL_WORLD_SIZE=4 ranks on this node share 64 CPUs, "
             "16 each (this one may run on 64)", 0);
}

/* Open MPI's 8 ranks on 64 CPUs, unbound: 8 each, 6 threads */
static void test_openmpi(void **s)
{
    (void)s;
    const char *set[] = {"OMPI_COMM_WORLD_LOCAL_SIZE=8", NULL};
    run_case("copy", 64, set, 6, "OMPI_COMM_WORLD_LOCAL_SIZE=8 ranks on this node share 64 CPUs, 8 each", 0);
}

/* ranks the launcher bound to 16 of the node's 64 CPUs each (its daemon,
 * their parent, sees 64): 16 each, not 16 / 4 */
static void test_bound_ranks(void **s)
{
    (void)s;
    const char *set[] = {"MPI_LOCALNRANKS=4", "PFT_PARENT_CPUS=64", NULL};
    run_case("copy", 16, set, 12,
             "MPI_LOCALNRANKS=4 ranks on this node share 64 CPUs, 16 each (this one may run on 16)", 0);
    /* bound to a socket of 32 CPUs, two ranks to each: 16 each */
    const char *socket[] = {"MV2_COMM_WORLD_LOCAL_SIZE=4", "PFT_PARENT_CPUS=64", NULL};
    run_case("copy", 32, socket, 12, "16 each (this one may run on 32)", 0);
}

/* srun's tasks per node of the step, the largest count of the list */
static void test_slurm(void **s)
{
    (void)s;
    const char *set[] = {"SLURM_STEP_TASKS_PER_NODE=2(x3),8", "SLURM_NTASKS_PER_NODE=1", NULL};
    run_case("copy", 64, set, 6, "SLURM_STEP_TASKS_PER_NODE=8 ranks on this node share 64 CPUs, 8 each", 0);
}

/* a count that is no number: one warning, the next variable is read */
static void test_not_a_number(void **s)
{
    (void)s;
    const char *set[] = {"LOCAL_WORLD_SIZE=four", NULL};
    run_case("copy", 64, set, 16, "no launcher's ranks per node", 1);
    /* two that are not: still one warning */
    const char *next[] = {"LOCAL_WORLD_SIZE=4x", "OMPI_COMM_WORLD_LOCAL_SIZE=0", "MPI_LOCALNRANKS=4", NULL};
    run_case("copy", 64, next, 12, "MPI_LOCALNRANKS=4 ranks on this node", 1);
    const char *slurm[] = {"SLURM_STEP_TASKS_PER_NODE=4(x", NULL};
    run_case("copy", 64, slurm, 16, "no launcher's ranks per node", 1);
    const char *one[] = {"LOCAL_WORLD_SIZE=1", NULL};
    run_case("copy", 64, one, 16, "no launcher's ranks per node", 0);
}

/* the user's number holds */
static void test_threads_set(void **s)
{
    (void)s;
    const char *set[] = {"LOCAL_WORLD_SIZE=4", "PINFAST_THREADS=5", NULL};
    run_case("copy", 64, set, 5, "staging threads: 5 for 1 context(s), PINFAST_THREADS=5", 0);
}

/* a large fresh destination grows the pool to a thread per CPU of the
 * rank's share (with transparent huge pages in madvise mode: test_data);
 * where the pool stays at its size before (FRESH_BEFORE), pinfast did not
 * take the destination for fresh memory and the test is skipped */
static void test_fresh_share(void **s)
{
    (void)s;
    char *thp = sp_slurp("/sys/kernel/mm/transparent_hugepage/enabled", NULL);
    int madvise = thp && strstr(thp, "[madvise]");
    free(thp);
    if (!madvise)
        skip();
    const char *set[] = {"LOCAL_WORLD_SIZE=4", NULL};
    run_case("fresh", 64, set, 16, "LOCAL_WORLD_SIZE=4 ranks on this node share 64 CPUs, 16 each", 0);
}

int main(int argc, char **argv)
{
    if (argc == 2)
        return child(argv[1]);
    /* the children see only the launcher variables a case sets */
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        unsetenv(launcher_vars[i]);
    unsetenv("PINFAST_THREADS");
    t_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone),
        cmocka_unit_test(test_few_cpus),
        cmocka_unit_test(test_cpu_quota),
        cmocka_unit_test(test_torchrun),
        cmocka_unit_test(test_openmpi),
        cmocka_unit_test(test_bound_ranks),
        cmocka_unit_test(test_slurm),
        cmocka_unit_test(test_not_a_number),
        cmocka_unit_test(test_threads_set),
        cmocka_unit_test(test_fresh_share),
    };
    return cmocka_run_group_tests(tests, sp_dir_setup, sp_dir_teardown);
}
